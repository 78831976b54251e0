//! Pending data effects, applied in virtual-time order.
//!
//! Each op contributes a start action (read inputs, compute outputs) at its start time and an
//! end action (store outputs) at its end time. Actions are ordered by
//! `(time, end-before-start, sequence number)` and applied ("drained") once the host clock has
//! reached their time. Since new work never starts before the host time at its submission,
//! draining after every host-clock advance applies every effect exactly in virtual-time order.
//!
//! In a node of several devices there is one queue for all of them and each device has its
//! own host clock; the queue is drained up to the clock of the device making a call. Work a
//! device submits can then start before effects already applied by another device's further
//! clock: it sees them early. That only happens for work not ordered with those effects (a
//! race, which the sanitizer reports); ordered work always waits for what it depends on.
//!
//! A user operator whose host body fails at its start writes nothing; the queue keeps it as a
//! [`FailedOp`] for the engine to report ([`DataQueue::take_failures`]).

use crate::compute::{self, PendingWrite};
use crate::memory::{DataView, Memory};
use crate::op::OpKind;
use braid_stream_core::kernel::Kernel;
use std::collections::BTreeMap;

/// End actions sort before start actions at the same time: data written by an op ending at `t`
/// is visible to an op starting at `t`.
const END: u8 = 0;
const START: u8 = 1;

enum Action {
    Start {
        op: OpKind,
        end: u64,
        device: usize,
        /// The stream a failure of the op is reported on (`None`: it cannot fail).
        report: Option<u32>,
    },
    End(Vec<PendingWrite>, usize),
}

/// A user operator whose host body failed: it wrote nothing.
#[derive(Debug)]
pub(crate) struct FailedOp {
    /// Index of the device whose stream ran it.
    pub device: usize,
    /// The stream its failure is reported on (for a graph node, the launching stream).
    pub stream: u32,
    /// Its place among the queued ops: events recorded on `stream` at or after it report it.
    pub seq: u64,
    /// The operator's name.
    pub name: std::sync::Arc<str>,
    /// The ranges it should have written.
    pub writes: Vec<braid_stream_core::types::DeviceSlice>,
    /// Its start and end times.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// What failed and why, as the stream reports it.
    pub message: String,
}

/// The queue of pending data actions.
#[derive(Default)]
pub(crate) struct DataQueue {
    pending: BTreeMap<(u64, u8, u64), Action>,
    seq: u64,
    /// Operators that failed, not yet taken by the engine.
    failed: Vec<FailedOp>,
}

impl std::fmt::Debug for DataQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataQueue")
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl DataQueue {
    /// Queues the data effects of `op` of device `device` (an index into the node's
    /// memories), which runs from `start` to `end`.
    pub fn push(&mut self, start: u64, end: u64, op: OpKind, device: usize) {
        self.push_action(start, end, op, device, None);
    }

    /// [`DataQueue::push`] of an op run on stream `stream` (or by a graph launched on it),
    /// where a failure of the op is reported.
    pub fn push_on(&mut self, start: u64, end: u64, op: OpKind, device: usize, stream: u32) {
        let can_fail = match &op {
            OpKind::Custom(_) => true,
            OpKind::Kernel(k) => matches!(k.kernel, Kernel::Op(_)),
            _ => false,
        };
        let report = can_fail.then_some(stream);
        self.push_action(start, end, op, device, report);
    }

    fn push_action(
        &mut self,
        start: u64,
        end: u64,
        op: OpKind,
        device: usize,
        report: Option<u32>,
    ) {
        self.seq += 1;
        let action = Action::Start {
            op,
            end,
            device,
            report,
        };
        self.pending.insert((start, START, self.seq), action);
    }

    /// The number of ops queued so far: an op queued from now on has a larger
    /// [`FailedOp::seq`].
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether some op failed since the last [`DataQueue::take_failures`].
    #[inline]
    pub fn has_failures(&self) -> bool {
        !self.failed.is_empty()
    }

    /// The ops that failed since the last call, in the order they ran.
    pub fn take_failures(&mut self) -> Vec<FailedOp> {
        std::mem::take(&mut self.failed)
    }

    /// Whether some action is due at or before `t` (a drain up to `t` would apply it).
    pub fn due_by(&self, t: u64) -> bool {
        self.pending
            .first_key_value()
            .is_some_and(|(k, _)| k.0 <= t)
    }

    /// Applies every action whose time is at or before `now`, in order.
    #[inline]
    pub fn drain(&mut self, now: u64, mems: &mut [Memory]) {
        // Inlined for this check: every host call drains, and in timing-only mode nothing is
        // ever queued.
        if !self.pending.is_empty() {
            self.drain_pending(now, mems);
        }
    }

    /// [`DataQueue::drain`] of a non-empty queue.
    fn drain_pending(&mut self, now: u64, mems: &mut [Memory]) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((start, _, seq), action) = entry.remove_entry();
            match action {
                Action::Start {
                    op,
                    end,
                    device,
                    report,
                } => match compute::begin(&op, &mut DataView::new(mems, device)) {
                    Ok(writes) if writes.is_empty() => {}
                    Ok(writes) => {
                        self.pending
                            .insert((end, END, seq), Action::End(writes, device));
                    }
                    Err(message) => {
                        let failed = match &op {
                            OpKind::Custom(c) => Some((
                                c.0.name.clone(),
                                c.0.writes.clone(),
                                format!(
                                    "user operator `{}` failed on the device: its host body panicked ({message})",
                                    c.0.name
                                ),
                            )),
                            OpKind::Kernel(k) => Some((
                                std::sync::Arc::from(k.name()),
                                k.writes().collect(),
                                format!("kernel `{}` failed on the device: {message}", k.name()),
                            )),
                            _ => None,
                        };
                        if let (Some((name, writes, message)), Some(stream)) = (failed, report) {
                            self.failed.push(FailedOp {
                                device,
                                stream,
                                seq,
                                name,
                                writes,
                                start_ns: start,
                                end_ns: end,
                                message,
                            });
                        }
                    }
                },
                Action::End(writes, device) => {
                    compute::finish(writes, &mut DataView::new(mems, device))
                }
            }
        }
    }
}
