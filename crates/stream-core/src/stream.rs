//! `Stream<B>`: a FIFO of device work, with the ordering model applied to every submission.
//!
//! This file has the stream itself, the submission path every piece of work takes and the
//! launches of operators; the other calls are grouped by job: copies and memsets
//! (`copies`), events, waits and the host waiting (`waits`), capture (`capture`), task
//! groups and their updates (`task_groups`), collectives (`collective`, `batch`).

use crate::custom::CustomOp;
use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::hal::{self, Backend, PreparedLaunch as _, Stream as _};
use crate::kernel::TypedKernel;
use crate::lowered::Lowered;
use crate::ordering::StreamPosition;
use crate::state::KeepAlive;
use crate::sync::{Mutex, MutexGuard};
use crate::task_group::{self, OpSignature};
use crate::types::{DeviceSlice, Priority, StreamId};
use crate::uses::Access;
use std::fmt;
use std::sync::{Arc, OnceLock};

mod batch;
mod capture;
mod collective;
mod copies;
mod task_groups;
mod waits;

pub(crate) use task_groups::UpdateOutcome;

pub(crate) struct StreamInner<B: Backend> {
    pub(crate) id: StreamId,
    pub(crate) priority: Priority,
    tag: OnceLock<String>,
    pub(crate) hal: B::Stream,
    /// Held across enqueuing work on `hal` and giving it its position (see [`crate::sync`]).
    submission: Mutex<()>,
}

impl<B: Backend> StreamInner<B> {
    pub(crate) fn new(
        id: StreamId,
        priority: Priority,
        tag: Option<String>,
        hal: B::Stream,
    ) -> Self {
        let cell = OnceLock::new();
        if let Some(tag) = tag {
            let _ = cell.set(tag);
        }
        StreamInner {
            id,
            priority,
            tag: cell,
            hal,
            submission: Mutex::new(()),
        }
    }

    /// This stream's turn to enqueue: the backend stream receives work in the order the
    /// guards are taken, and the model gives positions in the same order.
    pub(crate) fn submission_turn(&self) -> MutexGuard<'_, ()> {
        self.submission.lock()
    }

    pub(crate) fn set_tag(&self, tag: &str) {
        let _ = self.tag.set(tag.to_string());
    }
}

/// A stream of work on a device. Cheap to clone; clones are the same stream.
///
/// Any thread may submit to any stream. Submissions to one stream take turns (its positions
/// follow the order its backend stream received the work); submissions to different streams
/// run their backend calls at the same time ([`crate::sync`] has the locking rules).
pub struct Stream<B: Backend> {
    device: Device<B>,
    pub(crate) inner: Arc<StreamInner<B>>,
}

impl<B: Backend> Clone for Stream<B> {
    fn clone(&self) -> Self {
        Stream {
            device: self.device.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<B: Backend> PartialEq for Stream<B> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl<B: Backend> Eq for Stream<B> {}

impl<B: Backend> fmt::Debug for Stream<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stream({}, {}", self.device.id(), self.inner.id)?;
        if let Some(tag) = self.tag() {
            write!(f, ", tag {tag:?}")?;
        }
        write!(f, ")")
    }
}

impl<B: Backend> Stream<B> {
    pub(crate) fn from_parts(device: Device<B>, inner: Arc<StreamInner<B>>) -> Self {
        Stream { device, inner }
    }

    /// The stream's id on its device; the default stream is `StreamId(0)`.
    pub fn id(&self) -> StreamId {
        self.inner.id
    }

    /// Whether this is the device's default stream.
    pub fn is_default(&self) -> bool {
        self.inner.id == StreamId::DEFAULT
    }

    /// The priority the stream was created with.
    pub fn priority(&self) -> Priority {
        self.inner.priority
    }

    /// The tag of a tagged stream.
    pub fn tag(&self) -> Option<&str> {
        self.inner.tag.get().map(String::as_str)
    }

    /// The device of the stream.
    pub fn device(&self) -> &Device<B> {
        &self.device
    }

    /// The backend stream.
    pub fn hal(&self) -> &B::Stream {
        &self.inner.hal
    }

    /// The position of the last work submitted to this stream.
    pub fn position(&self) -> StreamPosition {
        self.device.inner.lock().ordering.position(self.id())
    }

    /// Whether the stream is part of an active capture (as origin or joined).
    pub fn is_capturing(&self) -> bool {
        self.device
            .inner
            .lock()
            .ordering
            .capture_of(self.id())
            .is_some()
    }

    /// Submits one piece of work: the capture gate shared (no capture begins or ends meanwhile)
    /// and this stream's turn held across the backend call and the position, so positions
    /// follow the order in which the backend stream received the work, while other streams
    /// submit at the same time. `keep` is kept alive until the host observes the work.
    fn submit(
        &self,
        call: &'static str,
        keep: Option<KeepAlive>,
        enqueue: impl FnOnce(&B::Stream) -> std::result::Result<(), hal::HalError>,
    ) -> Result<StreamPosition> {
        self.submit_work(call, Capturable::Yes, keep, enqueue)
    }

    /// [`Stream::submit`] of work a capture may refuse ([`Capturable::No`]: refused while this
    /// stream captures, checked under the gate so no capture begins before the work is in).
    fn submit_work(
        &self,
        call: &'static str,
        capturable: Capturable,
        keep: Option<KeepAlive>,
        enqueue: impl FnOnce(&B::Stream) -> std::result::Result<(), hal::HalError>,
    ) -> Result<StreamPosition> {
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let _turn = self.inner.submission_turn();
        inner.check_submit(call, self.id())?;
        if !OPERATOR_CALLS.contains(&call) && inner.lock().task_recording.contains_key(&self.id()) {
            return Err(task_group::not_an_operator(call, self.id()));
        }
        if capturable == Capturable::No && self.is_capturing() {
            return Err(StreamError::ForbiddenDuringCapture {
                call,
                stream: self.id(),
            });
        }
        enqueue(&self.inner.hal)?;
        let mut st = inner.lock();
        let pos = st.ordering.submit(self.id());
        if let Some(keep) = keep {
            st.keep_alive(pos, keep);
        }
        Ok(pos)
    }

    /// Enqueues a built-in kernel, labelled with its name. A `&Kernel` computes in `f32`;
    /// pass `kernel.typed(DType::F16)` for another data type.
    pub fn launch(&self, kernel: impl Into<TypedKernel>) -> Result<StreamPosition> {
        let kernel = kernel.into();
        self.launch_typed(&kernel, kernel.name())
    }

    /// Enqueues a built-in kernel with a label for timelines and reports.
    pub fn launch_labeled(
        &self,
        kernel: impl Into<TypedKernel>,
        label: &str,
    ) -> Result<StreamPosition> {
        self.launch_typed(&kernel.into(), label)
    }

    fn launch_typed(&self, kernel: &TypedKernel, label: &str) -> Result<StreamPosition> {
        kernel.validate()?;
        self.submit_operator(Lowered::Kernel { kernel, label })
    }

    /// Enqueues a user-defined operator ([`CustomOp`]), exactly like a built-in kernel: its
    /// declaration is validated, its ranges must be live memory of this device, it gets a
    /// position in the ordering model, and its uses reach the allocator's automatic mode,
    /// captures, timelines and the simulator's sanitizer.
    pub fn launch_op(&self, op: &CustomOp<B>) -> Result<StreamPosition> {
        op.validate()?;
        self.submit_operator(Lowered::Operator(op.lower()))
    }

    /// The one path of every operator (built-in kernel, user operator, collective part): its
    /// ranges placed (live memory of this device or of a peer it may reach), the backend's
    /// enqueue under this stream's turn, then its uses noted to the observers of the devices
    /// owning the memory.
    fn submit_operator(&self, op: Lowered<'_, B>) -> Result<StreamPosition> {
        let uses = op.uses();
        let foreign = self.device.place_ranges(op.label(), uses.clone())?;
        let recorded = self.check_task_recording(&op)?;
        let pos = match &op {
            Lowered::Kernel { kernel, label } => self.submit_kernel(kernel, label)?,
            Lowered::Operator(lowered) => {
                self.submit(op.call(), None, |s| s.launch_operator(lowered))?
            }
            Lowered::Collective { enqueue, .. } => self.submit(op.call(), None, enqueue)?,
        };
        if let Some(sig) = recorded {
            let own = self.device.inner.uid;
            let placed = uses.clone().map(|(range, access)| {
                let owner = foreign
                    .iter()
                    .find(|f| f.range == range)
                    .map_or(own, |f| f.owner.inner.uid);
                (owner, range, access)
            });
            if let Some(r) = self.device.inner.lock().task_recording.get_mut(&self.id()) {
                r.note(sig, placed);
            }
        }
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// For a stream with an open task group or update: the operator's signature, checked
    /// against the update's expectation before the backend gets it.
    fn check_task_recording(&self, op: &Lowered<'_, B>) -> Result<Option<OpSignature>> {
        let mut st = self.device.inner.lock();
        let Some(r) = st.task_recording.get_mut(&self.id()) else {
            return Ok(None);
        };
        let sig = OpSignature::of(op);
        r.check(&sig)?;
        Ok(Some(sig))
    }

    /// A built-in kernel in two phases: the backend prepares it (no lock held), the workspace
    /// it asks for comes in stream order ([`Stream::workspace`]), then the launch is submitted
    /// and the workspace given back right after (reused by this stream's later work only).
    fn submit_kernel(&self, kernel: &TypedKernel, label: &str) -> Result<StreamPosition> {
        let prepared = self.inner.hal.prepare(kernel)?;
        let needed = prepared.workspace_size();
        let workspace = self.workspace(needed)?;
        let slice = (needed > 0).then(|| workspace.slice());
        let pos = self.submit("Stream::launch", None, |s| {
            s.launch_prepared(prepared, slice, label)
        })?;
        // Back to the stream's cache in stream order, after the submission's locks are gone.
        drop(workspace);
        Ok(pos)
    }

    /// Gives work that other code enqueued on this stream's native handle (an aclnn call, a
    /// library kernel, work of the framework whose stream braid wraps) its own position in the
    /// ordering model, and tells the device's use observers (the allocator's automatic mode)
    /// which ranges it uses. Call it after enqueuing that work and before anything else is
    /// submitted to the stream: until then braid does not know the work exists, so a host
    /// observation could let memory it still uses be handed out again. Where other threads
    /// submit to the same stream, enqueue the foreign work as a [`CustomOp`] instead (on ACL
    /// a `native_op` body, with the work's ranges declared on the operator): its body runs
    /// during the stream's turn, so no other submission lands between the work and its
    /// position. (A body must not call back into braid: the turn it runs in is not reentrant.)
    ///
    /// Ranges are checked as a launch's are: memory of another device needs peer access
    /// ([`StreamError::ForeignMemory`]) and is reported to that device's observers, and a
    /// range live on no device is [`StreamError::RangeNotLive`]; a refused call takes no
    /// position.
    pub fn note_foreign_work(&self, uses: &[(DeviceSlice, Access)]) -> Result<StreamPosition> {
        let foreign = self
            .device
            .place_ranges("Stream::note_foreign_work", uses.iter().copied())?;
        let pos = self.submit("Stream::note_foreign_work", None, |_| Ok(()))?;
        self.device
            .notify_placed(pos, uses.iter().copied(), &foreign);
        Ok(pos)
    }
}

/// The front-layer calls of the operator path: the only work allowed in a task group.
const OPERATOR_CALLS: [&str; 3] = [
    "Stream::launch",
    "Stream::launch_op",
    "Stream::launch_collective",
];

/// Whether work may be recorded into a capture.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Capturable {
    /// Captured like any work when the stream captures.
    Yes,
    /// Refused while the stream captures (copies to the host: the host cannot read a replay's
    /// result through them).
    No,
}
