//! `lifetime_placement`: with expandable segments, requests predicted to be short-lived share
//! the stream's small-pool segment with the small requests, and the large-pool segment keeps
//! the long-lived ones, so the holes transient blocks leave between long-lived blocks do not
//! pile up (the online form of "place blocks by lifetime"; Barrett and Zorn's lifetime
//! predictors).
//!
//! The prediction (the arena's `Lifetimes`) is per rounded size, from how long its last
//! blocks lived; a size never freed yet is predicted long-lived. A short-lived request takes
//! the best fit of both free lists (it leaves soon, so where it lies costs little); a
//! long-lived one only that of the large pool. On a miss the segment of the predicted
//! lifetime grows; when that would raise the peak of reserved memory, the whole
//! free pages of the stream's other segment (anywhere in it) are unmapped first, so the two
//! segments together stay under one peak.

use super::{Granted, Request, State};
use crate::size::SizeClass;
use crate::snapshot::PoolId;
use crate::AllocError;
use braid_stream_core::hal::Backend;
use braid_stream_core::Device;

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
            self.arena.lifetimes.born(g.block, req.rounded);
        }
        granted
    }

    fn place_by_lifetime(&mut self, dev: &Device<B>, req: Request) -> Result<Granted, AllocError> {
        let short =
            req.class == SizeClass::Small || self.arena.lifetimes.predicts_short(req.rounded);
        let found = if short {
            let small = self.find_free::<false>(req.in_class(SizeClass::Small));
            let large = self.find_free::<false>(req.in_class(SizeClass::Large));
            self.arena.better_fit(small, large)
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

    /// Before the expandable segment of request `home`'s stream and class grows past the
    /// peak of reserved memory, unmaps the whole free pages of the stream's other expandable
    /// segment (the two segments share one peak).
    fn trim_other_before_peak(&mut self, dev: &Device<B>, home: Request) {
        let (stream, rounded) = (home.stream, home.rounded);
        let small = home.class == SizeClass::Small;
        // The cheap questions first: planning the growth is the costly one.
        let Some(other) = self.arena.expandable_of(stream, !small) else {
            return;
        };
        let candidates = self.arena.unmappable_cached(other);
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
