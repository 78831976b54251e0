//! Contended hardware resources: a pool of identical units with a capacity, and the usage
//! profile over virtual time of the work placed on it.
//!
//! An op demands some number of units for its duration; it starts at the earliest time at or
//! after it is ready at which that many units are free for the whole duration. With capacity
//! one and demand one this is the classic "one op at a time" resource.

/// Usage of one resource over time: a step function kept as sorted breakpoints
/// `(time, units in use from this time on)`. Before the first breakpoint, and after the last
/// one (whose level is always zero), nothing is in use.
#[derive(Clone, Debug)]
pub(crate) struct Pool {
    capacity: u32,
    steps: Vec<(u64, u32)>,
}

impl Pool {
    /// A pool of `capacity` units (zero is treated as one).
    pub fn new(capacity: u32) -> Self {
        Pool {
            capacity: capacity.max(1),
            steps: Vec::new(),
        }
    }

    /// The number of units an op asking for `demand` actually gets: at least one, at most the
    /// capacity.
    pub fn clamp(&self, demand: u32) -> u32 {
        demand.clamp(1, self.capacity)
    }

    /// Units in use at time `t`, and the index of the first breakpoint after `t`.
    fn level_at(&self, t: u64) -> (u32, usize) {
        let i = self.steps.partition_point(|&(s, _)| s <= t);
        let level = if i == 0 { 0 } else { self.steps[i - 1].1 };
        (level, i)
    }

    /// The earliest time `>= ready` at which `demand` units (clamped) are free for `duration`
    /// ns. Zero-length work needs only a point in time at which the units are free.
    pub fn earliest(&self, ready: u64, duration: u64, demand: u32) -> u64 {
        let limit = self.capacity - self.clamp(demand);
        let mut t = ready;
        'search: loop {
            let (level, mut i) = self.level_at(t);
            if level > limit {
                // Jump to the next breakpoint at which enough units are free; the last level
                // is zero, so one exists.
                while i < self.steps.len() && self.steps[i].1 > limit {
                    i += 1;
                }
                match self.steps.get(i) {
                    Some(&(s, _)) => t = s,
                    None => return t,
                }
                continue;
            }
            let end = t.saturating_add(duration);
            while i < self.steps.len() && self.steps[i].0 < end {
                if self.steps[i].1 > limit {
                    t = self.steps[i].0;
                    continue 'search;
                }
                i += 1;
            }
            return t;
        }
    }

    /// Index of the breakpoint at `t`, inserting one (with the level in force there) if needed.
    fn breakpoint(&mut self, t: u64) -> usize {
        let (level, i) = self.level_at(t);
        if i > 0 && self.steps[i - 1].0 == t {
            return i - 1;
        }
        self.steps.insert(i, (t, level));
        i
    }

    /// Marks `demand` units (clamped) busy over `[start, start + duration)`. The caller found
    /// `start` with [`Pool::earliest`], so the capacity is never exceeded.
    pub fn reserve(&mut self, start: u64, duration: u64, demand: u32) {
        if duration == 0 {
            return;
        }
        let demand = self.clamp(demand);
        let end = start.saturating_add(duration);
        let first = self.breakpoint(start);
        let last = self.breakpoint(end);
        for step in &mut self.steps[first..last] {
            step.1 = step.1.saturating_add(demand).min(self.capacity);
        }
    }

    /// Places work: [`Pool::earliest`] then [`Pool::reserve`]; returns the start time.
    #[cfg(test)]
    pub fn place(&mut self, ready: u64, duration: u64, demand: u32) -> u64 {
        let t = self.earliest(ready, duration, demand);
        self.reserve(t, duration, demand);
        t
    }

    /// Forgets usage before `now`: no later op can start before `now`.
    pub fn prune(&mut self, now: u64) {
        let i = self.steps.partition_point(|&(s, _)| s <= now);
        if i >= 2 {
            self.steps.drain(..i - 1);
        }
        if self.steps.len() == 1 && self.steps[0].1 == 0 {
            self.steps.clear();
        }
    }

    /// Number of remembered breakpoints.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.steps.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_one_places_in_the_first_gap_that_fits() {
        let mut r = Pool::new(1);
        assert_eq!(r.place(0, 10, 1), 0);
        assert_eq!(r.place(0, 10, 1), 10);
        assert_eq!(r.place(30, 10, 1), 30);
        // gap [20, 30) fits 10 but not 11
        assert_eq!(r.place(5, 10, 1), 20);
        assert_eq!(r.place(0, 11, 1), 40);
        // zero-length work needs no free time, only a point at which the unit is free
        assert_eq!(r.place(0, 0, 1), 51);
        assert_eq!(r.place(45, 0, 1), 51);
        r.prune(40);
        assert_eq!(r.len(), 2);
        assert_eq!(r.place(45, 1, 1), 51);
        assert_eq!(r.place(u64::MAX - 1, 5, 1), u64::MAX - 1);
    }

    #[test]
    fn units_are_shared_up_to_the_capacity() {
        let mut r = Pool::new(4);
        assert_eq!(r.place(0, 100, 2), 0);
        assert_eq!(r.place(0, 100, 2), 0, "two halves share");
        assert_eq!(r.place(0, 100, 1), 100, "full until 100");
        assert_eq!(r.place(0, 50, 3), 100, "one unit busy until 200: three fit");
        assert_eq!(r.place(0, 10, 9), 200, "demand is clamped to the capacity");
        assert_eq!(
            r.place(150, 10, 1),
            150,
            "level 1 + 3 = 4 in [100,150) but free after"
        );
        r.prune(1_000);
        assert_eq!(r.len(), 0);
    }
}
