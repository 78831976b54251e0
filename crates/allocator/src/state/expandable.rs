//! Expandable segments (PyTorch's `expandable_segments:True`): one segment per (stream,
//! small/large) of the default pool, an address reservation into which pages of physical
//! memory are mapped on demand (`hal::Device::map_physical`).
//!
//! The mapped part is always a prefix of the reservation: growth maps pages right after it,
//! so a free block at the end merges with the new memory and no sliver is left between
//! segments; releasing (empty_cache, the out-of-memory ladder, garbage collection, drop)
//! unmaps the whole pages at the end that a free block covers, and gives the reservation
//! back once nothing is mapped. PyTorch also unmaps free pages in the middle of a segment;
//! here they stay mapped until the blocks after them are free too. Pages are
//! `small_segment_size` (2 MiB) for the small pool and `expandable_large_page` (default
//! `large_segment_size`, 20 MiB) for the large pool, rounded up to the backend's granularity;
//! each page is one device mapping.

use super::{SegmentFailure, State};
use crate::block::{BlockId, NewBlock, Reservation, Segment, SegmentId, Status, NONE};
use crate::size::SizeClass;
use crate::snapshot::{HistoryAction, PoolId};
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::{Device, DevicePtr, StreamId};

impl<B: Backend> State<B> {
    /// A miss grows memory by `rounded` bytes or more: the stream's expandable segment when
    /// expandable segments are on (default pool only: private pools, and so graph captures,
    /// keep normal segments), else a new segment of `seg_size` bytes. The block returned is
    /// free and in no free list.
    pub(super) fn grow(
        &mut self,
        dev: &Device<B>,
        stream: StreamId,
        pool: PoolId,
        class: SizeClass,
        seg_size: u64,
        rounded: u64,
    ) -> Result<BlockId, SegmentFailure> {
        match self.vmm_granularity {
            Some(granularity) if self.config.expandable_segments && pool == PoolId::DEFAULT => {
                self.expand(dev, stream, class == SizeClass::Small, rounded, granularity)
            }
            _ => self.alloc_segment(dev, stream, pool, class, seg_size),
        }
    }

    /// Maps enough pages at the end of the (stream, small) expandable segment, created on
    /// first use, for a free block of `rounded` bytes at its end, and returns that block.
    fn expand(
        &mut self,
        dev: &Device<B>,
        stream: StreamId,
        small: bool,
        rounded: u64,
        granularity: u64,
    ) -> Result<BlockId, SegmentFailure> {
        let seg = match self
            .expandable
            .iter()
            .find(|e| e.0 == stream && e.1 == small)
        {
            Some(e) => e.2,
            None => self.reserve_segment(dev, stream, small, granularity)?,
        };
        let tail = self.tail(seg);
        let tail_free = tail != NONE && self.blocks.get(tail).status == Status::Free;
        let have = if tail_free {
            self.blocks.get(tail).size
        } else {
            0
        };
        let mapped = self.segments.get(seg).size;
        let result = self.map_pages(dev, seg, rounded.saturating_sub(have));
        if result.is_err() && mapped == 0 {
            // A segment that was just reserved for this request: give it back.
            self.release_reservation(dev, seg);
        }
        let grown = result?;
        if tail_free {
            self.uncache_block(tail);
            let blk = self.blocks.get_mut(tail);
            blk.size += grown;
            if blk.is_split() {
                self.stats.inactive_split_bytes.increase(small, grown);
            }
            return Ok(tail);
        }
        let addr = self.segments.get(seg).addr + mapped;
        let b = self.blocks.insert(NewBlock {
            addr,
            size: grown,
            stream,
            pool: PoolId::DEFAULT,
            small,
            expandable: true,
            segment: seg,
            prev: tail,
            next: NONE,
        });
        if tail == NONE {
            self.segments.get_mut(seg).head = b;
        } else {
            self.blocks.get_mut(tail).next = b;
            self.stats.inactive_split.increase(small, 1);
            self.stats.inactive_split_bytes.increase(small, grown);
        }
        Ok(b)
    }

    /// Reserves the address range of a new expandable segment (as large as the device, so
    /// one stream could map all of it) and registers the segment, with nothing mapped.
    fn reserve_segment(
        &mut self,
        dev: &Device<B>,
        stream: StreamId,
        small: bool,
        granularity: u64,
    ) -> Result<SegmentId, SegmentFailure> {
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
        let seg = self.segments.insert(Segment {
            addr: ptr.0,
            size: 0,
            stream,
            pool: PoolId::DEFAULT,
            small,
            head: NONE,
            live: true,
            expandable: Some(Reservation { size, step }),
        });
        self.expandable.push((stream, small, seg));
        self.stats.segment.increase(small, 1);
        tracing::debug!(ptr = %ptr, size, step, stream = stream.0, small, "expandable segment reserved");
        Ok(seg)
    }

    /// Maps the pages covering at least `need` bytes at the end of expandable segment `seg`,
    /// within the memory limit and the reservation, and returns the bytes mapped. On failure
    /// nothing stays mapped.
    fn map_pages(
        &mut self,
        dev: &Device<B>,
        seg: SegmentId,
        need: u64,
    ) -> Result<u64, SegmentFailure> {
        let s = self.segments.get(seg);
        let (addr, mapped, stream, small) = (s.addr, s.size, s.stream, s.small);
        let Some(Reservation {
            size: reserved,
            step,
        }) = s.expandable
        else {
            return Err(SegmentFailure::OutOfMemory);
        };
        let grow = need
            .checked_next_multiple_of(step)
            .ok_or(SegmentFailure::OutOfMemory)?;
        if grow == 0 {
            return Ok(0);
        }
        let current = self.stats.reserved_bytes.all.current;
        let over_limit = self
            .allowed_max
            .is_some_and(|max| current.saturating_add(grow) > max);
        if over_limit || mapped.saturating_add(grow) > reserved {
            tracing::debug!(
                grow,
                reserved = current,
                "expandable segment growth refused by the memory limit or its reservation"
            );
            return Err(SegmentFailure::OutOfMemory);
        }
        let start = addr + mapped;
        let mut done = 0;
        while done < grow {
            if let Err(e) = dev.hal().map_physical(DevicePtr(start + done), step) {
                tracing::debug!(%e, grow, mapped = done, "mapping pages into an expandable segment failed");
                if self.unmap_pages(dev, start, done, step) != done {
                    tracing::warn!("pages mapped for a failed growth could not be unmapped");
                }
                return Err(failure(e));
            }
            done += step;
        }
        self.segments.get_mut(seg).size += grow;
        self.stats.reserved_bytes.increase(small, grow);
        self.stats.num_device_alloc += grow / step;
        self.history.record(
            HistoryAction::SegmentMap,
            start,
            grow,
            stream,
            PoolId::DEFAULT,
        );
        tracing::debug!(
            addr = start,
            grow,
            stream = stream.0,
            "expandable segment grown"
        );
        Ok(grow)
    }

    /// Unmaps the pages of `[start, start + len)` from the last one down, stopping at the
    /// first failure; returns the bytes unmapped (a suffix of the range).
    fn unmap_pages(&mut self, dev: &Device<B>, start: u64, len: u64, step: u64) -> u64 {
        let mut unmapped = 0;
        while unmapped < len {
            let page = start + len - unmapped - step;
            // SAFETY: `page` is one mapping this allocator made on this device and has not
            // unmapped; the callers hold no block over it (a free block, or pages mapped by a
            // failed growth) and synchronized the device first where work could have used it.
            if let Err(err) = unsafe { dev.hal().unmap_physical(DevicePtr(page), step) } {
                tracing::warn!(%err, page, "unmapping a page of an expandable segment failed");
                break;
            }
            unmapped += step;
        }
        unmapped
    }

    /// The last block of segment `seg` (`NONE` when nothing is mapped).
    fn tail(&self, seg: SegmentId) -> BlockId {
        let mut b = self.segments.get(seg).head;
        while b != NONE {
            let next = self.blocks.get(b).next;
            if next == NONE {
                break;
            }
            b = next;
        }
        b
    }

    /// The free block at the end of expandable segment `seg` and the first page boundary it
    /// covers, when it covers at least one whole page.
    fn free_tail_pages(&self, seg: SegmentId) -> Option<(BlockId, u64, u64)> {
        let s = self.segments.get(seg);
        let step = s.expandable?.step;
        let tail = self.tail(seg);
        let blk = (tail != NONE).then(|| self.blocks.get(tail))?;
        if blk.status != Status::Free {
            return None;
        }
        let cut = s.addr + (blk.addr - s.addr).checked_next_multiple_of(step)?;
        (cut < s.end()).then_some((tail, cut, step))
    }

    /// Unmaps the whole pages covered by the free block at the end of expandable segment
    /// `seg` (the device is synchronized), and releases the reservation once nothing is
    /// mapped. Returns the bytes unmapped.
    pub(super) fn unmap_free_tail(&mut self, dev: &Device<B>, seg: SegmentId) -> u64 {
        let Some((tail, cut, step)) = self.free_tail_pages(seg) else {
            return 0;
        };
        let end = self.segments.get(seg).end();
        let unmapped = self.unmap_pages(dev, cut, end - cut, step);
        if unmapped == 0 {
            return 0;
        }
        let new_end = end - unmapped;
        self.uncache_block(tail);
        let blk = self.blocks.get(tail);
        let (addr, size, prev, small, stream, split) = (
            blk.addr,
            blk.size,
            blk.prev,
            blk.small,
            blk.stream,
            blk.is_split(),
        );
        if new_end == addr {
            if prev == NONE {
                self.segments.get_mut(seg).head = NONE;
            } else {
                self.blocks.get_mut(prev).next = NONE;
            }
            if split {
                self.stats.inactive_split.decrease(small, 1);
                self.stats.inactive_split_bytes.decrease(small, size);
            }
            self.blocks.remove(tail);
        } else {
            self.blocks.get_mut(tail).size -= unmapped;
            if split {
                self.stats.inactive_split_bytes.decrease(small, unmapped);
            }
            self.cache_block(tail);
        }
        self.segments.get_mut(seg).size -= unmapped;
        self.stats.reserved_bytes.decrease(small, unmapped);
        self.stats.num_device_free += unmapped / step;
        self.history.record(
            HistoryAction::SegmentUnmap,
            new_end,
            unmapped,
            stream,
            PoolId::DEFAULT,
        );
        tracing::debug!(
            addr = new_end,
            unmapped,
            stream = stream.0,
            "free pages unmapped from an expandable segment"
        );
        if new_end == self.segments.get(seg).addr {
            self.release_reservation(dev, seg);
        }
        unmapped
    }

    /// Unmaps the free pages at the end of every expandable segment (one device synchronize
    /// first, as PyTorch does before unmapping). Returns the bytes unmapped.
    pub(super) fn trim_expandable(&mut self, dev: &Device<B>) -> u64 {
        let segs: Vec<SegmentId> = self
            .expandable
            .iter()
            .map(|e| e.2)
            .filter(|&seg| self.free_tail_pages(seg).is_some())
            .collect();
        if segs.is_empty() {
            return 0;
        }
        if let Err(err) = dev.synchronize() {
            tracing::warn!(%err, "not unmapping free pages: device synchronize failed");
            return 0;
        }
        segs.into_iter()
            .map(|seg| self.unmap_free_tail(dev, seg))
            .sum()
    }

    /// Gives back the address range of expandable segment `seg`, which has nothing mapped.
    /// On failure the empty segment stays, to be grown again.
    fn release_reservation(&mut self, dev: &Device<B>, seg: SegmentId) {
        let (addr, small) = (self.segments.get(seg).addr, self.segments.get(seg).small);
        // SAFETY: the range came from `reserve_address` on this device and was not released;
        // nothing is mapped in it, so no block and no work can use it.
        if let Err(err) = unsafe { dev.hal().release_address(DevicePtr(addr)) } {
            tracing::warn!(%err, addr, "releasing the addresses of an expandable segment failed");
            return;
        }
        self.segments.remove(seg);
        self.expandable.retain(|e| e.2 != seg);
        self.stats.segment.decrease(small, 1);
        tracing::debug!(addr, "expandable segment released");
    }
}

/// A backend error as a growth failure: out of memory lets the ladder run.
fn failure(e: HalError) -> SegmentFailure {
    match e {
        HalError::OutOfMemory { .. } => SegmentFailure::OutOfMemory,
        e => SegmentFailure::Other(e),
    }
}
