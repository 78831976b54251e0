//! The state side of sleep mode (`crate::sleep` has the public API and the copies): the
//! segments of sleepable pools, each an address reservation with one physical mapping over
//! all of it; putting pools to sleep (their mappings released, the addresses kept) and waking
//! them (new mappings at the same addresses); and which blocks hold data worth offloading.

use super::State;
use crate::block::{SegmentId, Status, NONE};
use crate::error::AllocError;
use crate::snapshot::PoolId;
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::{Device, DevicePtr, DeviceSlice};

/// What releasing the mappings of pools found.
pub(crate) struct Released {
    /// Bytes whose mappings were released.
    pub released: u64,
    /// Bytes whose mappings the device refused to release (they stay mapped, with their data).
    pub kept: u64,
}

impl<B: Backend> State<B> {
    /// Reserves `size` bytes of addresses and maps physical memory over all of them: a
    /// segment of a sleepable pool. On failure nothing is left reserved or mapped.
    pub(super) fn map_sleepable_segment(
        &self,
        dev: &Device<B>,
        size: u64,
    ) -> Result<DevicePtr, HalError> {
        let ptr = dev.hal().reserve_address(size)?;
        if let Err(err) = dev.hal().map_physical(ptr, size) {
            // SAFETY: just reserved on this device; nothing is mapped in it or uses it.
            if let Err(e) = unsafe { dev.hal().release_address(ptr) } {
                tracing::warn!(%e, %ptr, "releasing the addresses of a failed segment failed");
            }
            return Err(err);
        }
        Ok(ptr)
    }

    /// Gives a sleepable pool's segment back: its mapping (unless it sleeps), then its
    /// addresses.
    ///
    /// # Safety
    /// `addr` and `size` are those of a live segment made by
    /// [`State::map_sleepable_segment`], mapped unless `asleep`; no buffer refers to it and no
    /// queued work uses it.
    pub(super) unsafe fn unmap_sleepable_segment(
        &self,
        dev: &Device<B>,
        addr: u64,
        size: u64,
        asleep: bool,
    ) -> Result<(), HalError> {
        if !asleep {
            // SAFETY: per the caller, one live mapping of exactly this range that nothing uses.
            unsafe { dev.hal().unmap_physical(DevicePtr(addr), size) }?;
        }
        // SAFETY: per the caller, a reservation of this device with nothing mapped now.
        if let Err(err) = unsafe { dev.hal().release_address(DevicePtr(addr)) } {
            if !asleep {
                // Keep the segment whole: map it again (its contents were free memory).
                if let Err(e) = dev.hal().map_physical(DevicePtr(addr), size) {
                    tracing::warn!(%e, addr, "re-mapping a segment whose release failed failed");
                }
            }
            return Err(err);
        }
        Ok(())
    }

    /// The sleepable pools tagged `tag`, or why they cannot go to sleep.
    pub(crate) fn begin_sleep(&mut self, tag: &str) -> Result<Vec<PoolId>, AllocError> {
        let pools = self.tagged_pools(tag)?;
        if pools.iter().any(|&id| self.pools.is_asleep(id)) {
            return Err(AllocError::AlreadyAsleep {
                tag: tag.to_string(),
            });
        }
        self.set_asleep(&pools, true);
        Ok(pools)
    }

    /// The sleepable pools tagged `tag`, or why they cannot wake.
    pub(crate) fn begin_wake(&self, tag: &str) -> Result<Vec<PoolId>, AllocError> {
        let pools = self.tagged_pools(tag)?;
        if !pools.iter().any(|&id| self.pools.is_asleep(id)) {
            return Err(AllocError::NotAsleep {
                tag: tag.to_string(),
            });
        }
        Ok(pools)
    }

    fn tagged_pools(&self, tag: &str) -> Result<Vec<PoolId>, AllocError> {
        let pools = self.pools.tagged(tag);
        if pools.is_empty() {
            return Err(AllocError::UnknownSleepTag {
                tag: tag.to_string(),
            });
        }
        Ok(pools)
    }

    /// Marks `pools` asleep (allocations from them are refused) or awake.
    pub(crate) fn set_asleep(&mut self, pools: &[PoolId], asleep: bool) {
        for &id in pools {
            if let Some(p) = self.pools.get_mut(id) {
                p.asleep = asleep;
            }
        }
    }

    /// The segments of `pools`, by address.
    fn segments_of(&self, pools: &[PoolId]) -> Vec<SegmentId> {
        self.arena
            .segments
            .by_addr()
            .filter(|(_, seg)| pools.contains(&seg.pool))
            .map(|(id, _)| id)
            .collect()
    }

    /// `(address, bytes)` of every allocated block of `pools`: the data a sleep offloads.
    pub(crate) fn allocated_ranges(&self, pools: &[PoolId]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for sid in self.segments_of(pools) {
            let mut b = self.arena.segments.get(sid).head;
            while b != NONE {
                let blk = self.arena.blocks.get(b);
                if blk.status == Status::Allocated {
                    out.push((blk.addr, blk.size));
                }
                b = blk.next;
            }
        }
        out
    }

    /// Whether `[addr, addr + len)` is still the start of an allocated block (so data offloaded
    /// from it is restored at wake; a block freed meanwhile is not written).
    pub(crate) fn is_allocated_at(&self, addr: u64, len: u64) -> bool {
        self.arena.segments.overlapping(addr, addr + 1).any(|sid| {
            let mut b = self.arena.segments.get(sid).head;
            while b != NONE {
                let blk = self.arena.blocks.get(b);
                if blk.addr == addr {
                    return blk.status == Status::Allocated && blk.size >= len;
                }
                b = blk.next;
            }
            false
        })
    }

    /// The first part of `ranges` (`(start, end)` pairs) that lies in a sleeping segment, with
    /// the tag of its pool.
    pub(crate) fn first_asleep(
        &self,
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> Option<(u64, u64, String)> {
        if self.pools.asleep_count() == 0 {
            return None;
        }
        ranges.into_iter().find_map(|(start, end)| {
            self.arena.segments.overlapping(start, end).find_map(|sid| {
                let seg = self.arena.segments.get(sid);
                seg.asleep.then(|| {
                    let (lo, hi) = (start.max(seg.addr), end.min(seg.end()));
                    let tag = self
                        .pools
                        .tag(seg.pool)
                        .map_or_else(String::new, |t| t.to_string());
                    (lo, hi - lo, tag)
                })
            })
        })
    }

    /// Releases the mappings of every mapped segment of `pools`, keeping their addresses. The
    /// caller synchronized the device: no queued work uses them.
    pub(crate) fn unmap_pools(&mut self, dev: &Device<B>, pools: &[PoolId]) -> Released {
        let mut out = Released {
            released: 0,
            kept: 0,
        };
        for sid in self.segments_of(pools) {
            let seg = self.arena.segments.get(sid);
            if !seg.vmm || seg.asleep {
                continue;
            }
            let (addr, size, small, pool) = (seg.addr, seg.size, seg.small, seg.pool);
            self.note_segment(dev, sid, false);
            // SAFETY: the segment's one live mapping, made by `map_sleepable_segment` (or a
            // wake) on this device; the device was synchronized after the pool stopped
            // allocating, and its blocks' data is offloaded or discarded on purpose.
            if let Err(err) = unsafe { dev.hal().unmap_physical(DevicePtr(addr), size) } {
                tracing::warn!(%err, addr, size, "releasing the pages of a sleeping segment failed; it stays mapped");
                self.note_segment(dev, sid, true);
                out.kept += size;
                continue;
            }
            self.arena.segments.get_mut(sid).asleep = true;
            self.stats.reserved_bytes.decrease(small, size);
            if let Some(p) = self.pools.get_mut(pool) {
                p.reserved_bytes = p.reserved_bytes.saturating_sub(size);
                p.asleep_bytes += size;
            }
            out.released += size;
        }
        tracing::debug!(
            released = out.released,
            kept = out.kept,
            "sleeping pools' pages released"
        );
        out
    }

    /// Maps new physical memory at the addresses of every sleeping segment of `pools`. When
    /// the device is out of memory, whole cached segments of the default pool and of freeable
    /// pools are released and the mapping retried once; if it still fails, the segments mapped
    /// by this call are released again and nothing changes. Returns the bytes mapped.
    pub(crate) fn map_pools(
        &mut self,
        dev: &Device<B>,
        pools: &[PoolId],
        tag: &str,
    ) -> Result<u64, AllocError> {
        let mut mapped: Vec<SegmentId> = Vec::new();
        let mut failure = None;
        for sid in self.segments_of(pools) {
            let seg = self.arena.segments.get(sid);
            if !seg.vmm || !seg.asleep {
                continue;
            }
            let (addr, size) = (seg.addr, seg.size);
            let mut result = self.map_within_limit(dev, addr, size);
            if matches!(result, Err(HalError::OutOfMemory { .. })) {
                self.release_all_cached_segments(dev);
                result = self.map_within_limit(dev, addr, size);
            }
            match result {
                Ok(()) => {
                    self.wake_segment(sid);
                    self.note_segment(dev, sid, true);
                    mapped.push(sid);
                }
                Err(err) => {
                    failure = Some((err, size));
                    break;
                }
            }
        }
        let Some((err, size)) = failure else {
            let bytes = mapped
                .iter()
                .map(|&sid| self.arena.segments.get(sid).size)
                .sum();
            tracing::debug!(bytes, tag, "sleeping pools mapped again");
            return Ok(bytes);
        };
        // Undo: the pools stay asleep as a whole.
        for sid in mapped {
            let (addr, size) = {
                let seg = self.arena.segments.get(sid);
                (seg.addr, seg.size)
            };
            self.note_segment(dev, sid, false);
            // SAFETY: mapped by this call over a sleeping segment; nothing used it since.
            match unsafe { dev.hal().unmap_physical(DevicePtr(addr), size) } {
                Ok(()) => self.sleep_segment(sid),
                Err(e) => {
                    tracing::warn!(%e, addr, "unmapping a segment after a failed wake failed; it stays mapped");
                    self.note_segment(dev, sid, true);
                }
            }
        }
        Err(match err {
            HalError::OutOfMemory { free, total, .. } => AllocError::WakeOutOfMemory {
                tag: tag.to_string(),
                needed: size,
                free,
                total,
            },
            other => AllocError::Backend(other),
        })
    }

    /// `map_physical` unless the configured limit on reserved memory forbids it.
    fn map_within_limit(&self, dev: &Device<B>, addr: u64, size: u64) -> Result<(), HalError> {
        let reserved = self.stats.reserved_bytes.all.current;
        if let Some(max) = self.allowed_max {
            if reserved.saturating_add(size) > max {
                return Err(HalError::OutOfMemory {
                    requested: size,
                    free: max.saturating_sub(reserved),
                    total: max,
                });
            }
        }
        dev.hal().map_physical(DevicePtr(addr), size)
    }

    /// Segment `sid` is mapped again.
    fn wake_segment(&mut self, sid: SegmentId) {
        let seg = self.arena.segments.get_mut(sid);
        seg.asleep = false;
        let (size, small, pool) = (seg.size, seg.small, seg.pool);
        self.stats.reserved_bytes.increase(small, size);
        if let Some(p) = self.pools.get_mut(pool) {
            p.reserved_bytes += size;
            p.asleep_bytes = p.asleep_bytes.saturating_sub(size);
        }
    }

    /// Segment `sid`'s mapping is released again.
    fn sleep_segment(&mut self, sid: SegmentId) {
        let seg = self.arena.segments.get_mut(sid);
        seg.asleep = true;
        let (size, small, pool) = (seg.size, seg.small, seg.pool);
        self.stats.reserved_bytes.decrease(small, size);
        if let Some(p) = self.pools.get_mut(pool) {
            p.reserved_bytes = p.reserved_bytes.saturating_sub(size);
            p.asleep_bytes += size;
        }
    }

    /// Tells a memory checker (the simulator's sanitizer) that sleepable segment `sid` is
    /// live (`alive`) or not: its reservation is dead to the checker but for what is declared
    /// live, and the pool's blocks are not declared one by one (a private pool's segments stay
    /// whole to the checker, as normal segments do).
    pub(super) fn note_segment(&mut self, dev: &Device<B>, sid: SegmentId, alive: bool) {
        if !self.note_lifetimes {
            return;
        }
        let seg = self.arena.segments.get(sid);
        let (range, owner) = (DeviceSlice::new(DevicePtr(seg.addr), seg.size), seg.stream);
        let Some(owner) = self.pending.stream(dev, owner) else {
            return;
        };
        let result = if alive {
            dev.hal().note_sub_alloc(range, owner.hal())
        } else {
            dev.hal().note_sub_free(range, owner.hal())
        };
        if let Err(err) = result {
            tracing::warn!(%err, %range, "backend refused a sleepable segment's lifetime note");
        }
    }
}
