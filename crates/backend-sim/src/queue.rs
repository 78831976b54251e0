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

use crate::compute::{self, PendingWrite};
use crate::memory::{DataView, Memory};
use crate::op::OpKind;
use std::collections::BTreeMap;

/// End actions sort before start actions at the same time: data written by an op ending at `t`
/// is visible to an op starting at `t`.
const END: u8 = 0;
const START: u8 = 1;

enum Action {
    Start { op: OpKind, end: u64, device: usize },
    End(Vec<PendingWrite>, usize),
}

/// The queue of pending data actions.
#[derive(Default)]
pub(crate) struct DataQueue {
    pending: BTreeMap<(u64, u8, u64), Action>,
    seq: u64,
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
        self.seq += 1;
        self.pending
            .insert((start, START, self.seq), Action::Start { op, end, device });
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
            let ((_, _, seq), action) = entry.remove_entry();
            match action {
                Action::Start { op, end, device } => {
                    let writes = compute::begin(&op, &mut DataView::new(mems, device));
                    if !writes.is_empty() {
                        self.pending
                            .insert((end, END, seq), Action::End(writes, device));
                    }
                }
                Action::End(writes, device) => {
                    compute::finish(writes, &mut DataView::new(mems, device))
                }
            }
        }
    }
}
