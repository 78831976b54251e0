//! Giving memory back to the device: whole cached segments (on `empty_cache`, on the
//! out-of-memory ladder, when a private pool is released, when the allocator is dropped),
//! PyTorch's oversize release, and garbage collection of old cached segments.

use super::{Request, State};
use crate::block::{BlockId, Status};
use crate::size::SizeClass;
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::{Backend, Device as _};
use braid_stream_core::{Device, DevicePtr};

impl<B: Backend> State<B> {
    /// Returns whole free segments to the device (one device synchronize first, as `cudaFree`
    /// implies). Refused during capture.
    pub(super) fn release_blocks(&mut self, dev: &Device<B>, candidates: &[BlockId]) -> u64 {
        if candidates.is_empty() {
            return 0;
        }
        if let Err(err) = dev.synchronize() {
            tracing::warn!(%err, "not releasing cached segments: device synchronize failed");
            return 0;
        }
        let mut released = 0;
        for &b in candidates {
            let blk = self.arena.blocks.get(b);
            if blk.status != Status::Free || blk.is_split() {
                continue;
            }
            let (addr, size, small, stream, pool, seg) = (
                blk.addr,
                blk.size,
                blk.small,
                blk.stream,
                blk.pool,
                blk.segment,
            );
            let segment = self.arena.segments.get(seg);
            if segment.expandable.is_some() {
                // A whole free range of an expandable segment: unmap its pages.
                released += self.unmap_free_block(dev, b);
                continue;
            }
            let (vmm, asleep) = (segment.vmm, segment.asleep);
            self.arena.uncache(b);
            let freed = if vmm {
                // SAFETY: a live segment of a sleepable pool, mapped unless asleep; it is one
                // free block and the device was just synchronized (as below).
                unsafe { self.unmap_sleepable_segment(dev, addr, size, asleep) }
            } else {
                // SAFETY: `addr` is the base of a segment this allocator got from this device
                // and has not freed; the segment is one free block (no buffer refers to it, no
                // pending use), and the device was just synchronized, so no queued work uses
                // it.
                unsafe { dev.hal().free(DevicePtr(addr)) }
            };
            if let Err(err) = freed {
                tracing::warn!(%err, addr, "returning a segment to the device failed");
                self.arena.cache(b);
                continue;
            }
            self.arena.blocks.remove(b);
            self.arena.segments.remove(seg);
            // A sleeping segment's bytes were no longer counted as reserved.
            let mapped = if asleep { 0 } else { size };
            if let Some(p) = self.pools.get_mut(pool) {
                p.segments = p.segments.saturating_sub(1);
                p.reserved_bytes = p.reserved_bytes.saturating_sub(mapped);
                p.asleep_bytes = p.asleep_bytes.saturating_sub(size - mapped);
            }
            let s = &mut self.stats;
            s.segment.decrease(small, 1);
            s.reserved_bytes.decrease(small, mapped);
            s.num_device_free += 1;
            if size >= self.config.max_split_size {
                s.oversize_segments.decrease(1);
            }
            self.history
                .record(HistoryAction::SegmentFree, addr, size, stream, pool);
            tracing::debug!(
                addr,
                size,
                stream = stream.0,
                "segment returned to the device"
            );
            released += mapped;
        }
        released
    }

    pub(crate) fn release_cached_segments(&mut self, dev: &Device<B>, pool: PoolId) -> u64 {
        if dev.is_capturing() {
            return 0;
        }
        let candidates = self.arena.whole_free_segments(pool);
        self.release_blocks(dev, &candidates)
    }

    /// Returns the whole cached segments of the default pool and of every freeable private
    /// pool (PyTorch's `release_cached_blocks`); pools still in use keep theirs.
    pub(super) fn release_all_cached_segments(&mut self, dev: &Device<B>) -> u64 {
        if dev.is_capturing() {
            return 0;
        }
        let mut candidates = self.arena.whole_free_segments(PoolId::DEFAULT);
        for id in self.pools.freeable() {
            candidates.extend(self.arena.whole_free_segments(id));
        }
        let released = self.release_blocks(dev, &candidates) + self.trim_expandable(dev);
        self.forget_empty_pools();
        released
    }

    /// `empty_cache`: synchronize pending events, then return every whole cached segment of
    /// the default pool and of freeable private pools.
    pub(crate) fn empty_cache(&mut self, dev: &Device<B>) {
        if dev.is_capturing() {
            tracing::warn!("empty_cache skipped: a capture is active on the device");
            return;
        }
        if self.pins.posted() {
            self.release_pins(dev);
        }
        self.synchronize_pending(dev);
        self.release_all_cached_segments(dev);
    }

    /// `MemPool::empty_cache`: as [`State::empty_cache`] (pending frees processed first, their
    /// events synchronized, as PyTorch's `emptyCache(mempool_id)` does), then every whole
    /// cached segment of `pool` returned.
    pub(crate) fn empty_cache_pool(&mut self, dev: &Device<B>, pool: PoolId) {
        if dev.is_capturing() {
            tracing::warn!("empty_cache skipped: a capture is active on the device");
            return;
        }
        if self.pins.posted() {
            self.release_pins(dev);
        }
        self.synchronize_pending(dev);
        self.release_cached_segments(dev, pool);
    }

    /// The allocator's last handle is gone: no buffer, pool handle, diversion or graph refers
    /// to it any more, so every block is free or pending on other streams. Pending blocks are
    /// synchronized (their events, then the device for uses no event covers) and freed, and
    /// every segment of every pool goes back to the device (one device synchronize first, as
    /// for any segment release). Nothing panics: failures are logged and the segments they
    /// concern are left to the device. During a capture nothing can be freed (the device refuses
    /// to synchronize), so the segments are left with a warning. Blocks a live captured graph
    /// still uses ([`crate::graph_pins`]) are not freed: their segments are left to the device,
    /// with a warning, so the graph's replays never touch memory handed to someone else.
    pub(crate) fn release_all_on_drop(&mut self, dev: &Device<B>) {
        if self.arena.segments.is_empty() {
            return;
        }
        if self.pins.posted() {
            self.release_pins(dev);
        }
        if !self.pins.freed().is_empty() {
            let bytes: u64 = self
                .pins
                .freed()
                .iter()
                .map(|&b| self.arena.blocks.get(b).size)
                .sum();
            tracing::warn!(
                blocks = self.pins.freed().len(),
                bytes,
                "allocator dropped while captured graphs still use some of its memory: the segments holding it are not returned to the device"
            );
        }
        if dev.is_capturing() {
            tracing::warn!(
                segments = self.stats.segment.all.current,
                bytes = self.stats.reserved_bytes.all.current,
                "allocator dropped during a capture: its cached segments are not returned to the device"
            );
            return;
        }
        if !self.pending.blocks.is_empty() {
            self.synchronize_pending(dev);
        }
        if !self.pending.blocks.is_empty() {
            // Uses neither an event nor the ordering model settles (recorded inside a capture
            // that has ended, or on a stream that is gone): all eager work is finished once the
            // device is synchronized, and no graph of this allocator's pools is left to replay.
            match dev.synchronize() {
                Ok(()) => {
                    for b in std::mem::take(&mut self.pending.blocks) {
                        let (size, small) = (
                            self.arena.blocks.get(b).size,
                            self.arena.blocks.get(b).small,
                        );
                        self.stats.pending_free_bytes.decrease(size);
                        self.pending_by_class.remove(small, size);
                        self.arena.blocks.get_mut(b).uses.clear();
                        self.free_block(dev, b);
                    }
                }
                Err(err) => tracing::warn!(
                    %err,
                    "allocator dropped: device synchronize failed, blocks pending on other streams are not returned"
                ),
            }
        }
        let mut candidates = self.arena.whole_free_segments(PoolId::DEFAULT);
        for id in self.pools.ids().collect::<Vec<_>>() {
            candidates.extend(self.arena.whole_free_segments(id));
        }
        self.release_blocks(dev, &candidates);
        if !self.arena.segments.is_empty() {
            tracing::warn!(
                segments = self.stats.segment.all.current,
                bytes = self.stats.reserved_bytes.all.current,
                "allocator dropped: segments not returned to the device"
            );
        }
    }

    /// PyTorch's `release_available_cached_blocks`.
    pub(super) fn release_available_cached_blocks(
        &mut self,
        dev: &Device<B>,
        req: Request,
    ) -> bool {
        let max_split = self.config.max_split_size;
        let key_size = req.rounded.max(max_split);
        let list = self
            .arena
            .free
            .of_pool_mut(req.pool)
            .list_mut(req.stream, req.class == SizeClass::Small);
        let i = list.lower_bound(key_size);
        let mut chosen = Vec::new();
        if let Some(k) = list.get(i) {
            chosen.push(k.id);
        } else {
            let mut total = 0;
            let mut j = list.len();
            while j > 0 && total < key_size {
                j -= 1;
                let Some(k) = list.get(j) else { break };
                if k.size < max_split {
                    break;
                }
                if !self.arena.blocks.get(k.id).is_split() {
                    chosen.push(k.id);
                    total += k.size;
                }
            }
            if total < key_size {
                return false;
            }
        }
        self.release_blocks(dev, &chosen) > 0
    }

    /// PyTorch's `garbage_collect_cached_blocks`: free old whole large segments until reserved
    /// drops below threshold × allowed.
    pub(super) fn garbage_collect(&mut self, dev: &Device<B>) {
        let allowed = self.allowed_max.unwrap_or(self.device_total);
        let threshold = (self.config.garbage_collection_threshold * allowed as f64) as u64;
        let reserved = self.stats.reserved_bytes.all.current;
        if reserved <= threshold {
            return;
        }
        let target = reserved - threshold;
        let Some(p) = self.arena.free.of_pool(PoolId::DEFAULT) else {
            return;
        };
        let clock = p.gc_clock[1];
        let mut candidates: Vec<(u64, BlockId, u64)> = Vec::new();
        for (_, list) in p.lists(false) {
            for k in list.keys() {
                let blk = self.arena.blocks.get(k.id);
                if !blk.is_split() {
                    candidates.push((clock.saturating_sub(blk.gc_base), k.id, k.size));
                }
            }
        }
        let mut chosen = Vec::new();
        let mut reclaimed = 0;
        let mut total_age: u64 = candidates.iter().map(|c| c.0).sum();
        let mut count = candidates.len() as u64;
        let mut freed_one = true;
        while reclaimed < target && freed_one && count > 0 {
            let avg = total_age as f64 / count as f64;
            freed_one = false;
            for c in candidates.iter_mut() {
                if c.2 != 0 && c.0 as f64 >= avg {
                    freed_one = true;
                    reclaimed += c.2;
                    total_age -= c.0;
                    count -= 1;
                    chosen.push(c.1);
                    c.2 = 0;
                }
            }
        }
        if !chosen.is_empty() {
            tracing::debug!(
                blocks = chosen.len(),
                reclaimed,
                "garbage collecting cached segments"
            );
            self.release_blocks(dev, &chosen);
        }
    }
}
