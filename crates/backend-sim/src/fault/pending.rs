//! Failures on the device not reported yet: kernels and collective parts a plan made fail
//! after their call succeeded, and user operators whose body failed. Each waits on its stream
//! for the first observer that reports it (see the [parent module](super)).

use super::{FaultState, ACL_ERROR_RT_AICORE_EXCEPTION, ACL_ERROR_RT_INTERNAL_ERROR};
use crate::limits::native;
use braid_stream_core::hal::HalError;

/// What failed on the device.
#[derive(Debug)]
enum Cause {
    /// A kernel whose launch a plan made fail later.
    Kernel,
    /// A user operator whose body failed (not injected): what failed and why.
    Operator(String),
    /// A collective part a plan made fail later: which call, communicator and rank, and
    /// whether its call has run (only then is the failure reported).
    Collective { what: String, ran: bool },
}

/// An asynchronous failure not reported yet.
#[derive(Debug)]
pub(super) struct Pending {
    /// The stream whose work failed.
    stream: u32,
    /// Events recorded on that stream after the failure (and not recorded elsewhere since).
    events: Vec<usize>,
    cause: Cause,
}

impl Pending {
    /// Whether the failure may be reported now: a collective part's once its call has run.
    fn known(&self) -> bool {
        !matches!(self.cause, Cause::Collective { ran: false, .. })
    }
}

impl FaultState {
    /// A kernel on stream `s` failed on the device: reported later.
    pub(crate) fn fail_later(&mut self, s: u32) {
        self.pending.push(Pending {
            stream: s,
            events: Vec::new(),
            cause: Cause::Kernel,
        });
    }

    /// A collective part submitted on stream `s` fails on the device (`what` names its call,
    /// communicator and rank): reported later, once its call has run
    /// ([`FaultState::collective_ran`]).
    pub(crate) fn fail_collective(&mut self, s: u32, what: String) {
        self.pending.push(Pending {
            stream: s,
            events: Vec::new(),
            cause: Cause::Collective { what, ran: false },
        });
    }

    /// The call of the failing part on stream `s` that `what` names has run: its failure may
    /// be reported from now on.
    pub(crate) fn collective_ran(&mut self, s: u32, what: &str) {
        for p in &mut self.pending {
            if let Cause::Collective { what: w, ran } = &mut p.cause {
                if p.stream == s && w == what {
                    *ran = true;
                }
            }
        }
    }

    /// A user operator on stream `s` failed on the device (`what` says which and why): reported
    /// later, also by `events`, recorded on `s` after the operator's launch.
    pub(crate) fn fail_op(&mut self, s: u32, events: Vec<usize>, what: String) {
        self.pending.push(Pending {
            stream: s,
            events,
            cause: Cause::Operator(what),
        });
    }

    /// Event `e` was recorded on stream `s`: it reports the failures pending on `s`, and no
    /// longer those of its earlier records.
    #[inline]
    pub(crate) fn recorded(&mut self, s: u32, e: usize) {
        if !self.pending.is_empty() {
            for p in &mut self.pending {
                p.events.retain(|&x| x != e);
                if p.stream == s {
                    p.events.push(e);
                }
            }
        }
    }

    /// The failure pending on stream `s`, reported now (once).
    #[inline]
    pub(crate) fn take_stream(&mut self, s: u32) -> Result<(), HalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.take(|p| p.stream == s && p.known())
    }

    /// The failure an event `e` recorded after it reports, now (once).
    #[inline]
    pub(crate) fn take_event(&mut self, e: usize) -> Result<(), HalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.take(|p| p.events.contains(&e) && p.known())
    }

    /// Every pending failure, reported now as one error (a device synchronize).
    #[inline]
    pub(crate) fn take_all(&mut self) -> Result<(), HalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (known, later) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition::<Vec<_>, _>(Pending::known);
        self.pending = later;
        if known.is_empty() {
            return Ok(());
        }
        Err(self.report(&known))
    }

    fn take(&mut self, matches: impl Fn(&Pending) -> bool) -> Result<(), HalError> {
        let Some(i) = self.pending.iter().position(matches) else {
            return Ok(());
        };
        let p = self.pending.remove(i);
        Err(self.report(std::slice::from_ref(&p)))
    }

    /// The error that reports `failures` (counted as reported), at least one: with the code
    /// of the first (a kernel's or operator's 507015, a collective part's 507000).
    fn report(&mut self, failures: &[Pending]) -> HalError {
        let kernels = failures
            .iter()
            .filter(|p| matches!(p.cause, Cause::Kernel))
            .count() as u64;
        let collectives = failures
            .iter()
            .filter(|p| matches!(p.cause, Cause::Collective { .. }))
            .count() as u64;
        self.counts.async_reported += kernels + collectives;
        let mut parts: Vec<String> = failures
            .iter()
            .filter_map(|p| match &p.cause {
                Cause::Operator(what) | Cause::Collective { what, .. } => Some(what.clone()),
                Cause::Kernel => None,
            })
            .collect();
        if kernels > 0 {
            parts.push(format!(
                "{kernels} kernel(s) failed on the device after launch (injected fault)"
            ));
        }
        let (code, name) = match failures.first().map(|p| &p.cause) {
            Some(Cause::Collective { .. }) => {
                (ACL_ERROR_RT_INTERNAL_ERROR, "ACL_ERROR_RT_INTERNAL_ERROR")
            }
            _ => (
                ACL_ERROR_RT_AICORE_EXCEPTION,
                "ACL_ERROR_RT_AICORE_EXCEPTION",
            ),
        };
        native(code, name, parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CallKind, FaultPlan, Verdict};
    use super::*;

    #[test]
    fn async_failures_are_reported_once_by_the_first_observer() {
        let mut f = FaultState::new(&FaultPlan::new().fail_async_nth(1));
        assert_eq!(f.decide(CallKind::Launch, true), Verdict::Pass);
        f.set_plan(&FaultPlan::new().fail_async_nth(1));
        assert_eq!(f.decide(CallKind::Launch, false), Verdict::FailLater);
        f.fail_later(2);
        f.recorded(2, 7);
        f.recorded(3, 8);
        assert!(f.take_stream(3).is_ok());
        assert!(f.take_event(8).is_ok());
        let err = f.take_event(7).unwrap_err();
        assert!(
            matches!(err, HalError::Native { code: 507_015, .. }),
            "{err}"
        );
        assert!(f.take_stream(2).is_ok(), "reported once");
        f.fail_later(1);
        f.fail_later(2);
        assert!(f.take_all().is_err());
        assert!(f.take_all().is_ok());
        assert_eq!(f.counts().async_reported(), 3);
    }

    #[test]
    fn failed_operators_are_reported_with_their_text_and_not_counted_as_injected() {
        let mut f = FaultState::default();
        f.fail_op(1, vec![4], "user operator `a` failed".into());
        f.fail_later(2);
        f.fail_op(2, Vec::new(), "user operator `b` failed".into());
        let err = f.take_event(4).unwrap_err();
        assert!(err.to_string().contains("`a` failed"), "{err}");
        assert!(f.take_stream(1).is_ok(), "reported once");
        let err = f.take_all().unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("`b` failed") && text.contains("1 kernel(s) failed"),
            "{text}"
        );
        assert!(matches!(err, HalError::Native { code: 507_015, .. }));
        assert_eq!(f.counts().async_reported(), 1, "the injected one only");
    }

    #[test]
    fn collective_parts_fail_later_with_their_own_code_and_kernels_keep_theirs() {
        let plan = FaultPlan::new()
            .fail_collective_async_nth(2)
            .collective_async_rate(9, 0.0);
        let mut f = FaultState::new(&plan);
        assert_eq!(f.decide(CallKind::Launch, false), Verdict::Pass);
        assert_eq!(f.decide(CallKind::Collective, false), Verdict::Pass);
        assert_eq!(f.decide(CallKind::Collective, false), Verdict::FailLater);
        assert_eq!(f.counts().async_injected(), 1);
        assert_eq!(f.counts().injected(CallKind::Collective), 0);
        let mut always = FaultState::new(&FaultPlan::new().collective_async_rate(9, 1.0));
        assert_eq!(always.decide(CallKind::Collective, true), Verdict::Pass);
        assert_eq!(always.decide(CallKind::Launch, false), Verdict::Pass);
        let what = "call 1 of communicator 0: rank 1's part failed";
        f.fail_collective(3, what.into());
        f.recorded(3, 5);
        // Not reported before its call has run.
        assert!(f.take_event(5).is_ok() && f.take_stream(3).is_ok() && f.take_all().is_ok());
        f.collective_ran(3, "another call");
        assert!(f.take_stream(3).is_ok());
        f.collective_ran(3, what);
        let err = f.take_event(5).unwrap_err();
        assert!(
            matches!(err, HalError::Native { code: 507_000, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("rank 1's part failed"), "{err}");
        assert!(f.take_stream(3).is_ok(), "reported once");
        // A device synchronize reporting both gives the first one's code.
        f.fail_later(1);
        f.fail_collective(2, "call 2".into());
        f.collective_ran(2, "call 2");
        let err = f.take_all().unwrap_err();
        assert!(
            matches!(err, HalError::Native { code: 507_015, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("call 2"), "{err}");
        assert_eq!(f.counts().async_reported(), 3);
    }

    #[test]
    fn a_rerecorded_event_no_longer_reports() {
        let mut f = FaultState::default();
        f.fail_later(1);
        f.recorded(1, 4);
        f.recorded(2, 4);
        assert!(f.take_event(4).is_ok());
        assert!(f.take_stream(1).is_err());
    }
}
