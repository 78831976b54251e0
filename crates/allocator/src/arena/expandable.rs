//! The arena's side of expandable segments (`state/expandable` has the policy and the
//! device calls): the reservations and their mapped ranges, each range an arena segment;
//! where a growth maps pages (growth planning), how newly mapped pages join the ranges and
//! the free blocks around them, how an unmapped hole cuts a range in two, which free blocks
//! have whole pages to unmap, and the ranges' invariants.

use super::{Arena, SplitDelta};
use crate::block::{BlockId, NewBlock, Segment, SegmentId, Status, NONE};
use crate::snapshot::PoolId;
use braid_stream_core::StreamId;
use std::cell::Cell;

/// The address reservation of one (stream, small) of the default pool and the ranges mapped
/// in it.
#[derive(Debug)]
pub(crate) struct Expandable {
    pub stream: StreamId,
    pub small: bool,
    /// The reservation's address.
    pub base: u64,
    /// Bytes reserved from `base` on.
    pub size: u64,
    /// Memory is mapped and unmapped in pages of this many bytes (one device mapping each).
    pub step: u64,
    /// The mapped ranges by address; an unmapped hole lies between two of them.
    pub ranges: Vec<Range>,
}

/// The gaps a growth maps, `(addr, len)` in address order. The first is kept inline: a
/// growth nearly always maps one gap, and planning runs on every miss.
#[derive(Default)]
pub(crate) struct Gaps {
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
    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.first.into_iter().chain(self.rest.iter().copied())
    }
}

/// A mapped range of an expandable segment.
#[derive(Debug)]
pub(crate) struct Range {
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
    /// A reservation of `size` bytes at `base` for (stream, small), mapped in pages of `step`
    /// bytes, with nothing mapped yet.
    pub(crate) fn new(stream: StreamId, small: bool, base: u64, size: u64, step: u64) -> Self {
        Expandable {
            stream,
            small,
            base,
            size,
            step,
            ranges: Vec::new(),
        }
    }

    fn end(&self) -> u64 {
        self.base + self.size
    }
}

impl Arena {
    /// The index of the expandable segment of (stream, small).
    pub(crate) fn expandable_of(&self, stream: StreamId, small: bool) -> Option<usize> {
        self.expandable
            .iter()
            .position(|e| e.stream == stream && e.small == small)
    }

    /// The unmapped gap `k` of expandable segment `e`: before its range `k` (or, for `k` =
    /// the number of ranges, after the last one up to the end of the reservation).
    fn gap(&self, e: usize, k: usize) -> (u64, u64) {
        let x = &self.expandable[e];
        let start = match k {
            0 => x.base,
            _ => self.segments.get(x.ranges[k - 1].seg).end(),
        };
        let end = match x.ranges.get(k) {
            Some(r) => self.segments.get(r.seg).addr,
            None => x.end(),
        };
        (start, end)
    }

    /// Where to map for a free block of `rounded` bytes in expandable segment `e`, at the
    /// lowest address that can hold one: the free block at the end of the range before the
    /// first gap (`NONE` if there is none) and the gaps to map, `(addr, len)` in address
    /// order, which form with the free blocks between them one free run of `rounded` bytes or
    /// more. `None` when no run can.
    pub(crate) fn plan_growth(&self, e: usize, rounded: u64) -> Option<(BlockId, Gaps)> {
        let x = &self.expandable[e];
        let (n, step) = (x.ranges.len(), x.step);
        let free = |b: BlockId| b != NONE && self.blocks.get(b).status == Status::Free;
        // Gap `k` runs from the end of range `k - 1` (the reservation's base for the first)
        // to the start of range `k` (the reservation's end after the last).
        let mut gap_start = x.base;
        for k in 0..=n {
            let first_gap = (
                gap_start,
                x.ranges
                    .get(k)
                    .map_or(x.end(), |r| self.segments.get(r.seg).addr),
            );
            if let Some(r) = x.ranges.get(k) {
                gap_start = self.segments.get(r.seg).end();
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
                self.blocks.get(tail).size
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
                let head = self.segments.get(r.seg).head;
                if !free(head) {
                    break;
                }
                avail += self.blocks.get(head).size;
                if avail >= rounded {
                    return Some((tail, maps));
                }
                if self.blocks.get(head).next != NONE {
                    break;
                }
                j += 1;
            }
        }
        None
    }

    /// Adds the newly mapped `[addr, addr + len)` to expandable segment `e`: it extends the
    /// range that ends there (or starts a new one), joins the range that starts right after,
    /// and becomes a free block merged with free neighbours. Returns that block, in its free
    /// list when `cache`.
    pub(crate) fn insert_mapped(
        &mut self,
        e: usize,
        addr: u64,
        len: u64,
        cache: bool,
    ) -> (BlockId, SplitDelta) {
        let x = &self.expandable[e];
        let pos = x
            .ranges
            .partition_point(|r| self.segments.get(r.seg).addr < addr);
        let left = pos
            .checked_sub(1)
            .map(|i| &x.ranges[i])
            .filter(|r| self.segments.get(r.seg).end() == addr);
        let left_tail = left.map_or(NONE, |r| self.range_tail(r));
        let left = left.map(|r| r.seg);
        let right = x
            .ranges
            .get(pos)
            .map(|r| r.seg)
            .filter(|&r| self.segments.get(r).addr == addr + len);
        let right_head = right.map_or(NONE, |r| self.segments.get(r).head);
        let left_free = left_tail != NONE && self.blocks.get(left_tail).status == Status::Free;
        let mut split = SplitDelta::default();
        for b in [left_tail, right_head] {
            if b != NONE && self.blocks.get(b).status == Status::Free {
                split += self.detach_free(b);
            }
        }
        let (b, seg) = match left {
            // A free block ending the range takes the pages itself: what a new block merged
            // into it would give, without making and dropping that block.
            Some(l) if left_free => {
                self.blocks.get_mut(left_tail).size += len;
                (left_tail, l)
            }
            Some(l) => {
                let b = self.new_block(e, addr, len, l, left_tail, NONE);
                self.blocks.get_mut(left_tail).next = b;
                (b, l)
            }
            None => {
                let b = self.new_block(e, addr, len, NONE, NONE, NONE);
                (b, self.add_range(e, addr, len, b))
            }
        };
        if left.is_some() {
            self.segments.get_mut(seg).size += len;
        }
        // `b` is the last block of `seg` now.
        if let Some(r) = right {
            self.join_range(e, seg, b, r);
        }
        let b = self.merge_free_neighbours(b);
        split += match cache {
            true => self.attach_free(b),
            false => SplitDelta::of_free(self.blocks.get(b)),
        };
        (b, split)
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
        self.blocks.insert(NewBlock {
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
        let seg = self.segments.insert(Segment {
            addr,
            size,
            stream: x.stream,
            pool: PoolId::DEFAULT,
            small: x.small,
            head,
            live: true,
            expandable: Some(x.step),
            vmm: false,
            asleep: false,
        });
        self.relabel(head, seg);
        let segments = &self.segments;
        let ranges = &mut self.expandable[e].ranges;
        let pos = ranges.partition_point(|r| segments.get(r.seg).addr < addr);
        ranges.insert(pos, Range::new(seg));
        seg
    }

    /// Appends range `right` of expandable segment `e`, which starts where range `left` (whose
    /// last block is `tail`) ends, to `left`.
    fn join_range(&mut self, e: usize, left: SegmentId, tail: BlockId, right: SegmentId) {
        let (head, size) = (self.segments.get(right).head, self.segments.get(right).size);
        self.blocks.get_mut(tail).next = head;
        self.blocks.get_mut(head).prev = tail;
        self.relabel(head, left);
        self.segments.get_mut(left).size += size;
        self.segments.remove(right);
        self.expandable[e].ranges.retain(|r| r.seg != right);
    }

    /// Merges free block `b` (in no free list, not counted) with its free neighbours, which
    /// are in no free list and not counted either; returns the merged block.
    fn merge_free_neighbours(&mut self, mut b: BlockId) -> BlockId {
        let prev = self.blocks.get(b).prev;
        if prev != NONE && self.blocks.get(prev).status == Status::Free {
            self.absorb_next(prev);
            b = prev;
        }
        let next = self.blocks.get(b).next;
        if next != NONE && self.blocks.get(next).status == Status::Free {
            self.absorb_next(b);
        }
        b
    }

    /// Block `b` takes over the block after it.
    fn absorb_next(&mut self, b: BlockId) {
        let next = self.blocks.get(b).next;
        let (size, after) = (self.blocks.get(next).size, self.blocks.get(next).next);
        let blk = self.blocks.get_mut(b);
        blk.size += size;
        blk.next = after;
        if after != NONE {
            self.blocks.get_mut(after).prev = b;
        }
        self.blocks.remove(next);
    }

    /// Sets the segment of `b` and every block after it to `seg`.
    fn relabel(&mut self, mut b: BlockId, seg: SegmentId) {
        while b != NONE {
            let blk = self.blocks.get_mut(b);
            blk.segment = seg;
            b = blk.next;
        }
    }

    /// Takes free block `b` out of its free list before its size or neighbours change; returns
    /// what that takes from the split free blocks.
    fn detach_free(&mut self, b: BlockId) -> SplitDelta {
        self.uncache(b);
        SplitDelta::of_free(self.blocks.get(b)).negated()
    }

    /// Puts free block `b` back into its free list; returns what that adds to the split free
    /// blocks.
    fn attach_free(&mut self, b: BlockId) -> SplitDelta {
        self.cache(b);
        SplitDelta::of_free(self.blocks.get(b))
    }

    /// The last block of range `r` (`NONE` when it has none), walking from its hint when
    /// that is still a block of the range (any is: the walk reaches the last one).
    #[inline]
    pub(crate) fn range_tail(&self, r: &Range) -> BlockId {
        let hint = r.tail.get();
        let usable = hint != NONE
            && self.blocks.get(hint).status != Status::Dead
            && self.blocks.get(hint).segment == r.seg;
        let mut b = if usable {
            hint
        } else {
            self.segments.get(r.seg).head
        };
        while b != NONE {
            let next = self.blocks.get(b).next;
            if next == NONE {
                break;
            }
            b = next;
        }
        r.tail.set(b);
        b
    }

    /// Consistency of the expandable segments (for `check_invariants`): ranges are live
    /// segments of their reservation, page-aligned, sorted, apart, inside it; every segment
    /// with pages is a range of one.
    pub(crate) fn check_expandable(&self) -> Result<(), String> {
        for x in &self.expandable {
            let mut cursor = x.base;
            for (i, r) in x.ranges.iter().enumerate() {
                let s = self.segments.get(r.seg);
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
        for (id, s) in self.segments.by_addr() {
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

    /// The whole pages `[lo, hi)` inside free block `b` of an expandable segment, if any.
    pub(crate) fn whole_pages(&self, b: BlockId) -> Option<(u64, u64)> {
        let blk = self.blocks.get(b);
        let s = self.segments.get(blk.segment);
        let step = s.expandable?;
        // Ranges start on page boundaries.
        let lo = s.addr + (blk.addr - s.addr).checked_next_multiple_of(step)?;
        let hi = s.addr + (blk.end() - s.addr) / step * step;
        (lo < hi).then_some((lo, hi))
    }

    /// Removes the unmapped `[h0, h1)` from free block `b` of a range of expandable segment
    /// `e`: the block keeps the part before the hole (or goes), a new free block takes the
    /// part after it, and the blocks after the hole form a new range.
    pub(crate) fn cut_hole(&mut self, e: usize, b: BlockId, h0: u64, h1: u64) -> SplitDelta {
        let mut split = self.detach_free(b);
        let blk = self.blocks.get(b);
        let (addr, end, prev, next, seg) = (blk.addr, blk.end(), blk.prev, blk.next, blk.segment);
        let seg_end = self.segments.get(seg).end();
        // The blocks after the hole.
        let after = if h1 < end {
            let a = self.new_block(e, h1, end - h1, seg, NONE, next);
            if next != NONE {
                self.blocks.get_mut(next).prev = a;
            }
            a
        } else {
            if next != NONE {
                self.blocks.get_mut(next).prev = NONE;
            }
            next
        };
        // The blocks before it.
        let before = if h0 > addr {
            let blk = self.blocks.get_mut(b);
            blk.size = h0 - addr;
            blk.next = NONE;
            b
        } else {
            if prev != NONE {
                self.blocks.get_mut(prev).next = NONE;
            }
            self.blocks.remove(b);
            prev
        };
        if before == NONE {
            self.segments.remove(seg);
            self.expandable[e].ranges.retain(|r| r.seg != seg);
        } else {
            let s = self.segments.get_mut(seg);
            s.size = h0 - s.addr;
        }
        if after != NONE {
            self.add_range(e, h1, seg_end - h1, after);
        }
        if before == b {
            split += self.attach_free(b);
        }
        if h1 < end {
            split += self.attach_free(after);
        }
        split
    }

    /// The free blocks of expandable segment `e` with whole pages inside, in address order.
    pub(crate) fn unmappable_blocks(&self, e: usize) -> Vec<BlockId> {
        let mut out = Vec::new();
        for r in &self.expandable[e].ranges {
            let mut b = self.segments.get(r.seg).head;
            while b != NONE {
                if self.blocks.get(b).status == Status::Free && self.whole_pages(b).is_some() {
                    out.push(b);
                }
                b = self.blocks.get(b).next;
            }
        }
        out
    }

    /// [`Arena::unmappable_blocks`] from the free list of expandable segment `e` rather than
    /// from all its blocks (a stream's segment can hold thousands of live blocks, and
    /// lifetime placement asks on every miss): the list's entries of a page or more in the
    /// segment. The same answer whenever every free block is cached, that is outside a
    /// malloc in progress (its block in hand is free but in no list).
    pub(crate) fn unmappable_cached(&self, e: usize) -> Vec<BlockId> {
        let (stream, small, step) = {
            let x = &self.expandable[e];
            (x.stream, x.small, x.step)
        };
        let Some(list) = self
            .free
            .of_pool(PoolId::DEFAULT)
            .and_then(|p| p.lists(small).find(|(s, _)| *s == stream))
            .map(|(_, list)| list)
        else {
            return Vec::new();
        };
        let keys = &list.keys()[list.lower_bound(step)..];
        if keys.is_empty() {
            // The usual answer on a miss (no free block of a page): no vector to build.
            return Vec::new();
        }
        let mut out: Vec<BlockId> = keys
            .iter()
            .map(|k| k.id)
            .filter(|&b| self.blocks.get(b).expandable && self.whole_pages(b).is_some())
            .collect();
        out.sort_unstable_by_key(|&b| self.blocks.get(b).addr);
        out
    }
}
