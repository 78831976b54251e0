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
//! An operator that fails (a user operator's host body that panics, a tensor operator reading
//! outside live memory or finding an index out of range) writes nothing; the queue keeps it as
//! a [`FailedOp`] for the engine to report ([`DataQueue::take_failures`]).
//!
//! A kernel that computes, or a user operator's body, leaves a [`JobCell`] at its start
//! ([`crate::job`]); its end action
//! waits for the cell's result. A drain meeting an end whose kernel is not computed yet stops
//! there ([`Drained::Stalled`]): the caller computes it with the engine lock released and
//! drains again. [`DataQueue::drain_all`] computes it in place instead, for the calls that
//! must see every effect before they go on.
//!
//! A drain meeting the end of a kernel no thread has taken yet first makes its outputs
//! ranges of device memory where it can ([`JobCell::place`]): whoever computes it then
//! writes them in place. Until that kernel's end is applied, nothing touching those ranges
//! is. An action queued meanwhile at an earlier time by another device (whose host clock
//! lags) is applied in its turn if it touches none of them (so that device is not held up
//! by the computing); one that does touch them, or that has ranges the queue does not know
//! (a collective's data effect), waits for the kernel's end and sees its outputs, as it sees
//! any effect applied by a device's further clock.

use crate::buffers::BufferPool;
use crate::compute::{self, Begun, PendingWrite};
use crate::job::JobCell;
use crate::memory::{DataView, Memory};
use crate::op::OpKind;
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::DeviceSlice;
use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// The end of a kernel computed outside the drain: its outputs are the cell's result.
    EndJob {
        cell: Arc<JobCell>,
        device: usize,
        start: u64,
        /// The stream a failure is reported on, with the op (to name it).
        report: Option<(u32, OpKind)>,
    },
}

/// How far a drain got.
#[derive(Debug)]
pub(crate) enum Drained {
    /// Every action due was applied.
    All,
    /// It stopped at the end of a kernel not computed yet: compute it (or wait for the thread
    /// computing it) and drain again.
    Stalled(Arc<JobCell>),
}

/// An operator that failed on the device: it wrote nothing.
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
    /// The kernels whose end is pending, in start order: the ones no thread computes yet
    /// are there for any thread to take ([`DataQueue::ready_job`]).
    jobs: Vec<Arc<JobCell>>,
    /// Where the last drain stopped, if it stalled: (time, end-before-start, sequence).
    stalled: Option<(u64, u8, u64)>,
    /// The end of a kernel writing its outputs in place ([`JobCell::place`]), not applied
    /// yet, with those outputs' ranges: it is applied before anything touching them.
    placed: Option<((u64, u8, u64), Vec<DeviceSlice>)>,
    /// The most threads a kernel computes on (at least 1).
    threads: usize,
    /// Buffers of stored outputs, for the next kernels' outputs.
    pool: BufferPool,
}

impl std::fmt::Debug for DataQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataQueue")
            .field("pending", &self.pending.len())
            .field("jobs", &self.jobs.len())
            .finish()
    }
}

impl DataQueue {
    /// Sets the most threads a kernel computes on.
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
    }

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

    /// Applies every action whose time is at or before `now`, in order, up to the end of a
    /// kernel not computed yet, where it stops ([`Drained::Stalled`]).
    #[inline]
    pub fn drain(&mut self, now: u64, mems: &mut [Memory]) -> Drained {
        // Inlined for this check: every host call drains, and in timing-only mode nothing is
        // ever queued.
        if self.pending.is_empty() {
            return Drained::All;
        }
        self.drain_pending(now, mems, false)
    }

    /// [`DataQueue::drain`] that computes a kernel not computed yet in place (waiting for the
    /// thread computing it, if one is), so that every action due is applied when it returns.
    pub fn drain_all(&mut self, now: u64, mems: &mut [Memory]) {
        if !self.pending.is_empty() {
            self.drain_pending(now, mems, true);
        }
    }

    /// The time up to which every effect is applied: before where the last drain stalled, or
    /// `u64::MAX` when it did not (what is due later is applied when it is due).
    pub fn frontier(&self) -> u64 {
        self.stalled.map_or(u64::MAX, |k| k.0.saturating_sub(1))
    }

    /// A kernel of device `device` no thread is computing yet, oldest first; with
    /// `deferred` false, only among those that cannot write in place at their end
    /// ([`JobCell::deferred`]).
    pub fn ready_job(&self, device: usize, deferred: bool) -> Option<Arc<JobCell>> {
        self.jobs
            .iter()
            .find(|c| c.device == device && (deferred || !c.deferred) && c.is_ready())
            .cloned()
    }

    /// [`DataQueue::drain`] of a non-empty queue; `all`: compute kernels in place.
    fn drain_pending(&mut self, now: u64, mems: &mut [Memory], all: bool) -> Drained {
        self.stalled = None;
        // A placed kernel's end goes first, whatever its time; while it computes, only what
        // stays clear of its outputs.
        if let Some(key) = self.placed.as_ref().map(|p| p.0) {
            match self.pending.remove(&key) {
                Some(action) => {
                    if let Some(stalled) = self.apply(key, action, mems, all) {
                        self.apply_clear_of_placed(now, mems);
                        self.stalled = Some(key);
                        return stalled;
                    }
                }
                None => self.placed = None,
            }
        }
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, action) = entry.remove_entry();
            if let Some(stalled) = self.apply(key, action, mems, all) {
                return stalled;
            }
        }
        Drained::All
    }

    /// While a placed kernel computes: applies the actions due by `now` and queued before its
    /// end (another device's, whose host clock lags) up to the first one that may touch its
    /// outputs, or that is a kernel's end.
    fn apply_clear_of_placed(&mut self, now: u64, mems: &mut [Memory]) {
        let Some((placed, ranges)) = self.placed.clone() else {
            return;
        };
        let clear = |s: DeviceSlice| ranges.iter().all(|r| !r.overlaps(&s));
        while let Some(entry) = self.pending.first_entry() {
            let key = *entry.key();
            if key >= placed || key.0 > now {
                break;
            }
            let apart = match entry.get() {
                Action::Start { op, .. } => {
                    let uses = op.accesses();
                    !matches!(op, OpKind::CollectiveEffect(_))
                        && uses.reads().chain(uses.writes()).all(clear)
                }
                Action::End(writes, _) => writes.iter().all(|w| w.device_range().is_none_or(clear)),
                Action::EndJob { .. } => false,
            };
            if !apart {
                break;
            }
            let (key, action) = entry.remove_entry();
            // A start or a stored end: it never stalls.
            let _ = self.apply(key, action, mems, false);
        }
    }

    /// Applies `action`, queued at `key`; `Some` where it is the end of a kernel not
    /// computed yet (`all`: only while another thread computes it), which stays queued.
    fn apply(
        &mut self,
        key: (u64, u8, u64),
        action: Action,
        mems: &mut [Memory],
        all: bool,
    ) -> Option<Drained> {
        let (start, _, seq) = key;
        match action {
            Action::Start {
                op,
                end,
                device,
                report,
            } => match compute::begin(
                &op,
                &mut DataView::new(mems, device),
                self.threads,
                &mut self.pool,
            ) {
                Ok(Begun::Done(writes)) if writes.is_empty() => {}
                Ok(Begun::Done(writes)) => {
                    self.pending
                        .insert((end, END, seq), Action::End(writes, device));
                }
                Ok(Begun::Job(job)) => {
                    let cell = Arc::new(JobCell::new(*job, device));
                    self.jobs.push(cell.clone());
                    let action = Action::EndJob {
                        cell,
                        device,
                        start,
                        report: report.map(|stream| (stream, op)),
                    };
                    self.pending.insert((end, END, seq), action);
                }
                Err(message) => self.fail(&op, report, device, seq, start, end, message),
            },
            Action::End(writes, device) => {
                compute::finish(writes, &mut DataView::new(mems, device), &mut self.pool)
            }
            Action::EndJob {
                cell,
                device,
                start,
                report,
            } => {
                // Its end is the next effect: computed from now on, it writes in place.
                if self.placed.is_none() && cell.deferred {
                    let ranges = cell.place(&mut DataView::new(mems, device), &mut self.pool);
                    if !ranges.is_empty() {
                        self.placed = Some((key, ranges));
                    }
                }
                if all {
                    cell.run_or_wait();
                }
                let Some(result) = cell.take() else {
                    // Not computed yet: it stays, and so does everything after it.
                    self.pending.insert(
                        key,
                        Action::EndJob {
                            cell: cell.clone(),
                            device,
                            start,
                            report,
                        },
                    );
                    self.stalled = Some(key);
                    return Some(Drained::Stalled(cell));
                };
                if self.placed.as_ref().is_some_and(|p| p.0 == key) {
                    self.placed = None;
                }
                self.jobs.retain(|c| !Arc::ptr_eq(c, &cell));
                match result {
                    Ok(writes) => {
                        compute::finish(writes, &mut DataView::new(mems, device), &mut self.pool)
                    }
                    Err(failure) => {
                        if failure.body_panicked {
                            DataView::new(mems, device).note_failed_op();
                        }
                        if let Some((stream, op)) = report {
                            let message = failure.message;
                            self.fail(&op, Some(stream), device, seq, start, key.0, message);
                        }
                    }
                }
            }
        }
        None
    }

    /// Records `op` (queued `seq`-th, run from `start` to `end` on `device`) as failed with
    /// `message`, when it has a stream to report it on.
    #[allow(clippy::too_many_arguments)]
    fn fail(
        &mut self,
        op: &OpKind,
        report: Option<u32>,
        device: usize,
        seq: u64,
        start: u64,
        end: u64,
        message: String,
    ) {
        let failed = match op {
            OpKind::Custom(c) => Some((
                c.0.name.clone(),
                c.0.writes.clone(),
                format!(
                    "user operator `{}` failed on the device: its host body panicked ({message})",
                    c.0.name
                ),
            )),
            OpKind::Kernel(k) => Some((
                Arc::from(k.name()),
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
}
