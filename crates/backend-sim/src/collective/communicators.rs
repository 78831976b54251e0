//! Communicators: [`SimComm`], one rank's handle (HCCL-style), and the hal's collective
//! extension for [`SimBackend`]; in the engine, each communicator's state ([`CommState`]:
//! which device each rank is on, the calls in flight) and how communicators are made. A
//! communicator joined through a root info exists in the engine from its first rank's join;
//! a collective cannot run before every rank has joined (each rank's part comes from its own
//! joined handle).

use crate::collective::cost::LinkParams;
use crate::collective::remote::RemoteGroup;
use crate::device::{lock_engine, same_node, Shared};
use crate::engine::{invalid, Engine};
use crate::fault::{CallKind, Verdict};
use crate::stream::SimStream;
use crate::{SimBackend, SimDevice};
use braid_stream_core::collective::{
    CallKey, CollectiveCall, CollectiveOp, Matcher, Part, Peers, RootInfo,
};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Comm, HalError};
use braid_stream_core::sync::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// One rank's handle of a communicator: a group of devices of one [`crate::SimNode`] that run
/// collectives together ([`SimBackend::launch_collective`], the hal's collective extension;
/// its rank and rank count through [`Comm`]). Cloning gives another handle of the same
/// rank; handles may move between threads.
///
/// Every rank submits its part of each collective separately, in the same order on every
/// rank (call `k` of each rank belongs together; sends and receives pair per peer). A part
/// that does not match the parts already in is refused when it arrives, naming the rank, the
/// call and the difference. A rank's stream holds back the work submitted after its part
/// until every rank's part is in; a host synchronization that would wait on such work waits
/// for the ranks driven by other host threads (up to
/// [`SimConfig::collective_timeout`](crate::SimConfig#structfield.collective_timeout)), then
/// fails with an error naming the ranks that have not issued the call, instead of hanging
/// (at once when the calling thread drives those ranks itself: see
/// [`SimBackend::launch_collective`]).
///
/// ```
/// use braid_backend_sim::{NodeConfig, SimBackend, SimComm, SimNode};
/// use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
/// use braid_stream_core::dtype::DType;
/// use braid_stream_core::hal::{CollectiveBackend, Device as _, Stream as _};
///
/// let node = SimNode::new(NodeConfig::new(2));
/// let devices = node.devices();
/// let comms = SimComm::init_all(&[&devices[0], &devices[1]]).unwrap();
/// let mut results = Vec::new();
/// for (dev, comm) in devices.iter().zip(&comms) {
///     let s = dev.create_stream(0).unwrap();
///     let x = dev.alloc(8).unwrap();
///     let bytes = DType::F16.encode(&[1.0, 2.0, 3.0, 4.0]);
///     // SAFETY: `bytes` outlives the copy (the stream is synchronized below).
///     unsafe { s.memcpy_h2d(x, bytes.as_ptr(), 8).unwrap() };
///     let call = CollectiveCall {
///         op: CollectiveOp::AllReduce(ReduceOp::Sum),
///         send: x,
///         recv: x,
///         count: 4,
///         dtype: DType::F16,
///         v: None,
///     };
///     SimBackend::launch_collective(&s, comm, &call, "allreduce(sum)").unwrap();
///     results.push((s, x, bytes));
/// }
/// for (s, x, _bytes) in results {
///     let mut out = [0u8; 8];
///     // SAFETY: `out` is read only after the synchronize.
///     unsafe { s.memcpy_d2h(out.as_mut_ptr(), x, 8).unwrap() };
///     s.synchronize().unwrap();
///     assert_eq!(DType::F16.decode(&out), vec![2.0, 4.0, 6.0, 8.0]);
/// }
/// ```
#[derive(Clone, Debug)]
pub struct SimComm {
    shared: Shared,
    kind: Kind,
    rank: u32,
    ranks: u32,
}

/// Where a communicator's collectives run.
#[derive(Clone, Debug)]
enum Kind {
    /// Every rank is a device of one node: the node's engine matches and runs them.
    Node(usize),
    /// The ranks are in several processes (or nodes): parts are exchanged over the root
    /// info's transport; `calls` counts this rank's calls (shared by its handles).
    Remote {
        group: Arc<RemoteGroup>,
        calls: Arc<Mutex<u64>>,
        /// This rank's sends and receives so far, per (sender, receiver) pair (each pair
        /// locked on its own, so that a rank may send and receive from two threads at once).
        pairs: Arc<Mutex<HashMap<Peers, Arc<Mutex<u64>>>>>,
    },
}

/// How long joining a root info and each exchange of a communicator spanning processes
/// wait for the other ranks: HCCL's default `HCCL_CONNECT_TIMEOUT` (120 s).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(120);

impl SimComm {
    /// A communicator of `devices` (rank `r` is `devices[r]`), all of one node and distinct;
    /// one handle per rank (HCCL's `HcclCommInitAll`).
    pub fn init_all(devices: &[&SimDevice]) -> Result<Vec<SimComm>, HalError> {
        let first = devices.first().ok_or_else(|| {
            HalError::InvalidArgument("a communicator needs at least one device".to_string())
        })?;
        for d in devices {
            same_node(&first.shared, &d.shared)?;
        }
        let indices: Vec<u32> = devices.iter().map(|d| d.shared.device).collect();
        let comm = lock_engine(&first.shared).comm_init_all(&indices)?;
        let ranks = devices.len() as u32;
        Ok(devices
            .iter()
            .enumerate()
            .map(|(rank, d)| SimComm {
                shared: d.shared.clone(),
                kind: Kind::Node(comm),
                rank: rank as u32,
                ranks,
            })
            .collect())
    }

    /// A root info for a new communicator (HCCL's `HcclGetRootInfo`), made in the process of
    /// the rank 0 that will join it: the simulator's transport between processes
    /// ([`RemoteGroup::root_info`], a listener on `127.0.0.1`). Its 4,108 bytes go to the other
    /// ranks by any means (for example `braid_collective`'s `TcpRootInfoTransport`).
    pub fn root_info(device: &SimDevice) -> Result<RootInfo, HalError> {
        lock_engine(&device.shared).host_call("comm_root_info");
        RemoteGroup::root_info()
    }

    /// Rank `rank` of `ranks` joins the communicator of `info` on `device` (HCCL's
    /// `HcclCommInitRootInfo`): blocks until every rank has joined (at most
    /// [`JOIN_TIMEOUT`]; rank 0 joins in the process that made `info`), so ranks of one
    /// process join from their own threads.
    ///
    /// When every rank turns out to be a device of `device`'s node, the communicator is the
    /// node's own (its collectives match and run in the node's engine, as with
    /// [`SimComm::init_all`]); otherwise each collective exchanges the ranks' parts over the
    /// transport (see [`SimBackend::launch_collective`] for what that supports). Refused: a root info
    /// not made by [`SimComm::root_info`], a rank out of range or taken, a rank count that
    /// differs from rank 0's, two ranks on one device; ranks that do not join in time are an
    /// HCCL timeout naming them.
    pub fn init_root_info(
        device: &SimDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<SimComm, HalError> {
        let group = RemoteGroup::join(info, ranks, rank, JOIN_TIMEOUT)?;
        let node = lock_engine(&device.shared).node_id();
        let mut mine = std::process::id().to_le_bytes().to_vec();
        mine.extend(node.to_le_bytes());
        let everyone = group.exchange(0, mine.clone())?;
        let one_node = everyone.iter().all(|theirs| theirs[..] == mine[..]);
        let kind = if one_node {
            let comm = lock_engine(&device.shared).comm_join_local(group.id(), ranks, rank)?;
            Kind::Node(comm)
        } else {
            Kind::Remote {
                group: Arc::new(group),
                calls: Arc::new(Mutex::new(1)),
                pairs: Arc::new(Mutex::new(HashMap::new())),
            }
        };
        Ok(SimComm {
            shared: device.shared.clone(),
            kind,
            rank,
            ranks,
        })
    }

    /// This rank's handle of sub-communicator `sub_id` of this communicator, made of its ranks
    /// `ranks` (sub-rank `i` is rank `ranks[i]`, on that rank's device), as sub-rank
    /// `sub_rank` (HCCL's `HcclCreateSubCommConfig`). The first member's call makes it in the
    /// node's engine; the others join it. Refused as invalid arguments: an empty list, a rank
    /// out of range or listed twice, a `sub_rank` whose entry is not this rank, a member that
    /// passes another list than the first member did, a sub-rank that already joined. A
    /// communicator spanning processes cannot be split ([`HalError::Unsupported`]).
    pub fn create_sub_comm(
        &self,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Result<SimComm, HalError> {
        let Kind::Node(parent) = self.kind else {
            return Err(HalError::Unsupported(
                "create_sub_comm on a communicator spanning processes",
            ));
        };
        let comm =
            lock_engine(&self.shared).comm_split(parent, self.rank, ranks, sub_id, sub_rank)?;
        Ok(SimComm {
            shared: self.shared.clone(),
            kind: Kind::Node(comm),
            rank: sub_rank,
            ranks: ranks.len() as u32,
        })
    }

    /// Whether the communicator's ranks are all devices of one node (otherwise its parts go
    /// over the transport between processes).
    pub fn is_node_local(&self) -> bool {
        matches!(self.kind, Kind::Node(_))
    }

    /// The cost model's numbers for this communicator's collectives on `dtype` elements: the
    /// links between its devices and the reduction rate, for [`crate::collective_bound`].
    pub fn link_params(&self, dtype: DType) -> LinkParams {
        let engine = lock_engine(&self.shared);
        match &self.kind {
            Kind::Node(comm) => engine.comm_link_params(*comm, dtype),
            Kind::Remote { .. } => engine.network_link_params(dtype),
        }
    }

    /// The communicator's asynchronous error (`HcclGetCommAsyncError`): the first of a host
    /// wait on one of its collectives that could not complete, as
    /// [`HalError::CollectiveIncomplete`] naming the call and the missing ranks, and a rank's
    /// part that the fault plan made fail on the device
    /// ([`crate::FaultPlan::fail_collective_async_nth`]), as the error its stream reports
    /// (507000, naming the call, communicator and rank); `None` while there is none. Kept for
    /// the communicator's life, as HCCL keeps it; later collectives still run. A communicator
    /// whose ranks live in several processes reports none (their waits fail in each process).
    pub fn async_error(&self) -> Option<HalError> {
        match &self.kind {
            Kind::Node(comm) => lock_engine(&self.shared).comm_async_error(*comm),
            Kind::Remote { .. } => None,
        }
    }

    /// Submits this rank's part `call` on `stream` (see [`SimBackend::launch_collective`]).
    pub(crate) fn submit(
        &self,
        stream: &SimStream,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        same_node(&self.shared, &stream.shared)?;
        // The fault plan of the stream's device decides first: a failed part does nothing, a
        // part failing later (eager, node-local parts only) is submitted as usual.
        let mut engine = lock_engine(&stream.shared);
        let mut fails = false;
        if engine.faults().armed() {
            let s = stream.global();
            let eager = self.is_node_local() && !engine.is_capturing(s) && !engine.is_updating(s);
            match engine.faults().decide(CallKind::Collective, !eager) {
                Verdict::Fail => return Err(engine.fault_error(CallKind::Collective, 0)),
                Verdict::FailLater => fails = true,
                Verdict::Pass => {}
            }
        }
        match &self.kind {
            Kind::Node(comm) => {
                engine.collective(stream.global(), *comm, self.rank, call, label, fails)
            }
            Kind::Remote {
                group,
                calls,
                pairs,
            } => {
                if stream.shared.device != self.shared.device {
                    return Err(HalError::InvalidArgument(format!(
                        "rank {}'s part submitted on a stream of another device than the rank's",
                        self.rank
                    )));
                }
                drop(engine);
                if let CollectiveOp::Send { .. } | CollectiveOp::Recv { .. } = call.op {
                    return self.submit_pair(stream, group, pairs, call, label);
                }
                // One call at a time per rank, in the order the rank issues them.
                let mut next = calls.lock();
                // Exchange 0 was the join's: collective `k` is exchange `k + 1`.
                let part = lock_engine(&stream.shared).remote_prepare(
                    stream.global(),
                    self.rank,
                    self.ranks,
                    *next - 1,
                    call,
                    label,
                )?;
                let blobs = group.exchange(*next, part.blob.clone())?;
                *next += 1;
                lock_engine(&stream.shared).remote_finish(part, blobs)
            }
        }
    }
}

impl SimComm {
    /// A send or receive of a communicator spanning processes: numbered on its (sender,
    /// receiver) pair, as a node numbers it, and carried over the pair's direct connection
    /// (outside the engine lock); a wait on the peer lasts at most the collective timeout
    /// (the simulator's `HCCL_EXEC_TIMEOUT`). The number advances only when the pair matched.
    fn submit_pair(
        &self,
        stream: &SimStream,
        group: &RemoteGroup,
        pairs: &Mutex<HashMap<Peers, Arc<Mutex<u64>>>>,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        let pair = pairs
            .lock()
            .entry(Peers::of(self.rank, call.op))
            .or_default()
            .clone();
        // One call at a time per pair, in the order the rank issues them.
        let mut next = pair.lock();
        let number = *next;
        let (part, timeout) = {
            let mut engine = lock_engine(&stream.shared);
            let part = engine.remote_prepare(
                stream.global(),
                self.rank,
                self.ranks,
                number,
                call,
                label,
            )?;
            (part, engine.collective_timeout)
        };
        let (theirs_number, theirs) = match call.op {
            CollectiveOp::Send { peer } => group.send(peer, number, &part.blob, timeout)?,
            CollectiveOp::Recv { peer } => group.receive(peer, number, &part.blob, timeout)?,
            _ => {
                return Err(invalid(
                    "a pair's part that is neither a send nor a receive",
                ))
            }
        };
        lock_engine(&stream.shared).remote_finish_pair(part, theirs_number, &theirs)?;
        *next += 1;
        Ok(())
    }
}

/// Collectives on the simulated node: [`SimComm`]s, each rank's part matched with the others'
/// and run in the node's engine (or, across processes, over the simulator's transport).
/// Mismatches are always checked: a hang in a simulation helps nobody.
impl CollectiveBackend for SimBackend {
    type Comm = SimComm;
    const ALWAYS_CHECKS_MISMATCH: bool = true;

    fn init_all(devices: &[&SimDevice]) -> Result<Vec<SimComm>, HalError> {
        SimComm::init_all(devices)
    }

    fn root_info(device: &SimDevice) -> Result<RootInfo, HalError> {
        SimComm::root_info(device)
    }

    fn init_root_info(
        device: &SimDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<SimComm, HalError> {
        SimComm::init_root_info(device, ranks, rank, info)
    }

    /// This rank's handle of a sub-communicator of `parent` ([`SimComm::create_sub_comm`]).
    fn create_sub_comm(
        parent: &SimComm,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Result<SimComm, HalError> {
        parent.create_sub_comm(ranks, sub_id, sub_rank)
    }

    /// Submits `comm`'s rank's part `call` of a collective on `stream` (whose device must be
    /// the rank's), labelled `label` in the timeline (for example `allreduce(sum)`).
    ///
    /// The part is matched with the other ranks' parts of the same call (the `k`-th
    /// collective each rank issues on `comm`; sends and receives pair per peer; the blocks of
    /// a variable-count call as HCCL requires) and refused as [`HalError::CollectiveMismatch`]
    /// when it does not match those already in, naming the rank, the call and the difference. Until every rank's part is in, the stream holds back what
    /// is submitted to it afterwards (and events recorded on it are pending; a stream waiting
    /// on a pending event holds back too). A host synchronization (stream, event or device
    /// synchronize, event elapsed time, `free_host`) that would wait on held-back work waits
    /// for the other ranks' parts, submitted by other host threads, up to the node's
    /// [`SimConfig::collective_timeout`](crate::SimConfig#structfield.collective_timeout)
    /// (the simulator's `HCCL_EXEC_TIMEOUT`), then fails with
    /// [`HalError::CollectiveIncomplete`] naming the ranks that have not issued the call. It
    /// fails at once, without waiting, when every missing rank's parts have so far been
    /// submitted by the calling thread only (it drives those ranks and it is blocked: one
    /// thread driving every rank, or a thread that forgets one of its ranks); a rank that has
    /// never submitted a part may be driven by a thread that has not reached its first call
    /// yet, so a wait on it takes the timeout. Then the collective runs in
    /// virtual time (ready at the latest of the parts' submissions and their streams' ends,
    /// for the time the cost model gives on the node's links, occupying every participant's
    /// communication engine and the links the algorithm uses: compute overlaps it), and the
    /// held-back work follows in order. In data mode the send buffers are read at the start
    /// and the receive buffers written at the end. Inside a capture the part becomes a graph
    /// node that runs the collective again at each replay (with the other ranks' replays).
    ///
    /// The device's fault plan may make the call fail ([`crate::CallKind::Collective`]): then
    /// nothing is submitted and the part takes no call number, so the rank may submit it again.
    /// It may also make an eager part fail on the device after the call succeeded
    /// ([`crate::FaultPlan::fail_collective_async_nth`]): the part's receive buffer is left
    /// untouched, its stream reports the failure later and the communicator keeps it as its
    /// asynchronous error (see [`crate::fault`]).
    ///
    /// Refused as invalid arguments: a communicator of another node, a stream of another
    /// device than the rank's, a buffer (of `send_len`/`recv_len` bytes) that is not live
    /// memory of the stream's device, a root or peer out of range, a send or receive to the
    /// rank itself.
    ///
    /// On a communicator spanning processes (a root info joined by ranks of several nodes)
    /// the call blocks until every rank has submitted its part (each rank's ready time, call
    /// with its per-rank blocks, and send bytes go over the transport). Every rank then
    /// matches all the ranks' calls as above: a mismatch fails the call on every rank with
    /// the same [`HalError::CollectiveMismatch`] (nothing runs, and the next call is matched
    /// afresh); otherwise the collective starts at the latest ready time, for the cost
    /// model's time of its busiest part on the network. A send or receive there blocks until
    /// its peer issues the matching receive or send (over a direct connection between the
    /// two; a mismatch fails both ranks alike; a peer that does not come within
    /// the collective timeout is an `HCCL_E_TIMEOUT` naming it). Captures and streams
    /// holding back work are [`HalError::Unsupported`] there.
    fn launch_collective(
        stream: &SimStream,
        comm: &SimComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        comm.submit(stream, call, label)
    }

    /// The communicator's asynchronous error ([`SimComm::async_error`]).
    fn comm_async_error(comm: &SimComm) -> Result<Option<HalError>, HalError> {
        Ok(comm.async_error())
    }
}

impl Comm for SimComm {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn ranks(&self) -> u32 {
        self.ranks
    }
}

/// What the engine keeps with one rank's part of a call.
#[derive(Clone, Debug)]
pub(crate) struct PartInfo {
    /// The rank's call (its buffers).
    pub call: CollectiveCall,
    /// The node-wide stream index the part was submitted on.
    pub stream: u32,
    /// Its label for the timeline.
    pub label: Arc<str>,
    /// For a part replayed from a graph, its node in the graph launched on `stream`.
    pub node: Option<usize>,
    /// The fault plan made this part fail on the device: when the call runs, its receive
    /// buffer is left untouched and the communicator keeps the failure.
    pub fails: bool,
}

/// One communicator.
#[derive(Debug)]
pub(crate) struct CommState {
    ranks: u32,
    /// The device (index in the node) of each rank, once joined.
    devices: Vec<Option<usize>>,
    /// Calls in flight, matched by the one call matcher.
    pub matcher: Matcher<PartInfo>,
    /// Calls whose parts are all in, waiting for their streams to reach them.
    pub ready: HashMap<CallKey, Vec<Part<PartInfo>>>,
    /// Per rank and peers (all ranks, or a sender and its receiver), the number the rank's
    /// next captured call with those peers takes.
    captured: HashMap<(u32, Peers), u64>,
    /// The first failure of a collective reported after its call returned (a host wait on
    /// it that could not complete, a part that failed on the device):
    /// `HcclGetCommAsyncError`'s answer, kept from then on.
    pub async_error: Option<HalError>,
}

impl CommState {
    /// A communicator of `ranks` ranks with none joined yet.
    pub fn forming(ranks: u32) -> Self {
        CommState {
            ranks,
            devices: vec![None; ranks as usize],
            matcher: Matcher::new(ranks),
            ready: HashMap::new(),
            captured: HashMap::new(),
            async_error: None,
        }
    }

    /// A communicator whose rank `r` is on `devices[r]`.
    pub fn complete(devices: &[usize]) -> Self {
        let ranks = u32::try_from(devices.len()).unwrap_or(u32::MAX);
        let mut comm = CommState::forming(ranks);
        comm.devices = devices.iter().map(|&d| Some(d)).collect();
        comm
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The device of rank `rank`, if joined.
    pub fn device(&self, rank: u32) -> Option<usize> {
        self.devices.get(rank as usize).copied().flatten()
    }

    /// Rank `rank` of `ranks` joins on `device`: refused when the sizes differ, the rank is
    /// out of range or taken, or the device already holds a rank.
    pub fn join(&mut self, ranks: u32, rank: u32, device: usize) -> Result<(), HalError> {
        if ranks != self.ranks {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} joins with {ranks} ranks a communicator of {} ranks",
                self.ranks
            )));
        }
        let slot = self.devices.get(rank as usize).ok_or_else(|| {
            HalError::InvalidArgument(format!(
                "rank {rank} is out of range for a communicator of {ranks} ranks"
            ))
        })?;
        if slot.is_some() {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} of the communicator has already joined"
            )));
        }
        if let Some(other) = self.devices.iter().position(|d| *d == Some(device)) {
            return Err(HalError::InvalidArgument(format!(
                "device {device} already holds rank {other} of the communicator"
            )));
        }
        self.devices[rank as usize] = Some(device);
        Ok(())
    }

    /// The number rank `rank`'s next captured call with `peers` takes (counting it): captured
    /// calls are numbered per peers, as eager ones, so that a send captured by two ranks does
    /// not shift a third rank's numbers.
    pub fn next_captured(&mut self, rank: u32, peers: Peers) -> u64 {
        let n = self.captured.entry((rank, peers)).or_insert(0);
        *n += 1;
        *n - 1
    }
}

impl Engine {
    /// A communicator whose rank `r` is device `devices[r]` (indices in the node).
    pub fn comm_init_all(&mut self, devices: &[u32]) -> Result<usize, HalError> {
        self.host_call("comm_init_all");
        if devices.is_empty() {
            return Err(invalid("a communicator needs at least one device"));
        }
        let mut seen = BTreeSet::new();
        for &d in devices {
            if d as usize >= self.devices.len() {
                return Err(invalid(format!("device index {d} is not in the node")));
            }
            if !seen.insert(d) {
                return Err(invalid(format!(
                    "device {} appears twice: every rank of a communicator needs its own device",
                    self.ordinal_of(d)
                )));
            }
        }
        let indices: Vec<usize> = devices.iter().map(|&d| d as usize).collect();
        self.coll.comms.push(CommState::complete(&indices));
        Ok(self.coll.comms.len() - 1)
    }

    /// Rank `rank` of communicator `parent` joins, as sub-rank `sub_rank`, sub-communicator
    /// `sub_id` made of the parent's ranks `ranks` (see [`SimComm::create_sub_comm`]).
    pub fn comm_split(
        &mut self,
        parent: usize,
        rank: u32,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Result<usize, HalError> {
        self.host_call("comm_create_sub_comm");
        let size = self.coll.comms[parent].ranks();
        if ranks.is_empty() {
            return Err(invalid("a sub-communicator needs at least one rank"));
        }
        for (i, &r) in ranks.iter().enumerate() {
            if r >= size {
                return Err(invalid(format!(
                    "rank {r} is out of range for a communicator of {size} ranks"
                )));
            }
            if ranks[..i].contains(&r) {
                return Err(invalid(format!(
                    "rank {r} is listed twice for sub-communicator {sub_id}"
                )));
            }
        }
        if ranks.get(sub_rank as usize) != Some(&rank) {
            return Err(invalid(format!(
                "rank {rank} is not sub-rank {sub_rank} of sub-communicator {sub_id} (ranks {ranks:?})"
            )));
        }
        let device = self.coll.comms[parent]
            .device(rank)
            .ok_or_else(|| invalid(format!("rank {rank} has not joined the communicator")))?;
        let comm = match self.coll.subs.get(&(parent, sub_id)) {
            Some((comm, first)) if first[..] == ranks[..] => *comm,
            Some((_, first)) => {
                return Err(invalid(format!(
                    "rank {rank} makes sub-communicator {sub_id} of ranks {ranks:?}, \
                     but its first member made it of ranks {first:?}"
                )))
            }
            None => {
                self.coll.comms.push(CommState::forming(ranks.len() as u32));
                let c = self.coll.comms.len() - 1;
                self.coll.subs.insert((parent, sub_id), (c, ranks.to_vec()));
                c
            }
        };
        self.coll.comms[comm].join(ranks.len() as u32, sub_rank, device)?;
        Ok(comm)
    }

    /// This node's process-unique number (ranks joining one root info compare theirs to
    /// find out whether they share a node).
    pub fn node_id(&self) -> u64 {
        self.coll.node
    }

    /// The current device joins, as rank `rank` of `ranks`, the node-local communicator that
    /// the ranks of root info communicator `group_id` (all on devices of this node) form.
    pub fn comm_join_local(
        &mut self,
        group_id: u64,
        ranks: u32,
        rank: u32,
    ) -> Result<usize, HalError> {
        self.host_call("comm_init_root_info");
        if rank >= ranks {
            return Err(invalid(format!(
                "rank {rank} is out of range for a communicator of {ranks} ranks"
            )));
        }
        let comm = match self.coll.joined.get(&group_id) {
            Some(&c) => c,
            None => {
                self.coll.comms.push(CommState::forming(ranks));
                let c = self.coll.comms.len() - 1;
                self.coll.joined.insert(group_id, c);
                c
            }
        };
        let device = self.cur;
        self.coll.comms[comm].join(ranks, rank, device)?;
        Ok(comm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_join_once_each_on_distinct_devices() {
        let mut c = CommState::forming(2);
        assert_eq!(c.device(1), None);
        c.join(2, 1, 5).unwrap();
        assert_eq!(c.device(1), Some(5));
        let again = c.join(2, 1, 6).unwrap_err().to_string();
        assert!(again.contains("already joined"), "{again}");
        let same_device = c.join(2, 0, 5).unwrap_err().to_string();
        assert!(
            same_device.contains("already holds rank 1"),
            "{same_device}"
        );
        let size = c.join(3, 0, 4).unwrap_err().to_string();
        assert!(size.contains("with 3 ranks a communicator of 2"), "{size}");
        let range = c.join(2, 2, 4).unwrap_err().to_string();
        assert!(range.contains("out of range"), "{range}");
        c.join(2, 0, 4).unwrap();
        assert_eq!((c.device(0), c.ranks()), (Some(4), 2));
    }

    #[test]
    fn sub_communicator_members_join_with_one_list() {
        let node = crate::SimNode::new(crate::NodeConfig::new(4));
        let devices = node.devices();
        let all: Vec<&SimDevice> = devices.iter().collect();
        let comms = SimComm::init_all(&all).unwrap();
        let err = |r: usize, list: &[u32], sub: u32| {
            comms[r]
                .create_sub_comm(list, 9, sub)
                .unwrap_err()
                .to_string()
        };
        assert!(err(1, &[], 0).contains("at least one rank"));
        assert!(err(1, &[1, 4], 0).contains("out of range"));
        assert!(err(1, &[1, 1], 0).contains("listed twice"));
        assert!(err(0, &[1, 3], 0).contains("not sub-rank 0"));
        let first = comms[1].create_sub_comm(&[1, 3], 9, 0).unwrap();
        assert!(err(3, &[3, 1], 0).contains("first member made it of ranks [1, 3]"));
        assert!(err(1, &[1, 3], 0).contains("already joined"));
        let second = comms[3].create_sub_comm(&[1, 3], 9, 1).unwrap();
        assert_eq!((first.rank(), second.rank(), second.ranks()), (0, 1, 2));
        let engine = lock_engine(&first.shared);
        let Kind::Node(sub) = first.kind else {
            panic!("a node-local sub-communicator")
        };
        let devices = (
            engine.coll.comms[sub].device(0),
            engine.coll.comms[sub].device(1),
        );
        assert_eq!(devices, (Some(1), Some(3)));
    }

    #[test]
    fn a_complete_communicator_numbers_captured_calls_per_rank() {
        let mut c = CommState::complete(&[3, 1]);
        assert_eq!((c.device(0), c.device(1)), (Some(3), Some(1)));
        assert_eq!(c.next_captured(0, Peers::All), 0);
        assert_eq!(c.next_captured(0, Peers::All), 1);
        assert_eq!(c.next_captured(1, Peers::All), 0);
        let pair = Peers::Pair { from: 0, to: 1 };
        assert_eq!(c.next_captured(0, pair), 0);
        assert_eq!(c.next_captured(0, Peers::All), 2);
    }
}
