//! Collectives in the engine: communicators, each rank's part, the work held back behind a
//! collective not yet run ([`crate::collective::backlog`]), and the placement of a collective
//! on the node's links and communication engines.
//!
//! A rank's part is matched with the other ranks' parts ([`braid_stream_core::collective::Matcher`]) when
//! it is submitted, and its stream is deferred until the collective runs. A collective runs
//! once every participant's part is in *and* ready: an eager part at the front of its
//! stream's held-back work (ready at the latest of its host time and its stream's end), a part
//! replayed from a graph once the nodes it depends on are placed ([`super::graph_run`]). It
//! is ready at the latest of the parts' ready times, takes the time of
//! the cost model's algorithm ([`crate::collective::cost`]) on the node's links, and occupies
//! the communication engine of every participant's device and every link the algorithm uses
//! (overlapping compute). Then each deferred stream's held-back work is placed in order, each
//! call at the host time it was submitted at.

use super::graph_run::GraphRuns;
use super::submit::op_info_at;
use super::{invalid, sanitizer_error, Engine};
use crate::capture::{ExternalEvents, Node};
use crate::collective::backlog::{Backlog, Deferred};
use crate::collective::communicator::{CommState, PartInfo};
use crate::collective::cost::{self, LinkParams, Plan, Wiring};
use crate::collective::exchange::{Exchange, Source};
use crate::config::SimMode;
use crate::link::{LinkId, Route};
use crate::op::{CollectivePart, Op, OpKind};
use crate::sanitizer::SanitizerMode;
use crate::timeline::OpRecord;
use crate::trace::LinkSlice;
use braid_stream_core::collective::{Arrival, CallKey, CollectiveCall, CollectiveOp, Part, Peers};
use braid_stream_core::hal::HalError;
use braid_stream_core::kernel::ComputeUnit;
use braid_stream_core::types::DeviceSlice;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar};
use std::thread::ThreadId;
use std::time::Duration;

/// Work held back on a deferred stream, placed in order once the stream is free.
#[derive(Debug)]
pub(crate) enum Work {
    /// An op.
    Op(Op),
    /// A record of an event ([`Backlog::hold_record`]'s ticket).
    Record { e: usize, ticket: u64 },
    /// A wait on an event.
    Wait(usize),
    /// A graph launch without collectives (its external events held separately).
    Graph(Arc<[Node]>),
}

/// A held-back call: a rank's part of a collective, or other work.
#[derive(Debug)]
pub(crate) enum Held {
    /// The part of call `key` of communicator `comm`.
    Part { comm: usize, key: CallKey },
    /// A launch of a graph with collective parts ([`super::graph_run`]), by number.
    Graph(u64),
    /// Anything else.
    Work(Work),
}

/// What a host call waits on (for [`Engine::may_be_released`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum HostWait {
    /// Every call so far on a stream (node-wide index).
    Stream(u32),
    /// An event's latest record.
    Event(usize),
    /// The latest records of two events (elapsed time).
    Events(usize, usize),
    /// Every stream of the current device (device synchronize, `free_host`).
    Device,
}

/// The host threads that have submitted parts to one communicator, and the ranks whose
/// parts they submitted: what tells a wait that no other thread can release from one that
/// another thread may.
#[derive(Debug, Default)]
struct Drivers {
    /// Every thread that has submitted a part (a handful: one per rank at most, usually).
    threads: Vec<ThreadId>,
    /// The ranks that have submitted a part.
    ranks: BTreeSet<u32>,
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
    /// This node's process-unique number.
    node: u64,
    /// The launches of graphs with collective parts in progress.
    pub(super) runs: GraphRuns,
    /// Per communicator, who has submitted parts to it.
    drivers: HashMap<usize, Drivers>,
}

impl Collectives {
    /// No communicator, nothing held back.
    pub fn new() -> Self {
        Collectives {
            backlog: Backlog::default(),
            comms: Vec::new(),
            joined: HashMap::new(),
            node: NEXT_NODE.fetch_add(1, Ordering::Relaxed),
            runs: GraphRuns::default(),
            drivers: HashMap::new(),
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

/// The participants' bytes of one collective, in participant order.
fn ranges(parts: &[Part<PartInfo>], ranks: u32) -> (Vec<DeviceSlice>, Vec<DeviceSlice>) {
    parts
        .iter()
        .map(|p| {
            let call = &p.payload.call;
            let send = call.send_len(p.rank, ranks).unwrap_or(0);
            let recv = call.recv_len(ranks).unwrap_or(0);
            (
                DeviceSlice::new(call.send, send),
                DeviceSlice::new(call.recv, recv),
            )
        })
        .unzip()
}

impl Engine {
    // ----- communicators -----

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

    /// The cost model's numbers for communicator `comm` on elements of `dtype`: the links
    /// between its devices (HCCS in one server, the network otherwise) and the first device's
    /// reduction rate.
    pub fn comm_link_params(
        &self,
        comm: usize,
        dtype: braid_stream_core::dtype::DType,
    ) -> LinkParams {
        let devices: Vec<usize> = self.coll.comms.get(comm).map_or_else(Vec::new, |c| {
            (0..c.ranks()).filter_map(|r| c.device(r)).collect()
        });
        self.link_params(&devices, dtype)
    }

    /// The cost model's numbers for a collective among `devices`.
    fn link_params(&self, devices: &[usize], dtype: braid_stream_core::dtype::DType) -> LinkParams {
        let topology = self.links.topology();
        let first = devices.first().copied().unwrap_or(self.cur);
        let one_server = devices
            .iter()
            .all(|&d| topology.same_server(first as u32, d as u32));
        let (spec, wiring) = if one_server {
            (topology.intra_server, Wiring::FullMesh)
        } else {
            (topology.network, Wiring::Switched)
        };
        LinkParams {
            alpha_ns: spec.latency_ns,
            link_bytes_per_s: spec.bytes_per_s,
            reduce_bytes_per_s: LinkParams::reduce_rate(&self.devices[first].config.profile, dtype),
            wiring,
        }
    }

    // ----- parts -----

    /// Checks rank `rank`'s part `call` of communicator `comm` submitted on stream `s`;
    /// returns its send and receive ranges.
    fn check_part(
        &self,
        s: u32,
        comm: usize,
        rank: u32,
        call: &CollectiveCall,
    ) -> Result<(DeviceSlice, DeviceSlice), HalError> {
        let state = self
            .coll
            .comms
            .get(comm)
            .ok_or_else(|| invalid(format!("unknown communicator {comm}")))?;
        let ranks = state.ranks();
        let device = self.stream(s)?.device;
        match state.device(rank) {
            Some(d) if d == device as usize => {}
            Some(d) => {
                return Err(invalid(format!(
                "rank {rank}'s part submitted on a stream of device {}: rank {rank} is device {}",
                self.ordinal_of(device),
                self.ordinal_of(d as u32)
            )))
            }
            None => {
                return Err(invalid(format!(
                    "rank {rank} has not joined the communicator"
                )))
            }
        }
        self.check_buffers(s, rank, ranks, call)
    }

    /// Checks the root or peer and the buffers of rank `rank`'s part `call` (of a
    /// communicator of `ranks`) submitted on stream `s`; returns its send and receive ranges.
    pub(super) fn check_buffers(
        &self,
        s: u32,
        rank: u32,
        ranks: u32,
        call: &CollectiveCall,
    ) -> Result<(DeviceSlice, DeviceSlice), HalError> {
        let device = self.stream(s)?.device;
        match call.op {
            CollectiveOp::Broadcast { root } if root >= ranks => {
                return Err(invalid(format!(
                    "broadcast root {root} is out of range for {ranks} ranks"
                )))
            }
            CollectiveOp::Send { peer } | CollectiveOp::Recv { peer }
                if peer >= ranks || peer == rank =>
            {
                return Err(invalid(format!(
                    "{} of rank {rank}: peer {peer} must be another rank of the {ranks}",
                    call.op
                )))
            }
            _ => {}
        }
        let lengths = [
            ("send", call.send, call.send_len(rank, ranks)),
            ("receive", call.recv, call.recv_len(ranks)),
        ];
        let mut out = [DeviceSlice::new(call.send, 0); 2];
        for (i, (what, ptr, len)) in lengths.into_iter().enumerate() {
            let len = len.ok_or_else(|| {
                invalid(format!(
                    "{} of {} elements: the {what} buffer's size overflows",
                    call.op, call.count
                ))
            })?;
            let range = DeviceSlice::new(ptr, len);
            if len > 0 && !self.memories[device as usize].is_valid(range) {
                return Err(invalid(format!(
                    "{} of rank {rank}: the {what} buffer ({len} bytes at {ptr}) is not live memory of device {}",
                    call.op,
                    self.ordinal_of(device)
                )));
            }
            out[i] = range;
        }
        Ok((out[0], out[1]))
    }

    /// Submits rank `rank`'s part `call` of communicator `comm` on stream `s` (or captures it).
    pub fn collective(
        &mut self,
        s: u32,
        comm: usize,
        rank: u32,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "collective");
        let (send, recv) = self.check_part(s, comm, rank, call)?;
        let label: Arc<str> = Arc::from(label);
        if self.stream(s)?.capture.is_some() {
            let number = self.coll.comms[comm].next_captured(rank, Peers::of(rank, call.op));
            let op = Op {
                kind: OpKind::Collective(Arc::new(CollectivePart {
                    comm,
                    rank,
                    call: *call,
                    send,
                    recv,
                    captured: number,
                })),
                label,
                stream: s,
            };
            return self.with_frontier(s, |cap, frontier| cap.add(op, frontier));
        }
        let host = self.dev().host_ns;
        self.submit_part(s, comm, rank, *call, None, label, host)?;
        self.pump()
    }

    /// Adds a part to its communicator's matcher and holds it back on stream `s`.
    #[allow(clippy::too_many_arguments)]
    fn submit_part(
        &mut self,
        s: u32,
        comm: usize,
        rank: u32,
        call: CollectiveCall,
        replay_of: Option<u64>,
        label: Arc<str>,
        host_ns: u64,
    ) -> Result<(), HalError> {
        let info = PartInfo {
            call,
            stream: s,
            label,
            node: None,
        };
        let key = self.join_call(comm, rank, replay_of, info)?;
        self.coll.backlog.push(s, host_ns, Held::Part { comm, key });
        Ok(())
    }

    /// Adds rank `rank`'s part `info` (of a replay of captured call `replay_of`, or eager) to
    /// communicator `comm`'s matcher; returns the key of its call. A part that does not match
    /// is [`HalError::CollectiveMismatch`].
    pub(super) fn join_call(
        &mut self,
        comm: usize,
        rank: u32,
        replay_of: Option<u64>,
        info: PartInfo,
    ) -> Result<CallKey, HalError> {
        let state = &mut self.coll.comms[comm];
        let signature = info.call.signature();
        let key = match state.matcher.submit(rank, signature, replay_of, info)? {
            Arrival::Waiting(key) => key,
            Arrival::Complete(key, parts) => {
                state.ready.insert(key, parts);
                key
            }
        };
        let drivers = self.coll.drivers.entry(comm).or_default();
        let me = std::thread::current().id();
        if !drivers.threads.contains(&me) {
            drivers.threads.push(me);
        }
        drivers.ranks.insert(rank);
        Ok(key)
    }

    // ----- running held-back work -----

    /// Places every held-back call that can be placed now, until none can. A call that fails
    /// (a sanitizer report in abort mode) does not stop the others; the first error is
    /// returned.
    pub(super) fn pump(&mut self) -> Result<(), HalError> {
        // Host synchronizations waiting on held-back work re-check it once this call lets go
        // of the engine (cheap when nobody waits).
        self.progress.notify_all();
        let mut first_error = None;
        enum Front {
            Blocked,
            Part(usize, CallKey),
            Graph(u64),
            Ready,
        }
        loop {
            let mut progressed = false;
            for s in self.coll.backlog.streams() {
                loop {
                    let front = match self.coll.backlog.front(s).map(|d| &d.action) {
                        None => break,
                        Some(Held::Work(Work::Wait(e))) if self.coll.backlog.is_pending(*e) => {
                            Front::Blocked
                        }
                        Some(Held::Part { comm, key }) => Front::Part(*comm, *key),
                        Some(Held::Graph(id)) => Front::Graph(*id),
                        Some(Held::Work(_)) => Front::Ready,
                    };
                    match front {
                        Front::Blocked => break,
                        Front::Part(comm, key) => {
                            if !self.call_ready(comm, &key) {
                                break;
                            }
                            if let Err(e) = self.run_collective(comm, key) {
                                first_error.get_or_insert(e);
                            }
                        }
                        Front::Graph(id) => match self.advance_run(s, id, &mut first_error) {
                            Ok(true) => {}
                            Ok(false) => break,
                            Err(e) => {
                                first_error.get_or_insert(e);
                            }
                        },
                        Front::Ready => {
                            if let Some(Deferred {
                                host_ns,
                                action: Held::Work(work),
                            }) = self.coll.backlog.pop(s)
                            {
                                if let Err(e) = self.run_work(s, host_ns, work) {
                                    first_error.get_or_insert(e);
                                }
                            }
                        }
                    }
                    progressed = true;
                }
            }
            if !progressed {
                return first_error.map_or(Ok(()), Err);
            }
        }
    }

    /// Whether call `key` of `comm` can run: every part is in and ready.
    pub(super) fn call_ready(&self, comm: usize, key: &CallKey) -> bool {
        self.call_ready_at(comm, key).is_some()
    }

    /// When call `key` of `comm` is ready (the latest of its parts' ready times), if every
    /// part is in and ready ([`Engine::part_ready`]).
    fn call_ready_at(&self, comm: usize, key: &CallKey) -> Option<u64> {
        let parts = self.coll.comms.get(comm)?.ready.get(key)?;
        parts
            .iter()
            .try_fold(0, |t, p| Some(t.max(self.part_ready(comm, key, p)?)))
    }

    /// Places held-back `work` of stream `s`, submitted at host time `host_ns`.
    fn run_work(&mut self, s: u32, host_ns: u64, work: Work) -> Result<(), HalError> {
        match work {
            Work::Op(op) => self.place_at(op, host_ns),
            Work::Record { e, ticket } => {
                if self.coll.backlog.take_record(e, ticket) {
                    let t = self.stream(s)?.tail.max(host_ns);
                    self.record_at(s, e, t);
                }
                Ok(())
            }
            Work::Wait(e) => self.wait_at(s, e, host_ns),
            Work::Graph(nodes) => self.replay_at(s, &nodes, &ExternalEvents::default(), host_ns),
        }
    }

    /// Runs call `key` of communicator `comm`, whose parts are all ready: the eager parts
    /// leave their streams' backlogs, the replayed parts are their launches' placed nodes.
    pub(super) fn run_collective(&mut self, comm: usize, key: CallKey) -> Result<(), HalError> {
        let Some(ready) = self.call_ready_at(comm, &key) else {
            return Ok(());
        };
        let Some(mut parts) = self.coll.comms[comm].ready.remove(&key) else {
            return Ok(());
        };
        // Participant order: rank order; the sender first for a send and its receive.
        if let Peers::Pair { from, .. } = key.peers {
            parts.sort_by_key(|p| p.rank != from);
        }
        // The stream each part runs on: an eager part's own, a replayed part's captured one.
        let streams: Vec<u32> = parts
            .iter()
            .map(|p| match p.payload.node {
                None => {
                    self.coll.backlog.pop(p.payload.stream);
                    p.payload.stream
                }
                Some(i) => self
                    .front_run(p.payload.stream)
                    .and_then(|id| self.run_node_stream(id, i))
                    .unwrap_or(p.payload.stream),
            })
            .collect();
        let state = &self.coll.comms[comm];
        let ranks = state.ranks();
        let devices: Vec<usize> = parts
            .iter()
            .map(|p| state.device(p.rank).unwrap_or(self.cur))
            .collect();
        let lead = parts[0].payload.call;
        let params = self.link_params(&devices, lead.dtype);
        let (plan, pairs) = match key.peers {
            Peers::Pair { .. } => {
                let bytes = lead.count.saturating_mul(lead.dtype.size());
                (cost::plan(lead.op, 2, bytes, &params), vec![(0, 1)])
            }
            Peers::All => {
                let bytes = cost::model_bytes(&lead, ranks).unwrap_or(u64::MAX);
                let plan: Plan = cost::plan(lead.op, ranks, bytes, &params);
                let root = match lead.op {
                    CollectiveOp::Broadcast { root } => root,
                    _ => 0,
                };
                let pairs = plan.algorithm.pairs(ranks, root);
                (
                    plan,
                    pairs
                        .into_iter()
                        .map(|(a, b)| (a as usize, b as usize))
                        .collect(),
                )
            }
        };
        let mut hops: Vec<LinkId> = pairs
            .iter()
            .flat_map(|&(a, b)| self.links.route(devices[a] as u32, devices[b] as u32).hops)
            .collect();
        // Each link once (a port serves every pair it is on).
        let mut seen = std::collections::HashSet::new();
        hops.retain(|h| seen.insert(*h));
        // The links the algorithm uses, as one route reserved for the whole collective (its
        // time comes from the cost model, not from the route's spec).
        let route = Route {
            hops,
            spec: self.links.topology().intra_server,
        };
        let duration = plan.ns;
        let engines = devices
            .iter()
            .map(|&d| (&self.devices[d].comm, 1))
            .collect();
        let start = self.links.earliest_along(&route, engines, ready, duration);
        let end = start.saturating_add(duration);
        for &d in &devices {
            self.devices[d].comm.reserve(start, duration, 1);
        }
        self.links.reserve(&route, start, end);
        let (sends, recvs) = ranges(&parts, ranks);
        let mut first_report = None;
        for (i, p) in parts.iter().enumerate() {
            let s = streams[i];
            let op = Op {
                kind: OpKind::Collective(Arc::new(CollectivePart {
                    comm,
                    rank: p.rank,
                    call: p.payload.call,
                    send: sends[i],
                    recv: recvs[i],
                    captured: key.replay_of.unwrap_or(key.number),
                })),
                label: p.payload.label.clone(),
                stream: s,
            };
            let at = self.locate(s);
            let from_graph = key.replay_of.is_some();
            match p.payload.node {
                // A replayed part goes to the sanitizer with its launch's other nodes.
                Some(node) => {
                    let info = op_info_at(&op, at, start, end, from_graph);
                    self.run_node_placed(p.payload.stream, node, info);
                }
                None => {
                    let acc = op.kind.accesses();
                    if let Err(r) = self
                        .sanitizer
                        .eager_op(s, &acc, || op_info_at(&op, at, start, end, from_graph))
                    {
                        first_report.get_or_insert(r);
                    }
                }
            }
            let d = devices[i];
            let dev = &mut self.devices[d];
            dev.makespan = dev.makespan.max(end);
            dev.ops_executed += 1;
            if self.record_timeline {
                let (device, local) = at;
                self.timeline.push(OpRecord {
                    device,
                    stream: local,
                    label: op.label.to_string(),
                    kind: lead.op.name(),
                    start_ns: start,
                    end_ns: end,
                    unit: ComputeUnit::Copy,
                    reads: op.kind.reads(),
                    writes: op.kind.writes(),
                    from_graph,
                });
                self.trace.links.push(LinkSlice {
                    device,
                    track: "comm engine".to_string(),
                    label: op.label.to_string(),
                    start_ns: start,
                    end_ns: end,
                });
            }
            if p.payload.node.is_none() {
                if let Ok(st) = self.stream_mut(s) {
                    st.tail = st.tail.max(end);
                }
            }
        }
        if self.record_timeline {
            let label = parts[0].payload.label.to_string();
            for hop in &route.hops {
                let track = hop.name(|i| self.ordinal_of(i));
                self.trace.links.push(LinkSlice {
                    device: self.ordinal_of(devices[0] as u32),
                    track,
                    label: label.clone(),
                    start_ns: start,
                    end_ns: end,
                });
            }
        }
        if self.mode == SimMode::Data {
            let exchange = Exchange {
                op: lead.op,
                count: lead.count,
                dtype: lead.dtype,
                sends: sends.into_iter().map(Source::Memory).collect(),
                recvs,
            };
            self.queue
                .push(start, end, OpKind::Exchange(Arc::new(exchange)), devices[0]);
        }
        match first_report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }

    // ----- blocked host calls -----

    /// The condition variable paired with the engine's mutex, notified when held-back work
    /// may have been released.
    pub(crate) fn progress(&self) -> Arc<Condvar> {
        self.progress.clone()
    }

    /// How long a host synchronization waits for other threads' ranks.
    pub(crate) fn collective_timeout(&self) -> Duration {
        self.collective_timeout
    }

    /// Whether the host call waiting on `what` (on behalf of the current device, from the
    /// calling thread) waits on work held back behind a collective that another host thread
    /// may still release by submitting its rank's part: then the call waits for it rather
    /// than failing.
    ///
    /// No other thread can release it when the calling thread is the only one that has ever
    /// submitted parts to the communicator the work waits for, and has submitted parts of
    /// every rank whose part is missing: it drives those ranks itself, and it is blocked. A
    /// rank that has never submitted a part might be driven by a thread that has not reached
    /// its first call yet, so a wait on it is given the timeout.
    pub(crate) fn may_be_released(&self, what: HostWait) -> bool {
        let held = match what {
            HostWait::Stream(s) => self.coll.is_deferred(s).then_some(s),
            HostWait::Event(e) => self.record_holder(e),
            HostWait::Events(a, b) => self.record_holder(a).or_else(|| self.record_holder(b)),
            HostWait::Device => self.devices[self.cur]
                .streams
                .iter()
                .copied()
                .find(|&s| self.coll.is_deferred(s)),
        };
        held.is_some_and(|s| self.stream_may_be_released(s, 0))
    }

    /// The stream holding back event `e`'s latest record, if it is held back.
    fn record_holder(&self, e: usize) -> Option<u32> {
        if !self.coll.is_pending(e) {
            return None;
        }
        self.coll
            .backlog
            .holder_of(|h| matches!(h, Held::Work(Work::Record { e: x, .. }) if *x == e))
    }

    /// Whether another thread may release stream `s`'s held-back work (see
    /// [`Engine::may_be_released`]); `depth` bounds the chain of held records followed.
    fn stream_may_be_released(&self, s: u32, depth: u32) -> bool {
        match self.coll.backlog.front(s).map(|d| &d.action) {
            Some(Held::Part { comm, key }) => self.call_may_be_released(*comm, key),
            Some(Held::Graph(id)) => self
                .run_blocker(*id)
                .is_none_or(|(comm, key)| self.call_may_be_released(comm, &key)),
            Some(Held::Work(Work::Wait(e))) if depth < 4 => self
                .record_holder(*e)
                .is_none_or(|h| self.stream_may_be_released(h, depth + 1)),
            // A longer chain: give it the timeout.
            _ => true,
        }
    }

    /// Whether another thread may still submit a missing part of call `key` of `comm` (see
    /// [`Engine::may_be_released`]).
    fn call_may_be_released(&self, comm: usize, key: &CallKey) -> bool {
        let Some(drivers) = self.coll.drivers.get(&comm) else {
            return true;
        };
        let me = std::thread::current().id();
        let only_me = drivers.threads.iter().all(|t| *t == me);
        let missing = self.coll.comms[comm].matcher.missing(key);
        !(only_me && missing.iter().all(|r| drivers.ranks.contains(r)))
    }

    /// The error of a host call that would wait on stream `s`, whose work is held back.
    pub(super) fn blocked_stream(&self, s: u32) -> HalError {
        let (device, local) = self.locate(s);
        invalid(format!(
            "stream {local} of device {device} would wait forever: it {}",
            self.blocker(s, 0)
        ))
    }

    /// The error of a host call that would wait on event `e`, whose record is held back.
    pub(super) fn blocked_event(&self, e: usize) -> HalError {
        invalid(format!(
            "event {e} would never complete: {}",
            self.event_blocker(e, 0)
        ))
    }

    fn event_blocker(&self, e: usize, depth: u32) -> String {
        match self
            .coll
            .backlog
            .holder_of(|h| matches!(h, Held::Work(Work::Record { e: x, .. }) if *x == e))
        {
            Some(s) if depth < 4 => {
                let (device, local) = self.locate(s);
                format!(
                    "its record is held back on stream {local} of device {device}, which {}",
                    self.blocker(s, depth + 1)
                )
            }
            _ => "its record is held back behind a collective".to_string(),
        }
    }

    /// What stream `s`'s held-back work waits for.
    fn blocker(&self, s: u32, depth: u32) -> String {
        let front = match self.coll.backlog.front(s).map(|d| &d.action) {
            Some(Held::Graph(id)) => self
                .run_blocker(*id)
                .map(|(comm, key)| Held::Part { comm, key }),
            Some(Held::Part { comm, key }) => Some(Held::Part {
                comm: *comm,
                key: *key,
            }),
            _ => None,
        };
        match (
            front.as_ref(),
            self.coll.backlog.front(s).map(|d| &d.action),
        ) {
            (Some(Held::Part { comm, key }), _) => {
                let state = &self.coll.comms[*comm];
                let missing = state.matcher.missing(key);
                if missing.is_empty() {
                    format!(
                        "waits for {key} of communicator {comm}, issued by every rank but not \
                         yet reached by every rank's stream"
                    )
                } else {
                    let list: Vec<String> = missing.iter().map(u32::to_string).collect();
                    format!(
                        "waits for {key} of communicator {comm}, which rank(s) {} have not issued",
                        list.join(", ")
                    )
                }
            }
            (_, Some(Held::Work(Work::Wait(e)))) => {
                format!("waits on event {e}: {}", self.event_blocker(*e, depth))
            }
            _ => "holds back work".to_string(),
        }
    }
}
