//! The one rule of which event waits a capture refuses, shared by the front layer's model, the
//! simulator and (through the simulator's typed refusals) `braid-acl-sim`, so the three cannot
//! drift apart.
//!
//! | waiting stream | event last recorded | outcome |
//! |---|---|---|
//! | any | never | nothing to wait for |
//! | eager | eagerly | ordered |
//! | eager | in a live capture | the stream joins that capture |
//! | eager | in a capture that has ended | refused ([`WaitRefusal::RecordedInEndedCapture`]) |
//! | capturing | in the same capture | ordered inside the capture |
//! | capturing | in another capture | refused ([`WaitRefusal::RecordedInOtherCapture`]) |
//! | capturing | eagerly | refused ([`WaitRefusal::RecordedOutsideCapture`]: ACL's and CUDA's capture isolation) |

/// Why a wait was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitRefusal {
    /// The event was recorded outside the capture the waiting stream belongs to.
    RecordedOutsideCapture,
    /// The event was recorded inside a different capture.
    RecordedInOtherCapture,
    /// The event was recorded inside a capture that has ended.
    RecordedInEndedCapture,
}

impl WaitRefusal {
    /// Human-readable reason.
    pub fn reason(self) -> &'static str {
        match self {
            WaitRefusal::RecordedOutsideCapture => "recorded outside the capture it belongs to",
            WaitRefusal::RecordedInOtherCapture => "recorded inside a different capture",
            WaitRefusal::RecordedInEndedCapture => "recorded inside a capture that has ended",
        }
    }
}

/// Where an event was last recorded, as the rule needs it; `C` identifies a capture.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RecordSite<C> {
    /// Never recorded.
    Never,
    /// Recorded eagerly.
    Eager,
    /// Recorded inside capture `id`, which is still going on (`live`) or has ended.
    Capture {
        /// The capture.
        id: C,
        /// Whether it is still going on.
        live: bool,
    },
}

/// What a wait the rule allows does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitOutcome {
    /// The event was never recorded: the wait orders nothing.
    Nothing,
    /// The waiting stream is ordered after the record (eagerly, or inside its capture).
    Ordered,
    /// The eager waiting stream joins the capture the event was recorded in.
    Joins,
}

/// Applies the rule: `waiter` is the capture the waiting stream belongs to (`None` when eager).
pub fn capture_wait<C: PartialEq>(
    waiter: Option<C>,
    site: RecordSite<C>,
) -> Result<WaitOutcome, WaitRefusal> {
    match (waiter, site) {
        (_, RecordSite::Never) => Ok(WaitOutcome::Nothing),
        (None, RecordSite::Eager) => Ok(WaitOutcome::Ordered),
        (None, RecordSite::Capture { live: true, .. }) => Ok(WaitOutcome::Joins),
        (None, RecordSite::Capture { live: false, .. }) => Err(WaitRefusal::RecordedInEndedCapture),
        (Some(c), RecordSite::Capture { id, .. }) if c == id => Ok(WaitOutcome::Ordered),
        (Some(_), RecordSite::Capture { .. }) => Err(WaitRefusal::RecordedInOtherCapture),
        (Some(_), RecordSite::Eager) => Err(WaitRefusal::RecordedOutsideCapture),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds() {
        let live = |id| RecordSite::Capture { id, live: true };
        assert_eq!(
            capture_wait::<u8>(None, RecordSite::Never),
            Ok(WaitOutcome::Nothing)
        );
        assert_eq!(
            capture_wait(Some(1), RecordSite::Never),
            Ok(WaitOutcome::Nothing)
        );
        assert_eq!(
            capture_wait::<u8>(None, RecordSite::Eager),
            Ok(WaitOutcome::Ordered)
        );
        assert_eq!(capture_wait(None, live(1)), Ok(WaitOutcome::Joins));
        assert_eq!(
            capture_wait(None, RecordSite::Capture { id: 1, live: false }),
            Err(WaitRefusal::RecordedInEndedCapture)
        );
        assert_eq!(capture_wait(Some(1), live(1)), Ok(WaitOutcome::Ordered));
        assert_eq!(
            capture_wait(Some(1), live(2)),
            Err(WaitRefusal::RecordedInOtherCapture)
        );
        assert_eq!(
            capture_wait(Some(1), RecordSite::Eager),
            Err(WaitRefusal::RecordedOutsideCapture)
        );
    }
}
