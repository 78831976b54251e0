//! Graph capture: recording submitted work as nodes with dependencies.

use crate::op::Op;
use braid_stream_core::sync::RwLock;
use braid_stream_core::types::CaptureMode;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A graph's nodes, shared by its clones and by the engine's task groups, which replace
/// operators in place when a group is updated.
pub(crate) type GraphNodes = Arc<RwLock<Arc<[Node]>>>;

/// One captured piece of work and the nodes it depends on (all earlier in the list).
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// The work, at its captured addresses.
    pub op: Op,
    /// Indices of the nodes that must finish before it starts.
    pub deps: Vec<usize>,
}

/// A capture in progress.
#[derive(Debug)]
pub(crate) struct Capture {
    /// Stream that began it (the only one that may end it).
    pub origin: u32,
    /// Mode it was begun with (kept for reports; the front layer enforces it).
    #[allow(dead_code)]
    pub mode: CaptureMode,
    /// Streams capturing into it, the origin included.
    pub members: BTreeSet<u32>,
    /// Nodes so far, in topological order by construction.
    pub nodes: Vec<Node>,
    /// External events recorded and waited on so far.
    pub external: ExternalEvents,
    /// Task groups open on member streams: the indices of their nodes so far.
    pub open_groups: BTreeMap<u32, Vec<usize>>,
    /// Handles of the task groups ended in this capture, bound to its graph at the end.
    pub groups: Vec<u64>,
}

/// The external events ([`braid_stream_core::EventFlags::EXTERNAL`]) a graph records and waits
/// on, by event index. At each launch the graph waits for every waited event's last record
/// before its first node starts, and records every recorded event once its last node is done:
/// the whole launch is ordered after the waits and before the records, which is what the
/// front layer's model says (coarser than CUDA, which places each at its node).
#[derive(Clone, Debug, Default)]
pub(crate) struct ExternalEvents {
    /// Events each launch records at its end.
    pub records: Vec<usize>,
    /// Events each launch waits on at its start.
    pub waits: Vec<usize>,
}

impl ExternalEvents {
    /// Adds `other`'s events (a graph launched into a capture).
    pub fn extend(&mut self, other: &ExternalEvents) {
        self.records.extend_from_slice(&other.records);
        self.waits.extend_from_slice(&other.waits);
    }
}

/// A stream's part in a capture.
#[derive(Clone, Debug)]
pub(crate) struct StreamCapture {
    /// Capture id.
    pub id: u64,
    /// Nodes the stream's next node depends on (sorted, no duplicates).
    pub frontier: Vec<usize>,
}

/// Adds the nodes of `b` to the sorted, deduplicated set `a`.
pub(crate) fn union(a: &mut Vec<usize>, b: &[usize]) {
    a.extend_from_slice(b);
    a.sort_unstable();
    a.dedup();
}

impl Capture {
    /// Appends `op`, depending on `frontier`; the frontier becomes the new node.
    pub fn add(&mut self, op: Op, frontier: &mut Vec<usize>) {
        let index = self.nodes.len();
        if let Some(group) = self.open_groups.get_mut(&op.stream) {
            group.push(index);
        }
        self.nodes.push(Node {
            op,
            deps: std::mem::take(frontier),
        });
        frontier.push(index);
    }

    /// Appends the nodes of a graph (a graph launched into a capture): its roots depend on
    /// `frontier`, its edges are kept, and the frontier becomes its sinks (or stays as it was
    /// for an empty graph).
    pub fn add_graph(&mut self, graph: &[Node], frontier: &mut Vec<usize>) {
        if graph.is_empty() {
            return;
        }
        let offset = self.nodes.len();
        let mut has_successor = vec![false; graph.len()];
        for (i, node) in graph.iter().enumerate() {
            let mut deps: Vec<usize> = node
                .deps
                .iter()
                .filter(|&&d| d < i)
                .map(|&d| d + offset)
                .collect();
            for &d in &node.deps {
                if let Some(flag) = has_successor.get_mut(d) {
                    *flag = true;
                }
            }
            if deps.is_empty() {
                deps = frontier.clone();
            }
            self.nodes.push(Node {
                op: node.op.clone(),
                deps,
            });
        }
        *frontier = (0..graph.len())
            .filter(|&i| !has_successor[i])
            .map(|i| i + offset)
            .collect();
    }
}
