//! Fault injection: make any backend call of a simulated device fail on demand.
//!
//! A [`FaultPlan`] says which calls fail: the `n`-th call of a [`CallKind`]
//! ([`FaultPlan::fail_nth`]), or each call of some kinds with a probability drawn from a
//! seeded generator ([`FaultPlan::rate`]), so a failing run replays exactly. It is set with
//! the configuration ([`crate::SimConfig::faults`]) or at run time
//! ([`crate::SimDevice::set_fault_plan`]); [`crate::SimDevice::fault_counts`] tells how many
//! calls of each kind were seen and failed.
//!
//! Every hal entry point asks the plan once, before doing anything: an injected failure has
//! no effect at all (no host time, no work, no memory), with one exception taken from the
//! real runtimes: a failed end of capture ends the capture all the same and discards it (as
//! `cudaStreamEndCapture` does with an invalidated capture), so no stream is left capturing.
//! A run of pages (`map_physical_pages`, `unmap_physical_pages`) counts as one call per
//! page, as the hal defines it, and stops at the failing page with the pages before it done.
//!
//! Failures come back as the runtime would give them. The simulator models an Ascend device,
//! so the errors other than out of memory are ACL's (`reference/acl-runtime.md` §1.3), as
//! [`HalError::Native`]; `braid-acl-sim` passes their codes through unchanged:
//!
//! | kind | error |
//! |---|---|
//! | [`CallKind::SegmentAlloc`], [`CallKind::Map`], [`CallKind::HostAlloc`] | [`HalError::OutOfMemory`] |
//! | [`CallKind::StreamCreate`] | 207008 `ACL_ERROR_RT_NO_STREAM_RESOURCE` |
//! | [`CallKind::EventCreate`] | 207007 `ACL_ERROR_RT_NO_EVENT_RESOURCE` |
//! | [`CallKind::Launch`], [`CallKind::Copy`], [`CallKind::Collective`], [`CallKind::Record`], [`CallKind::Wait`], [`CallKind::BeginCapture`], [`CallKind::Unmap`] | 507000 `ACL_ERROR_RT_INTERNAL_ERROR` |
//! | [`CallKind::Synchronize`], [`CallKind::Query`] | 507046 `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` |
//! | [`CallKind::EndCapture`] | 507903 `ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED` |
//! | [`CallKind::GraphLaunch`] | 507011 `ACL_ERROR_RT_MODEL_EXECUTE` |
//!
//! **Asynchronous errors.** A kernel can also fail on the device after its launch succeeded
//! ([`FaultPlan::fail_async_nth`], [`FaultPlan::async_rate`]): the launch returns `Ok`, the
//! kernel runs as usual, and the error (507015 `ACL_ERROR_RT_AICORE_EXCEPTION`) is reported
//! once, by the first of: the stream's next synchronize or query, the synchronize or query of
//! an event recorded on the stream after the launch, or a device synchronize (which reports
//! every pending error at once). A synchronize that reports it has still waited for the work.
//! Launches into a capture never fail asynchronously (their kernels run at replay).
//!
//! **Collective parts failing on the device.** A rank's part of a collective can fail the
//! same way ([`FaultPlan::fail_collective_async_nth`], [`FaultPlan::collective_async_rate`],
//! counting [`CallKind::Collective`] calls of the part's stream's device): the call returns
//! `Ok`, takes its call number and matches the other ranks' parts as usual, and when the call
//! runs the other ranks complete as if it had succeeded (the failed rank's send buffer is
//! read) while **the failed rank's receive buffer is left untouched** (it keeps what it held
//! before; the sanitizer marks those bytes unwritten, so a later read of them is reported).
//! The failure is reported twice, as HCCL reports a collective task that fails on the
//! device:
//! - on the part's stream, once the call has run (before, a query of the stream is only not
//!   done), by the same observers as a kernel's (the stream's next synchronize or query, an
//!   event recorded on it after the part, a device synchronize), as 507000 `ACL_ERROR_RT_INTERNAL_ERROR` (the reference lists no
//!   code of its own for a failed communication task) whose message names the operation, the
//!   call, the communicator and the rank;
//! - as the communicator's asynchronous error ([`crate::SimComm::async_error`],
//!   `HcclGetCommAsyncError` through `braid-acl-sim`, where it is `HCCL_E_RUNTIME`), the same
//!   error, kept from when the call runs, unless the communicator already has one (the first
//!   is kept for its life).
//!
//! The communicator and its streams stay usable: later calls run and compute as usual. Parts
//! captured into a graph (or re-issued into a task group) and parts on a communicator
//! spanning processes never fail asynchronously (a rule that would fire lets them pass and
//! counts nothing).
//!
//! A user operator whose host body fails ([`crate::host_op`]) is reported the same way, with
//! the same code, by the same observers, whether or not a plan is set: the message names the
//! operator and why its body failed. A graph node that fails is reported on the stream the
//! graph was launched on. These failures are not counted in [`FaultCounts`] (nothing was
//! injected); [`crate::SimStats::failed_ops`] counts them.
//!
//! With no plan set, the check at each entry point is one predictable branch.

mod pending;

use crate::limits::native;
use braid_stream_core::hal::HalError;
use pending::Pending;
use std::fmt;

/// ACL's code for a kernel that failed on the device (reported asynchronously).
pub const ACL_ERROR_RT_AICORE_EXCEPTION: i32 = 507_015;

/// ACL's code for a collective part that failed on the device (reported asynchronously):
/// `ACL_ERROR_RT_INTERNAL_ERROR`, the runtime's generic device-side failure (the reference
/// lists no code of its own for a failed communication task).
pub const ACL_ERROR_RT_INTERNAL_ERROR: i32 = 507_000;

/// A kind of backend call a [`FaultPlan`] can make fail.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum CallKind {
    /// `Device::alloc` and `SimDevice::alloc_physical`: a segment of device memory.
    SegmentAlloc,
    /// `Device::map_physical`, each page of `map_physical_pages`, `SimDevice::map_handle`.
    Map,
    /// `Device::unmap_physical`, each page of `unmap_physical_pages`, `SimDevice::unmap`.
    Unmap,
    /// `Stream::launch`: a kernel launch.
    Launch,
    /// `Stream::memcpy_*` and `Stream::memset`.
    Copy,
    /// `SimBackend::launch_collective`: a rank's part of a collective. A failed part is not added to
    /// its call (it takes no call number, holds nothing back), so the rank may submit it
    /// again and the other ranks' parts still pair with it.
    Collective,
    /// `Stream::record`: an event record.
    Record,
    /// `Stream::wait`: a wait on an event.
    Wait,
    /// Host synchronization: `Stream::synchronize`, `Event::synchronize`,
    /// `Device::synchronize`.
    Synchronize,
    /// `Stream::query`, `Event::query`.
    Query,
    /// `Stream::begin_capture`.
    BeginCapture,
    /// `Stream::end_capture`.
    EndCapture,
    /// `Graph::launch`: a graph replay.
    GraphLaunch,
    /// `Device::alloc_host`: pinned host memory.
    HostAlloc,
    /// `Device::create_event`.
    EventCreate,
    /// `Device::create_stream`.
    StreamCreate,
}

impl CallKind {
    /// Every kind, in declaration order.
    pub const ALL: [CallKind; 16] = [
        CallKind::SegmentAlloc,
        CallKind::Map,
        CallKind::Unmap,
        CallKind::Launch,
        CallKind::Copy,
        CallKind::Collective,
        CallKind::Record,
        CallKind::Wait,
        CallKind::Synchronize,
        CallKind::Query,
        CallKind::BeginCapture,
        CallKind::EndCapture,
        CallKind::GraphLaunch,
        CallKind::HostAlloc,
        CallKind::EventCreate,
        CallKind::StreamCreate,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn bit(self) -> u32 {
        1 << self.index()
    }

    /// The error an injected failure of this kind gives (out of memory: `requested` bytes of
    /// which `free` of `total` are free).
    fn error(self, requested: u64, free: u64, total: u64) -> HalError {
        const INTERNAL: (i32, &str) = (ACL_ERROR_RT_INTERNAL_ERROR, "ACL_ERROR_RT_INTERNAL_ERROR");
        let (code, name) = match self {
            CallKind::SegmentAlloc | CallKind::Map | CallKind::HostAlloc => {
                return HalError::OutOfMemory {
                    requested,
                    free,
                    total,
                }
            }
            CallKind::StreamCreate => (207_008, "ACL_ERROR_RT_NO_STREAM_RESOURCE"),
            CallKind::EventCreate => (207_007, "ACL_ERROR_RT_NO_EVENT_RESOURCE"),
            CallKind::Synchronize | CallKind::Query => {
                (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT")
            }
            CallKind::EndCapture => (507_903, "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED"),
            CallKind::GraphLaunch => (507_011, "ACL_ERROR_RT_MODEL_EXECUTE"),
            CallKind::Launch
            | CallKind::Copy
            | CallKind::Collective
            | CallKind::Record
            | CallKind::Wait
            | CallKind::BeginCapture
            | CallKind::Unmap => INTERNAL,
        };
        native(code, name, format!("injected fault ({self:?})"))
    }
}

/// What makes a rule fire.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Trigger {
    /// The `n`-th call (from 1) of a kind since the plan was set.
    Nth(u64),
    /// Each call, when a draw of the generator seeded with `seed` is below `threshold`.
    Rate { seed: u64, threshold: u64 },
}

/// One line of a plan.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Rule {
    /// The kinds it applies to, one bit per [`CallKind`].
    kinds: u32,
    trigger: Trigger,
    /// Whether the failure is reported later (a kernel or collective part that fails on the
    /// device after its call succeeded).
    later: bool,
}

/// Which backend calls of a simulated device fail. Built with chained calls; an empty plan
/// injects nothing.
///
/// ```
/// use braid_backend_sim::{CallKind, FaultPlan, SimConfig, SimDevice};
/// use braid_stream_core::hal::{Device as _, HalError};
///
/// let plan = FaultPlan::new()
///     .fail_nth(CallKind::SegmentAlloc, 2)
///     .rate(7, 0.01, [CallKind::Launch, CallKind::Record]);
/// let dev = SimDevice::new(SimConfig::new().faults(plan));
/// let first = dev.alloc(1 << 20).unwrap();
/// assert!(matches!(dev.alloc(1 << 20), Err(HalError::OutOfMemory { .. })));
/// assert_eq!(dev.fault_counts().injected(CallKind::SegmentAlloc), 1);
/// // The failed call had no effect: one segment is allocated.
/// assert_eq!(dev.stats().allocations, 1);
/// # let _ = first;
/// ```
#[derive(Clone, PartialEq, Debug, Default)]
pub struct FaultPlan {
    rules: Vec<Rule>,
}

/// The generator threshold for probability `p` (clamped to `[0, 1]`, NaN as 0).
fn threshold(p: f64) -> u64 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        u64::MAX
    } else {
        (p * u64::MAX as f64) as u64
    }
}

impl FaultPlan {
    /// A plan that injects nothing.
    pub fn new() -> Self {
        FaultPlan::default()
    }

    /// Whether the plan injects nothing.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The `n`-th call (counting from 1, from when the plan is set) of `kind` fails. `n = 0`
    /// never fires.
    pub fn fail_nth(mut self, kind: CallKind, n: u64) -> Self {
        self.rules.push(Rule {
            kinds: kind.bit(),
            trigger: Trigger::Nth(n),
            later: false,
        });
        self
    }

    /// Each call of one of `kinds` fails with probability `p` (clamped to `[0, 1]`), drawn
    /// from a generator seeded with `seed`: the same plan and program fail the same calls.
    pub fn rate(mut self, seed: u64, p: f64, kinds: impl IntoIterator<Item = CallKind>) -> Self {
        self.rules.push(Rule {
            kinds: kinds.into_iter().fold(0, |bits, k| bits | k.bit()),
            trigger: Trigger::Rate {
                seed,
                threshold: threshold(p),
            },
            later: false,
        });
        self
    }

    /// The `n`-th kernel launch (from 1) succeeds but its kernel fails on the device: the
    /// error surfaces later (see the [module docs](self)).
    pub fn fail_async_nth(mut self, n: u64) -> Self {
        self.rules.push(Rule {
            kinds: CallKind::Launch.bit(),
            trigger: Trigger::Nth(n),
            later: true,
        });
        self
    }

    /// Each kernel launch fails asynchronously with probability `p`, drawn from a generator
    /// seeded with `seed`.
    pub fn async_rate(mut self, seed: u64, p: f64) -> Self {
        self.rules.push(Rule {
            kinds: CallKind::Launch.bit(),
            trigger: Trigger::Rate {
                seed,
                threshold: threshold(p),
            },
            later: true,
        });
        self
    }

    /// The `n`-th collective part (from 1; a [`CallKind::Collective`] call) succeeds but
    /// fails on the device: the call runs with the other ranks, this rank's receive buffer is
    /// left untouched, and the error surfaces later on the part's stream and as the
    /// communicator's asynchronous error (see the [module docs](self)).
    pub fn fail_collective_async_nth(mut self, n: u64) -> Self {
        self.rules.push(Rule {
            kinds: CallKind::Collective.bit(),
            trigger: Trigger::Nth(n),
            later: true,
        });
        self
    }

    /// Each collective part fails asynchronously with probability `p`, drawn from a generator
    /// seeded with `seed` (as [`FaultPlan::fail_collective_async_nth`]).
    pub fn collective_async_rate(mut self, seed: u64, p: f64) -> Self {
        self.rules.push(Rule {
            kinds: CallKind::Collective.bit(),
            trigger: Trigger::Rate {
                seed,
                threshold: threshold(p),
            },
            later: true,
        });
        self
    }
}

/// How many calls of each kind a device saw and made fail (since it was created; setting a
/// new plan does not reset them).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultCounts {
    calls: [u64; CallKind::ALL.len()],
    injected: [u64; CallKind::ALL.len()],
    async_injected: u64,
    async_reported: u64,
}

impl FaultCounts {
    /// Calls of `kind` seen while a plan was set.
    pub fn calls(&self, kind: CallKind) -> u64 {
        self.calls[kind.index()]
    }

    /// Calls of `kind` made to fail (synchronously).
    pub fn injected(&self, kind: CallKind) -> u64 {
        self.injected[kind.index()]
    }

    /// Calls made to fail synchronously, all kinds.
    pub fn total_injected(&self) -> u64 {
        self.injected.iter().sum()
    }

    /// Kernel launches and collective parts that failed asynchronously.
    pub fn async_injected(&self) -> u64 {
        self.async_injected
    }

    /// Asynchronous failures reported so far (each once).
    pub fn async_reported(&self) -> u64 {
        self.async_reported
    }
}

impl fmt::Debug for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for k in CallKind::ALL {
            if self.calls(k) > 0 {
                m.entry(&k, &(self.injected(k), self.calls(k)));
            }
        }
        m.entry(&"async", &(self.async_injected, self.async_reported));
        m.finish()
    }
}

/// What a [`crate::SimDevice`] knows about faults: its plan, counters and pending
/// asynchronous failures.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    /// The rules of the plan with, for each, its generator state (`None` when empty).
    rules: Option<Vec<(Rule, u64)>>,
    /// Calls per kind since the plan was set (for [`Trigger::Nth`]).
    since_plan: [u64; CallKind::ALL.len()],
    counts: FaultCounts,
    pending: Vec<Pending>,
}

/// SplitMix64: a small, good generator, enough for fault draws.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What the plan decided for one call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verdict {
    /// The call goes on.
    Pass,
    /// The call fails now, without effect.
    Fail,
    /// The call succeeds; its work fails on the device (kernel launches and collective parts).
    FailLater,
}

impl FaultState {
    /// State with `plan` set.
    pub(crate) fn new(plan: &FaultPlan) -> Self {
        let mut state = FaultState::default();
        state.set_plan(plan);
        state
    }

    /// Replaces the plan; call counting for [`FaultPlan::fail_nth`] restarts.
    pub(crate) fn set_plan(&mut self, plan: &FaultPlan) {
        self.since_plan = Default::default();
        self.rules = (!plan.is_empty()).then(|| {
            plan.rules
                .iter()
                .map(|r| {
                    let seed = match r.trigger {
                        Trigger::Rate { seed, .. } => seed,
                        Trigger::Nth(_) => 0,
                    };
                    (*r, seed)
                })
                .collect()
        });
    }

    /// The counters.
    pub(crate) fn counts(&self) -> FaultCounts {
        self.counts
    }

    /// Whether a plan is set: the one branch every entry point pays without one.
    #[inline(always)]
    pub(crate) fn armed(&self) -> bool {
        self.rules.is_some()
    }

    /// Decides the fate of one call of `kind` (a plan is set). `capturing`: the call submits
    /// into a capture, or cannot fail later for another reason (no asynchronous failure then).
    #[cold]
    #[inline(never)]
    pub(crate) fn decide(&mut self, kind: CallKind, capturing: bool) -> Verdict {
        let Some(rules) = self.rules.as_mut() else {
            return Verdict::Pass;
        };
        let i = kind.index();
        self.since_plan[i] += 1;
        self.counts.calls[i] += 1;
        let nth = self.since_plan[i];
        let mut verdict = Verdict::Pass;
        for (rule, rng) in rules.iter_mut() {
            if rule.kinds & kind.bit() == 0 {
                continue;
            }
            // Every rate rule draws for every call it covers, so one rule's draws do not
            // depend on whether another fired.
            let fires = match rule.trigger {
                Trigger::Nth(n) => n == nth,
                Trigger::Rate { threshold, .. } => next(rng) < threshold,
            };
            if !fires || verdict != Verdict::Pass {
                continue;
            }
            verdict = match (rule.later, capturing) {
                (false, _) => Verdict::Fail,
                (true, false) => Verdict::FailLater,
                (true, true) => Verdict::Pass,
            };
        }
        match verdict {
            Verdict::Fail => self.counts.injected[i] += 1,
            Verdict::FailLater => self.counts.async_injected += 1,
            Verdict::Pass => {}
        }
        verdict
    }

    /// The error of an injected failure of `kind` (see [`CallKind`]'s table in the module
    /// docs); `requested`, `free`, `total`: for out of memory.
    pub(crate) fn error(kind: CallKind, requested: u64, free: u64, total: u64) -> HalError {
        kind.error(requested, free, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_fires_once_and_counts() {
        let mut f = FaultState::new(&FaultPlan::new().fail_nth(CallKind::Launch, 3));
        let verdicts: Vec<_> = (0..5).map(|_| f.decide(CallKind::Launch, false)).collect();
        assert_eq!(verdicts[2], Verdict::Fail);
        assert_eq!(verdicts.iter().filter(|v| **v != Verdict::Pass).count(), 1);
        assert_eq!(f.decide(CallKind::Record, false), Verdict::Pass);
        assert_eq!(f.counts().calls(CallKind::Launch), 5);
        assert_eq!(f.counts().injected(CallKind::Launch), 1);
        assert_eq!(f.counts().total_injected(), 1);
    }

    #[test]
    fn rates_are_deterministic_and_near_their_probability() {
        let run = |seed| {
            let mut f = FaultState::new(&FaultPlan::new().rate(seed, 0.1, [CallKind::Wait]));
            (0..10_000)
                .map(|_| f.decide(CallKind::Wait, false) == Verdict::Fail)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
        let hits = run(5).iter().filter(|h| **h).count();
        assert!((800..1200).contains(&hits), "{hits}");
        assert_eq!(threshold(f64::NAN), 0);
        assert_eq!(threshold(2.0), u64::MAX);
    }

    #[test]
    fn an_empty_plan_disarms() {
        let mut f = FaultState::new(&FaultPlan::new().fail_nth(CallKind::Map, 1));
        assert!(f.armed());
        f.set_plan(&FaultPlan::new());
        assert!(!f.armed());
    }
}
