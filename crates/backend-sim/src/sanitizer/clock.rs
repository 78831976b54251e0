//! Vector clocks over the sanitizer's actors (streams, and lanes of graph replays).
//!
//! Each actor counts its own ops; an op is identified by its [`Epoch`] (actor, count). An earlier
//! op happened before a later one exactly when the later one's vector clock covers the earlier
//! one's epoch. The sanitizer keeps these clocks itself, independently of the front layer's
//! ordering model.

/// A vector clock: for each actor, the count of its ops known to have happened before.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct VectorClock(Vec<u64>);

impl VectorClock {
    /// The count known for `actor` (zero if none).
    pub fn get(&self, actor: u32) -> u64 {
        self.0.get(actor as usize).copied().unwrap_or(0)
    }

    /// Sets the count of `actor`.
    pub fn set(&mut self, actor: u32, count: u64) {
        let i = actor as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = count;
    }

    /// Makes this clock the element-wise maximum of itself and `other`.
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Whether the op with epoch `e` happened before anything this clock describes.
    pub fn covers(&self, e: Epoch) -> bool {
        e.count <= self.get(e.actor)
    }
}

/// One op of one actor: the actor's `count`-th op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Epoch {
    /// The actor.
    pub actor: u32,
    /// Its op count at that op (from 1).
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_cover() {
        let mut a = VectorClock::default();
        a.set(0, 3);
        let mut b = VectorClock::default();
        b.set(2, 5);
        assert!(!a.covers(Epoch { actor: 2, count: 1 }));
        a.join(&b);
        assert!(a.covers(Epoch { actor: 2, count: 5 }));
        assert!(!a.covers(Epoch { actor: 2, count: 6 }));
        assert!(a.covers(Epoch { actor: 0, count: 3 }));
        assert_eq!(a.get(7), 0);
    }
}
