//! Each rank's part of a collective: checked (its communicator, device, root or peer, and
//! buffers that are live memory of the stream's device), then matched with the other ranks'
//! parts of the same call by stream-core's one [`Matcher`](braid_stream_core::collective::Matcher)
//! (a part that does not match is refused when it arrives, as
//! [`HalError::CollectiveMismatch`]). An eager part holds its stream back until the call has
//! run (`super::backlog`); inside a capture it becomes a graph node. A matched call runs
//! once every part is ready: an eager part at the front of its stream's held-back work (ready
//! at the latest of its host time and its stream's end), a part replayed from a graph once
//! the nodes it depends on are placed (`engine::graph_run`).

use super::communicators::PartInfo;
use super::Held;
use crate::engine::{invalid, Engine};
use crate::op::{CollectivePart, Op, OpKind};
use braid_stream_core::collective::{Arrival, CallKey, CollectiveCall, CollectiveOp, Peers};
use braid_stream_core::hal::HalError;
use braid_stream_core::sync::thread;
use braid_stream_core::types::DeviceSlice;
use std::sync::Arc;

impl Engine {
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
        if call.op.is_variable() {
            super::variable::check(call, rank, ranks)?;
        }
        let lengths = [
            ("send", call.send, call.send_len(rank, ranks)),
            ("receive", call.recv, call.recv_len(rank, ranks)),
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
    /// `fails`: the fault plan made the part fail on the device (eager parts only; see
    /// [`crate::FaultPlan::fail_collective_async_nth`]).
    pub fn collective(
        &mut self,
        s: u32,
        comm: usize,
        rank: u32,
        call: &CollectiveCall,
        label: &str,
        fails: bool,
    ) -> Result<(), HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "collective");
        let (send, recv) = self.check_part(s, comm, rank, call)?;
        let label: Arc<str> = Arc::from(label);
        let capturing = self.stream(s)?.capture.is_some();
        if capturing || self.is_updating(s) {
            // A re-issued part takes the captured part's number when the update ends.
            let number = if capturing {
                self.coll.comms[comm].next_captured(rank, Peers::of(rank, call.op))
            } else {
                0
            };
            let op = Op {
                kind: OpKind::Collective(Arc::new(CollectivePart {
                    comm,
                    rank,
                    call: call.clone(),
                    send,
                    recv,
                    captured: number,
                })),
                label,
                stream: s,
            };
            if !capturing {
                return self.reissue(s, op);
            }
            return self.with_frontier(s, |cap, frontier| cap.add(op, frontier));
        }
        let host = self.dev().host_ns;
        self.submit_part(s, comm, rank, call.clone(), label, host, fails)?;
        self.pump()
    }

    /// Adds an eager part to its communicator's matcher and holds it back on stream `s`; a
    /// part that `fails` on the device is pending on `s` from now on, as a kernel that fails
    /// after its launch is.
    #[allow(clippy::too_many_arguments)]
    fn submit_part(
        &mut self,
        s: u32,
        comm: usize,
        rank: u32,
        call: CollectiveCall,
        label: Arc<str>,
        host_ns: u64,
        fails: bool,
    ) -> Result<(), HalError> {
        let op = call.op;
        let info = PartInfo {
            call,
            stream: s,
            label,
            node: None,
            fails,
        };
        let key = self.join_call(comm, rank, None, info)?;
        if fails {
            let what = failed_part(comm, &key, rank, op);
            tracing::debug!(comm, rank, call = %key, "this part will fail on the device (injected fault)");
            self.faults().fail_collective(s, what);
        }
        self.coll.backlog.push(s, host_ns, Held::Part { comm, key });
        Ok(())
    }

    /// Adds rank `rank`'s part `info` (of a replay of captured call `replay_of`, or eager) to
    /// communicator `comm`'s matcher; returns the key of its call. A part that does not match
    /// is [`HalError::CollectiveMismatch`].
    pub(crate) fn join_call(
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
        let me = thread::current().id();
        let threads = drivers.ranks.entry(rank).or_default();
        if !threads.contains(&me) {
            threads.push(me);
        }
        Ok(key)
    }

    /// Whether call `key` of `comm` can run: every part is in and ready.
    pub(crate) fn call_ready(&self, comm: usize, key: &CallKey) -> bool {
        self.call_ready_at(comm, key).is_some()
    }

    /// When call `key` of `comm` is ready (the latest of its parts' ready times), if every
    /// part is in and ready ([`Engine::part_ready`]).
    pub(crate) fn call_ready_at(&self, comm: usize, key: &CallKey) -> Option<u64> {
        let parts = self.coll.comms.get(comm)?.ready.get(key)?;
        parts
            .iter()
            .try_fold(0, |t, p| Some(t.max(self.part_ready(comm, key, p)?)))
    }
}

/// What reports rank `rank`'s part of call `key` (an `op`) of communicator `comm` that failed
/// on the device: its stream's error and the communicator's asynchronous error.
pub(super) fn failed_part(comm: usize, key: &CallKey, rank: u32, op: CollectiveOp) -> String {
    format!(
        "collective {op}, {key} of communicator {comm}: rank {rank}'s part failed on the \
         device (injected fault); its receive buffer was left untouched"
    )
}
