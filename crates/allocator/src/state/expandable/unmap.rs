//! Releasing memory of expandable segments: the whole pages inside a free block are
//! unmapped, wherever the block lies, leaving a hole that splits its range in two (PyTorch's
//! `unmap_block`); the partial pages at the block's edges stay mapped as smaller free blocks.

use super::super::State;
use crate::block::BlockId;
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::Backend;
use braid_stream_core::Device;

impl<B: Backend> State<B> {
    /// Unmaps the whole pages inside free block `b` of an expandable segment (the device is
    /// synchronized), and releases the reservation once nothing is mapped. Returns the bytes
    /// unmapped.
    pub(in crate::state) fn unmap_free_block(&mut self, dev: &Device<B>, b: BlockId) -> u64 {
        let Some((lo, hi)) = self.arena.whole_pages(b) else {
            return 0;
        };
        let blk = self.arena.blocks.get(b);
        let (stream, small) = (blk.stream, blk.small);
        let Some(e) = self.arena.expandable_of(stream, small) else {
            return 0;
        };
        let step = self.arena.expandable[e].step;
        let unmapped = self.unmap_pages(dev, lo, hi - lo, step);
        if unmapped == 0 {
            return 0;
        }
        let start = hi - unmapped;
        let split = self.arena.cut_hole(e, b, start, hi);
        self.stats.note_split_change(small, split);
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
        if self.arena.expandable[e].ranges.is_empty() {
            self.release_reservation(dev, e);
        }
        unmapped
    }

    /// Unmaps the whole pages inside every free block of every expandable segment (one device
    /// synchronize first, as PyTorch does before unmapping). Returns the bytes unmapped.
    pub(in crate::state) fn trim_expandable(&mut self, dev: &Device<B>) -> u64 {
        let candidates = (0..self.arena.expandable.len())
            .flat_map(|e| self.arena.unmappable_blocks(e))
            .collect();
        self.unmap_free_blocks(dev, candidates)
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
