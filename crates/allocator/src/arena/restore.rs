//! The arena's side of checkpoint restore: a private pool's blocks, the segment a checkpoint
//! describes, and re-carving that segment into the checkpoint's blocks.

use super::{Arena, SplitDelta};
use crate::block::{BlockId, NewBlock, SegmentId, Status, NONE};
use crate::snapshot::{PoolId, SegmentSnapshot, SegmentType};

impl Arena {
    /// Blocks of `pool`'s segments, by segment address then block address.
    pub(crate) fn pool_blocks(&self, pool: PoolId) -> Vec<BlockId> {
        let mut out = Vec::new();
        for (_, seg) in self.segments.by_addr() {
            if seg.pool != pool {
                continue;
            }
            let mut b = seg.head;
            while b != NONE {
                out.push(b);
                b = self.blocks.get(b).next;
            }
        }
        out
    }

    /// The segment of `pool` that checkpointed segment `s` describes (same address, size,
    /// stream and class), if the arena holds it.
    pub(crate) fn segment_of(&self, s: &SegmentSnapshot, pool: PoolId) -> Option<SegmentId> {
        self.segments
            .overlapping(s.address, s.address + 1)
            .find(|&id| {
                let seg = self.segments.get(id);
                seg.addr == s.address
                    && seg.size == s.total_size
                    && seg.pool == pool
                    && seg.stream == s.stream
                    && seg.small == (s.segment_type == SegmentType::Small)
            })
    }

    /// Replaces the one free block checkpointed segment `s` is now (its blocks were all freed
    /// and coalesced) by the checkpoint's blocks, each cached as a free block. Returns them in
    /// address order, with what they add to the split free blocks; `None` when the arena
    /// holds no segment at `s`'s address.
    pub(crate) fn carve(&mut self, s: &SegmentSnapshot) -> Option<(Vec<BlockId>, SplitDelta)> {
        let seg = self
            .segments
            .overlapping(s.address, s.address + 1)
            .find(|&id| self.segments.get(id).addr == s.address)?;
        let whole = self.segments.get(seg).head;
        debug_assert!(
            self.blocks.get(whole).status == Status::Free && !self.blocks.get(whole).is_split(),
            "a restored segment is one free block once its blocks are freed"
        );
        let (stream, pool, small) = {
            let blk = self.blocks.get(whole);
            (blk.stream, blk.pool, blk.small)
        };
        self.uncache(whole);
        self.blocks.remove(whole);
        let mut prev = NONE;
        let mut carved = Vec::with_capacity(s.blocks.len());
        for cb in &s.blocks {
            let b = self.blocks.insert(NewBlock {
                addr: cb.address,
                size: cb.size,
                stream,
                pool,
                small,
                // Checkpoints are of private pools, which keep normal segments.
                expandable: false,
                segment: seg,
                prev,
                next: NONE,
            });
            if prev == NONE {
                self.segments.get_mut(seg).head = b;
            } else {
                self.blocks.get_mut(prev).next = b;
            }
            prev = b;
            self.cache(b);
            carved.push(b);
        }
        let mut split = SplitDelta::default();
        for &b in &carved {
            split += SplitDelta::of_free(self.blocks.get(b));
        }
        Some((carved, split))
    }
}
