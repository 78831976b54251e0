//! Collectives on a simulated node, in one folder with a room for each part of the job:
//!
//! | room | what it holds |
//! |---|---|
//! | `communicators` | [`crate::SimComm`] (a rank's handle) and the hal's collective extension for [`crate::SimBackend`]; each communicator's state in the engine (`CommState`) and how communicators are made |
//! | `matching` | each rank's part: its checks, the ranks' parts of a call matched by stream-core's one [`Matcher`](braid_stream_core::collective::Matcher), and when a matched call is ready |
//! | `placement` | where and when a ready call runs: the node's links and communication engines, the timeline, the sanitizer |
//! | [`cost`] | the alpha–beta cost model, and the link figures a communicator's calls are costed with |
//! | `effect` | what a collective does to the numbers (data mode): every rank's receive bytes from every rank's send bytes |
//! | `variable` | the variable-count collectives (all-gather-v, reduce-scatter-v, all-to-all-v): their blocks' checks, cost size and effect |
//! | `async_error` | failures reported after their call returned: a host wait on a collective that cannot complete or a part the fault plan made fail on the device, kept on its communicator ([`crate::SimComm::async_error`], `HcclGetCommAsyncError`) |
//! | `backlog` | the work held back behind a collective not yet run, placing it once the call has run, and the host calls that wait on it |
//! | `remote` (`join`, `wire`, `p2p`), `remote_parts` (`blob`) | communicators spanning processes: the simulator's transport between them ([`crate::RemoteGroup`]; its rendezvous in `remote::join`, its wire format in `remote::wire`, the direct connections of sends and receives in `remote::p2p`) and the engine's side of their parts (each rank's call and send bytes as one blob in `remote_parts::blob`; every rank matches the ranks' calls and places the collective) |
//!
//! The engine keeps this state as one `Collectives` value; graph launches holding collective
//! parts are `engine::graph_run`'s.

mod async_error;
mod backlog;
pub(crate) mod communicators;
pub mod cost;
mod effect;
mod matching;
mod placement;
pub(crate) mod remote;
mod remote_parts;
mod variable;

pub(crate) use backlog::{Held, HostWait, Work};
pub(crate) use communicators::PartInfo;
pub(crate) use effect::DataEffect;

use crate::capture::Node;
use crate::engine::GraphRuns;
use crate::op::OpKind;
use backlog::{Backlog, Deferred};
use braid_stream_core::sync::thread::ThreadId;
use communicators::CommState;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

/// Per rank of one communicator, the host threads that have submitted its parts: what tells
/// a wait that no other thread can release (every missing rank was driven by the waiting
/// thread only) from one that another thread may.
#[derive(Debug, Default)]
struct Drivers {
    /// Rank → the threads that submitted its parts (one, usually).
    ranks: BTreeMap<u32, Vec<ThreadId>>,
}

/// Numbers nodes uniquely within the process (root infos name their node).
static NEXT_NODE: AtomicU64 = AtomicU64::new(1);

/// The collective state of a node.
#[derive(Debug)]
pub(crate) struct Collectives {
    backlog: Backlog<Held>,
    comms: Vec<CommState>,
    /// Root info communicator id → the node-local communicator its ranks form, from the
    /// first join on.
    joined: HashMap<u64, usize>,
    /// (parent communicator, sub-communicator id) → the sub-communicator and the parent
    /// ranks it was made of, from its first member's join on.
    subs: HashMap<(usize, u64), (usize, Vec<u32>)>,
    /// This node's process-unique number.
    node: u64,
    /// The launches of graphs with collective parts in progress.
    pub(crate) runs: GraphRuns,
    /// Per communicator, who has submitted parts to it.
    drivers: HashMap<usize, Drivers>,
    /// Host gates (`engine::gates`): the last number given, and those opened but not yet
    /// passed by their stream.
    pub(crate) gates: (u64, std::collections::HashSet<u64>),
}

impl Collectives {
    /// No communicator, nothing held back.
    pub fn new() -> Self {
        Collectives {
            backlog: Backlog::default(),
            comms: Vec::new(),
            joined: HashMap::new(),
            subs: HashMap::new(),
            node: NEXT_NODE.fetch_add(1, Ordering::Relaxed),
            runs: GraphRuns::default(),
            drivers: HashMap::new(),
            gates: (0, std::collections::HashSet::new()),
        }
    }

    /// Whether stream `s` holds back work.
    pub fn is_deferred(&self, s: u32) -> bool {
        self.backlog.is_deferred(s)
    }

    /// Whether event `e`'s latest record is held back.
    pub fn is_pending(&self, e: usize) -> bool {
        self.backlog.is_pending(e)
    }

    /// Holds back `work` on stream `s`, submitted at host time `host_ns`.
    pub fn hold(&mut self, s: u32, host_ns: u64, work: Work) {
        self.push_held(s, host_ns, Held::Work(work));
    }

    /// Holds back `held` on stream `s`, submitted at host time `host_ns`.
    pub fn push_held(&mut self, s: u32, host_ns: u64, held: Held) {
        self.backlog.push(s, host_ns, held);
    }

    /// The first held-back call of stream `s`.
    pub fn backlog_front(&self, s: u32) -> Option<&Deferred<Held>> {
        self.backlog.front(s)
    }

    /// Removes the first held-back call of stream `s`.
    pub fn backlog_pop(&mut self, s: u32) -> Option<Deferred<Held>> {
        self.backlog.pop(s)
    }

    /// Holds back a record of `e` on stream `s`.
    pub fn hold_record(&mut self, s: u32, host_ns: u64, e: usize) {
        let ticket = self.backlog.hold_record(e);
        self.hold(s, host_ns, Work::Record { e, ticket });
    }

    /// A record of `e` placed now supersedes a held one; whether one was held (then waits
    /// held back on `e` may go on).
    pub fn supersede_record(&mut self, e: usize) -> bool {
        self.backlog.supersede_record(e)
    }
}

/// Whether `node` is a rank's part of a collective.
pub(crate) fn is_collective(node: &Node) -> bool {
    matches!(node.op.kind, OpKind::Collective(_))
}
