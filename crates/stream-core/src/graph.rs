//! `Graph<B>`: a captured, replayable graph of work.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::hal::{Backend, Graph as _};
use crate::ordering::StreamPosition;
use crate::state::KeepAlive;
use crate::stream::Stream;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A graph returned by [`Stream::end_capture`]. Launch it on any stream of its device, as often
/// as needed.
pub struct Graph<B: Backend> {
    device: Device<B>,
    hal: B::Graph,
    /// Host memory captured copies read at every replay.
    keep_alive: Arc<Vec<KeepAlive>>,
    /// The last launch on each stream: replays still running when the graph is dropped keep
    /// `keep_alive` until the host observes them.
    launches: Mutex<BTreeMap<crate::types::StreamId, StreamPosition>>,
}

impl<B: Backend> fmt::Debug for Graph<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.device.ordinal())
            .field("nodes", &self.node_count())
            .finish()
    }
}

impl<B: Backend> Graph<B> {
    pub(crate) fn new(device: Device<B>, hal: B::Graph, keep_alive: Vec<KeepAlive>) -> Self {
        Graph {
            device,
            hal,
            keep_alive: Arc::new(keep_alive),
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

    /// Enqueues one replay of the graph on `stream`; later work on `stream` runs after it.
    pub fn launch(&self, stream: &Stream<B>) -> Result<StreamPosition> {
        self.device.check_same_device("stream", stream.device())?;
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
        self.hal.launch(stream.hal())?;
        let pos = inner.lock().ordering.submit(stream.id());
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
