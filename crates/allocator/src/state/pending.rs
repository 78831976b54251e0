//! Frees with uses on other streams, seen from the state: `record_stream`, `erase_stream`,
//! automatic uses noted by the front layer, and the pending blocks the [`Reclaimer`] holds
//! until their uses are ordered (processed, synchronized, or reused behind a stream wait).
//!
//! [`Reclaimer`]: crate::reclaim::Reclaimer

use super::State;
use crate::arena::{FitRules, Found, Request};
use crate::block::{BlockId, Status, NONE};
use crate::reclaim::add_use;
use crate::size::SizeClass;
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Domain, Stream, StreamId, StreamPosition};

impl<B: Backend> State<B> {
    /// `record_stream`: the block must not be reused before the work submitted to `stream` (of
    /// this device or a peer) up to the free has completed (ordered before the owner's next
    /// work).
    pub(crate) fn record_stream(&mut self, b: BlockId, stream: &Stream<B>) {
        let blk = self.arena.blocks.get(b);
        let device = stream.device().id().uid;
        if blk.status != Status::Allocated
            || (device == self.pending.device() && blk.stream == stream.id())
        {
            return;
        }
        self.pending.remember_any(stream);
        add_use(
            &mut self.arena.blocks.get_mut(b).uses,
            device,
            stream.id(),
            None,
        );
    }

    /// `erase_stream`: forgets the uses of allocated block `b` by stream `stream` of device
    /// `device` (recorded or noted); the caller promises the stream no longer uses it.
    pub(crate) fn erase_stream(&mut self, b: BlockId, device: u64, stream: StreamId) {
        let blk = self.arena.blocks.get_mut(b);
        if blk.status == Status::Allocated {
            blk.uses
                .retain(|u| u.stream != stream || u.device != device);
        }
    }

    /// Automatic mode: work at `pos` uses `[start, end)`. A use inside a capture counts only
    /// for blocks allocated for that capture (it runs at every replay; eager memory a graph
    /// uses is held for the graph's life instead, by `crate::graph_pins`). `pos` may be on
    /// another device's stream (a peer copy, a collective): a use like any other.
    pub(crate) fn note_use(&mut self, pos: StreamPosition, start: u64, end: u64) {
        if start >= end || self.arena.segments.is_empty() {
            return;
        }
        let capture = match pos.domain {
            Domain::Eager => None,
            Domain::Capture(c) => Some(c),
        };
        let foreign = pos.device != self.pending.device();
        if foreign && capture.is_some() {
            // Another device's capture: no block here was allocated for it (captures belong
            // to one device), so it adds no use here; `crate::graph_pins` holds the blocks
            // it uses while its graph lives.
            return;
        }
        // Segments overlapping the range (almost always one).
        let mut segs = [u32::MAX; 4];
        let mut n = 0;
        for s in self.arena.segments.overlapping(start, end) {
            if n == segs.len() {
                break;
            }
            segs[n] = s;
            n += 1;
        }
        for &seg in &segs[..n] {
            let mut b = self.arena.segments.get(seg).head;
            while b != NONE {
                let blk = self.arena.blocks.get_mut(b);
                if blk.addr >= end {
                    break;
                }
                let next = blk.next;
                if blk.end() > start
                    && (foreign || blk.stream != pos.stream)
                    && matches!(blk.status, Status::Allocated | Status::Pending)
                    && (capture.is_none() || blk.capture == capture)
                {
                    add_use(&mut blk.uses, pos.device, pos.stream, Some(pos));
                }
                b = next;
            }
        }
    }

    // ----- pending processing -----

    /// Re-checks the ordering model for every pending block (after querying the oldest events
    /// per stream when `query`), records events that could not be recorded earlier, and caches
    /// the blocks whose uses are all ordered before their owner's next work.
    pub(crate) fn process_pending(&mut self, dev: &Device<B>, query: bool) {
        if self.pending.blocks.is_empty() {
            return;
        }
        let capturing = dev.is_capturing();
        if query && !capturing {
            self.pending.poll(&self.arena.blocks, &mut self.stats);
        }
        let mut i = 0;
        while i < self.pending.blocks.len() {
            let b = self.pending.blocks[i];
            if self.pending.settle(dev, &mut self.arena.blocks, b) {
                self.pending.blocks.swap_remove(i);
                let (size, small) = (
                    self.arena.blocks.get(b).size,
                    self.arena.blocks.get(b).small,
                );
                self.stats.pending_free_bytes.decrease(size);
                self.pending_by_class.remove(small, size);
                self.free_block(dev, b);
            } else {
                if !capturing {
                    self.pending
                        .record_events(dev, &mut self.arena.blocks, b, &mut self.stats);
                }
                i += 1;
            }
        }
    }

    /// Synchronizes every pending event (and the device, for uses no event covers), then
    /// processes the pending blocks (PyTorch's `synchronize_and_free_events`).
    pub(crate) fn synchronize_pending(&mut self, dev: &Device<B>) {
        if dev.is_capturing() {
            return;
        }
        self.stats.num_sync_all_streams += 1;
        let uncovered = self
            .pending
            .blocks
            .iter()
            .any(|&b| self.arena.blocks.get(b).uses.iter().any(|u| !u.event));
        self.pending.synchronize_all(&self.arena.blocks);
        if uncovered {
            if let Err(err) = dev.synchronize() {
                tracing::warn!(%err, "device synchronize failed while freeing pending blocks");
            }
        }
        self.process_pending(dev, false);
    }

    /// Reuses a pending block of the right size by making `stream` wait on its uses' events.
    pub(super) fn reuse_pending_with_wait(
        &mut self,
        dev: &Device<B>,
        req: Request,
    ) -> Option<Found> {
        let Request {
            stream: sid,
            pool,
            class,
            rounded,
            ..
        } = req;
        let stream = self.pending.stream(dev, sid)?;
        let rules = FitRules::of(&self.config);
        let small = class == SizeClass::Small;
        let skip_expandable = self.skip_expandable();
        let mut best: Option<(u64, u64, BlockId)> = None;
        for &b in &self.pending.blocks {
            let blk = self.arena.blocks.get(b);
            if blk.stream != sid
                || blk.pool != pool
                || blk.small != small
                || blk.size < rounded
                || (skip_expandable && blk.expandable)
            {
                continue;
            }
            if rules.too_large(rounded, blk.size) {
                continue;
            }
            if !blk.uses.iter().all(|u| u.event) {
                continue;
            }
            let key = (blk.size, blk.addr, b);
            if best.is_none_or(|cur| key < cur) {
                best = Some(key);
            }
        }
        let (_, _, b) = best?;
        let generation = self.arena.blocks.get(b).generation;
        for u in self.arena.blocks.get(b).uses.iter() {
            let event = self.pending.event_for(u.device, u.stream, b, generation)?;
            if let Err(err) = stream.wait(event) {
                tracing::warn!(%err, "could not wait on a pending block's event");
                return None;
            }
        }
        self.stats.num_reuse_with_wait += 1;
        tracing::debug!(
            block_size = self.arena.blocks.get(b).size,
            stream = sid.0,
            "reusing a pending block with a stream wait"
        );
        self.process_pending(dev, false);
        self.find_free::<false>(req)
    }
}
