//! `Graph<B>`: a captured, replayable graph of work.

use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::event::Event;
use crate::event::{EventInner, RecordState};
use crate::graph_hold::{GraphHold, Holds};
use crate::hal::{Backend, Graph as _};
use crate::ordering::{CaptureId, StreamPosition};
use crate::state::KeepAlive;
use crate::stream::Stream;
use crate::sync::{Mutex, MutexGuard};
use crate::task_group::TaskGroup;
use crate::types::EventFlags;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// The external events ([`crate::EventFlags::EXTERNAL`]) a graph records and waits on: at each
/// launch the graph waits for each waited event's last record (made eagerly or by a launched
/// graph), and each recorded event counts as recorded by the launch.
pub(crate) struct ExternalNodes<B: Backend> {
    pub(crate) records: Vec<Arc<EventInner<B>>>,
    pub(crate) waits: Vec<Arc<EventInner<B>>>,
}

impl<B: Backend> Default for ExternalNodes<B> {
    fn default() -> Self {
        ExternalNodes {
            records: Vec::new(),
            waits: Vec::new(),
        }
    }
}

impl<B: Backend> ExternalNodes<B> {
    /// Locks the state of every external event of the graph, each once, in address order (the
    /// one place a thread holds several event locks; see [`crate::sync`]).
    fn lock_all(&self) -> Vec<(*const EventInner<B>, MutexGuard<'_, RecordState>)> {
        let mut events: Vec<&Arc<EventInner<B>>> = self.records.iter().chain(&self.waits).collect();
        events.sort_by_key(|e| Arc::as_ptr(e));
        events.dedup_by_key(|e| Arc::as_ptr(e));
        events
            .into_iter()
            .map(|e| (Arc::as_ptr(e), e.record_state()))
            .collect()
    }
}

/// What a graph keeps for its replays; after the graph is dropped, until the host has
/// observed its last launches complete.
struct Kept {
    /// Host memory captured copies read at every replay.
    keep_alive: Vec<KeepAlive>,
    /// Holds on the device memory its work uses ([`crate::graph_hold`]).
    holds: Holds,
}

/// A graph returned by [`Stream::end_capture`]. Launch it on any stream of its device, as often
/// as needed.
pub struct Graph<B: Backend> {
    device: Device<B>,
    hal: B::Graph,
    /// Host memory and device memory holds its replays need.
    kept: Arc<Kept>,
    /// External events recorded and waited on by every launch.
    external: ExternalNodes<B>,
    /// The last launch on each stream: replays still running when the graph is dropped keep
    /// `kept` until the host observes them.
    launches: Mutex<BTreeMap<crate::types::StreamId, StreamPosition>>,
    /// The capture that made the graph: its task groups name it.
    capture: CaptureId,
    /// The event recorded after the last update: every launch waits on it until the host
    /// has observed it complete.
    pending_update: Mutex<Option<Event<B>>>,
    /// Updates applied.
    updates: AtomicU64,
}

impl<B: Backend> fmt::Debug for Graph<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.device.id())
            .field("nodes", &self.node_count())
            .finish()
    }
}

impl<B: Backend> Graph<B> {
    pub(crate) fn new(
        device: Device<B>,
        capture: CaptureId,
        hal: B::Graph,
        keep_alive: Vec<KeepAlive>,
        holds: Vec<Arc<dyn GraphHold>>,
        external: ExternalNodes<B>,
    ) -> Self {
        Graph {
            device,
            hal,
            kept: Arc::new(Kept {
                keep_alive,
                holds: Holds::new(holds),
            }),
            external,
            launches: Mutex::new(BTreeMap::new()),
            capture,
            pending_update: Mutex::new(None),
            updates: AtomicU64::new(0),
        }
    }

    /// Number of work nodes captured.
    pub fn node_count(&self) -> usize {
        self.hal.node_count()
    }

    /// The backend graph.
    pub fn hal(&self) -> &B::Graph {
        &self.hal
    }

    /// External events the graph records at each launch, and waits on.
    pub fn external_event_counts(&self) -> (usize, usize) {
        (self.external.records.len(), self.external.waits.len())
    }

    /// Enqueues one replay of the graph on `stream`; later work on `stream` runs after it.
    ///
    /// A graph with external wait nodes is ordered after the last record of each waited event
    /// (made eagerly or by a graph launched before); each of its external record nodes counts
    /// as a record of its event at this launch.
    ///
    /// After a [`Graph::update`], the launch first waits on the update's event (the update
    /// stream's work), so it runs the updated operators.
    ///
    /// Refused before anything is enqueued when an owner of memory the graph's work uses
    /// says so ([`crate::graph_hold`]): with braid's caching allocator, when a buffer an
    /// update names was dropped ([`StreamError::GraphUsesDroppedBuffer`]) or the graph uses
    /// memory of a sleeping pool ([`StreamError::GraphMemoryAsleep`]).
    pub fn launch(&self, stream: &Stream<B>) -> Result<StreamPosition> {
        self.device
            .check_same_device("Graph::launch", "stream", stream.device())?;
        crate::dry_run::check(self.device.id(), "Graph::launch")?;
        for hold in self.kept.holds.all() {
            if let Err(err) = hold.check_launch() {
                tracing::warn!(%err, "graph launch refused");
                return Err(err);
            }
        }
        if !stream.is_capturing() {
            self.wait_for_update(stream)?;
        }
        // As any submission (see `crate::sync`): the capture checks hold until the backend
        // has the launch, and the stream's positions follow its backend order.
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let _turn = stream.inner.submission_turn();
        {
            let st = inner.lock();
            if st.ordering.capture_of(stream.id()).is_some() {
                return Err(StreamError::ForbiddenDuringCapture {
                    call: "Graph::launch",
                    stream: stream.id(),
                });
            }
            st.check_submit("Graph::launch", stream.id())?;
        }
        // The events' states stay locked until the model has the launch: a record or wait of
        // one of them from another thread lands wholly before or wholly after it.
        let mut events = self.external.lock_all();
        self.hal.launch(stream.hal())?;
        let pos = {
            let mut st = inner.lock();
            let state = |events: &mut Vec<(*const EventInner<B>, MutexGuard<'_, RecordState>)>,
                         e: &Arc<EventInner<B>>| {
                events.iter_mut().position(|(p, _)| *p == Arc::as_ptr(e))
            };
            for e in &self.external.waits {
                if let Some(i) = state(&mut events, e) {
                    if let Some(snap) = events[i].1.snapshot.clone() {
                        // External events are only ever recorded eagerly or by launches, so
                        // the eager launching stream is ordered after the record.
                        let _ = st.ordering.wait(stream.id(), &snap);
                    }
                }
            }
            let pos = st.ordering.submit(stream.id());
            for e in &self.external.records {
                if let Some(i) = state(&mut events, e) {
                    events[i].1.note_record(st.ordering.record(stream.id()));
                }
            }
            pos
        };
        drop(events);
        self.launches.lock().insert(stream.id(), pos);
        Ok(pos)
    }
}

impl<B: Backend> Graph<B> {
    /// Orders `stream` after the last update, until the host has observed it complete.
    fn wait_for_update(&self, stream: &Stream<B>) -> Result<()> {
        let mut pending = self.pending_update.lock();
        let Some(event) = pending.as_ref() else {
            return Ok(());
        };
        if event
            .recorded_at()
            .is_some_and(|at| self.device.is_complete(at))
        {
            *pending = None;
            return Ok(());
        }
        stream.wait(event)
    }

    /// Updates captured work without recapturing (ACL's `aclmdlRICaptureTaskUpdateBegin` /
    /// `aclmdlRICaptureTaskUpdateEnd`, torch_npu's `graph_task_update_begin/end`): `f`
    /// re-issues the operators of `group`, in order, on `stream` (an eager stream of the
    /// graph's device), with new scalar parameters, bodies or buffers of the same shape. The
    /// next launches of the graph run the new operators: each waits on the event returned
    /// (recorded on `stream` after the update), so no launch runs before the update.
    ///
    /// The graph holds the memory the new operators use, as it holds what its capture used
    /// ([`crate::graph_hold`]; braid's caching allocator keeps such a buffer's block from
    /// other buffers), until it is dropped or a later update of the group no longer names it;
    /// a launch while a buffer an update names has been dropped is refused
    /// ([`StreamError::GraphUsesDroppedBuffer`]). If `f` panics, the stream leaves the update
    /// and the graph is left as an error returned by `f` at that point would leave it (an
    /// incomplete update discarded, a complete one standing), then the panic propagates.
    ///
    /// Every re-issued operator is checked before the backend gets it: one that differs from
    /// the group's in kind, data type or shape, or one too few, is refused with
    /// [`StreamError::TaskUpdateMismatch`] naming the difference, and the graph keeps its operators
    /// (an update is applied whole or not at all). One operator too many is refused the same
    /// way, but the group's operators re-issued before it stand, as they do when `f` fails
    /// after re-issuing the whole group: ACL applies a complete update and has no way to
    /// discard it, so braid behaves the same on every backend. Refused also, before anything
    /// is issued: a group of another graph ([`StreamError::TaskGroupOfOtherGraph`]), an update while
    /// a launch of the graph may still run ([`StreamError::UpdateWhileLaunchInFlight`]: synchronize
    /// first, so a running replay never sees half an update), a capturing `stream`.
    ///
    /// ```
    /// # fn demo<B: braid_stream_core::hal::Backend>(
    /// #     device: braid_stream_core::Device<B>,
    /// # ) -> braid_stream_core::Result<()> {
    /// use braid_stream_core::{CaptureMode, Kernel};
    /// let (s, update) = (device.create_stream(0)?, device.create_stream(0)?);
    /// let out = device.alloc(64)?;
    /// s.begin_capture(CaptureMode::Global)?;
    /// s.begin_task_group()?;
    /// s.launch(&Kernel::Fill { dst: out.slice(), value: 1.0 })?;
    /// let group = s.end_task_group()?;
    /// let graph = s.end_capture()?;
    /// graph.update(&group, &update, |u| {
    ///     u.launch(&Kernel::Fill { dst: out.slice(), value: 2.0 }).map(|_| ())
    /// })?;
    /// graph.launch(&s)?; // waits for the update, fills with 2.0
    /// # Ok(()) }
    /// ```
    pub fn update(
        &self,
        group: &TaskGroup,
        stream: &Stream<B>,
        f: impl FnOnce(&Stream<B>) -> Result<()>,
    ) -> Result<Event<B>> {
        let span = tracing::info_span!("graph_update", stream = stream.id().0, ops = group.len());
        let _span = span.enter();
        if group.device != self.device.id() || group.capture != self.capture {
            return Err(StreamError::TaskGroupOfOtherGraph {
                group_device: group.device,
                group_capture: group.capture.0,
                graph_device: self.device.id(),
                graph_capture: self.capture.0,
            });
        }
        self.device
            .check_same_device("Graph::update", "stream", stream.device())?;
        {
            let launches = self.launches.lock();
            if let Some((s, _)) = launches
                .iter()
                .find(|(_, pos)| !self.device.is_complete(**pos))
            {
                tracing::warn!(stream = s.0, "graph update refused: launch in flight");
                return Err(StreamError::UpdateWhileLaunchInFlight { stream: *s });
            }
        }
        // Made before the update so that a failure to make it changes nothing.
        let event = self.device.create_event(EventFlags::default())?;
        let mut outcome = stream.task_update_scope(group, f)?;
        let panic = outcome.panic.take();
        let applied = self.apply_update(group, stream, event, outcome);
        if let Some(panic) = panic {
            // The closure's panic goes on to the caller, with the stream out of the update
            // and the graph as an error of the closure would have left it.
            tracing::warn!("the graph update's closure panicked");
            std::panic::resume_unwind(panic);
        }
        applied
    }

    /// The end of [`Graph::update`] once the update scope is closed: a committed update's
    /// holds kept and its event recorded for the next launches to wait on.
    fn apply_update(
        &self,
        group: &TaskGroup,
        stream: &Stream<B>,
        event: Event<B>,
        outcome: crate::stream::UpdateOutcome,
    ) -> Result<Event<B>> {
        let report = outcome.report;
        if !outcome.committed {
            return Err(report
                .err()
                .unwrap_or_else(|| StreamError::TaskUpdateMismatch {
                    index: 0,
                    difference: "the update was not applied".into(),
                }));
        }
        // The memory the new operators use is held for the graph from now on; what only the
        // group's previous update named is let go (dropped after the holds' lock).
        let holds = self.device.update_holds(&outcome.uses);
        drop(self.kept.holds.replace_update(group.handle, holds));
        event.record(stream)?;
        *self.pending_update.lock() = Some(event.clone());
        let n = self.updates.fetch_add(1, AtomicOrdering::Relaxed) + 1;
        tracing::info!(updates = n, "graph updated");
        report.map(|()| event)
    }

    /// Updates applied to the graph so far ([`Graph::update`]).
    pub fn update_count(&self) -> u64 {
        self.updates.load(AtomicOrdering::Relaxed)
    }
}

impl<B: Backend> Drop for Graph<B> {
    fn drop(&mut self) {
        let launches = std::mem::take(&mut *self.launches.lock());
        if launches.is_empty() || (self.kept.keep_alive.is_empty() && self.kept.holds.is_empty()) {
            return;
        }
        let mut st = self.device.inner.lock();
        for pos in launches.into_values() {
            st.keep_alive(pos, Box::new(self.kept.clone()));
        }
        st.release_completed();
    }
}
