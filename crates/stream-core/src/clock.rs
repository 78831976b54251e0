//! Vector clocks over a device's streams.

/// For each stream (by index), the last position of that stream something is known to be
/// ordered after. Missing entries are zero ("nothing known").
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct VectorClock(Vec<u64>);

impl VectorClock {
    /// A clock that knows nothing.
    pub fn new() -> Self {
        VectorClock(Vec::new())
    }

    /// The entry for stream `index`.
    pub fn get(&self, index: usize) -> u64 {
        self.0.get(index).copied().unwrap_or(0)
    }

    /// Raises the entry for stream `index` to at least `value`.
    pub fn advance(&mut self, index: usize, value: u64) {
        if self.0.len() <= index {
            self.0.resize(index + 1, 0);
        }
        if self.0[index] < value {
            self.0[index] = value;
        }
    }

    /// Pointwise maximum with `other`: afterwards this clock knows everything `other` knows.
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            if *mine < *theirs {
                *mine = *theirs;
            }
        }
    }

    /// Whether this clock knows at least everything `other` knows.
    pub fn dominates(&self, other: &VectorClock) -> bool {
        other.0.iter().enumerate().all(|(i, v)| self.get(i) >= *v)
    }

    /// The non-zero entries as `(stream index, position)`.
    pub fn entries(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.0.iter().copied().enumerate().filter(|(_, v)| *v > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clock(v: &[u64]) -> VectorClock {
        let mut c = VectorClock::new();
        for (i, x) in v.iter().enumerate() {
            c.advance(i, *x);
        }
        c
    }

    #[test]
    fn join_is_pointwise_max() {
        let mut a = clock(&[1, 5]);
        a.join(&clock(&[3, 2, 7]));
        assert_eq!(a, clock(&[3, 5, 7]));
        assert!(a.dominates(&clock(&[3, 5])));
        assert!(!clock(&[3, 5]).dominates(&a));
    }

    proptest! {
        #[test]
        fn join_is_a_least_upper_bound(a in proptest::collection::vec(0u64..10, 0..5),
                                       b in proptest::collection::vec(0u64..10, 0..5)) {
            let (a, b) = (clock(&a), clock(&b));
            let mut j = a.clone();
            j.join(&b);
            prop_assert!(j.dominates(&a) && j.dominates(&b));
            let mut k = b.clone();
            k.join(&a);
            prop_assert!(j.dominates(&k) && k.dominates(&j));
        }
    }
}
