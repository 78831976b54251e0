//! Replaying a graph that holds collective parts or host gates.
//!
//! Such a launch is held back on its stream ([`Held::Graph`]) like any call behind a
//! collective. Once it is first in its stream's backlog it starts, and its nodes are placed as
//! in a graph without collectives ([`Engine::replay_at`]): each when the nodes it depends on
//! (the previous node of its captured stream, event edges) are placed, at the latest of their
//! ends and the launch's start, on its own captured stream's resource. A collective node also
//! waits for the other ranks' parts of its call: it runs once every part is in and ready (an
//! eager part first in its stream's backlog, a replayed part's dependencies placed), at the
//! latest of the parts' ready times. Only the nodes that depend on a collective not yet run
//! wait; the rest of the graph is placed meanwhile, so a captured communication stream keeps
//! running beside the captured compute. A captured host gate ([`OpKind::Gate`],
//! `engine::gates`) passes once the host has opened it for this launch, and ends at the later
//! of its arrival and the opening: the nodes after it wait for it the same way. The launch's
//! stream goes on once every node is placed.
//!
//! The sanitizer sees the nodes in graph order (a prefix at a time, as they are placed).

use super::gates::gate_of;
use super::submit::op_info;
use super::{sanitizer_error, Engine};
use crate::capture::{ExternalEvents, Node};
use crate::collective::PartInfo;
use crate::collective::{needs_run, Held, Work};
use crate::op::OpKind;
use crate::sanitizer::report::{OpInfo, RaceReport};
use crate::sanitizer::{Replay, SanitizerMode};
use braid_stream_core::collective::{CallKey, Part};
use braid_stream_core::hal::HalError;
use std::collections::HashMap;
use std::sync::Arc;

/// A launch of a graph with collective parts, in progress.
#[derive(Debug)]
pub(crate) struct GraphRun {
    nodes: Arc<[Node]>,
    /// For each collective node, its communicator and call.
    calls: Vec<Option<(usize, CallKey)>>,
    /// When the launch started (it is first in its stream's backlog), once it has.
    base: Option<u64>,
    /// Each placed node's end.
    ends: Vec<Option<u64>>,
    /// Each placed node's place in time, as the sanitizer names it, until the sanitizer has
    /// seen it.
    infos: Vec<Option<OpInfo>>,
    /// How many nodes (a prefix) the sanitizer has seen (with the sanitizer on).
    checked: usize,
    replay: Option<Replay>,
    first_report: Option<RaceReport>,
}

/// The launches in progress, by number.
#[derive(Debug, Default)]
pub(crate) struct GraphRuns {
    runs: HashMap<u64, GraphRun>,
    next: u64,
}

impl GraphRun {
    /// The ready time of node `i` when every node it depends on is placed and the launch has
    /// started.
    fn ready(&self, i: usize) -> Option<u64> {
        let base = self.base?;
        self.nodes[i].deps.iter().try_fold(base, |t, &d| {
            self.ends.get(d).copied().flatten().map(|end| t.max(end))
        })
    }
}

impl Engine {
    /// Launches a graph holding collective parts or host gates (or on a deferred stream, or
    /// waiting on a pending event) on stream `s`: its external waits, the launch and its external records
    /// are held back and run as the stream becomes free; each collective part joins its
    /// call's matcher now, in launch order.
    pub(super) fn hold_graph(
        &mut self,
        s: u32,
        nodes: &[Node],
        external: &ExternalEvents,
    ) -> Result<(), HalError> {
        let host = self.dev().host_ns;
        for &e in &external.waits {
            self.coll.hold(s, host, Work::Wait(e));
        }
        if nodes.iter().any(needs_run) {
            let mut calls = Vec::with_capacity(nodes.len());
            for (i, node) in nodes.iter().enumerate() {
                let call = match &node.op.kind {
                    OpKind::Collective(part) => {
                        let info = PartInfo {
                            call: part.call.clone(),
                            stream: s,
                            label: node.op.label.clone(),
                            node: Some(i),
                            fails: false,
                        };
                        let replay_of = Some(part.captured);
                        let key = self.join_call(part.comm, part.rank, replay_of, info);
                        Some((part.comm, key?))
                    }
                    _ => None,
                };
                calls.push(call);
            }
            let runs = &mut self.coll.runs;
            let id = runs.next;
            runs.next += 1;
            runs.runs.insert(
                id,
                GraphRun {
                    nodes: Arc::from(nodes),
                    calls,
                    base: None,
                    ends: vec![None; nodes.len()],
                    infos: nodes.iter().map(|_| None).collect(),
                    checked: 0,
                    replay: None,
                    first_report: None,
                },
            );
            self.coll.push_held(s, host, Held::Graph(id));
        } else {
            self.coll.hold(s, host, Work::Graph(Arc::from(nodes)));
        }
        for &e in &external.records {
            self.coll.hold_record(s, host, e);
        }
        self.devices[self.cur].graph_launches += 1;
        self.pump()
    }

    /// When rank part `p` of call `key` of `comm` can run: an eager part first in its
    /// stream's backlog, or a replayed part of a started launch whose dependencies are placed.
    pub(crate) fn part_ready(&self, comm: usize, key: &CallKey, p: &Part<PartInfo>) -> Option<u64> {
        let s = p.payload.stream;
        let front = self.coll.backlog_front(s)?;
        match (&front.action, p.payload.node) {
            (Held::Part { comm: c, key: k }, None) if *c == comm && k == key => Some(
                self.stream(s)
                    .map_or(front.host_ns, |st| st.tail.max(front.host_ns)),
            ),
            (Held::Graph(id), Some(i)) => {
                let run = self.coll.runs.runs.get(id)?;
                let mine = run.calls.get(i).copied().flatten() == Some((comm, *key));
                (mine && run.ends[i].is_none())
                    .then(|| run.ready(i))
                    .flatten()
            }
            _ => None,
        }
    }

    /// The captured stream of node `i` of launch `id` (a replayed part's stream).
    pub(crate) fn run_node_stream(&self, id: u64, i: usize) -> Option<u32> {
        let run = self.coll.runs.runs.get(&id)?;
        run.nodes.get(i).map(|n| n.op.stream)
    }

    /// Node `i` of the launch first in stream `s`'s backlog is placed as `info`.
    pub(crate) fn run_node_placed(&mut self, s: u32, i: usize, info: OpInfo) {
        let Some(Held::Graph(id)) = self.coll.backlog_front(s).map(|d| &d.action) else {
            return;
        };
        let id = *id;
        if let Some(run) = self.coll.runs.runs.get_mut(&id) {
            if i < run.ends.len() {
                run.ends[i] = Some(info.end_ns);
                run.infos[i] = Some(info);
            }
        }
    }

    /// The launch first in stream `s`'s backlog, if any.
    pub(crate) fn front_run(&self, s: u32) -> Option<u64> {
        match self.coll.backlog_front(s).map(|d| &d.action) {
            Some(Held::Graph(id)) => Some(*id),
            _ => None,
        }
    }

    /// Advances launch `id`, first in stream `s`'s backlog: starts it, places every node
    /// whose dependencies are placed (running the collectives whose parts are all ready) and,
    /// once every node is placed, ends it. Whether anything changed; a collective that fails
    /// does not stop the others (its error goes to `first_error`).
    pub(crate) fn advance_run(
        &mut self,
        s: u32,
        id: u64,
        first_error: &mut Option<HalError>,
    ) -> Result<bool, HalError> {
        let Some(run) = self.coll.runs.runs.get(&id) else {
            return Ok(false);
        };
        let nodes = run.nodes.clone();
        let mut progressed = false;
        if run.base.is_none() {
            let host = self.coll.backlog_front(s).map_or(0, |d| d.host_ns);
            let base = host.max(self.stream(s)?.tail);
            let replay = self.sanitizer.begin_replay(s);
            if let Some(run) = self.coll.runs.runs.get_mut(&id) {
                run.base = Some(base);
                run.replay = replay;
            }
            progressed = true;
        }
        loop {
            let mut placed_any = false;
            for (i, node) in nodes.iter().enumerate() {
                let Some(run) = self.coll.runs.runs.get(&id) else {
                    return Ok(progressed);
                };
                if run.ends[i].is_some() {
                    continue;
                }
                let Some(ready) = run.ready(i) else {
                    continue;
                };
                if let Some(gate) = gate_of(node) {
                    let Some(opened) = gate.pass() else {
                        continue;
                    };
                    let end = ready.max(opened);
                    let at = self.locate(node.op.stream);
                    let info = super::submit::op_info_at(&node.op, at, ready, end, true);
                    self.run_node_placed(s, i, info);
                    placed_any = true;
                    continue;
                }
                match run.calls[i] {
                    None => {
                        let slot = self.slot(&node.op, ready);
                        let info = op_info(&node.op, &slot, self.locate(node.op.stream), true);
                        self.place(node.op.clone(), slot, Some(s));
                        self.run_node_placed(s, i, info);
                    }
                    Some((comm, key)) => {
                        if !self.call_ready(comm, &key) {
                            continue;
                        }
                        if let Err(e) = self.run_collective(comm, key) {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                placed_any = true;
            }
            if !placed_any {
                break;
            }
            progressed = true;
        }
        self.check_run(id);
        let done = self
            .coll
            .runs
            .runs
            .get(&id)
            .is_some_and(|r| r.ends.iter().all(Option::is_some));
        if done {
            self.end_run(s, id)?;
            return Ok(true);
        }
        Ok(progressed)
    }

    /// Shows the sanitizer the placed nodes of launch `id` not yet shown, in graph order up
    /// to the first one not placed.
    fn check_run(&mut self, id: u64) {
        let Some(run) = self.coll.runs.runs.get_mut(&id) else {
            return;
        };
        let Some(replay) = run.replay.as_mut() else {
            return;
        };
        while let Some(info) = run.infos.get_mut(run.checked).and_then(Option::take) {
            let node = &run.nodes[run.checked];
            let acc = node.op.kind.accesses();
            let reports = self.sanitizer.replay_node(replay, &node.deps, &acc, info);
            if run.first_report.is_none() {
                run.first_report = reports.into_iter().next();
            }
            run.checked += 1;
        }
    }

    /// Ends launch `id`, first in stream `s`'s backlog, every node placed: the stream goes on
    /// after its last node.
    fn end_run(&mut self, s: u32, id: u64) -> Result<(), HalError> {
        self.coll.backlog_pop(s);
        let Some(run) = self.coll.runs.runs.remove(&id) else {
            return Ok(());
        };
        if let Some(r) = run.replay {
            self.sanitizer.end_replay(r);
        }
        let base = run.base.unwrap_or(0);
        let end = run.ends.iter().flatten().fold(base, |t, &e| t.max(e));
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        match run.first_report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }

    /// The first host gate launch `id` waits at (reached, not yet passed): its number and
    /// when the launch reached it.
    pub(crate) fn run_gate(&self, id: u64) -> Option<(u64, u64)> {
        let run = self.coll.runs.runs.get(&id)?;
        run.nodes.iter().enumerate().find_map(|(i, node)| {
            let gate = gate_of(node)?;
            if run.ends[i].is_some() {
                return None;
            }
            run.ready(i).map(|reached| (gate.id, reached))
        })
    }

    /// What launch `id` waits for: its first collective node not yet run.
    pub(crate) fn run_blocker(&self, id: u64) -> Option<(usize, CallKey)> {
        let run = self.coll.runs.runs.get(&id)?;
        run.calls
            .iter()
            .zip(&run.ends)
            .find(|(c, end)| c.is_some() && end.is_none())
            .and_then(|(c, _)| *c)
    }
}
