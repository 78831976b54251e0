//! `Stream<B>`: a FIFO of device work, with the ordering model applied to every submission.

use crate::capture_rule::WaitOutcome;
use crate::collective::CollectiveCall;
use crate::custom::CustomOp;
use crate::device::Device;
use crate::error::{Result, SizeOverflow, StreamError, WrongDevice};
use crate::event::Event;
use crate::graph::Graph;
use crate::hal::{self, Backend, Comm as _, Device as _, PreparedLaunch as _, Stream as _};
use crate::kernel::TypedKernel;
use crate::lowered::Lowered;
use crate::memory::HostReadback;
use crate::ordering::{Domain, StreamPosition, WaitEffect};
use crate::state::{BlockingTarget, KeepAlive};
use crate::sync::{Mutex, MutexGuard};
use crate::task_group::{self, OpSignature, TaskGroup};
use crate::types::{CaptureMode, DeviceSlice, EventFlags, Priority, StreamId};
use crate::uses::Access;
use bytes::Bytes;
use std::fmt;
use std::sync::{Arc, OnceLock};

mod batch;

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

    /// Opens a task group on this capturing stream: the operators (built-in kernels, user
    /// operators, collective parts) submitted to it until [`Stream::end_task_group`] form a
    /// group that [`Graph::update`] can re-issue with new parameters without recapturing
    /// (ACL's `aclmdlRICaptureTaskGrpBegin`). Copies, memsets and host work are refused
    /// inside a group ([`StreamError::NotAnOperatorInTaskGroup`]).
    ///
    /// Refused with [`StreamError::TaskGroupOutsideCapture`] when the stream does not capture and
    /// [`StreamError::TaskGroupAlreadyOpen`] when a group is open on it.
    pub fn begin_task_group(&self) -> Result<()> {
        let _turn = self.inner.submission_turn();
        let capture = {
            let st = self.device.inner.lock();
            let Some(cap) = st.ordering.capture_of(self.id()) else {
                return Err(StreamError::TaskGroupOutsideCapture { stream: self.id() });
            };
            if st.task_recording.contains_key(&self.id()) {
                return Err(StreamError::TaskGroupAlreadyOpen { stream: self.id() });
            }
            cap.id
        };
        self.inner.hal.begin_task_group()?;
        self.device.inner.lock().task_recording.insert(
            self.id(),
            task_group::Recording::Group {
                capture,
                ops: Vec::new(),
            },
        );
        tracing::debug!(
            stream = self.id().0,
            capture = capture.0,
            "task group begun"
        );
        Ok(())
    }

    /// Closes the task group open on this stream and returns it (ACL's
    /// `aclmdlRICaptureTaskGrpEnd`): pass it to [`Graph::update`] of the graph this capture
    /// makes. Refused with [`StreamError::NoOpenTaskGroup`] when none is open.
    pub fn end_task_group(&self) -> Result<TaskGroup> {
        let _turn = self.inner.submission_turn();
        let capture = match self.device.inner.lock().task_recording.get(&self.id()) {
            Some(task_group::Recording::Group { capture, .. }) => *capture,
            _ => return Err(StreamError::NoOpenTaskGroup { stream: self.id() }),
        };
        let handle = self.inner.hal.end_task_group();
        let ops = match self.device.inner.lock().task_recording.remove(&self.id()) {
            Some(task_group::Recording::Group { ops, .. }) => ops,
            _ => Vec::new(),
        };
        let handle = handle?;
        tracing::debug!(
            stream = self.id().0,
            capture = capture.0,
            ops = ops.len(),
            "task group ended"
        );
        Ok(TaskGroup {
            device: self.device.id(),
            capture,
            handle,
            ops: ops.into(),
        })
    }

    /// Runs `f` with this stream in an update scope of `group`: the operators `f` submits
    /// are checked against the group's before the backend gets them; the scope is closed
    /// whatever `f` returns, and also when it panics (the panic is caught and handed back
    /// in [`UpdateOutcome::panic`] for the caller to resume once it is done). The backend
    /// commits the update when the whole group was re-issued, matching, and discards it
    /// otherwise ([`UpdateOutcome`]).
    pub(crate) fn task_update_scope(
        &self,
        group: &TaskGroup,
        f: impl FnOnce(&Stream<B>) -> Result<()>,
    ) -> Result<UpdateOutcome> {
        {
            let _turn = self.inner.submission_turn();
            let st = self.device.inner.lock();
            if st.ordering.capture_of(self.id()).is_some() {
                return Err(StreamError::ForbiddenDuringCapture {
                    call: "Graph::update",
                    stream: self.id(),
                });
            }
            if st.task_recording.contains_key(&self.id()) {
                return Err(StreamError::TaskGroupAlreadyOpen { stream: self.id() });
            }
            drop(st);
            self.inner.hal.begin_task_update(group.handle)?;
            self.device.inner.lock().task_recording.insert(
                self.id(),
                task_group::Recording::Update {
                    expected: group.ops.clone(),
                    seen: 0,
                    failed: false,
                    uses: Vec::new(),
                },
            );
        }
        // Caught so that a panicking closure leaves no update open on the stream (its later
        // copies, memsets and updates would be refused); the caller resumes it.
        let (result, panic) =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
                Ok(result) => (result, None),
                Err(panic) => (
                    Err(StreamError::TaskUpdateMismatch {
                        index: 0,
                        difference: "the update's closure panicked".into(),
                    }),
                    Some(panic),
                ),
            };
        let _turn = self.inner.submission_turn();
        let (seen, uses) = match self.device.inner.lock().task_recording.remove(&self.id()) {
            Some(task_group::Recording::Update { seen, uses, .. }) => (seen, uses),
            _ => (0, Vec::new()),
        };
        // Every operator before the group's count was checked before the backend got it, so
        // a complete update matches and stands (also when `f` then failed, or issued one too
        // many, which was refused); an incomplete one is discarded: nothing changes.
        let commit = seen == group.ops.len();
        let ended = self.inner.hal.end_task_update(commit);
        if commit {
            ended?;
        }
        let report = result.and_then(|()| {
            if commit {
                Ok(())
            } else {
                Err(StreamError::TaskUpdateMismatch {
                    index: seen,
                    difference: format!(
                        "count: the group has {} operators, the update issued {seen}; nothing \
                         was changed",
                        group.ops.len()
                    ),
                })
            }
        });
        Ok(UpdateOutcome {
            committed: commit,
            report,
            uses,
            panic,
        })
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

    /// Enqueues a copy of `src` into `dst`. The stream keeps `src` alive until the copy has
    /// run (for a captured copy, as long as the graph lives).
    pub fn copy_h2d(&self, dst: DeviceSlice, src: Bytes) -> Result<StreamPosition> {
        let (ptr, len) = (src.as_ptr(), src.len() as u64);
        // SAFETY: `src` goes to the keep-alive list as the copy gets its position and stays
        // there until the host observes this copy complete, or as long as the graph that
        // captured it lives; `Bytes` is immutable.
        unsafe { self.h2d(dst, ptr, len, Some(Box::new(src))) }
    }

    /// Enqueues a copy of `len` bytes at `src` (host memory, typically pinned) into `dst`,
    /// without copying the host bytes first. Same capture rules as [`Stream::copy_h2d`].
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes, and the host does not write it nor free it until
    /// the copy has completed as observed by the host (`synchronize`, a `true` query, an event
    /// recorded after it and found complete; see [`Device::is_complete`]), or, for a captured
    /// copy, until the graph is destroyed. The pinned host allocator upholds this with events.
    pub unsafe fn copy_h2d_raw(
        &self,
        dst: DeviceSlice,
        src: *const u8,
        len: u64,
    ) -> Result<StreamPosition> {
        // SAFETY: forwarded from the caller.
        unsafe { self.h2d(dst, src, len, None) }
    }

    /// Submits a host-to-device copy, keeping `keep` alive until the host observes it.
    ///
    /// # Safety
    /// `src` stays valid and unchanged for `len` bytes until the host observes the copy
    /// complete (or its graph is gone), by the caller's promise or because `keep` owns it.
    unsafe fn h2d(
        &self,
        dst: DeviceSlice,
        src: *const u8,
        len: u64,
        keep: Option<KeepAlive>,
    ) -> Result<StreamPosition> {
        check_copy_len("host-to-device copy", len, dst.len)?;
        let uses = [(dst, Access::Write)];
        let foreign = self.device.place_ranges("host-to-device copy", uses)?;
        let pos = self.submit("Stream::copy_h2d", keep, |s| {
            // SAFETY: the caller's promise on `src`, which `keep` may fulfil.
            unsafe { s.memcpy_h2d(dst.ptr, src, dst.len) }
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// Enqueues a copy of `src` to the host. The returned readback becomes readable once the
    /// host has observed the copy complete. Not capturable: inside a capture copy into device
    /// memory instead.
    pub fn copy_d2h(&self, src: DeviceSlice) -> Result<HostReadback<B>> {
        let len = usize::try_from(src.len).map_err(|_| {
            StreamError::SizeOverflow(SizeOverflow {
                call: "Stream::copy_d2h",
                what: format!("a host buffer of {} bytes", src.len),
            })
        })?;
        let uses = [(src, Access::Read)];
        let foreign = self.device.place_ranges("device-to-host copy", uses)?;
        let staging = crate::memory::Staging::new(len);
        let done = self.device.create_event(EventFlags::ORDERING)?;
        let keep: KeepAlive = Box::new(staging.clone());
        let pos = self.submit_work("Stream::copy_d2h", Capturable::No, Some(keep), |s| {
            // SAFETY: the staging buffer is kept alive in the keep-alive list until the host
            // observes this copy complete, and `HostReadback` only reads it after that.
            unsafe { s.memcpy_d2h(staging.as_mut_ptr(), src.ptr, src.len) }
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        done.record(self)?;
        Ok(HostReadback::new(staging, pos, done))
    }

    /// Enqueues a copy of `src` into `len` bytes of host memory at `dst` (typically pinned),
    /// without a staging buffer. Refused during a capture, like [`Stream::copy_d2h`].
    ///
    /// # Safety
    /// `dst` is valid for writes of `len` bytes, and the host neither reads, writes nor frees it
    /// until the copy has completed as observed by the host (see [`Device::is_complete`]).
    pub unsafe fn copy_d2h_raw(
        &self,
        dst: *mut u8,
        len: u64,
        src: DeviceSlice,
    ) -> Result<StreamPosition> {
        check_copy_len("device-to-host copy", len, src.len)?;
        let uses = [(src, Access::Read)];
        let foreign = self.device.place_ranges("device-to-host copy", uses)?;
        let pos = self.submit_work("Stream::copy_d2h", Capturable::No, None, |s| {
            // SAFETY: the caller's promise on `dst`.
            unsafe { s.memcpy_d2h(dst, src.ptr, src.len) }
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// Enqueues a device-to-device copy (same lengths). Either range may be memory of another
    /// device this stream's device has peer access to ([`Device::enable_peer_access`]): a
    /// peer copy, whose use the owning device's observers see too. Without peer access the
    /// copy is refused with [`StreamError::ForeignMemory`] naming both devices.
    pub fn copy_d2d(&self, src: DeviceSlice, dst: DeviceSlice) -> Result<StreamPosition> {
        if src.len != dst.len {
            return Err(StreamError::OutOfBounds {
                what: "device-to-device copy",
                offset: 0,
                len: src.len,
                capacity: dst.len,
            });
        }
        let uses = [(src, Access::Read), (dst, Access::Write)];
        let foreign = self.device.place_ranges("device-to-device copy", uses)?;
        let pos = self.submit("Stream::copy_d2d", None, |s| {
            s.memcpy_d2d(dst.ptr, src.ptr, src.len)
        })?;
        self.device.notify_placed(pos, uses, &foreign);
        Ok(pos)
    }

    /// Enqueues a copy of `src`, memory of `src_device`, into `dst`, memory of `dst_device`
    /// (same lengths): a peer copy when the devices differ (`aclrtMemcpyAsync` device to device
    /// after enabling peer access). One of the two devices must be this stream's
    /// ([`StreamError::WrongDevice`] otherwise), and this stream's device must have peer access to
    /// the other ([`StreamError::PeerAccessUnavailable`] naming both otherwise). Each range must be
    /// live memory of the device named for it, as far as the backend can tell. The read is
    /// noted to `src_device`'s observers and the write to `dst_device`'s, both at this
    /// stream's position: an allocator of either device sees its buffer used by this stream.
    pub fn copy_peer(
        &self,
        src: DeviceSlice,
        src_device: &Device<B>,
        dst: DeviceSlice,
        dst_device: &Device<B>,
    ) -> Result<StreamPosition> {
        let mine = &self.device;
        let other = if mine.same_as(src_device) {
            dst_device
        } else if mine.same_as(dst_device) {
            src_device
        } else {
            return Err(StreamError::WrongDevice(Box::new(WrongDevice {
                call: "Stream::copy_peer".into(),
                what: "source (neither side is the stream's device)",
                expected: mine.id(),
                found: src_device.id(),
            })));
        };
        if !mine.has_peer_access(other) {
            return Err(StreamError::PeerAccessUnavailable {
                from: mine.id(),
                to: other.id(),
                reason: "peer access was not enabled (Device::enable_peer_access)".into(),
            });
        }
        if src.len != dst.len {
            return Err(StreamError::OutOfBounds {
                what: "peer copy",
                offset: 0,
                len: src.len,
                capacity: dst.len,
            });
        }
        for (range, device) in [(src, src_device), (dst, dst_device)] {
            if range.len > 0 && device.hal().is_live(range) == Some(false) {
                return Err(StreamError::RangeNotLive {
                    work: "peer copy".into(),
                    range,
                    device: device.id(),
                });
            }
        }
        let pos = self.submit("Stream::copy_peer", None, |s| {
            s.memcpy_d2d(dst.ptr, src.ptr, src.len)
        })?;
        src_device.notify_uses(pos, [(src, Access::Read)]);
        dst_device.notify_uses(pos, [(dst, Access::Write)]);
        Ok(pos)
    }

    /// Enqueues a memset of every byte of `dst` to `value`.
    pub fn memset(&self, dst: DeviceSlice, value: u8) -> Result<StreamPosition> {
        let uses = [(dst, Access::Write)];
        let foreign = self.device.place_ranges("memset", uses)?;
        let pos = self.submit("Stream::memset", None, |s| {
            s.memset(dst.ptr, value, dst.len)
        })?;
        self.device.notify_placed(pos, uses, &foreign);
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

    /// Records `event` at this stream's current position.
    pub fn record(&self, event: &Event<B>) -> Result<()> {
        event.record(self)
    }

    /// Records a new event at this stream's current position.
    pub fn record_event(&self) -> Result<Event<B>> {
        let event = self.device.create_event(EventFlags::ORDERING)?;
        event.record(self)?;
        Ok(event)
    }

    /// Makes all later work on this stream wait for `event`'s last record. Waiting on an event
    /// recorded inside a capture makes this stream join that capture.
    ///
    /// The event may belong to another device (as CUDA and ACL allow): this stream is then
    /// ordered after that device's work up to the record, in the backend and in the model.
    /// Captures stay per device: a stream does not join another device's capture, and a
    /// capturing stream waits on no eager work of another device
    /// ([`StreamError::CaptureIsolation`], the one rule of [`crate::capture_rule`]).
    pub fn wait(&self, event: &Event<B>) -> Result<()> {
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let _turn = self.inner.submission_turn();
        inner.check_submit("Stream::wait", self.id())?;
        // The event's state stays locked until the backend has the wait, so a record of the
        // event from another thread lands wholly before (this wait sees it in the model and in
        // the backend) or wholly after (neither sees it).
        let record = event.inner.record_state();
        // Check first, so a refused wait reaches neither the backend nor the model. The answer
        // holds until the update below: only this stream's turn or the exclusive gate change
        // this stream's domain, and no capture ends while the gate is shared.
        let outcome = inner.lock().ordering.wait_outcome(
            self.id(),
            record.snapshot.as_ref(),
            event.inner.is_external(),
        );
        let snap = match outcome {
            Err(refusal) => {
                return Err(StreamError::CaptureIsolation {
                    stream: self.id(),
                    reason: refusal.reason(),
                })
            }
            Ok(WaitOutcome::WaitNode) => {
                // An external event waited on inside a capture: the graph waits at each launch
                // for the event's last record then (see `Graph::launch`).
                self.inner.hal.wait(&event.inner.hal)?;
                let mut st = inner.lock();
                if let Some(c) = st.ordering.capture_of(self.id()).map(|c| c.id) {
                    st.external_nodes(c).waits.push(event.inner.clone());
                }
                return Ok(());
            }
            Ok(_) => record.snapshot.clone(),
        };
        let Some(snap) = snap else {
            // Waiting on an event never recorded orders nothing (as in CUDA and ACL). A
            // foreign event may have been recorded by its library: the backend waits on it,
            // outside the model (see `Device::adopt_event`).
            if event.inner.foreign {
                self.inner.hal.wait(&event.inner.hal)?;
            }
            return Ok(());
        };
        self.inner.hal.wait(&event.inner.hal)?;
        drop(record);
        let effect = inner.lock().ordering.wait(self.id(), &snap);
        if let Ok(WaitEffect::JoinedCapture(c)) = effect {
            tracing::debug!(
                stream = self.id().0,
                capture = c.0,
                "stream joined a capture"
            );
        }
        Ok(())
    }

    /// Makes all later work on this stream wait for the work submitted to `other` so far;
    /// `other` may be a stream of another device (see [`Stream::wait`]).
    pub fn wait_stream(&self, other: &Stream<B>) -> Result<()> {
        if self == other {
            return Ok(());
        }
        let event = other.record_event()?;
        self.wait(&event)
    }

    /// Blocks the host until all work on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        let _gate = self.device.inner.gate_shared();
        // The clock before the backend call: all of its work reached the backend before the
        // synchronize began, so all of it is done when it returns.
        let (clock, learnt) = {
            let st = self.device.inner.lock();
            st.check_blocking("Stream::synchronize", BlockingTarget::Stream(self.id()))?;
            (
                st.ordering.clock_of(self.id()),
                st.ordering.remote_of(self.id()),
            )
        };
        self.inner.hal.synchronize()?;
        self.device.observe_host(&clock, &learnt);
        Ok(())
    }

    /// Whether all work on this stream is done. A `true` answer counts as a host observation.
    pub fn query(&self) -> Result<bool> {
        let _gate = self.device.inner.gate_shared();
        let (clock, learnt) = {
            let st = self.device.inner.lock();
            st.check_blocking("Stream::query", BlockingTarget::Stream(self.id()))?;
            (
                st.ordering.clock_of(self.id()),
                st.ordering.remote_of(self.id()),
            )
        };
        let done = self.inner.hal.query()?;
        if done {
            self.device.observe_host(&clock, &learnt);
        }
        Ok(done)
    }

    /// Begins capturing this stream's work into a graph. Work submitted afterwards is recorded,
    /// not run; other streams join by waiting on events recorded here.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        if self.is_default() {
            return Err(StreamError::CaptureOnDefaultStream);
        }
        // Exclusive: no submission, record, wait or blocking call is inside the device while
        // the stream's domain changes (see `crate::sync`).
        let _gate = self.device.inner.gate_exclusive();
        if self
            .device
            .inner
            .lock()
            .ordering
            .capture_of(self.id())
            .is_some()
        {
            return Err(StreamError::AlreadyCapturing { stream: self.id() });
        }
        self.inner.hal.begin_capture(mode)?;
        let id = self.device.inner.lock().ordering.begin_capture(
            self.id(),
            mode,
            std::thread::current().id(),
        );
        tracing::info!(stream = self.id().0, capture = id.0, ?mode, "capture begun");
        Ok(())
    }

    /// Ends the capture begun on this stream and returns the graph.
    ///
    /// Every stream that joined the capture must have rejoined this one (an event recorded after
    /// its last captured work and waited on here); otherwise the capture is discarded and
    /// [`StreamError::UnjoinedStream`] names the stream and where it forked. A task group still
    /// open on a stream of the capture discards it too
    /// ([`StreamError::TaskGroupOpenAtCaptureEnd`], naming the stream; the group is ended in
    /// the backend first). Either way all streams of the capture are back to eager work
    /// afterwards, with no group open.
    pub fn end_capture(&self) -> Result<Graph<B>> {
        let gate = self.device.inner.gate_exclusive();
        let (id, unjoined, members, open_group) = {
            let st = self.device.inner.lock();
            let (id, origin) = match st.ordering.capture_of(self.id()) {
                None => return Err(StreamError::NotCapturing { stream: self.id() }),
                Some(cap) => (cap.id, cap.origin),
            };
            if origin != self.id() {
                return Err(StreamError::NotCaptureOrigin {
                    stream: self.id(),
                    origin,
                });
            }
            let members = st
                .ordering
                .capture_of(self.id())
                .map_or(1, |cap| cap.members.len().max(1));
            let open_group = st.task_recording.iter().find_map(|(s, r)| {
                matches!(r, task_group::Recording::Group { capture, .. } if *capture == id)
                    .then_some(*s)
            });
            (id, st.ordering.unjoined(id), members, open_group)
        };
        let origin = self.id();
        if let Some(stream) = open_group {
            self.end_open_group(stream);
        }
        // The graph holds a stream per member on runtimes that count them (ACL's models).
        let hal_graph = self.inner.hal.end_capture().map_err(|e| {
            let needed = u32::try_from(members).unwrap_or(u32::MAX);
            self.device.stream_error("Stream::end_capture", needed, e)
        });
        let (keep_alive, holds, external) = {
            let mut st = self.device.inner.lock();
            // A group left open ends with its capture (the capture is discarded below).
            st.task_recording.retain(
                |_, r| !matches!(r, task_group::Recording::Group { capture, .. } if *capture == id),
            );
            st.ordering.end_capture(id);
            (
                st.capture_keep_alive.remove(&id).unwrap_or_default(),
                st.capture_holds.remove(&id).unwrap_or_default(),
                st.capture_events.remove(&id).unwrap_or_default(),
            )
        };
        drop(gate);
        self.device.free_deferred();
        if let Some(stream) = open_group {
            tracing::warn!(
                stream = stream.0,
                origin = origin.0,
                "capture discarded: a task group is still open"
            );
            return Err(StreamError::TaskGroupOpenAtCaptureEnd { stream, origin });
        }
        if let Some(u) = unjoined.first() {
            tracing::warn!(
                stream = u.stream.0,
                origin = origin.0,
                "capture discarded: unjoined stream"
            );
            return Err(StreamError::UnjoinedStream {
                stream: u.stream,
                origin,
                joined_at: u.joined_at,
                last_work: u.last_work,
            });
        }
        let graph = Graph::new(
            self.device.clone(),
            id,
            hal_graph?,
            keep_alive,
            holds,
            external,
        );
        if graph.node_count() == 0 {
            tracing::warn!(stream = self.id().0, "the captured graph is empty");
        }
        tracing::info!(
            stream = self.id().0,
            capture = id.0,
            nodes = graph.node_count(),
            "capture ended"
        );
        Ok(graph)
    }

    /// Ends, in the backend, the task group left open on `stream` of a capture that is being
    /// discarded (the capture gate held exclusively by the caller), so the backend's capture
    /// ends with no group open.
    fn end_open_group(&self, stream: StreamId) {
        let inner = if stream == self.id() {
            Some(self.inner.clone())
        } else if stream == StreamId::DEFAULT {
            Some(self.device.inner.default_stream.clone())
        } else {
            let st = self.device.inner.lock();
            st.streams.get(&stream).and_then(std::sync::Weak::upgrade)
        };
        if let Some(inner) = inner {
            let _turn = inner.submission_turn();
            if let Err(err) = inner.hal.end_task_group() {
                tracing::warn!(%err, stream = stream.0, "ending the open task group failed");
            }
        }
    }

    /// The streams of the capture this stream belongs to, its origin first (empty when the
    /// stream is not capturing). Graph capture sessions use it to join side streams back.
    pub fn capture_members(&self) -> Vec<StreamId> {
        let st = self.device.inner.lock();
        let Some(cap) = st.ordering.capture_of(self.id()) else {
            return Vec::new();
        };
        let mut members = vec![cap.origin];
        members.extend(cap.members.keys().copied().filter(|s| *s != cap.origin));
        members
    }

    /// Where work submitted to this stream now goes: eager, or into a capture.
    pub fn domain(&self) -> Domain {
        self.device.inner.lock().ordering.domain_of(self.id())
    }
}

impl<B: hal::CollectiveBackend> Stream<B> {
    /// Enqueues rank `comm.rank()`'s part of `call` with its backend communicator `comm`
    /// (the backend's collective extension, [`hal::CollectiveBackend::launch_collective`]),
    /// labelled `label`: an operator reading its send buffer and writing its receive buffer
    /// ([`CollectiveCall::ranges`]), so ordering, the allocator's automatic mode, capture and
    /// replay treat it like a kernel. Workspace the backend asks for
    /// ([`hal::CollectiveBackend::collective_workspace`]) is taken as a kernel's is
    /// ([`Stream::workspace`]). Nothing checks that the other ranks agree: that is
    /// `braid-collective`'s job, which checks every call before it gets here.
    pub fn launch_collective(
        &self,
        comm: &B::Comm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<StreamPosition> {
        let (rank, ranks) = (comm.rank(), comm.ranks());
        let (send, recv) = call.ranges(rank, ranks).ok_or_else(|| {
            hal::HalError::InvalidArgument(format!(
                "{label}: the buffers of {} of {} elements over {ranks} ranks overflow",
                call.op, call.count
            ))
        })?;
        let uses = [(send, Access::Read), (recv, Access::Write)];
        let used = match (call.op.reads_send(rank), call.op.writes_recv(rank)) {
            (true, true) => &uses[..],
            (true, false) => &uses[..1],
            (false, true) => &uses[1..],
            (false, false) => &[],
        };
        // Scratch the backend needs beside the buffers (an average scaled before its sum on
        // HCCL), in stream order and given back once the part is submitted.
        let workspace = self.workspace(B::collective_workspace(comm, call))?;
        let scratch = workspace.slice();
        let enqueue = |s: &B::Stream| B::launch_collective_in(s, comm, call, label, scratch);
        let position = self.submit_operator(Lowered::Collective {
            label,
            uses: used,
            enqueue: &enqueue,
        });
        drop(workspace);
        position
    }
}

/// How an update scope ended ([`Stream::task_update_scope`]).
pub(crate) struct UpdateOutcome {
    /// Whether the backend committed the update (the whole group was re-issued, matching).
    pub(crate) committed: bool,
    /// The error to report, if any (a committed update may still report `f`'s error).
    pub(crate) report: Result<()>,
    /// The ranges the re-issued operators use, each with its device's uid.
    pub(crate) uses: Vec<task_group::UpdateUse>,
    /// The panic of the closure, caught to close the scope, for the caller to resume.
    pub(crate) panic: Option<Box<dyn std::any::Any + Send>>,
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

/// Refuses a host copy whose host length differs from its device range's.
fn check_copy_len(what: &'static str, host_len: u64, device_len: u64) -> Result<()> {
    if host_len == device_len {
        Ok(())
    } else {
        Err(StreamError::OutOfBounds {
            what,
            offset: 0,
            len: host_len,
            capacity: device_len,
        })
    }
}
