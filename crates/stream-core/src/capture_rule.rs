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
//! | capturing | any, on an *external* event | a wait node ([`WaitOutcome::WaitNode`]) |
//!
//! External events ([`crate::EventFlags::EXTERNAL`], CUDA's external event record and wait
//! nodes, CANN's `ACL_EVENT_RECORD_EXTERNAL` / `ACL_EVENT_WAIT_EXTERNAL`) are the explicit
//! opt-in for ordering graphs captured separately: recorded on a capturing stream, an external
//! event becomes a record node ([`capture_record`]), which counts as recorded only when the
//! graph is launched; waited on from a capturing stream, it becomes a wait node, which at each
//! launch waits for the event's last record made eagerly or by a launched graph. So the site of
//! an external event is never a capture, and eager waits on it follow the rows above.

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
    /// The capturing stream's graph gets a wait node on the external event: each launch waits
    /// for the event's last launched (or eager) record.
    WaitNode,
}

/// Applies the rule: `waiter` is the capture the waiting stream belongs to (`None` when eager),
/// `external` whether the event is an external one.
pub fn capture_wait<C: PartialEq>(
    waiter: Option<C>,
    site: RecordSite<C>,
    external: bool,
) -> Result<WaitOutcome, WaitRefusal> {
    match (waiter, site) {
        (Some(_), _) if external => Ok(WaitOutcome::WaitNode),
        (_, RecordSite::Never) => Ok(WaitOutcome::Nothing),
        (None, RecordSite::Eager) => Ok(WaitOutcome::Ordered),
        (None, RecordSite::Capture { live: true, .. }) => Ok(WaitOutcome::Joins),
        (None, RecordSite::Capture { live: false, .. }) => Err(WaitRefusal::RecordedInEndedCapture),
        (Some(c), RecordSite::Capture { id, .. }) if c == id => Ok(WaitOutcome::Ordered),
        (Some(_), RecordSite::Capture { .. }) => Err(WaitRefusal::RecordedInOtherCapture),
        (Some(_), RecordSite::Eager) => Err(WaitRefusal::RecordedOutsideCapture),
    }
}

/// What a record does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RecordOutcome {
    /// The event is recorded now (eagerly, or inside the capture for the capture's own waits).
    Recorded,
    /// The capturing stream's graph gets a record node: the event counts as recorded when the
    /// graph is launched, not now.
    RecordNode,
}

/// Applies the rule to a record on a stream that is `capturing` or not, of an event that is
/// `external` or not.
pub fn capture_record(capturing: bool, external: bool) -> RecordOutcome {
    if capturing && external {
        RecordOutcome::RecordNode
    } else {
        RecordOutcome::Recorded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds() {
        let live = |id| RecordSite::Capture { id, live: true };
        assert_eq!(
            capture_wait::<u8>(None, RecordSite::Never, false),
            Ok(WaitOutcome::Nothing)
        );
        assert_eq!(
            capture_wait(Some(1), RecordSite::Never, false),
            Ok(WaitOutcome::Nothing)
        );
        assert_eq!(
            capture_wait::<u8>(None, RecordSite::Eager, false),
            Ok(WaitOutcome::Ordered)
        );
        assert_eq!(capture_wait(None, live(1), false), Ok(WaitOutcome::Joins));
        assert_eq!(
            capture_wait(None, RecordSite::Capture { id: 1, live: false }, false),
            Err(WaitRefusal::RecordedInEndedCapture)
        );
        assert_eq!(
            capture_wait(Some(1), live(1), false),
            Ok(WaitOutcome::Ordered)
        );
        assert_eq!(
            capture_wait(Some(1), live(2), false),
            Err(WaitRefusal::RecordedInOtherCapture)
        );
        assert_eq!(
            capture_wait(Some(1), RecordSite::Eager, false),
            Err(WaitRefusal::RecordedOutsideCapture)
        );
    }

    #[test]
    fn external_events_become_record_and_wait_nodes_inside_captures() {
        for site in [RecordSite::Never, RecordSite::Eager] {
            assert_eq!(capture_wait(Some(1), site, true), Ok(WaitOutcome::WaitNode));
        }
        assert_eq!(
            capture_wait::<u8>(None, RecordSite::Eager, true),
            Ok(WaitOutcome::Ordered)
        );
        assert_eq!(
            capture_wait::<u8>(None, RecordSite::Never, true),
            Ok(WaitOutcome::Nothing)
        );
        assert_eq!(capture_record(true, true), RecordOutcome::RecordNode);
        assert_eq!(capture_record(true, false), RecordOutcome::Recorded);
        assert_eq!(capture_record(false, true), RecordOutcome::Recorded);
    }
}
