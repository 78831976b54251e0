//! Collectives of a communicator whose ranks are in several processes (or several nodes of
//! one process): each rank's part is exchanged over the root info's transport
//! ([`crate::RemoteGroup`]), outside the engine lock, between [`Engine::remote_prepare`] and
//! [`Engine::remote_finish`].
//!
//! Each rank sends the virtual time its part is ready at (the latest of its submission and
//! its stream's end), its call (operation, count, data type and, for a variable-count
//! operation, its per-rank blocks) and, in data mode, its send bytes as of that time
//! (`blob`). Every rank then holds every rank's call and matches them as a node matches its
//! ranks' parts (stream-core's one [`Matcher`], HCCL's rules for the blocks of the
//! variable-count operations): a mismatch fails the call on every rank alike, naming the rank
//! and the difference, and nothing runs. Otherwise every rank starts the collective at the
//! latest ready time of all ranks (the processes' virtual time axes meet there) and takes the
//! cost model's time for the busiest part on the network (one port per rank: a
//! [`Wiring::Switched`](crate::Wiring::Switched) fabric with the topology's network link),
//! occupying its device's communication engine and network ports. Its receive buffer is
//! written at the end, by the data effect a node's collective has, from every rank's send
//! bytes and blocks.
//!
//! A send or receive goes to its peer alone, over the pair's direct connection
//! ([`crate::RemoteGroup::send`] / [`crate::RemoteGroup::receive`]), numbered on its (sender,
//! receiver) pair as a node numbers it: the `k`-th send from `a` to `b` pairs with `b`'s
//! `k`-th receive from `a`, and neither counts as one of the communicator's collectives. Both
//! ranks hold both parts and match them as a node matches a pair (count and data type): a
//! mismatch fails both alike and the pair's number does not advance. Otherwise both start at
//! the later of the two ready times and take the node-local send's cost on the network link
//! ([`Engine::remote_finish_pair`]).

mod blob;

use super::cost::{self, LinkParams};
use super::effect::{DataEffect, Source};
use crate::config::SimMode;
use crate::engine::{invalid, op_info_at, sanitizer_error, Engine};
use crate::link::{LinkId, Route};
use crate::op::{CollectivePart, Op, OpKind};
use crate::sanitizer::SanitizerMode;
use crate::timeline::OpRecord;
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, MatchError, Matcher};
use braid_stream_core::hal::HalError;
use braid_stream_core::kernel::ComputeUnit;
use braid_stream_core::types::DeviceSlice;
use std::sync::Arc;

/// The communicator index a rank's part of a remote communicator carries (it is not one of
/// the node's communicators).
const REMOTE: usize = usize::MAX;

/// One rank's part of a remote collective between its preparation and its placement.
#[derive(Debug)]
pub(crate) struct RemotePart {
    stream: u32,
    rank: u32,
    ranks: u32,
    /// The call's number on its communicator (the `k`-th collective of every rank), or for a
    /// send or receive on its (sender, receiver) pair.
    number: u64,
    /// When this rank's part is ready (the latest of its submission and its stream's end).
    ready: u64,
    call: CollectiveCall,
    send: DeviceSlice,
    recv: DeviceSlice,
    label: Arc<str>,
    /// What this rank sends to the others: its ready time, its call, then its send bytes
    /// (`blob`'s format).
    pub blob: Vec<u8>,
}

impl Engine {
    /// Checks rank `rank`'s part `call` (of a remote communicator of `ranks`, its collective
    /// number `number`, or for a send or receive its number on its pair) on stream `s` and
    /// reads what it contributes. Refused as unsupported: inside a capture, on a stream
    /// holding back work behind a node-local collective.
    pub fn remote_prepare(
        &mut self,
        s: u32,
        rank: u32,
        ranks: u32,
        number: u64,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<RemotePart, HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "collective");
        if self.stream(s)?.capture.is_some() {
            return Err(HalError::Unsupported(
                "capturing a collective of a communicator spanning processes",
            ));
        }
        if self.coll.is_deferred(s) {
            return Err(HalError::Unsupported(
                "a collective spanning processes on a stream holding back work behind a \
                 node-local collective",
            ));
        }
        let (send, recv) = self.check_buffers(s, rank, ranks, call)?;
        let ready = self.dev().host_ns.max(self.stream(s)?.tail);
        let mut blob = blob::encode(ready, call);
        if self.mode == SimMode::Data && send.len > 0 {
            // The send buffer as of `ready`: what the stream's earlier work wrote.
            self.queue.drain_all(ready, &mut self.memories);
            let device = self.stream(s)?.device as usize;
            blob.extend(self.memories[device].read(send).unwrap_or_default());
        }
        Ok(RemotePart {
            stream: s,
            rank,
            ranks,
            number,
            ready,
            call: call.clone(),
            send,
            recv,
            label: Arc::from(label),
            blob,
        })
    }

    /// Places `part` once every rank's blob (`blobs`, in rank order) has come back: refused
    /// as [`HalError::CollectiveMismatch`] (the same on every rank, which sees the same blobs)
    /// when the ranks' calls do not match, and then nothing runs.
    pub fn remote_finish(&mut self, part: RemotePart, blobs: Vec<Vec<u8>>) -> Result<(), HalError> {
        if blobs.len() != part.ranks as usize {
            return Err(invalid(format!(
                "the exchange returned {} parts for {} ranks",
                blobs.len(),
                part.ranks
            )));
        }
        let mut ready = 0;
        let mut calls = Vec::with_capacity(blobs.len());
        let mut sends = Vec::with_capacity(blobs.len());
        for (r, bytes) in blobs.iter().enumerate() {
            let blob = blob::decode(bytes)
                .ok_or_else(|| invalid(format!("rank {r}'s part came back malformed")))?;
            ready = ready.max(blob.ready);
            calls.push(blob.call);
            sends.push(Source::Bytes(blob.send));
        }
        match_calls(&calls, part.number)?;
        let d = self.stream(part.stream)?.device as usize;
        let call = &part.call;
        let params = LinkParams {
            reduce_bytes_per_s: LinkParams::reduce_rate(
                &self.devices[d].config.profile,
                call.dtype,
            ),
            ..self.network_link_params(call.dtype)
        };
        let bytes = cost::busiest_bytes(&calls, part.ranks);
        let duration = cost::plan(call.op, part.ranks, bytes, &params).ns;
        // Only this rank's receive buffer is in this node: every other range is empty.
        let recvs = (0..part.ranks)
            .map(|r| {
                if r == part.rank {
                    part.recv
                } else {
                    DeviceSlice::new(part.recv.ptr, 0)
                }
            })
            .collect();
        let effect = DataEffect {
            op: call.op,
            count: call.count,
            dtype: call.dtype,
            sends,
            recvs,
            layouts: calls.into_iter().map(|c| c.v).collect(),
        };
        self.place_remote(part, ready, duration, effect)
    }

    /// Places `part`, a send or a receive, once its peer's answer has come back over their
    /// connection: `theirs` is the peer's part and `their_number` the number it gave the
    /// pair's call. Refused as [`HalError::CollectiveMismatch`] (the same on both ranks, which
    /// see the same two parts) when count or data type differ, and then nothing runs.
    /// Otherwise both start at the later of the two ready times and take the node-local
    /// send's time on the network link; the receive buffer is written at the end.
    pub fn remote_finish_pair(
        &mut self,
        part: RemotePart,
        their_number: u64,
        theirs: &[u8],
    ) -> Result<(), HalError> {
        let (peer, sending) = match part.call.op {
            CollectiveOp::Send { peer } => (peer, true),
            CollectiveOp::Recv { peer } => (peer, false),
            _ => {
                return Err(invalid(
                    "a pair's part that is neither a send nor a receive",
                ))
            }
        };
        let blob = blob::decode(theirs)
            .ok_or_else(|| invalid(format!("rank {peer}'s part came back malformed")))?;
        let ready_here = part.ready;
        if their_number != part.number {
            return Err(invalid(format!(
                "send and receive out of step: rank {} is at call {} with rank {peer}, which \
                 is at call {their_number}",
                part.rank, part.number
            )));
        }
        // The sender's part first, as a node matches a pair.
        let (from, to) = if sending {
            (part.rank, peer)
        } else {
            (peer, part.rank)
        };
        let (first, second) = if sending {
            (&part.call, &blob.call)
        } else {
            (&blob.call, &part.call)
        };
        let mut matcher = Matcher::new(part.ranks);
        for (rank, call) in [(from, first), (to, second)] {
            match matcher.submit(rank, call.signature(), None, ()) {
                Ok(_) => {}
                Err(MatchError::Mismatch(mut m)) => {
                    m.key.number = part.number;
                    tracing::debug!(%m, "a send and receive across processes refused on both");
                    return Err(HalError::CollectiveMismatch(m));
                }
                Err(other) => return Err(other.into()),
            }
        }
        let call = &part.call;
        let bytes = call.count.saturating_mul(call.dtype.size());
        let params = self.network_link_params(call.dtype);
        let duration = cost::plan(call.op, 2, bytes, &params).ns;
        let sends = if sending {
            vec![Source::Bytes(Vec::new()), Source::Bytes(Vec::new())]
        } else {
            vec![Source::Bytes(blob.send), Source::Bytes(Vec::new())]
        };
        // The sender is participant 0, the receiver 1: only the receiver's buffer is written.
        let recvs = if sending {
            vec![DeviceSlice::new(part.recv.ptr, 0); 2]
        } else {
            vec![DeviceSlice::new(part.recv.ptr, 0), part.recv]
        };
        let effect = DataEffect {
            op: call.op,
            count: call.count,
            dtype: call.dtype,
            sends,
            recvs,
            layouts: vec![None, None],
        };
        self.place_remote(part, blob.ready.max(ready_here), duration, effect)
    }

    /// Places `part` on its device's communication engine and network ports for `duration`,
    /// from the later of `ready` and its stream's end, and queues `effect` (data mode, a
    /// receive buffer to write) for its end.
    fn place_remote(
        &mut self,
        part: RemotePart,
        ready: u64,
        duration: u64,
        effect: DataEffect,
    ) -> Result<(), HalError> {
        let s = part.stream;
        let device = self.stream(s)?.device;
        let d = device as usize;
        let call = part.call.clone();
        let network = self.links.topology().network;
        let route = Route {
            hops: vec![LinkId::PortOut(device), LinkId::PortIn(device)],
            spec: network,
        };
        let ready = ready.max(self.stream(s)?.tail);
        let engine = vec![(&self.devices[d].comm, 1)];
        let start = self.links.earliest_along(&route, engine, ready, duration);
        let end = start.saturating_add(duration);
        self.devices[d].comm.reserve(start, duration, 1);
        self.links.reserve(&route, start, end);
        let op = Op {
            kind: OpKind::Collective(Arc::new(CollectivePart {
                comm: REMOTE,
                rank: part.rank,
                call: call.clone(),
                send: part.send,
                recv: part.recv,
                captured: 0,
            })),
            label: part.label,
            stream: s,
        };
        let at = self.locate(s);
        let report = self
            .sanitizer
            .eager_op(s, &op.kind.accesses(), || {
                op_info_at(&op, at, start, end, false)
            })
            .err();
        let dev = &mut self.devices[d];
        dev.makespan = dev.makespan.max(end);
        dev.ops_executed += 1;
        if self.record_timeline {
            self.timeline.push(OpRecord {
                device: at.0,
                stream: at.1,
                label: op.label.to_string(),
                kind: call.op.name(),
                start_ns: start,
                end_ns: end,
                unit: ComputeUnit::Copy,
                reads: op.kind.reads(),
                writes: op.kind.writes(),
                from_graph: false,
            });
        }
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        if self.mode == SimMode::Data && part.recv.len > 0 {
            self.queue
                .push(start, end, OpKind::CollectiveEffect(Arc::new(effect)), d);
        }
        match report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }
}

/// Checks that the ranks' calls (`calls`, in rank order) of collective `number` agree, as a
/// node's [`Matcher`] checks its ranks' parts: each rank's against the ranks' before it.
fn match_calls(calls: &[CollectiveCall], number: u64) -> Result<(), HalError> {
    let mut matcher = Matcher::new(calls.len() as u32);
    for (rank, call) in calls.iter().enumerate() {
        match matcher.submit(rank as u32, call.signature(), None, ()) {
            Ok(_) => {}
            // A fresh matcher numbers the call 0: it is the communicator's `number`.
            Err(MatchError::Mismatch(mut m)) => {
                m.key.number = number;
                tracing::debug!(%m, "a collective across processes refused on every rank");
                return Err(HalError::CollectiveMismatch(m));
            }
            Err(other) => return Err(other.into()),
        }
    }
    Ok(())
}
