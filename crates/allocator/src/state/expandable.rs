//! Expandable segments (PyTorch's `expandable_segments:True`): one segment per (stream,
//! small/large) of the default pool, an address reservation into which pages of physical
//! memory are mapped on demand (`hal::Device::map_physical`).
//!
//! Each contiguous mapped range of a reservation is a [`Segment`] of its own, covered by
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
use crate::block::{BlockId, NewBlock, Segment, SegmentId, Status, NONE};
use crate::size::SizeClass;
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::{Device, DevicePtr, StreamId};
use std::cell::Cell;

/// The address reservation of one (stream, small) of the default pool and the ranges mapped
/// in it.
pub(super) struct Expandable {
    stream: StreamId,
    small: bool,
    /// The reservation's address.
    base: u64,
    /// Bytes reserved from `base` on.
    size: u64,
    /// Memory is mapped and unmapped in pages of this many bytes (one device mapping each).
    step: u64,
    /// The mapped ranges by address; an unmapped hole lies between two of them.
    ranges: Vec<Range>,
}

/// The gaps a growth maps, `(addr, len)` in address order. The first is kept inline: a
/// growth nearly always maps one gap, and planning runs on every miss.
#[derive(Default)]
struct Gaps {
    first: Option<(u64, u64)>,
    rest: Vec<(u64, u64)>,
}

impl Gaps {
    #[inline]
    fn push(&mut self, gap: (u64, u64)) {
        match self.first {
            None => self.first = Some(gap),
            Some(_) => self.rest.push(gap),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    #[inline]
    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.first.into_iter().chain(self.rest.iter().copied())
    }
}

/// A mapped range of an expandable segment.
struct Range {
    /// Its segment.
    seg: SegmentId,
    /// The range's last block when last looked up (`NONE` at first): growth planning asks for
    /// it on every miss, and walking the whole block list each time is quadratic in the
    /// blocks of a range. A hint only: blocks split and merge without updating it, so it is
    /// used when it is still a live block of the range, and the walk goes on from there.
    tail: Cell<BlockId>,
}

impl Range {
    fn new(seg: SegmentId) -> Self {
        Range {
            seg,
            tail: Cell::new(NONE),
        }
    }
}

impl Expandable {
    fn end(&self) -> u64 {
        self.base + self.size
    }
}

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
        let e = match self.expandable_of(stream, small) {
            Some(e) => e,
            None => self.reserve_segment(dev, stream, small, granularity)?,
        };
        let mut result = Err(SegmentFailure::OutOfMemory);
        // Whether the block in `result` is in its free list: the tail is; the last gap mapped
        // is left out of it (it is handed out right away), the gaps before it go in.
        let mut cached = true;
        match self.plan_growth(e, rounded) {
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
                if self.expandable[e].ranges.is_empty() {
                    // Nothing mapped (a reservation made for this request, or emptied
                    // before): give it back.
                    self.release_reservation(dev, e);
                }
                Err(err)
            }
        }
    }

    /// The index of the expandable segment of (stream, small).
    pub(super) fn expandable_of(&self, stream: StreamId, small: bool) -> Option<usize> {
        self.expandable
            .iter()
            .position(|e| e.stream == stream && e.small == small)
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
        self.expandable.push(Expandable {
            stream,
            small,
            base: ptr.0,
            size,
            step,
            ranges: Vec::new(),
        });
        self.stats.segment.increase(small, 1);
        tracing::debug!(ptr = %ptr, size, step, stream = stream.0, small, "expandable segment reserved");
        Ok(self.expandable.len() - 1)
    }

    /// Bytes a miss of `rounded` bytes maps into the (stream, small) expandable segment
    /// (`rounded` when it is not reserved yet or has no room).
    pub(super) fn expandable_growth(&self, stream: StreamId, small: bool, rounded: u64) -> u64 {
        self.expandable_of(stream, small)
            .and_then(|e| self.plan_growth(e, rounded))
            .map_or(rounded, |(_, maps)| maps.iter().map(|m| m.1).sum())
    }

    /// The unmapped gap `k` of expandable segment `e`: before its range `k` (or, for `k` =
    /// the number of ranges, after the last one up to the end of the reservation).
    fn gap(&self, e: usize, k: usize) -> (u64, u64) {
        let x = &self.expandable[e];
        let start = match k {
            0 => x.base,
            _ => self.arena.segments.get(x.ranges[k - 1].seg).end(),
        };
        let end = match x.ranges.get(k) {
            Some(r) => self.arena.segments.get(r.seg).addr,
            None => x.end(),
        };
        (start, end)
    }

    /// Where to map for a free block of `rounded` bytes in expandable segment `e`, at the
    /// lowest address that can hold one: the free block at the end of the range before the
    /// first gap (`NONE` if there is none) and the gaps to map, `(addr, len)` in address
    /// order, which form with the free blocks between them one free run of `rounded` bytes or
    /// more. `None` when no run can.
    fn plan_growth(&self, e: usize, rounded: u64) -> Option<(BlockId, Gaps)> {
        let x = &self.expandable[e];
        let (n, step) = (x.ranges.len(), x.step);
        let free = |b: BlockId| b != NONE && self.arena.blocks.get(b).status == Status::Free;
        // Gap `k` runs from the end of range `k - 1` (the reservation's base for the first)
        // to the start of range `k` (the reservation's end after the last).
        let mut gap_start = x.base;
        for k in 0..=n {
            let first_gap = (
                gap_start,
                x.ranges
                    .get(k)
                    .map_or(x.end(), |r| self.arena.segments.get(r.seg).addr),
            );
            if let Some(r) = x.ranges.get(k) {
                gap_start = self.arena.segments.get(r.seg).end();
            }
            if first_gap.0 == first_gap.1 {
                continue;
            }
            let tail = match k {
                0 => NONE,
                _ => self.range_tail(&x.ranges[k - 1]),
            };
            let tail = if free(tail) { tail } else { NONE };
            let mut avail = if tail == NONE {
                0
            } else {
                self.arena.blocks.get(tail).size
            };
            let mut maps = Gaps::default();
            let mut j = k;
            loop {
                let (start, end) = if j == k { first_gap } else { self.gap(e, j) };
                let need = rounded.saturating_sub(avail);
                if need == 0 {
                    return Some((tail, maps));
                }
                if start == end {
                    break;
                }
                if end - start >= need {
                    let len = need.checked_next_multiple_of(step)?.min(end - start);
                    maps.push((start, len));
                    return Some((tail, maps));
                }
                maps.push((start, end - start));
                avail += end - start;
                // The run goes on through the next range while it is free.
                let Some(r) = x.ranges.get(j) else {
                    break;
                };
                let head = self.arena.segments.get(r.seg).head;
                if !free(head) {
                    break;
                }
                avail += self.arena.blocks.get(head).size;
                if avail >= rounded {
                    return Some((tail, maps));
                }
                if self.arena.blocks.get(head).next != NONE {
                    break;
                }
                j += 1;
            }
        }
        None
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
        let step = self.expandable[e].step;
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
    /// a free block ([`State::insert_mapped`]); returns that block, in its free list when
    /// `cache`.
    fn add_mapped(&mut self, e: usize, addr: u64, len: u64, cache: bool) -> BlockId {
        let x = &self.expandable[e];
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
        self.insert_mapped(e, addr, len, cache)
    }

    /// Adds the newly mapped `[addr, addr + len)` to expandable segment `e`: it extends the
    /// range that ends there (or starts a new one), joins the range that starts right after,
    /// and becomes a free block merged with free neighbours. Returns that block, in its free
    /// list when `cache`.
    fn insert_mapped(&mut self, e: usize, addr: u64, len: u64, cache: bool) -> BlockId {
        let x = &self.expandable[e];
        let pos = x
            .ranges
            .partition_point(|r| self.arena.segments.get(r.seg).addr < addr);
        let left = pos
            .checked_sub(1)
            .map(|i| &x.ranges[i])
            .filter(|r| self.arena.segments.get(r.seg).end() == addr);
        let left_tail = left.map_or(NONE, |r| self.range_tail(r));
        let left = left.map(|r| r.seg);
        let right = x
            .ranges
            .get(pos)
            .map(|r| r.seg)
            .filter(|&r| self.arena.segments.get(r).addr == addr + len);
        let right_head = right.map_or(NONE, |r| self.arena.segments.get(r).head);
        let left_free =
            left_tail != NONE && self.arena.blocks.get(left_tail).status == Status::Free;
        for b in [left_tail, right_head] {
            if b != NONE && self.arena.blocks.get(b).status == Status::Free {
                self.detach_free(b);
            }
        }
        let (b, seg) = match left {
            // A free block ending the range takes the pages itself: what a new block merged
            // into it would give, without making and dropping that block.
            Some(l) if left_free => {
                self.arena.blocks.get_mut(left_tail).size += len;
                (left_tail, l)
            }
            Some(l) => {
                let b = self.new_block(e, addr, len, l, left_tail, NONE);
                self.arena.blocks.get_mut(left_tail).next = b;
                (b, l)
            }
            None => {
                let b = self.new_block(e, addr, len, NONE, NONE, NONE);
                (b, self.add_range(e, addr, len, b))
            }
        };
        if left.is_some() {
            self.arena.segments.get_mut(seg).size += len;
        }
        // `b` is the last block of `seg` now.
        if let Some(r) = right {
            self.join_range(e, seg, b, r);
        }
        let b = self.merge_free_neighbours(b);
        match cache {
            true => self.attach_free(b),
            false => self.count_free_split(b),
        }
        b
    }

    /// A new free block of expandable segment `e` (in no free list, not counted).
    fn new_block(
        &mut self,
        e: usize,
        addr: u64,
        size: u64,
        segment: SegmentId,
        prev: BlockId,
        next: BlockId,
    ) -> BlockId {
        let x = &self.expandable[e];
        self.arena.blocks.insert(NewBlock {
            addr,
            size,
            stream: x.stream,
            pool: PoolId::DEFAULT,
            small: x.small,
            expandable: true,
            segment,
            prev,
            next,
        })
    }

    /// Registers `[addr, addr + size)`, covered by the blocks from `head` on, as a new range
    /// of expandable segment `e`, and returns it.
    fn add_range(&mut self, e: usize, addr: u64, size: u64, head: BlockId) -> SegmentId {
        let x = &self.expandable[e];
        let seg = self.arena.segments.insert(Segment {
            addr,
            size,
            stream: x.stream,
            pool: PoolId::DEFAULT,
            small: x.small,
            head,
            live: true,
            expandable: Some(x.step),
        });
        self.relabel(head, seg);
        let segments = &self.arena.segments;
        let ranges = &mut self.expandable[e].ranges;
        let pos = ranges.partition_point(|r| segments.get(r.seg).addr < addr);
        ranges.insert(pos, Range::new(seg));
        seg
    }

    /// Appends range `right` of expandable segment `e`, which starts where range `left` (whose
    /// last block is `tail`) ends, to `left`.
    fn join_range(&mut self, e: usize, left: SegmentId, tail: BlockId, right: SegmentId) {
        let (head, size) = (
            self.arena.segments.get(right).head,
            self.arena.segments.get(right).size,
        );
        self.arena.blocks.get_mut(tail).next = head;
        self.arena.blocks.get_mut(head).prev = tail;
        self.relabel(head, left);
        self.arena.segments.get_mut(left).size += size;
        self.arena.segments.remove(right);
        self.expandable[e].ranges.retain(|r| r.seg != right);
    }

    /// Merges free block `b` (in no free list, not counted) with its free neighbours, which
    /// are in no free list and not counted either; returns the merged block.
    fn merge_free_neighbours(&mut self, mut b: BlockId) -> BlockId {
        let prev = self.arena.blocks.get(b).prev;
        if prev != NONE && self.arena.blocks.get(prev).status == Status::Free {
            self.absorb_next(prev);
            b = prev;
        }
        let next = self.arena.blocks.get(b).next;
        if next != NONE && self.arena.blocks.get(next).status == Status::Free {
            self.absorb_next(b);
        }
        b
    }

    /// Block `b` takes over the block after it.
    fn absorb_next(&mut self, b: BlockId) {
        let next = self.arena.blocks.get(b).next;
        let (size, after) = (
            self.arena.blocks.get(next).size,
            self.arena.blocks.get(next).next,
        );
        let blk = self.arena.blocks.get_mut(b);
        blk.size += size;
        blk.next = after;
        if after != NONE {
            self.arena.blocks.get_mut(after).prev = b;
        }
        self.arena.blocks.remove(next);
    }

    /// Sets the segment of `b` and every block after it to `seg`.
    fn relabel(&mut self, mut b: BlockId, seg: SegmentId) {
        while b != NONE {
            let blk = self.arena.blocks.get_mut(b);
            blk.segment = seg;
            b = blk.next;
        }
    }

    /// Takes free block `b` out of its free list and of the split statistics, before its size
    /// or neighbours change.
    fn detach_free(&mut self, b: BlockId) {
        self.arena.uncache(b);
        let blk = self.arena.blocks.get(b);
        if blk.is_split() {
            self.stats.inactive_split.decrease(blk.small, 1);
            self.stats
                .inactive_split_bytes
                .decrease(blk.small, blk.size);
        }
    }

    /// Puts free block `b` back into its free list and the split statistics.
    fn attach_free(&mut self, b: BlockId) {
        self.count_free_split(b);
        self.arena.cache(b);
    }

    /// Counts free block `b` in the split statistics when it is split.
    fn count_free_split(&mut self, b: BlockId) {
        let blk = self.arena.blocks.get(b);
        if blk.is_split() {
            self.stats.inactive_split.increase(blk.small, 1);
            self.stats
                .inactive_split_bytes
                .increase(blk.small, blk.size);
        }
    }

    /// The last block of range `r` (`NONE` when it has none), walking from its hint when
    /// that is still a block of the range (any is: the walk reaches the last one).
    #[inline]
    fn range_tail(&self, r: &Range) -> BlockId {
        let hint = r.tail.get();
        let usable = hint != NONE
            && self.arena.blocks.get(hint).status != Status::Dead
            && self.arena.blocks.get(hint).segment == r.seg;
        let mut b = if usable {
            hint
        } else {
            self.arena.segments.get(r.seg).head
        };
        while b != NONE {
            let next = self.arena.blocks.get(b).next;
            if next == NONE {
                break;
            }
            b = next;
        }
        r.tail.set(b);
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
        let (base, small) = (self.expandable[e].base, self.expandable[e].small);
        // SAFETY: the range came from `reserve_address` on this device and was not released;
        // nothing is mapped in it, so no block and no work can use it.
        if let Err(err) = unsafe { dev.hal().release_address(DevicePtr(base)) } {
            tracing::warn!(%err, base, "releasing the addresses of an expandable segment failed");
            return;
        }
        self.expandable.swap_remove(e);
        self.stats.segment.decrease(small, 1);
        tracing::debug!(base, "expandable segment released");
    }

    /// Whether cached blocks of expandable segments must be passed over: expandable segments
    /// are off but some exist (PyTorch serves no request from them then).
    #[inline(always)]
    pub(super) fn skip_expandable(&self) -> bool {
        !self.config.expandable_segments && !self.expandable.is_empty()
    }

    /// Consistency of the expandable segments (for `check_invariants`): ranges are live
    /// segments of their reservation, page-aligned, sorted, apart, inside it; every segment
    /// with pages is a range of one.
    pub(super) fn check_expandable(&self) -> Result<(), String> {
        for x in &self.expandable {
            let mut cursor = x.base;
            for (i, r) in x.ranges.iter().enumerate() {
                let s = self.arena.segments.get(r.seg);
                let fits = s.live
                    && s.expandable == Some(x.step)
                    && s.stream == x.stream
                    && s.small == x.small
                    && s.size > 0
                    && s.size % x.step == 0
                    && (s.addr > cursor || (i == 0 && s.addr == cursor))
                    && (s.addr - x.base) % x.step == 0;
                if !fits {
                    return Err(format!(
                        "expandable segment {:#x}: range {:#x} (+{:#x}) misplaced",
                        x.base, s.addr, s.size
                    ));
                }
                cursor = s.end();
            }
            if cursor > x.end() {
                return Err(format!(
                    "expandable segment {:#x}: mapped past its reservation",
                    x.base
                ));
            }
        }
        for e in 0..self.expandable.len() {
            if self.unmappable_cached(e) != self.unmappable_blocks(e) {
                return Err(format!(
                    "expandable segment {:#x}: its free list and its blocks disagree on what to unmap",
                    self.expandable[e].base
                ));
            }
        }
        for (id, s) in self.arena.segments.by_addr() {
            if s.expandable.is_some()
                && !self
                    .expandable
                    .iter()
                    .any(|x| x.ranges.iter().any(|r| r.seg == id))
            {
                return Err(format!(
                    "mapped range {:#x} in no expandable segment",
                    s.addr
                ));
            }
        }
        Ok(())
    }
}

/// A backend error as a growth failure: out of memory lets the ladder run.
fn failure(e: HalError) -> SegmentFailure {
    match e {
        HalError::OutOfMemory { .. } => SegmentFailure::OutOfMemory,
        e => SegmentFailure::Other(e),
    }
}
