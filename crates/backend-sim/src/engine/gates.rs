//! Host gates: a stream's later work held back until the host opens the gate, as a stream
//! behind a blocking host callback waits for the host thread that runs it
//! (`aclrtLaunchCallback` with `ACL_CALLBACK_BLOCK` in `braid-acl-sim`).
//!
//! An eager gate is one more kind of held-back call of the collective backlog
//! (`collective::backlog`): from it on, the stream is deferred, so what is submitted to it
//! afterwards (work, event records and waits, graph launches, collective parts) is kept in
//! order and placed once the gate is opened, no earlier than the host time of the opening.
//!
//! A captured gate is a node of its graph ([`OpKind::Gate`]): a launch of a graph holding one
//! is held back like a launch holding collective parts (`engine::graph_run`), and each time
//! the launch reaches the gate (its dependencies placed) it passes with the oldest opening
//! not yet used, ending at the later of its arrival and that opening; without one it waits,
//! and so do the nodes after it and the launch's stream.
//!
//! A host synchronization waiting on a stream held at a gate first lets the host clock reach
//! the gate (the host is blocked at least until the work before it is done), computes the
//! kernels and host bodies due by then with the engine lock released (`crate::job`: what
//! that work reports, a host callback, is then reported, and the callback's thread opens the
//! gate), then waits for another thread to open it, up to the node's collective timeout, and
//! fails naming the gate.

use crate::capture::Node;
use crate::collective::{Held, HostWait};
use crate::engine::Engine;
use crate::gate::{CapturedGate, GateKind};
use crate::op::{Op, OpKind};
use braid_stream_core::hal::HalError;
use std::sync::Arc;

impl Engine {
    /// Holds back the later work of stream `s` behind a new gate; its number.
    pub(crate) fn hold_gate(&mut self, s: u32) -> Result<u64, HalError> {
        self.host_call("hold_gate");
        if self.stream(s)?.capture.is_some() {
            return Err(HalError::InvalidArgument(
                "an eager host gate cannot be captured into a graph (capture_gate captures one)"
                    .to_string(),
            ));
        }
        let id = self.next_gate();
        let host = self.dev().host_ns;
        self.coll.push_held(s, host, Held::Gate(id));
        Ok(id)
    }

    /// Captures a gate into the graph stream `s` records into, after the stream's captured
    /// work so far.
    pub(crate) fn capture_gate(&mut self, s: u32) -> Result<Arc<CapturedGate>, HalError> {
        self.host_call("capture_gate");
        if self.stream(s)?.capture.is_none() {
            return Err(HalError::InvalidArgument(
                "a graph gate is captured on a capturing stream (hold_gate holds an eager one)"
                    .to_string(),
            ));
        }
        let gate = Arc::new(CapturedGate::new(self.next_gate()));
        let op = Op {
            kind: OpKind::Gate(GateKind(gate.clone())),
            label: Arc::from(format!("host gate {}", gate.id).as_str()),
            stream: s,
        };
        self.with_frontier(s, |cap, frontier| cap.add(op, frontier))?;
        Ok(gate)
    }

    /// The next gate number.
    fn next_gate(&mut self) -> u64 {
        self.coll.gates.0 += 1;
        self.coll.gates.0
    }

    /// Opens gate `id`: its stream's held-back work is placed, from the current host time.
    pub(crate) fn open_gate(&mut self, id: u64) -> Result<(), HalError> {
        self.host_call("open_gate");
        if id == 0 || id > self.coll.gates.0 {
            return Err(HalError::InvalidArgument(format!(
                "host gate {id} was never made"
            )));
        }
        self.coll.gates.1.insert(id);
        self.pump()
    }

    /// Opens captured `gate` for one launch, from the current host time.
    pub(crate) fn open_captured_gate(&mut self, gate: &CapturedGate) -> Result<(), HalError> {
        self.host_call("open_gate");
        gate.open(self.dev().host_ns);
        self.pump()
    }

    /// Whether stream `s`, whose first held-back call is gate `id`, may pass it (it was
    /// opened): then the gate is removed and the stream's work resumes no earlier than the
    /// host time of its device now.
    pub(crate) fn pass_gate(&mut self, s: u32, id: u64) -> bool {
        if !self.coll.gates.1.remove(&id) {
            return false;
        }
        self.coll.backlog_pop(s);
        let device = self.streams.get(s as usize).map(|st| st.device as usize);
        if let Some(now) = device.and_then(|d| self.devices.get(d)).map(|d| d.host_ns) {
            if let Ok(st) = self.stream_mut(s) {
                st.tail = st.tail.max(now);
            }
        }
        true
    }

    /// When the gate the held-back work of stream `s` waits at was reached (the work before
    /// it done), if it waits at one: an eager gate first in its backlog, or a captured gate
    /// of the launch first in it.
    fn gate_reached_at(&self, s: u32) -> Option<u64> {
        match self.coll.backlog_front(s).map(|d| &d.action) {
            Some(Held::Gate(_)) => self.stream(s).ok().map(|st| st.tail),
            Some(Held::Graph(id)) => self.run_gate(*id).map(|(_, reached)| reached),
            _ => None,
        }
    }

    /// Lets the current device's host clock reach every gate the host wait on `what` waits
    /// at: the host is blocked at least until then. The data effects up to it are applied up
    /// to the first kernel or host body not computed yet: the caller computes those with the
    /// lock released (`crate::device::host_wait`), so that what the work before a gate
    /// reports (a host callback) is reported.
    pub(crate) fn reach_gates(&mut self, what: HostWait) {
        let streams = match what {
            HostWait::Device => self.devices[self.cur]
                .streams
                .iter()
                .copied()
                .filter(|&s| self.coll.is_deferred(s))
                .collect(),
            _ => self.held_stream(what).into_iter().collect::<Vec<_>>(),
        };
        let reached = streams
            .into_iter()
            .filter_map(|s| self.gate_reached_at(s))
            .max();
        if let Some(t) = reached.filter(|&t| t > self.dev().host_ns) {
            self.block_until(t, "reach_host_gate");
        }
    }
}

/// The captured gate of `node`, if it is one.
pub(crate) fn gate_of(node: &Node) -> Option<&Arc<CapturedGate>> {
    match &node.op.kind {
        OpKind::Gate(GateKind(g)) => Some(g),
        _ => None,
    }
}
