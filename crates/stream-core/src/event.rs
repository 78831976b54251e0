//! `Event<B>`: a marker in a stream's work.

use crate::capture_rule::{capture_record, RecordOutcome};
use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::hal::{Backend, Event as _, Stream as _};
use crate::ordering::{Domain, EventSnapshot, StreamPosition};
use crate::state::BlockingTarget;
use crate::stream::Stream;
use crate::sync::{self, Mutex, MutexGuard};
use crate::types::EventFlags;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// An event's record state, under the event's lock (see [`crate::sync`] for the lock order).
#[derive(Default)]
pub(crate) struct RecordState {
    /// The last record's snapshot; `None` before the first record.
    pub(crate) snapshot: Option<EventSnapshot>,
    /// How many records braid has made: a host observation made without the lock counts only
    /// if no record happened meanwhile.
    records: u64,
}

pub(crate) struct EventInner<B: Backend> {
    pub(crate) hal: B::Event,
    flags: EventFlags,
    tag: Option<String>,
    /// Made by another library ([`crate::Device::adopt_event`]): it may be recorded behind
    /// braid's back, so a wait on it reaches the backend even with no record braid saw.
    pub(crate) foreign: bool,
    /// The last record, updated with the backend record under this lock.
    record: Mutex<RecordState>,
}

impl<B: Backend> EventInner<B> {
    pub(crate) fn new(hal: B::Event, flags: EventFlags, tag: Option<String>) -> Self {
        EventInner {
            hal,
            flags,
            tag,
            foreign: false,
            record: Mutex::new(RecordState::default()),
        }
    }

    /// The event's record state: hold it across a backend record or wait of this event.
    pub(crate) fn record_state(&self) -> MutexGuard<'_, RecordState> {
        self.record.lock()
    }

    /// Whether the event is an external one ([`EventFlags::external`]).
    pub(crate) fn is_external(&self) -> bool {
        self.flags.external
    }
}

impl RecordState {
    /// Notes a record made with `snapshot` (eager, or by a launched graph's record node).
    pub(crate) fn note_record(&mut self, snapshot: EventSnapshot) {
        self.snapshot = Some(snapshot);
        self.records += 1;
    }
}

/// A marker in a stream's work: record it on a stream, wait on it from others, query or
/// synchronize it from the host. Cheap to clone; clones are the same event.
pub struct Event<B: Backend> {
    device: Device<B>,
    pub(crate) inner: Arc<EventInner<B>>,
}

impl<B: Backend> Clone for Event<B> {
    fn clone(&self) -> Self {
        Event {
            device: self.device.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for Event<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.device.id())
            .field("timing", &self.inner.flags.timing)
            .field("tag", &self.inner.tag)
            .field("recorded_at", &self.recorded_at())
            .finish()
    }
}

impl<B: Backend> Event<B> {
    pub(crate) fn from_parts(device: Device<B>, inner: Arc<EventInner<B>>) -> Self {
        Event { device, inner }
    }

    /// The device of the event.
    pub fn device(&self) -> &Device<B> {
        &self.device
    }

    /// The backend event, for backend-specific calls (on ACL, `hal().as_raw()` is the native
    /// `aclrtEvent` another library can record or wait on).
    pub fn hal(&self) -> &B::Event {
        &self.inner.hal
    }

    /// The flags the event was created with.
    pub fn flags(&self) -> EventFlags {
        self.inner.flags
    }

    /// The tag of a tagged event.
    pub fn tag(&self) -> Option<&str> {
        self.inner.tag.as_deref()
    }

    /// Where the event was last recorded; `None` before the first record.
    pub fn recorded_at(&self) -> Option<StreamPosition> {
        self.inner
            .record_state()
            .snapshot
            .as_ref()
            .map(|s| s.position)
    }

    /// Records the event at `stream`'s current position (re-recording moves it).
    ///
    /// The stream's turn and the event's lock are held across the backend record and the
    /// snapshot: the snapshot is the stream's clock after exactly the work its backend stream
    /// had received, and a wait on the event from another thread sees this record in the model
    /// exactly when it sees it in the backend.
    ///
    /// An external event ([`EventFlags::EXTERNAL`]) recorded on a capturing stream becomes a
    /// record node of the graph instead: the event does not count as recorded until the graph
    /// is launched (see [`crate::capture_rule`]).
    pub fn record(&self, stream: &Stream<B>) -> Result<()> {
        self.device
            .check_same_device("Event::record", "stream", stream.device())?;
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let _turn = stream.inner.submission_turn();
        inner.check_submit("Event::record", stream.id())?;
        let mut record = self.inner.record_state();
        let capture = inner.lock().ordering.capture_of(stream.id()).map(|c| c.id);
        let outcome = capture_record(capture.is_some(), self.inner.is_external());
        stream.hal().record(&self.inner.hal)?;
        let mut st = inner.lock();
        match (outcome, capture) {
            (RecordOutcome::RecordNode, Some(c)) => {
                st.external_nodes(c).records.push(self.inner.clone())
            }
            _ => record.note_record(st.ordering.record(stream.id())),
        }
        Ok(())
    }

    /// Records the event on this thread's current stream (TorchAir's `npu_tagged_event_record`).
    pub fn record_on_current_stream(&self) -> Result<()> {
        self.record(&self.device.current_stream())
    }

    /// Makes this thread's current stream wait on the event (TorchAir's
    /// `npu_tagged_event_wait`).
    pub fn wait_on_current_stream(&self) -> Result<()> {
        self.device.current_stream().wait(self)
    }

    /// Whether the work before the last record is done (true if never recorded). A `true`
    /// answer counts as a host observation.
    pub fn query(&self) -> Result<bool> {
        self.observe("Event::query", |hal| hal.query())
    }

    /// Blocks the host until the work before the last record is done.
    pub fn synchronize(&self) -> Result<()> {
        self.observe("Event::synchronize", |hal| hal.synchronize().map(|()| true))?;
        Ok(())
    }

    /// Runs a host-blocking backend call on the event (`true`: the last record's work is done)
    /// and lets the host observe the record it answered about.
    ///
    /// The event's lock is not held across the call (a synchronize may block for long, and
    /// records and waits of the event from other threads go on meanwhile): the snapshot and
    /// the count of records are read before, and the answer counts only if no record happened
    /// by the time it is checked; otherwise the call may have answered about the newer record,
    /// which says nothing about the older one, and nothing is observed.
    fn observe(
        &self,
        call: &'static str,
        blocking: impl FnOnce(&B::Event) -> std::result::Result<bool, crate::hal::HalError>,
    ) -> Result<bool> {
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let (snap, records) = {
            let record = self.inner.record_state();
            (record.snapshot.clone(), record.records)
        };
        let target = BlockingTarget::Event(snap.as_ref().map(|s| s.position.domain));
        inner.lock().check_blocking(call, target)?;
        let done = blocking(&self.inner.hal)?;
        if let (true, Some(snap)) = (done, snap) {
            if self.inner.record_state().records == records {
                // The work before the record is complete, and with it the work of other
                // devices it was ordered after.
                let learnt = {
                    let mut st = inner.lock();
                    let learnt = st.ordering.observe_event(&snap);
                    st.release_completed();
                    learnt
                };
                if !learnt.is_empty() {
                    self.device
                        .observe_host(&crate::clock::VectorClock::new(), &learnt);
                }
            }
        }
        Ok(done)
    }

    /// Milliseconds of device time between this event and `end`.
    ///
    /// Both events need timing, must have been recorded (outside a capture) on the same device,
    /// and `end` must be complete; otherwise a typed error says which rule failed.
    pub fn elapsed_ms(&self, end: &Event<B>) -> Result<f32> {
        self.device
            .check_same_device("Event::elapsed_ms", "event", end.device())?;
        if !self.inner.flags.timing || !end.inner.flags.timing {
            return Err(StreamError::EventWithoutTiming);
        }
        let eager = |e: &Event<B>| e.recorded_at().is_some_and(|p| p.domain == Domain::Eager);
        if !eager(self) || !eager(end) {
            return Err(StreamError::EventNotRecorded);
        }
        if !self.query()? || !end.query()? {
            return Err(StreamError::NotReady);
        }
        Ok(self.inner.hal.elapsed_ms(&end.inner.hal)?)
    }

    /// A future that resolves when the work before the last record is done, for callers on an
    /// async runtime. The host-blocking wait runs on a helper thread, so the runtime's workers
    /// are never blocked.
    pub fn wait_async(&self) -> EventWait<B> {
        EventWait {
            event: self.clone(),
            shared: Arc::new(Mutex::new(WaitShared::default())),
        }
    }
}

#[derive(Default)]
struct WaitShared {
    started: bool,
    result: Option<Result<()>>,
    waker: Option<Waker>,
}

/// Future returned by [`Event::wait_async`].
pub struct EventWait<B: Backend> {
    event: Event<B>,
    shared: Arc<Mutex<WaitShared>>,
}

impl<B: Backend> Future for EventWait<B> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut shared = this.shared.lock();
        if let Some(result) = shared.result.take() {
            return Poll::Ready(result);
        }
        shared.waker = Some(cx.waker().clone());
        if !shared.started {
            match this.event.query() {
                Ok(true) => return Poll::Ready(Ok(())),
                Err(err) => return Poll::Ready(Err(err)),
                Ok(false) => {}
            }
            shared.started = true;
            let event = this.event.clone();
            let state = this.shared.clone();
            sync::thread::spawn(move || {
                let result = event.synchronize();
                let mut shared = state.lock();
                shared.result = Some(result);
                if let Some(waker) = shared.waker.take() {
                    waker.wake();
                }
            });
        }
        Poll::Pending
    }
}
