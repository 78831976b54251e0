//! Expandable segments (PyTorch's `expandable_segments:True`): one segment per (stream,
//! small/large) of the default pool, an address reservation into which pages of physical
//! memory are mapped on demand (`hal::Device::map_physical`).
//!
//! This module is the device side (reserve, map, unmap, release, and the statistics and
//! history of each); the reservations, their ranges, growth planning and hole cutting are
//! the arena's (`arena/expandable`).
//!
//! Each contiguous mapped range of a reservation is an arena segment of its own, covered by
//! blocks like any segment; two ranges never touch (an unmapped hole lies between them). So
//! the free lists only ever hold mapped memory, coalescing never crosses a hole, reserved
//! bytes are the ranges' bytes, and the snapshot shows one segment per mapped range, as
//! PyTorch's does. Growth maps pages at the lowest address where the request fits, counting a
//! free block at the end of the range before a hole and whole free ranges between holes
//! (PyTorch's `find_expandable_block`), so holes fill before the end grows; a mapping that
//! touches a range extends it, one that closes a hole joins the two ranges. Releasing
//! (`empty_cache`, the out-of-memory ladder, garbage collection, drop) unmaps the whole pages
//! inside free blocks anywhere in a range ([`unmap`]), and gives the reservation back once
//! nothing is mapped. Pages are `small_segment_size` (2 MiB) for the small pool and
//! `expandable_large_page` (default `large_segment_size`, 20 MiB) for the large pool, rounded
//! up to the backend's granularity; each page is one device mapping.
//!
//! With expandable segments turned off, cached blocks of expandable segments serve no request
//! (PyTorch's `get_free_block` skips them), so new memory comes from normal segments.
//!
//! The setting comes from `expandable_segments:true` (or
//! `AllocatorConfig::expandable_segments`), or at run time from
//! `CachingAllocator::set_expandable_segments` (PyTorch's `_set_allocator_settings`), so both
//! kinds of segment coexist. Every size, also ≥ 10 MiB, goes into the stream's segment, so a
//! free block at the end merges with new pages and no sliver is left between segments.
//! Reserved memory is the mapped bytes (limits and fractions apply to them). The snapshot's
//! `total_size` of an expandable segment counts mapped bytes only, as PyTorch's does (so a
//! segment with a hole shows as two, while `memory_stats().segment` still counts one per
//! reservation), and the history records `segment_map` / `segment_unmap` per range. A backend
//! without virtual memory (`vmm_granularity()` is `None`) makes the setting an
//! `AllocError::ExpandableSegmentsUnsupported` error, at creation or at the toggle, instead
//! of PyTorch's silent fallback. The simulator offers the API (off with
//! `SimConfig::virtual_memory(false)`); on Ascend it is `aclrtReserveMemAddress`,
//! `aclrtMallocPhysical` and `aclrtMapMem`.
//!
//! ```
//! use braid_allocator::{AllocatorConfig, CachingAllocator};
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::Device;
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(256 << 20))).unwrap();
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::parse("expandable_segments:true").unwrap()).unwrap();
//! let main = device.default_stream();
//! let a = alloc.alloc(8 << 20, &main).unwrap(); // maps one 20 MiB page
//! let b = alloc.alloc(44 << 20, &main).unwrap(); // maps two more: b follows a
//! let c = alloc.alloc(8 << 20, &main).unwrap(); // fits in the third page
//! assert_eq!(b.ptr().0, a.ptr().0 + (8 << 20));
//! assert_eq!(alloc.memory_reserved(), 60 << 20);
//! let snapshot = alloc.snapshot();
//! assert_eq!(snapshot.segments.len(), 1);
//! assert!(snapshot.segments[0].is_expandable);
//! drop(b);
//! alloc.empty_cache(); // unmaps the page [20, 40) MiB inside b's free block: a hole
//! assert_eq!(alloc.memory_reserved(), 40 << 20);
//! assert_eq!(alloc.snapshot().segments.len(), 2); // one per mapped range
//! let d = alloc.alloc(44 << 20, &main).unwrap(); // maps the hole again
//! assert_eq!(d.ptr().0, a.ptr().0 + (8 << 20));
//! assert_eq!(alloc.snapshot().segments.len(), 1);
//! # drop((a, c, d));
//! ```
//!
//! # Simplifications
//!
//! Private pools (graph capture) keep normal segments. Best fit does not rank a free block by
//! the unmapped space after it (PyTorch's "expandable size"); a miss looks for holes instead.
//! After a failed mapping of several holes, the ones already mapped stay mapped as cached
//! free blocks (as in PyTorch).
//!
//! # Cost of a miss
//!
//! Pages go to the device in runs: a growth maps its gap with one
//! `hal::Device::map_physical_pages(at, page, count)` call and a release unmaps a free block's
//! pages with one `unmap_physical_pages`. Each page stays a mapping of its own (unmapped alone
//! later, one device malloc in the statistics), and a run that fails stops at the failing
//! page and says how many were done, so the allocator undoes exactly those. The hal's default
//! methods call `map_physical` / `unmap_physical` page by page (ACL maps each page with its
//! own `aclrtMallocPhysical` + `aclrtMapMem`); the simulator keeps consecutive pages as one
//! run (see `braid_backend_sim`'s memory model). Growth planning finds a range's last block
//! from a remembered hint, and lifetime placement looks for free pages to unmap in the other
//! segment's free list rather than in all its blocks, so a miss costs about the same whatever
//! the number of live blocks.
//!
//! Every allocation of SketchKV2's state snapshot misses under
//! `expandable_segments:true,expandable_large_page_mb:2,lifetime_placement:true` and maps
//! pages, so the miss path is kept lean: it asks the device once per miss whether a graph is
//! being captured, builds no list of pages to unmap when the other segment has no free page,
//! and the block slab (with the lifetime table indexed by block id) starts with room for
//! 1,024 blocks instead of being copied at every doubling on the way there. None of this
//! changes a placement: the peaks, waste and device-malloc figures of the trace tests are
//! unchanged, and so is the cost of a cache hit. Replay throughput before and after is in the
//! `trace_replay` bench's docs (`benches/benches/trace_replay.rs`).

mod unmap;

use super::{Request, SegmentFailure, State};
use crate::arena::Expandable;
use crate::block::BlockId;
use crate::size::SizeClass;
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::{Device, DevicePtr, StreamId};

impl<B: Backend> State<B> {
    /// A miss grows memory by the request's rounded size or more: the stream's expandable
    /// segment when expandable segments are on (default pool only: private pools, and so
    /// graph captures, keep normal segments), else a new segment of `seg_size` bytes. The
    /// block returned is free and in no free list.
    pub(super) fn grow(
        &mut self,
        dev: &Device<B>,
        req: Request,
        seg_size: u64,
    ) -> Result<BlockId, SegmentFailure> {
        let small = req.class == SizeClass::Small;
        match self.vmm_granularity {
            Some(granularity) if self.config.expandable_segments && req.pool == PoolId::DEFAULT => {
                self.expand(dev, req.stream, small, req.rounded, granularity)
            }
            _ => self.alloc_segment(dev, req.stream, req.pool, req.class, seg_size),
        }
    }

    /// Maps pages into the (stream, small) expandable segment, created on first use, until a
    /// free block of at least `rounded` bytes spans them, at the lowest address that can hold
    /// one, and returns that block.
    fn expand(
        &mut self,
        dev: &Device<B>,
        stream: StreamId,
        small: bool,
        rounded: u64,
        granularity: u64,
    ) -> Result<BlockId, SegmentFailure> {
        let e = match self.arena.expandable_of(stream, small) {
            Some(e) => e,
            None => self.reserve_segment(dev, stream, small, granularity)?,
        };
        let mut result = Err(SegmentFailure::OutOfMemory);
        // Whether the block in `result` is in its free list: the tail is; the last gap mapped
        // is left out of it (it is handed out right away), the gaps before it go in.
        let mut cached = true;
        match self.arena.plan_growth(e, rounded) {
            Some((tail, maps)) => {
                result = Ok(tail);
                let n = maps.len();
                for (i, (addr, len)) in maps.iter().enumerate() {
                    cached = i + 1 < n;
                    result = self.map_gap(dev, e, addr, len, cached);
                    if result.is_err() {
                        break;
                    }
                }
            }
            None => tracing::debug!(rounded, "no room left in the expandable segment"),
        }
        match result {
            Ok(b) => {
                if cached {
                    self.arena.uncache(b);
                }
                Ok(b)
            }
            Err(err) => {
                if self.arena.expandable[e].ranges.is_empty() {
                    // Nothing mapped (a reservation made for this request, or emptied
                    // before): give it back.
                    self.release_reservation(dev, e);
                }
                Err(err)
            }
        }
    }

    /// Reserves the address range of a new expandable segment (as large as the device, so
    /// one stream could map all of it) and registers it, with nothing mapped.
    fn reserve_segment(
        &mut self,
        dev: &Device<B>,
        stream: StreamId,
        small: bool,
        granularity: u64,
    ) -> Result<usize, SegmentFailure> {
        let unit = if small {
            self.config.small_segment_size
        } else {
            self.config
                .expandable_large_page
                .unwrap_or(self.config.large_segment_size)
        };
        let step = unit
            .max(granularity)
            .checked_next_multiple_of(granularity)
            .ok_or(SegmentFailure::OutOfMemory)?;
        let size = self
            .device_total
            .max(step)
            .checked_next_multiple_of(step)
            .ok_or(SegmentFailure::OutOfMemory)?;
        let ptr = dev.hal().reserve_address(size).map_err(failure)?;
        self.arena
            .expandable
            .push(Expandable::new(stream, small, ptr.0, size, step));
        self.stats.segment.increase(small, 1);
        tracing::debug!(ptr = %ptr, size, step, stream = stream.0, small, "expandable segment reserved");
        Ok(self.arena.expandable.len() - 1)
    }

    /// Bytes a miss of `rounded` bytes maps into the (stream, small) expandable segment
    /// (`rounded` when it is not reserved yet or has no room).
    pub(super) fn expandable_growth(&self, stream: StreamId, small: bool, rounded: u64) -> u64 {
        self.arena
            .expandable_of(stream, small)
            .and_then(|e| self.arena.plan_growth(e, rounded))
            .map_or(rounded, |(_, maps)| maps.iter().map(|m| m.1).sum())
    }

    /// Maps `[addr, addr + len)`, the start of a gap of expandable segment `e`, as one free
    /// block merged with the free blocks around it; returns that block, in its free list when
    /// `cache`.
    fn map_gap(
        &mut self,
        dev: &Device<B>,
        e: usize,
        addr: u64,
        len: u64,
        cache: bool,
    ) -> Result<BlockId, SegmentFailure> {
        let step = self.arena.expandable[e].step;
        let current = self.stats.reserved_bytes.all.current;
        if self
            .allowed_max
            .is_some_and(|max| current.saturating_add(len) > max)
        {
            tracing::debug!(
                len,
                reserved = current,
                "expandable segment growth refused by the memory limit"
            );
            return Err(SegmentFailure::OutOfMemory);
        }
        if let Err(err) = dev
            .hal()
            .map_physical_pages(DevicePtr(addr), step, len / step)
        {
            let done = err.done * step;
            tracing::debug!(e = %err.error, len, mapped = done, "mapping pages into an expandable segment failed");
            // The rollback unmaps from the last page down: what it could not unmap is the
            // start of the run. Those pages stay known, as a cached free block (a later trim
            // unmaps them), rather than mapped behind the allocator's back.
            let kept = done - self.unmap_pages(dev, addr, done, step);
            if kept > 0 {
                tracing::warn!(
                    kept,
                    "pages mapped for a failed growth could not be unmapped; kept cached"
                );
                self.add_mapped(e, addr, kept, true);
            }
            return Err(failure(err.error));
        }
        Ok(self.add_mapped(e, addr, len, cache))
    }

    /// Counts the newly mapped `[addr, addr + len)` of expandable segment `e` and adds it as
    /// a free block (`Arena::insert_mapped`); returns that block, in its free list when
    /// `cache`.
    fn add_mapped(&mut self, e: usize, addr: u64, len: u64, cache: bool) -> BlockId {
        let x = &self.arena.expandable[e];
        let (stream, small, step) = (x.stream, x.small, x.step);
        self.stats.reserved_bytes.increase(small, len);
        self.stats.num_device_alloc += len / step;
        self.history.record(
            HistoryAction::SegmentMap,
            addr,
            len,
            stream,
            PoolId::DEFAULT,
        );
        tracing::debug!(
            addr,
            len,
            stream = stream.0,
            "pages mapped into an expandable segment"
        );
        let (b, split) = self.arena.insert_mapped(e, addr, len, cache);
        self.stats.note_split_change(small, split);
        b
    }

    /// Unmaps the pages of `[start, start + len)` from the last one down, stopping at the
    /// first failure; returns the bytes unmapped (a suffix of the range).
    fn unmap_pages(&mut self, dev: &Device<B>, start: u64, len: u64, step: u64) -> u64 {
        // SAFETY: every page of the range is one mapping this allocator made on this device
        // and has not unmapped; the callers hold no block over them (pages inside a free
        // block, or mapped by a failed growth) and synchronized the device first where work
        // could have used them.
        match unsafe {
            dev.hal()
                .unmap_physical_pages(DevicePtr(start), step, len / step)
        } {
            Ok(()) => len,
            Err(e) => {
                let page = start + len - (e.done + 1) * step;
                tracing::warn!(err = %e.error, page, "unmapping a page of an expandable segment failed");
                e.done * step
            }
        }
    }

    /// Gives back the address range of expandable segment `e`, which has nothing mapped.
    /// On failure the empty segment stays, to be grown again.
    fn release_reservation(&mut self, dev: &Device<B>, e: usize) {
        let (base, small) = (
            self.arena.expandable[e].base,
            self.arena.expandable[e].small,
        );
        // SAFETY: the range came from `reserve_address` on this device and was not released;
        // nothing is mapped in it, so no block and no work can use it.
        if let Err(err) = unsafe { dev.hal().release_address(DevicePtr(base)) } {
            tracing::warn!(%err, base, "releasing the addresses of an expandable segment failed");
            return;
        }
        self.arena.expandable.swap_remove(e);
        self.stats.segment.decrease(small, 1);
        tracing::debug!(base, "expandable segment released");
    }

    /// Whether cached blocks of expandable segments must be passed over: expandable segments
    /// are off but some exist (PyTorch serves no request from them then).
    #[inline(always)]
    pub(super) fn skip_expandable(&self) -> bool {
        !self.config.expandable_segments && !self.arena.expandable.is_empty()
    }
}

/// A backend error as a growth failure: out of memory lets the ladder run.
fn failure(e: HalError) -> SegmentFailure {
    match e {
        HalError::OutOfMemory { .. } => SegmentFailure::OutOfMemory,
        e => SegmentFailure::Other(e),
    }
}
