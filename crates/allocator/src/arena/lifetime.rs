//! The lifetime history behind `lifetime_placement` (`state/lifetime` places by it): per
//! rounded size, whether its last frees were of short-lived blocks.
//!
//! The prediction is per rounded size: each free notes whether the block lived for fewer than
//! [`SHORT_LIVED_ALLOCS`] allocations (its own excluded); a size is predicted short-lived when
//! at most half of its last [`HISTORY`] frees were long-lived. A size never freed yet is
//! predicted long-lived, so the first weights, caches and activations of a kind stay together.

use super::{Arena, Found};
use crate::block::{BlockId, INITIAL_BLOCK_SLOTS};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A block freed after fewer allocations than this (its own excluded) was short-lived.
pub(crate) const SHORT_LIVED_ALLOCS: u64 = 10;
/// Frees remembered per rounded size.
pub(crate) const HISTORY: u8 = 8;

/// The lifetime history the prediction draws on.
#[derive(Debug, Default)]
pub(crate) struct Lifetimes {
    /// Allocations so far.
    clock: u64,
    /// Per block id: the clock at its allocation and its rounded size (0: not tracked).
    births: Vec<(u64, u64)>,
    /// Per rounded size: the last frees (bit set = long-lived, newest in bit 0) and how many
    /// of the bits are filled.
    outcomes: HashMap<u64, (u8, u8), BuildHasherDefault<SizeHasher>>,
}

/// Hashes the rounded sizes that key the lifetime history with one folded multiply rather
/// than SipHash: the history is read on every placement and written on every free, and
/// sizes are no attacker's choice.
#[derive(Default)]
struct SizeHasher(u64);

impl Hasher for SizeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        // Folding the 128-bit product mixes every key bit into the low bits too, which the
        // table indexes by (sizes are multiples of 512: their own low bits are zero).
        let m = u128::from(self.0 ^ x) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

impl Lifetimes {
    /// Block `b` was just handed out for a request rounded to `rounded` bytes.
    #[inline]
    pub(crate) fn born(&mut self, b: BlockId, rounded: u64) {
        self.clock += 1;
        let i = b as usize;
        if self.births.len() <= i {
            // Block ids grow one by one: double, so resizing is rare, and start as large as
            // the block slab does, whose ids these are.
            let len = (i + 1).next_power_of_two().max(INITIAL_BLOCK_SLOTS);
            self.births.resize(len, (0, 0));
        }
        self.births[i] = (self.clock, rounded);
    }

    /// Block `b` was freed by its owner: notes how long it lived.
    #[cold]
    #[inline(never)]
    pub(crate) fn died(&mut self, b: BlockId) {
        let Some(entry) = self.births.get_mut(b as usize) else {
            return;
        };
        let (born, rounded) = std::mem::take(entry);
        if rounded == 0 {
            return;
        }
        let long = self.clock - born >= SHORT_LIVED_ALLOCS;
        let (bits, filled) = self.outcomes.entry(rounded).or_default();
        *bits = (*bits << 1) | u8::from(long);
        *filled = (*filled + 1).min(HISTORY);
    }

    /// Whether a request rounded to `rounded` bytes is predicted to be short-lived.
    pub(crate) fn predicts_short(&self, rounded: u64) -> bool {
        match self.outcomes.get(&rounded) {
            None => false,
            Some(&(bits, filled)) => {
                let mask = if filled >= 8 {
                    u8::MAX
                } else {
                    (1u8 << filled) - 1
                };
                2 * (bits & mask).count_ones() <= u32::from(filled)
            }
        }
    }
}

impl Arena {
    /// The smaller of two fits (then the lower address).
    pub(crate) fn better_fit(&self, a: Option<Found>, b: Option<Found>) -> Option<Found> {
        match (a, b) {
            (Some(x), Some(y)) => {
                let key = |f: &Found| {
                    let blk = self.blocks.get(f.block);
                    (blk.size, blk.addr)
                };
                Some(if key(&y) < key(&x) { y } else { x })
            }
            (x, y) => x.or(y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(l: &mut Lifetimes, b: BlockId, rounded: u64, allocs_between: u64) {
        l.born(b, rounded);
        for i in 0..allocs_between {
            l.born(1000 + i as BlockId, 512);
        }
        l.died(b);
    }

    #[test]
    fn unseen_sizes_are_long_lived_and_quick_frees_make_them_short() {
        let mut l = Lifetimes::default();
        assert!(!l.predicts_short(4 << 20));
        live(&mut l, 0, 4 << 20, 0);
        assert!(l.predicts_short(4 << 20));
        live(&mut l, 0, 4 << 20, SHORT_LIVED_ALLOCS + 1);
        // One short, one long: a tie is short.
        assert!(l.predicts_short(4 << 20));
        live(&mut l, 0, 4 << 20, SHORT_LIVED_ALLOCS + 1);
        assert!(!l.predicts_short(4 << 20));
        // Other sizes are unaffected.
        assert!(!l.predicts_short(2 << 20));
    }

    #[test]
    fn size_hashes_spread_over_the_low_bits() {
        use std::hash::{BuildHasher, Hash};
        let build = BuildHasherDefault::<SizeHasher>::default();
        // Rounded sizes (multiples of 512) land in 1024 buckets by their low bits.
        let buckets: std::collections::HashSet<u64> = (1..=1024u64)
            .map(|k| build.hash_one(k * 512) & 1023)
            .collect();
        assert!(buckets.len() > 550, "{} buckets used", buckets.len());
        // Bytes hash like the words they make up.
        let mut words = SizeHasher::default();
        words.write_u64(5);
        words.write_u64(7);
        let mut bytes = SizeHasher::default();
        bytes.write(&[5, 0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(words.finish(), bytes.finish());
        let mut hasher = SizeHasher::default();
        (4u64 << 20).hash(&mut hasher);
        assert_ne!(hasher.finish(), 0);
    }

    #[test]
    fn only_the_last_frees_count() {
        let mut l = Lifetimes::default();
        for _ in 0..20 {
            live(&mut l, 0, 3 << 20, SHORT_LIVED_ALLOCS + 1);
        }
        assert!(!l.predicts_short(3 << 20));
        for _ in 0..HISTORY / 2 {
            live(&mut l, 0, 3 << 20, 0);
        }
        assert!(l.predicts_short(3 << 20));
        // A block freed twice or never born is ignored.
        l.died(0);
        l.died(77);
        assert!(l.predicts_short(3 << 20));
    }
}
