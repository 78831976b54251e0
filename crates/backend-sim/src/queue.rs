//! Pending data effects, applied in virtual-time order.
//!
//! Each op contributes a start action (read inputs, compute outputs) at its start time and an
//! end action (store outputs) at its end time. Actions are ordered by
//! `(time, end-before-start, sequence number)` and applied ("drained") once the host clock has
//! reached their time. Since new work never starts before the host time at its submission,
//! draining after every host-clock advance applies every effect exactly in virtual-time order.

use crate::compute::{self, PendingWrite};
use crate::memory::Memory;
use crate::op::OpKind;
use std::collections::BTreeMap;

/// End actions sort before start actions at the same time: data written by an op ending at `t`
/// is visible to an op starting at `t`.
const END: u8 = 0;
const START: u8 = 1;

enum Action {
    Start { op: OpKind, end: u64 },
    End(Vec<PendingWrite>),
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
    /// Queues the data effects of `op`, which runs from `start` to `end`.
    pub fn push(&mut self, start: u64, end: u64, op: OpKind) {
        self.seq += 1;
        self.pending
            .insert((start, START, self.seq), Action::Start { op, end });
    }

    /// Whether some action is due at or before `t` (a drain up to `t` would apply it).
    pub fn due_by(&self, t: u64) -> bool {
        self.pending
            .first_key_value()
            .is_some_and(|(k, _)| k.0 <= t)
    }

    /// Applies every action whose time is at or before `now`, in order.
    #[inline]
    pub fn drain(&mut self, now: u64, mem: &mut Memory) {
        // Inlined for this check: every host call drains, and in timing-only mode nothing is
        // ever queued.
        if !self.pending.is_empty() {
            self.drain_pending(now, mem);
        }
    }

    /// [`DataQueue::drain`] of a non-empty queue.
    fn drain_pending(&mut self, now: u64, mem: &mut Memory) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, _, seq), action) = entry.remove_entry();
            match action {
                Action::Start { op, end } => {
                    let writes = compute::begin(&op, mem);
                    if !writes.is_empty() {
                        self.pending.insert((end, END, seq), Action::End(writes));
                    }
                }
                Action::End(writes) => compute::finish(writes, mem),
            }
        }
    }
}
