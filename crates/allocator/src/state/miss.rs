//! The miss path: what an allocation does when the free list of its class has no fit.
//!
//! A request travels as one [`Request`] value (stream, pool, class, requested and rounded
//! size) from [`State::malloc`] to the block it is granted; nothing below takes those as
//! separate parameters. The miss path climbs [`LADDER`], a fixed list of [`Step`]s, in order.
//! Each step either finds a cached block that fits (granted at once), makes room and asks for
//! the one grow attempt (a new segment, or pages of an expandable segment:
//! [`State::grow`]), or does nothing; a step that does not apply (most do not during a
//! capture, where nothing may be synchronized or freed) is passed over. When the last step is
//! passed, the request is out of memory and the report says why.
//!
//! The ladder, in order (PyTorch's `malloc` and its out-of-memory retries):
//! 1. a small request takes a cached large block (private pools; the default pool with
//!    `split_large_remainders`);
//! 2. with lazy event polling, the pending frees' events are polled and the lists searched
//!    again;
//! 3. garbage collection and `release_before_grow` make room, then the first grow;
//! 4. with `reuse_pending_with_wait`, a pending block is reused behind a stream wait;
//! 5. pending events are processed and the lists searched again;
//! 6. with `max_split_size`, oversize cached blocks are released, then a grow;
//! 7. every whole cached segment is released, then a grow;
//! 8. pending events are synchronized, the lists searched again, cached segments released,
//!    then a grow;
//! 9. for a default-pool request, the free cached blocks of private pools created with
//!    [`crate::PoolOptions::use_on_oom`] are lent (PyTorch's `MemPool(use_on_oom=True)`):
//!    the block stays its pool's and goes back to that pool's free list when freed. Other
//!    private pools are never borrowed from, and a request diverted into a private pool
//!    never borrows.

use super::{Granted, SegmentFailure, State};
use crate::arena::{Found, Request};
use crate::block::BlockId;
use crate::error::{AllocError, OutOfMemoryReport};
use crate::size::{self, SizeClass};
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, SizeOverflow};

/// A request that missed, with what the miss path needs on every step.
struct Miss {
    req: Request,
    /// The size of the segment a grow allocates (expandable segments map less).
    seg_size: u64,
    /// Whether the device is capturing (asked once per miss: a locked look-up).
    capturing: bool,
}

/// One step of the miss path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// A small request takes a cached large block.
    LargeBlockForSmall,
    /// Lazy event polling: poll the pending frees' events, then search again.
    PollEvents,
    /// Garbage collection and `release_before_grow`, then the first grow.
    MakeRoom,
    /// `reuse_pending_with_wait`: a pending block, behind a wait on its events.
    WaitForPending,
    /// Out of memory, 1: process the pending events, then search again.
    ProcessPending,
    /// Out of memory, 2: release oversize cached blocks (`max_split_size`), then grow.
    ReleaseOversize,
    /// Out of memory, 3: release every whole cached segment, then grow.
    ReleaseCached,
    /// Out of memory, 4: synchronize the pending events, search again, release, grow.
    SynchronizePending,
    /// Out of memory, 5: borrow a free block of a pool that lends on out-of-memory.
    BorrowFromLenders,
}

/// The steps, in the order the miss path tries them.
const LADDER: [Step; 9] = [
    Step::LargeBlockForSmall,
    Step::PollEvents,
    Step::MakeRoom,
    Step::WaitForPending,
    Step::ProcessPending,
    Step::ReleaseOversize,
    Step::ReleaseCached,
    Step::SynchronizePending,
    Step::BorrowFromLenders,
];

/// What a step leaves the miss path to do.
enum Outcome {
    /// A cached block fits: grant it.
    Take(Found),
    /// Memory may be available: make the grow attempt.
    Grow,
    /// Nothing to try: on to the next step.
    Next,
}

impl<B: Backend> State<B> {
    /// [`State::malloc`] when the free list of the request's class has no fit.
    #[inline(never)]
    pub(super) fn malloc_miss(
        &mut self,
        dev: &Device<B>,
        req: &Request,
    ) -> Result<Granted, AllocError> {
        // Asked here, on the cold path, for every step that must not run during a capture
        // (the hot path asks the device only when frees are pending).
        let capturing = dev.is_capturing();
        self.malloc_miss_capturing(dev, *req, capturing)
    }

    /// [`State::malloc_miss`] where the caller asked the device whether it is `capturing`.
    pub(super) fn malloc_miss_capturing(
        &mut self,
        dev: &Device<B>,
        req: Request,
        capturing: bool,
    ) -> Result<Granted, AllocError> {
        // Sizes below 1 EiB (all that reach here) never overflow when rounded to a segment.
        let miss = Miss {
            req,
            seg_size: self.segment_size_for(req)?,
            capturing,
        };
        for step in LADDER {
            match self.climb(dev, step, &miss) {
                Outcome::Take(f) => return Ok(self.grant_found(f, req)),
                Outcome::Grow => match self.grow(dev, req, miss.seg_size) {
                    Ok(b) => return Ok(self.grant(b, None, req)),
                    Err(SegmentFailure::Other(e)) => return Err(e.into()),
                    Err(SegmentFailure::OutOfMemory) => {}
                },
                Outcome::Next => {}
            }
        }
        Err(self.out_of_memory(dev, &miss))
    }

    /// The size of the segment a miss asks the device for.
    fn segment_size_for(&self, req: Request) -> Result<u64, AllocError> {
        let seg_size = if self.pools.no_split(req.pool) && req.class == SizeClass::Large {
            req.rounded
                .checked_next_multiple_of(self.config.round_large)
        } else {
            size::segment_size(&self.config, req.rounded)
        };
        seg_size.ok_or_else(|| {
            AllocError::SizeOverflow(SizeOverflow {
                call: "alloc",
                what: format!("{} bytes rounded to a segment", req.size),
            })
        })
    }

    /// Runs one step of the ladder.
    fn climb(&mut self, dev: &Device<B>, step: Step, miss: &Miss) -> Outcome {
        let req = miss.req;
        let capturing = miss.capturing;
        let pending = !self.pending.blocks.is_empty();
        match step {
            // In a private pool, a small request takes a cached large block before the pool
            // grows: the pool's memory is reserved for its graphs anyway, and graphs captured
            // largest first then fit in the first one's segments. With
            // `split_large_remainders` the default pool does the same, so the sub-MiB
            // remainders it splits off large blocks serve small requests.
            Step::LargeBlockForSmall => {
                if req.class == SizeClass::Small
                    && (req.pool != PoolId::DEFAULT || self.config.split_large_remainders)
                {
                    return self.search(req.in_class(SizeClass::Large));
                }
                Outcome::Next
            }
            Step::PollEvents => {
                if self.config.lazy_event_polling && pending && !capturing {
                    self.process_pending(dev, true);
                    return self.search(req);
                }
                Outcome::Next
            }
            Step::MakeRoom => {
                if !capturing {
                    if self.config.garbage_collection_threshold > 0.0 {
                        self.garbage_collect(dev);
                    }
                    if self.config.release_before_grow {
                        self.release_before_grow(dev, miss.seg_size);
                    }
                }
                Outcome::Grow
            }
            Step::WaitForPending => {
                if self.config.reuse_pending_with_wait && !capturing && pending {
                    if let Some(f) = self.reuse_pending_with_wait(dev, req) {
                        return Outcome::Take(f);
                    }
                }
                Outcome::Next
            }
            Step::ProcessPending => {
                if capturing || !pending {
                    return Outcome::Next;
                }
                self.note_rung(req, "processing pending events");
                self.process_pending(dev, true);
                self.search(req)
            }
            Step::ReleaseOversize => {
                if capturing || self.config.max_split_size == u64::MAX {
                    return Outcome::Next;
                }
                self.note_rung(req, "releasing oversize cached blocks");
                if self.release_available_cached_blocks(dev, req) {
                    Outcome::Grow
                } else {
                    Outcome::Next
                }
            }
            Step::ReleaseCached => {
                if capturing {
                    return Outcome::Next;
                }
                self.note_rung(req, "freeing cached segments");
                self.stats.num_alloc_retries += 1;
                self.release_all_cached_segments(dev);
                Outcome::Grow
            }
            Step::SynchronizePending => {
                if capturing || !pending {
                    return Outcome::Next;
                }
                self.note_rung(req, "synchronizing pending events");
                self.synchronize_pending(dev);
                if let Outcome::Take(f) = self.search(req) {
                    return Outcome::Take(f);
                }
                self.release_all_cached_segments(dev);
                Outcome::Grow
            }
            Step::BorrowFromLenders => self.borrow_from_lenders(req),
        }
    }

    /// The best fit for `req` in its free lists.
    fn search(&mut self, req: Request) -> Outcome {
        match self.find_free::<false>(req) {
            Some(f) => Outcome::Take(f),
            None => Outcome::Next,
        }
    }

    fn note_rung(&self, req: Request, what: &'static str) {
        tracing::info!(
            size = req.size,
            stream = req.stream.0,
            "out-of-memory ladder: {what}"
        );
    }

    /// A free cached block of a private pool that lends on out-of-memory, for a request of
    /// the default pool: pools in the order they were created, best fit in each.
    fn borrow_from_lenders(&mut self, req: Request) -> Outcome {
        if req.pool != PoolId::DEFAULT {
            return Outcome::Next;
        }
        for lender in self.pools.lenders() {
            if let Some(f) = self.find_free::<false>(req.in_pool(lender)) {
                tracing::info!(
                    size = req.size,
                    stream = req.stream.0,
                    pool = lender.0,
                    "out-of-memory ladder: borrowing a free block of a lending pool"
                );
                return Outcome::Take(f);
            }
        }
        Outcome::Next
    }

    /// `release_before_grow`, on a cache miss before a segment of `seg_size` bytes is
    /// allocated: when it would raise reserved memory past its peak, whole cached segments of
    /// the default pool and of freeable private pools (none can serve the request, or the
    /// free lists would have found it) go back to the device, largest first (the fewest device
    /// frees), until the new segment fits under the peak or none is left.
    fn release_before_grow(&mut self, dev: &Device<B>, seg_size: u64) {
        let peak = self.stats.reserved_bytes.all.peak;
        let needed = self
            .stats
            .reserved_bytes
            .all
            .current
            .saturating_add(seg_size);
        if needed <= peak || dev.is_capturing() {
            return;
        }
        let excess = needed - peak;
        let mut candidates: Vec<(u64, BlockId)> = self
            .arena
            .whole_free_segments(PoolId::DEFAULT)
            .into_iter()
            .chain(
                self.pools
                    .freeable()
                    .into_iter()
                    .flat_map(|id| self.arena.whole_free_segments(id)),
            )
            .map(|b| (self.arena.blocks.get(b).size, b))
            .collect();
        if candidates.is_empty() {
            return;
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let mut chosen = Vec::new();
        let mut total = 0;
        for (size, b) in candidates {
            if total >= excess {
                break;
            }
            chosen.push(b);
            total += size;
        }
        tracing::debug!(
            segments = chosen.len(),
            bytes = total,
            seg_size,
            "releasing whole cached segments before growing past the reserved peak"
        );
        self.release_blocks(dev, &chosen);
        self.forget_empty_pools();
    }

    /// The end of the ladder: counts the failure, records it and builds the report.
    fn out_of_memory(&mut self, dev: &Device<B>, miss: &Miss) -> AllocError {
        let req = miss.req;
        self.stats.num_ooms += 1;
        let info = dev.mem_info().ok();
        let report = OutOfMemoryReport {
            device: dev.ordinal(),
            backend: B::NAME,
            stream: req.stream,
            requested: req.size,
            rounded: req.rounded,
            segment_size: miss.seg_size,
            device_total: info.map_or(self.device_total, |i| i.total),
            device_free: info.map_or(0, |i| i.free),
            allowed: self.allowed_max,
            allocated: self.stats.allocated_bytes.all.current,
            reserved: self.stats.reserved_bytes.all.current,
            private_pools: self.pools.allocated_bytes(),
            pending_other_streams: self.stats.pending_free_bytes.current,
        };
        self.history.record(
            HistoryAction::Oom,
            report.device_free,
            miss.seg_size,
            req.stream,
            req.pool,
        );
        tracing::warn!(
            requested = req.size,
            segment_size = miss.seg_size,
            allocated = report.allocated,
            reserved = report.reserved,
            pending = report.pending_other_streams,
            "allocator out of memory"
        );
        AllocError::OutOfMemory(Box::new(report))
    }
}
