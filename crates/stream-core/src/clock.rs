//! Vector clocks over a device's streams, and what a device knows of other devices' streams.

use std::collections::BTreeMap;

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

/// What is known of the streams of *other* devices: for each device (by its process-unique
/// uid, [`crate::DeviceId::uid`]) a vector clock over that device's streams. Empty (and free to
/// clone or join) while nothing crossed devices, so single-device work pays nothing for it.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct RemoteClocks(BTreeMap<u64, VectorClock>);

impl RemoteClocks {
    /// Knows nothing of any other device.
    pub fn new() -> Self {
        RemoteClocks(BTreeMap::new())
    }

    /// Whether nothing is known of any other device.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entry for stream `index` of device `device`.
    pub fn get(&self, device: u64, index: usize) -> u64 {
        self.0.get(&device).map_or(0, |c| c.get(index))
    }

    /// The clock known of device `device`, if any.
    pub fn of(&self, device: u64) -> Option<&VectorClock> {
        self.0.get(&device)
    }

    /// Joins `clock`, a clock over the streams of `device`, into what is known of it.
    pub fn join_device(&mut self, device: u64, clock: &VectorClock) {
        if clock.entries().next().is_some() {
            self.0.entry(device).or_default().join(clock);
        }
    }

    /// Pointwise maximum with `other`, device by device.
    pub fn join(&mut self, other: &RemoteClocks) {
        for (device, clock) in &other.0 {
            self.join_device(*device, clock);
        }
    }

    /// Each device and the clock known of it.
    pub fn devices(&self) -> impl Iterator<Item = (u64, &VectorClock)> + '_ {
        self.0.iter().map(|(d, c)| (*d, c))
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

    #[test]
    fn remote_clocks_join_device_by_device() {
        let mut r = RemoteClocks::new();
        assert!(r.is_empty());
        r.join_device(7, &clock(&[0, 3]));
        r.join_device(9, &clock(&[]));
        assert_eq!(r.devices().count(), 1, "an empty clock adds no device");
        let mut other = RemoteClocks::new();
        other.join_device(7, &clock(&[2, 1]));
        other.join_device(9, &clock(&[4]));
        r.join(&other);
        assert_eq!((r.get(7, 0), r.get(7, 1), r.get(9, 0)), (2, 3, 4));
        assert_eq!(r.get(8, 0), 0);
        assert_eq!(r.of(9), Some(&clock(&[4])));
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
