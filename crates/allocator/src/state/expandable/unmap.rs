//! Releasing memory of expandable segments: the whole pages inside a free block are
//! unmapped, wherever the block lies, leaving a hole that splits its range in two (PyTorch's
//! `unmap_block`); the partial pages at the block's edges stay mapped as smaller free blocks.

use super::super::State;
use crate::block::{BlockId, Status, NONE};
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::Backend;
use braid_stream_core::Device;

impl<B: Backend> State<B> {
    /// The whole pages `[lo, hi)` inside free block `b` of an expandable segment, if any.
    fn whole_pages(&self, b: BlockId) -> Option<(u64, u64)> {
        let blk = self.arena.blocks.get(b);
        let s = self.arena.segments.get(blk.segment);
        let step = s.expandable?;
        // Ranges start on page boundaries.
        let lo = s.addr + (blk.addr - s.addr).checked_next_multiple_of(step)?;
        let hi = s.addr + (blk.end() - s.addr) / step * step;
        (lo < hi).then_some((lo, hi))
    }

    /// Unmaps the whole pages inside free block `b` of an expandable segment (the device is
    /// synchronized), and releases the reservation once nothing is mapped. Returns the bytes
    /// unmapped.
    pub(in crate::state) fn unmap_free_block(&mut self, dev: &Device<B>, b: BlockId) -> u64 {
        let Some((lo, hi)) = self.whole_pages(b) else {
            return 0;
        };
        let blk = self.arena.blocks.get(b);
        let (stream, small) = (blk.stream, blk.small);
        let Some(e) = self.expandable_of(stream, small) else {
            return 0;
        };
        let step = self.expandable[e].step;
        let unmapped = self.unmap_pages(dev, lo, hi - lo, step);
        if unmapped == 0 {
            return 0;
        }
        let start = hi - unmapped;
        self.cut_hole(e, b, start, hi);
        self.stats.reserved_bytes.decrease(small, unmapped);
        self.stats.num_device_free += unmapped / step;
        self.history.record(
            HistoryAction::SegmentUnmap,
            start,
            unmapped,
            stream,
            PoolId::DEFAULT,
        );
        tracing::debug!(
            addr = start,
            unmapped,
            stream = stream.0,
            "free pages unmapped from an expandable segment"
        );
        if self.expandable[e].ranges.is_empty() {
            self.release_reservation(dev, e);
        }
        unmapped
    }

    /// Removes the unmapped `[h0, h1)` from free block `b` of a range of expandable segment
    /// `e`: the block keeps the part before the hole (or goes), a new free block takes the
    /// part after it, and the blocks after the hole form a new range.
    fn cut_hole(&mut self, e: usize, b: BlockId, h0: u64, h1: u64) {
        self.detach_free(b);
        let blk = self.arena.blocks.get(b);
        let (addr, end, prev, next, seg) = (blk.addr, blk.end(), blk.prev, blk.next, blk.segment);
        let seg_end = self.arena.segments.get(seg).end();
        // The blocks after the hole.
        let after = if h1 < end {
            let a = self.new_block(e, h1, end - h1, seg, NONE, next);
            if next != NONE {
                self.arena.blocks.get_mut(next).prev = a;
            }
            a
        } else {
            if next != NONE {
                self.arena.blocks.get_mut(next).prev = NONE;
            }
            next
        };
        // The blocks before it.
        let before = if h0 > addr {
            let blk = self.arena.blocks.get_mut(b);
            blk.size = h0 - addr;
            blk.next = NONE;
            b
        } else {
            if prev != NONE {
                self.arena.blocks.get_mut(prev).next = NONE;
            }
            self.arena.blocks.remove(b);
            prev
        };
        if before == NONE {
            self.arena.segments.remove(seg);
            self.expandable[e].ranges.retain(|r| r.seg != seg);
        } else {
            let s = self.arena.segments.get_mut(seg);
            s.size = h0 - s.addr;
        }
        if after != NONE {
            self.add_range(e, h1, seg_end - h1, after);
        }
        if before == b {
            self.attach_free(b);
        }
        if h1 < end {
            self.attach_free(after);
        }
    }

    /// Unmaps the whole pages inside every free block of every expandable segment (one device
    /// synchronize first, as PyTorch does before unmapping). Returns the bytes unmapped.
    pub(in crate::state) fn trim_expandable(&mut self, dev: &Device<B>) -> u64 {
        let candidates = (0..self.expandable.len())
            .flat_map(|e| self.unmappable_blocks(e))
            .collect();
        self.unmap_free_blocks(dev, candidates)
    }

    /// The free blocks of expandable segment `e` with whole pages inside, in address order.
    pub(in crate::state) fn unmappable_blocks(&self, e: usize) -> Vec<BlockId> {
        let mut out = Vec::new();
        for r in &self.expandable[e].ranges {
            let mut b = self.arena.segments.get(r.seg).head;
            while b != NONE {
                if self.arena.blocks.get(b).status == Status::Free && self.whole_pages(b).is_some()
                {
                    out.push(b);
                }
                b = self.arena.blocks.get(b).next;
            }
        }
        out
    }

    /// [`State::unmappable_blocks`] from the free list of expandable segment `e` rather than
    /// from all its blocks (a stream's segment can hold thousands of live blocks, and
    /// lifetime placement asks on every miss): the list's entries of a page or more in the
    /// segment. The same answer whenever every free block is cached, that is outside a
    /// malloc in progress (its block in hand is free but in no list).
    pub(in crate::state) fn unmappable_cached(&self, e: usize) -> Vec<BlockId> {
        let (stream, small, step) = {
            let x = &self.expandable[e];
            (x.stream, x.small, x.step)
        };
        let Some(list) = self
            .arena
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
            .filter(|&b| self.arena.blocks.get(b).expandable && self.whole_pages(b).is_some())
            .collect();
        out.sort_unstable_by_key(|&b| self.arena.blocks.get(b).addr);
        out
    }

    /// Synchronizes the device once and unmaps the whole pages inside each of `candidates`.
    pub(in crate::state) fn unmap_free_blocks(
        &mut self,
        dev: &Device<B>,
        candidates: Vec<BlockId>,
    ) -> u64 {
        if candidates.is_empty() {
            return 0;
        }
        if let Err(err) = dev.synchronize() {
            tracing::warn!(%err, "not unmapping free pages: device synchronize failed");
            return 0;
        }
        candidates
            .into_iter()
            .map(|b| self.unmap_free_block(dev, b))
            .sum()
    }
}
