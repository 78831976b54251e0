//! [`HostGate`] and [`GraphGate`]: a point of a stream its later work waits behind until the
//! host opens it, eagerly or at every launch of a graph it was captured into.

use crate::device::{lock_engine, Shared};
use crate::stream::SimStream;
use braid_stream_core::hal::HalError;
use braid_stream_core::sync::Mutex;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// A gate in a stream: the work submitted to the stream after [`SimStream::hold_gate`] waits
/// until [`HostGate::open`], and starts no earlier than the host time of the opening. A host
/// synchronization waiting on the stream meanwhile waits for another thread to open it, up to
/// the node's collective timeout ([`crate::SimConfig::collective_timeout`]), then fails naming
/// the gate. What `braid-acl-sim` puts behind a blocking host callback.
pub struct HostGate {
    shared: Shared,
    id: u64,
}

impl fmt::Debug for HostGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostGate").field("id", &self.id).finish()
    }
}

impl HostGate {
    /// Its number in the node (in error messages).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Opens the gate: the stream's held-back work is placed from the host time now.
    pub fn open(self) -> Result<(), HalError> {
        lock_engine(&self.shared).open_gate(self.id)
    }
}

/// A gate captured into a graph ([`SimStream::capture_gate`]): a node of the graph that
/// every launch reaches once its nodes before it on the stream are done. The nodes after it
/// (those that depend on it) wait until the host opens that launch's passage
/// ([`GraphGate::open`]) and start no earlier than the opening, as work behind a
/// [`HostGate`] does eagerly; the launch's stream goes on once every node has run. A host
/// synchronization waiting on it first lets simulated time reach the gate (so what the work
/// before it reports, a host callback, is reported), then waits for another thread to open
/// it, up to the node's collective timeout, then fails naming the gate. What `braid-acl-sim`
/// puts behind a blocking host callback captured into a model.
#[derive(Clone)]
pub struct GraphGate {
    shared: Shared,
    gate: Arc<CapturedGate>,
}

impl fmt::Debug for GraphGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphGate")
            .field("id", &self.gate.id)
            .finish()
    }
}

impl GraphGate {
    /// Its number in the node (in error messages).
    pub fn id(&self) -> u64 {
        self.gate.id
    }

    /// Opens the gate for one launch: the oldest launch waiting at it goes on, its later
    /// nodes starting no earlier than the host time now; with none waiting, the next launch
    /// to reach it passes (from the later of its arrival and now).
    pub fn open(&self) -> Result<(), HalError> {
        lock_engine(&self.shared).open_captured_gate(&self.gate)
    }
}

impl SimStream {
    /// Holds the stream's later work back behind a new [`HostGate`]. Refused on a capturing
    /// stream ([`SimStream::capture_gate`] is the captured form).
    pub fn hold_gate(&self) -> Result<HostGate, HalError> {
        let id = lock_engine(&self.shared).hold_gate(self.global())?;
        Ok(HostGate {
            shared: self.shared.clone(),
            id,
        })
    }

    /// Captures a [`GraphGate`] into the graph the stream records into: its later nodes on
    /// the stream wait, at every launch, until the host opens the gate. Refused on a stream
    /// that is not capturing.
    pub fn capture_gate(&self) -> Result<GraphGate, HalError> {
        let gate = lock_engine(&self.shared).capture_gate(self.global())?;
        Ok(GraphGate {
            shared: self.shared.clone(),
            gate,
        })
    }
}

/// The state of a captured gate, shared by its graph's nodes (and the graphs they are
/// launched into) and its [`GraphGate`] handles; only touched under the engine's lock.
#[derive(Debug)]
pub(crate) struct CapturedGate {
    /// Its number in the node (eager and captured gates share the numbering).
    pub id: u64,
    /// The host times of the openings no launch has passed with yet, oldest first.
    opens: Mutex<VecDeque<u64>>,
}

impl CapturedGate {
    /// A gate numbered `id`, not yet opened.
    pub(crate) fn new(id: u64) -> Self {
        CapturedGate {
            id,
            opens: Mutex::new(VecDeque::new()),
        }
    }

    /// Opens it for one launch at host time `at`.
    pub(crate) fn open(&self, at: u64) {
        self.opens.lock().push_back(at);
    }

    /// Takes the oldest opening not yet passed with, if any: its host time.
    pub(crate) fn pass(&self) -> Option<u64> {
        self.opens.lock().pop_front()
    }
}

/// A captured gate inside an op: equal only to itself.
#[derive(Clone, Debug)]
pub(crate) struct GateKind(pub Arc<CapturedGate>);

impl PartialEq for GateKind {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
