//! A point in time a wait ends at, taken from a timeout without overflowing the clock.
//!
//! `Instant::now() + timeout` panics when the timeout is too long to add to the clock, and
//! `Duration::MAX` is the natural way to say "wait for ever". A [`Deadline`] saturates: a
//! timeout that does not fit is no deadline at all, and every question asked of it (has it
//! passed, how long is left) has an answer.

use std::time::{Duration, Instant};

/// The end of a wait: an instant, or none (the timeout was too long to represent).
///
/// ```
/// use std::time::Duration;
/// use braid_stream_core::deadline::Deadline;
///
/// let forever = Deadline::after(Duration::MAX);
/// assert_eq!(forever.instant(), None);
/// assert!(!forever.has_passed());
/// assert_eq!(forever.left(), Duration::MAX);
/// let soon = Deadline::after(Duration::from_secs(1));
/// assert!(soon.left() <= Duration::from_secs(1));
/// assert_eq!(forever.min(soon), soon);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// `timeout` from now; none when `now + timeout` does not fit in an [`Instant`].
    pub fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(timeout))
    }

    /// The instant the wait ends at, or `None` for a wait without end.
    pub fn instant(self) -> Option<Instant> {
        self.0
    }

    /// Whether the deadline is behind us (never for a wait without end).
    pub fn has_passed(self) -> bool {
        self.0.is_some_and(|at| Instant::now() >= at)
    }

    /// The time left: zero once passed, `Duration::MAX` for a wait without end.
    pub fn left(self) -> Duration {
        self.0.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }

    /// The earlier of two deadlines.
    pub fn min(self, other: Deadline) -> Deadline {
        match (self.0, other.0) {
            (Some(a), Some(b)) => Deadline(Some(a.min(b))),
            (a, b) => Deadline(a.or(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_too_long_for_the_clock_is_a_wait_without_end() {
        for timeout in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
            let deadline = Deadline::after(timeout);
            assert_eq!(deadline.instant(), None);
            assert!(!deadline.has_passed());
            assert_eq!(deadline.left(), Duration::MAX);
        }
    }

    #[test]
    fn a_deadline_passes_and_then_has_nothing_left() {
        let deadline = Deadline::after(Duration::from_millis(20));
        assert!(!deadline.has_passed());
        assert!(deadline.left() > Duration::ZERO);
        std::thread::sleep(Duration::from_millis(30));
        assert!(deadline.has_passed());
        assert_eq!(deadline.left(), Duration::ZERO);
        assert!(Deadline::after(Duration::ZERO).has_passed());
    }

    #[test]
    fn the_earlier_deadline_wins() {
        let near = Deadline::after(Duration::from_secs(1));
        let far = Deadline::after(Duration::from_secs(60));
        let never = Deadline::after(Duration::MAX);
        assert_eq!(near.min(far), near);
        assert_eq!(far.min(near), near);
        assert_eq!(never.min(far), far);
        assert_eq!(far.min(never), far);
        assert_eq!(never.min(never), never);
    }
}
