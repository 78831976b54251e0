//! Contended hardware resources: each has capacity one and a reservation list of busy intervals.

/// Busy intervals `[start, end)` of one resource, sorted and disjoint.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reservations {
    busy: Vec<(u64, u64)>,
}

impl Reservations {
    /// Reserves `duration` ns at the earliest time `>= ready` at which the resource is free for
    /// the whole duration, and returns that start time.
    pub fn place(&mut self, ready: u64, duration: u64) -> u64 {
        let mut t = ready;
        for &(start, end) in &self.busy {
            if end <= t {
                continue;
            }
            if start >= t.saturating_add(duration) {
                break;
            }
            t = end;
        }
        if duration > 0 {
            // Intervals are disjoint and `[t, t + duration)` is free: inserting before the first
            // interval that starts at or after `t` keeps the list sorted.
            let at = self.busy.partition_point(|&(s, _)| s < t);
            self.busy.insert(at, (t, t.saturating_add(duration)));
        }
        t
    }

    /// Forgets intervals that end at or before `now`: no later op can start before `now`.
    pub fn prune(&mut self, now: u64) {
        self.busy.retain(|&(_, end)| end > now);
    }

    /// Number of remembered intervals.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.busy.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_in_the_first_gap_that_fits() {
        let mut r = Reservations::default();
        assert_eq!(r.place(0, 10), 0);
        assert_eq!(r.place(0, 10), 10);
        assert_eq!(r.place(30, 10), 30);
        // gap [20, 30) fits 10 but not 11
        assert_eq!(r.place(5, 10), 20);
        assert_eq!(r.place(0, 11), 40);
        // zero-length work needs no free time, only a point not inside a busy interval
        assert_eq!(r.place(0, 0), 0);
        assert_eq!(r.place(45, 0), 51);
        r.prune(40);
        assert_eq!(r.len(), 1);
        assert_eq!(r.place(45, 1), 51);
        assert_eq!(r.place(u64::MAX - 1, 5), u64::MAX - 1);
    }
}
