//! `Graph<B>`: a captured, replayable graph of work.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::event::{EventInner, RecordState};
use crate::hal::{Backend, Graph as _};
use crate::ordering::StreamPosition;
use crate::state::KeepAlive;
use crate::stream::Stream;
use crate::sync::MutexGuard;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

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

/// A graph returned by [`Stream::end_capture`]. Launch it on any stream of its device, as often
/// as needed.
pub struct Graph<B: Backend> {
    device: Device<B>,
    hal: B::Graph,
    /// Host memory captured copies read at every replay.
    keep_alive: Arc<Vec<KeepAlive>>,
    /// External events recorded and waited on by every launch.
    external: ExternalNodes<B>,
    /// The last launch on each stream: replays still running when the graph is dropped keep
    /// `keep_alive` until the host observes them.
    launches: Mutex<BTreeMap<crate::types::StreamId, StreamPosition>>,
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
        hal: B::Graph,
        keep_alive: Vec<KeepAlive>,
        external: ExternalNodes<B>,
    ) -> Self {
        Graph {
            device,
            hal,
            keep_alive: Arc::new(keep_alive),
            external,
            launches: Mutex::new(BTreeMap::new()),
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
    pub fn launch(&self, stream: &Stream<B>) -> Result<StreamPosition> {
        self.device.check_same_device("stream", stream.device())?;
        crate::dry_run::check(self.device.id(), "Graph::launch")?;
        // As any submission (see `crate::sync`): the capture checks hold until the backend
        // has the launch, and the stream's positions follow its backend order.
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let _turn = stream.inner.submission_turn();
        {
            let st = inner.lock();
            if st.ordering.capture_of(stream.id()).is_some() {
                return Err(Error::ForbiddenDuringCapture {
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
        self.launches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(stream.id(), pos);
        Ok(pos)
    }
}

impl<B: Backend> Drop for Graph<B> {
    fn drop(&mut self) {
        let launches =
            std::mem::take(&mut *self.launches.lock().unwrap_or_else(|p| p.into_inner()));
        if self.keep_alive.is_empty() {
            return;
        }
        let mut st = self.device.inner.lock();
        for pos in launches.into_values() {
            st.keep_alive(pos, Box::new(self.keep_alive.clone()));
        }
        st.release_completed();
    }
}
