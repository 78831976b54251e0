//! Where and when a matched collective runs: ready at the latest of its parts' ready times,
//! it takes the time of the cost model's algorithm ([`super::cost`]) on the node's links and
//! occupies the communication engine of every participant's device and every link the
//! algorithm uses (overlapping compute); each participant's stream then goes on after it. In
//! data mode its effect ([`super::DataEffect`]) is queued for its start and end.

use super::communicators::PartInfo;
use super::cost::{self, Plan};
use super::effect::{DataEffect, Source};
use super::matching::failed_part;
use crate::config::SimMode;
use crate::engine::{op_info_at, sanitizer_error, Engine};
use crate::fault::ACL_ERROR_RT_INTERNAL_ERROR;
use crate::limits::native;
use crate::link::{LinkId, Route};
use crate::op::{CollectivePart, Op, OpKind};
use crate::sanitizer::SanitizerMode;
use crate::timeline::OpRecord;
use crate::trace::LinkSlice;
use braid_stream_core::collective::{CallKey, CollectiveOp, Part, Peers};
use braid_stream_core::hal::HalError;
use braid_stream_core::kernel::ComputeUnit;
use braid_stream_core::types::DeviceSlice;
use std::sync::Arc;

/// The participants' bytes of one collective, in participant order.
fn ranges(parts: &[Part<PartInfo>], ranks: u32) -> (Vec<DeviceSlice>, Vec<DeviceSlice>) {
    parts
        .iter()
        .map(|p| {
            let call = &p.payload.call;
            let send = call.send_len(p.rank, ranks).unwrap_or(0);
            let recv = call.recv_len(p.rank, ranks).unwrap_or(0);
            (
                DeviceSlice::new(call.send, send),
                DeviceSlice::new(call.recv, recv),
            )
        })
        .unzip()
}

impl Engine {
    /// Runs call `key` of communicator `comm`, whose parts are all ready: the eager parts
    /// leave their streams' backlogs, the replayed parts are their launches' placed nodes.
    pub(crate) fn run_collective(&mut self, comm: usize, key: CallKey) -> Result<(), HalError> {
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
        let lead = parts[0].payload.call.clone();
        let params = self.link_params(&devices, lead.dtype);
        let (plan, pairs) = match key.peers {
            Peers::Pair { .. } => {
                let bytes = lead.count.saturating_mul(lead.dtype.size());
                (cost::plan(lead.op, 2, bytes, &params), vec![(0, 1)])
            }
            Peers::All => {
                let bytes = cost::busiest_bytes(parts.iter().map(|p| &p.payload.call), ranks);
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
                    call: p.payload.call.clone(),
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
        // Parts the fault plan made fail on the device: nothing lands in their receive
        // buffers, and their communicator keeps the failure (see `crate::fault`).
        let mut recvs = recvs;
        for (i, p) in parts.iter().enumerate().filter(|(_, p)| p.payload.fails) {
            let what = failed_part(comm, &key, p.rank, p.payload.call.op);
            tracing::error!(comm, rank = p.rank, call = %key, "{what}");
            let (ordinal, _) = self.locate(streams[i]);
            let label = p.payload.label.as_ref();
            (self.sanitizer).op_failed(ordinal, label, (start, end), &[recvs[i]]);
            // Its stream (and the events recorded after it) may report it from now on.
            if let Some(d) = self.stream(streams[i]).ok().map(|st| st.device) {
                self.devices[d as usize]
                    .faults
                    .collective_ran(streams[i], &what);
            }
            let error = native(
                ACL_ERROR_RT_INTERNAL_ERROR,
                "ACL_ERROR_RT_INTERNAL_ERROR",
                what,
            );
            self.keep_async_error(comm, &error);
            recvs[i] = DeviceSlice::new(recvs[i].ptr, 0);
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
            let effect = DataEffect {
                op: lead.op,
                count: lead.count,
                dtype: lead.dtype,
                sends: sends.into_iter().map(Source::Memory).collect(),
                recvs,
                layouts: parts.iter().map(|p| p.payload.call.v.clone()).collect(),
            };
            self.queue.push(
                start,
                end,
                OpKind::CollectiveEffect(Arc::new(effect)),
                devices[0],
            );
        }
        match first_report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }
}
