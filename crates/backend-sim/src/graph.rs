//! [`SimGraph`]: the hal graph.

use crate::capture::{ExternalEvents, GraphNodes, Node};
use crate::device::{checked, same_device, Shared};
use crate::fault::CallKind;
use crate::limits::LiveSlot;
use crate::stream::SimStream;
use crate::SimBackend;
use braid_stream_core::hal::{self, HalError};
use braid_stream_core::sync::RwLock;
use std::fmt;
use std::sync::Arc;

/// A captured graph of a [`crate::SimDevice`]: nodes at their captured addresses, with
/// dependencies, in topological order. Cloning shares the nodes.
#[derive(Clone)]
pub struct SimGraph {
    shared: Shared,
    nodes: GraphNodes,
    external: Arc<ExternalEvents>,
    /// The streams the graph holds while it lives, one per stream captured into it
    /// ([`crate::limits`]).
    _streams: Arc<[Arc<LiveSlot>]>,
}

impl fmt::Debug for SimGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimGraph")
            .field("nodes", &self.nodes().len())
            .finish()
    }
}

impl SimGraph {
    pub(crate) fn new(
        shared: Shared,
        nodes: Vec<Node>,
        external: ExternalEvents,
        streams: Vec<Arc<LiveSlot>>,
    ) -> Self {
        SimGraph {
            shared,
            nodes: Arc::new(RwLock::new(nodes.into())),
            external: Arc::new(external),
            _streams: streams.into(),
        }
    }

    /// The nodes now (an update of one of its task groups replaces them).
    fn nodes(&self) -> Arc<[Node]> {
        self.nodes.read().clone()
    }

    /// The shared nodes, for binding task groups.
    pub(crate) fn nodes_cell(&self) -> &GraphNodes {
        &self.nodes
    }

    /// For each node, its label and the indices of the nodes it depends on.
    pub fn dependencies(&self) -> Vec<(String, Vec<usize>)> {
        self.nodes()
            .iter()
            .map(|n| (n.op.label.to_string(), n.deps.clone()))
            .collect()
    }
}

impl hal::Graph for SimGraph {
    type B = SimBackend;

    fn launch(&self, stream: &SimStream) -> Result<(), HalError> {
        same_device(&self.shared, &stream.shared)?;
        checked(&self.shared, CallKind::GraphLaunch)?.launch_graph(
            stream.global(),
            &self.nodes(),
            &self.external,
        )
    }

    fn node_count(&self) -> usize {
        self.nodes().len()
    }
}
