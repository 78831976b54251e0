//! `lifetime_placement`: with expandable segments, requests predicted to be short-lived share
//! the stream's small-pool segment with the small requests, and the large-pool segment keeps
//! the long-lived ones, so the holes transient blocks leave between long-lived blocks do not
//! pile up (the online form of "place blocks by lifetime"; Barrett and Zorn's lifetime
//! predictors).
//!
//! The prediction is per rounded size: each free notes whether the block lived for fewer than
//! [`SHORT_LIVED_ALLOCS`] allocations (its own excluded); a size is predicted short-lived when
//! at most half of its last [`HISTORY`] frees were long-lived. A size never freed yet is
//! predicted long-lived, so the first weights, caches and activations of a kind stay together.
//! A short-lived request takes the best fit of both free lists (it leaves soon, so where it
//! lies costs little); a long-lived one only that of the large pool. On a miss the segment of
//! the predicted lifetime grows; when that would raise the peak of reserved memory, the whole
//! free pages of the stream's other segment (anywhere in it) are unmapped first, so the two
//! segments together stay under one peak.

use super::{Found, Granted, Request, State};
use crate::block::{BlockId, INITIAL_BLOCK_SLOTS};
use crate::size::SizeClass;
use crate::snapshot::PoolId;
use crate::AllocError;
use braid_stream_core::hal::Backend;
use braid_stream_core::Device;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A block freed after fewer allocations than this (its own excluded) was short-lived.
pub(crate) const SHORT_LIVED_ALLOCS: u64 = 10;
/// Frees remembered per rounded size.
pub(crate) const HISTORY: u8 = 8;

/// The lifetime history the prediction draws on.
#[derive(Debug, Default)]
pub(super) struct Lifetimes {
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
    fn born(&mut self, b: BlockId, rounded: u64) {
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
    pub(super) fn died(&mut self, b: BlockId) {
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
    pub(super) fn predicts_short(&self, rounded: u64) -> bool {
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

impl<B: Backend> State<B> {
    /// `malloc` with `lifetime_placement` on: places by predicted lifetime in the default
    /// pool's expandable segments, allocates as usual elsewhere, and notes the allocation's
    /// birth.
    #[cold]
    #[inline(never)]
    pub(super) fn malloc_by_lifetime(
        &mut self,
        dev: &Device<B>,
        req: Request,
    ) -> Result<Granted, AllocError> {
        let expandable = req.pool == PoolId::DEFAULT
            && self.config.expandable_segments
            && self.vmm_granularity.is_some();
        let granted = if expandable {
            self.place_by_lifetime(dev, req)
        } else {
            self.malloc_in(dev, req)
        };
        if let Ok(g) = &granted {
            self.lifetimes.born(g.block, req.rounded);
        }
        granted
    }

    fn place_by_lifetime(&mut self, dev: &Device<B>, req: Request) -> Result<Granted, AllocError> {
        let short = req.class == SizeClass::Small || self.lifetimes.predicts_short(req.rounded);
        let found = if short {
            let small = self.find_free::<false>(req.in_class(SizeClass::Small));
            let large = self.find_free::<false>(req.in_class(SizeClass::Large));
            self.better_fit(small, large)
        } else {
            self.find_free::<false>(req.in_class(SizeClass::Large))
        };
        if let Some(f) = found {
            return Ok(self.grant_found(f, req));
        }
        let home = req.in_class(if short {
            SizeClass::Small
        } else {
            SizeClass::Large
        });
        let capturing = dev.is_capturing();
        if !capturing {
            self.trim_other_before_peak(dev, home);
        }
        tracing::trace!(
            rounded = req.rounded,
            short,
            "lifetime placement: growing the segment of the predicted lifetime"
        );
        self.malloc_miss_capturing(dev, home, capturing)
    }

    /// The smaller of two fits (then the lower address).
    fn better_fit(&self, a: Option<Found>, b: Option<Found>) -> Option<Found> {
        match (a, b) {
            (Some(x), Some(y)) => {
                let key = |f: &Found| {
                    let blk = self.arena.blocks.get(f.block);
                    (blk.size, blk.addr)
                };
                Some(if key(&y) < key(&x) { y } else { x })
            }
            (x, y) => x.or(y),
        }
    }

    /// Before the expandable segment of request `home`'s stream and class grows past the
    /// peak of reserved memory, unmaps the whole free pages of the stream's other expandable
    /// segment (the two segments share one peak).
    fn trim_other_before_peak(&mut self, dev: &Device<B>, home: Request) {
        let (stream, rounded) = (home.stream, home.rounded);
        let small = home.class == SizeClass::Small;
        // The cheap questions first: planning the growth is the costly one.
        let Some(other) = self.expandable_of(stream, !small) else {
            return;
        };
        let candidates = self.unmappable_cached(other);
        if candidates.is_empty() {
            return;
        }
        let growth = self.expandable_growth(stream, small, rounded);
        let reserved = self.stats.reserved_bytes.all.current;
        if reserved.saturating_add(growth) <= self.stats.reserved_bytes.all.peak {
            return;
        }
        let unmapped = self.unmap_free_blocks(dev, candidates);
        if unmapped > 0 {
            tracing::debug!(
                unmapped,
                small,
                "lifetime placement: free pages of the other segment unmapped before growing past the peak"
            );
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
