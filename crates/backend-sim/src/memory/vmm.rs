//! The virtual-memory API of the memory model: address reservations (no capacity), physical
//! memory by handle (counts against the capacity), and mappings of handles into reservations
//! (what makes reserved addresses accessible). The hal's `map_physical` / `unmap_physical`
//! combine allocating and mapping; ACL's separate `aclrtMallocPhysical` / `aclrtMapMem` use
//! the parts.
//!
//! `map_physical_pages` / `unmap_physical_pages` keep consecutive pages as one run and map or
//! unmap it at once, ending exactly where the same calls page by page would (errors,
//! statistics, host time, physical handles); with the timeline on, or when queued work falls
//! due meanwhile, they go page by page. A run mapped right after a reservation's last run is
//! appended without a search, and the engine skips idle resource pools and an empty data queue
//! inline, so the allocator's expandable segments pay little per page on a miss.

use super::mappings::{Mapping, Mappings, Run};
use super::{Memory, PageRun, Segment, VMM_GRANULARITY};
use braid_stream_core::hal::{page_of_run, HalError};
use braid_stream_core::types::DevicePtr;

impl Memory {
    /// Reserves `size` bytes of address space (a multiple of [`VMM_GRANULARITY`]) at a fresh
    /// address: no capacity is taken, and nothing in it is accessible until mapped.
    pub fn reserve(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        check_granular("reserve_address", 0, size)?;
        let base = self.next;
        let Some(next) = base.checked_add(size).filter(|&n| n <= self.limit) else {
            return Err(HalError::InvalidArgument(format!(
                "the simulated address space is exhausted; cannot reserve {size} bytes"
            )));
        };
        let data = self.backing(size, false)?;
        self.next = next;
        self.segments.insert(
            base,
            Segment {
                size,
                accounted: 0,
                data,
                mappings: Some(Mappings::default()),
            },
        );
        tracing::debug!(ptr = %DevicePtr(base), size, "sim reserve_address");
        Ok(DevicePtr(base))
    }

    /// Releases the reservation at `ptr`, which must have no mapping left.
    pub fn release(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        match self.segments.get(ptr.0).and_then(|s| s.mappings.as_ref()) {
            None => Err(HalError::InvalidArgument(format!(
                "release_address of {ptr}, which is not the base of a live reservation"
            ))),
            Some(maps) if !maps.is_empty() => Err(HalError::InvalidArgument(format!(
                "release_address of {ptr}, which still has {} mapping(s)",
                maps.count()
            ))),
            Some(_) => {
                self.remove_segment(ptr.0);
                tracing::debug!(%ptr, "sim release_address");
                Ok(())
            }
        }
    }

    /// Allocates `size` bytes of physical memory (a multiple of [`VMM_GRANULARITY`]) and
    /// returns its handle (never 0). It counts against the capacity from now on.
    pub fn alloc_physical(&mut self, size: u64) -> Result<u64, HalError> {
        check_granular("alloc_physical", 0, size)?;
        self.check_affordable(size)?;
        if self.store_data {
            // Its bytes live in host memory once mapped.
            super::host_budget::reserve(size, self.host_budget)?;
        }
        let handle = self.next_physical;
        self.next_physical += 1;
        self.physical.insert(handle, (size, None));
        self.used += size;
        self.peak = self.peak.max(self.used);
        self.allocations += 1;
        tracing::debug!(handle, size, used = self.used, "sim alloc_physical");
        Ok(handle)
    }

    /// Frees the physical memory of `handle`, which must not be mapped.
    pub fn free_physical(&mut self, handle: u64) -> Result<(), HalError> {
        match self.physical.get(&handle) {
            None => Err(match self.anonymous_mapping(handle) {
                Some(at) => still_mapped("free_physical", handle, at),
                None => HalError::InvalidArgument(format!(
                    "free_physical: {handle} is not a live physical memory handle"
                )),
            }),
            Some((_, Some(at))) => Err(still_mapped("free_physical", handle, *at)),
            Some(&(size, None)) => {
                self.physical.remove(&handle);
                if self.store_data {
                    super::host_budget::release(size);
                }
                self.shared_physical.remove(&handle);
                self.used -= size;
                self.frees += 1;
                tracing::debug!(handle, size, used = self.used, "sim free_physical");
                Ok(())
            }
        }
    }

    /// Maps all of `handle` (unmapped) at `at`, inside a reservation where nothing is mapped
    /// over the range yet.
    pub fn map_handle(&mut self, at: DevicePtr, handle: u64) -> Result<(), HalError> {
        let size = match self.physical.get(&handle) {
            Some((size, None)) => *size,
            Some((_, Some(_))) => return Err(already_mapped(handle)),
            None if self.anonymous_mapping(handle).is_some() => return Err(already_mapped(handle)),
            None => {
                return Err(HalError::InvalidArgument(format!(
                    "map: {handle} is not a live physical memory handle"
                )))
            }
        };
        let (offset, maps) = self.free_slot(at, size)?;
        let run = Run {
            page: size,
            count: 1,
            handle,
            anonymous: false,
        };
        maps.insert(offset, run);
        self.physical.insert(handle, (size, Some(at.0)));
        tracing::debug!(%at, size, handle, "sim map");
        Ok(())
    }

    /// Unmaps the mapping that starts at `at` and returns its handle (still allocated). Its
    /// contents are lost.
    pub fn unmap_at(&mut self, at: DevicePtr) -> Result<u64, HalError> {
        let m = self.mapping_at(at).ok_or_else(|| {
            HalError::InvalidArgument(format!("unmap: no mapping starts at {at}"))
        })?;
        if self.shared_physical.contains(&m.handle) {
            // The bytes live on in the shared memory (other processes, a later mapping).
            self.remove_overlay_at(at);
        }
        self.drop_mappings(at, m.size, 1);
        self.physical.insert(m.handle, (m.size, None));
        tracing::debug!(%at, size = m.size, handle = m.handle, "sim unmap");
        Ok(m.handle)
    }

    /// Out of memory unless `size` more bytes fit in the capacity (and, in data mode, in the
    /// host-memory budget).
    fn check_affordable(&self, size: u64) -> Result<(), HalError> {
        let free = self.capacity.saturating_sub(self.used);
        if size > free {
            return Err(HalError::OutOfMemory {
                requested: size,
                free,
                total: self.capacity,
            });
        }
        if self.store_data && super::host_budget::in_use().saturating_add(size) > self.host_budget {
            return Err(HalError::HostMemoryExhausted {
                requested: size,
                in_use: super::host_budget::in_use(),
                budget: self.host_budget,
                setting: super::host_budget::SETTING,
            });
        }
        Ok(())
    }

    /// The hal's `map_physical`: allocates `size` bytes and maps them at `at`; on failure
    /// nothing is allocated or mapped.
    pub fn map(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        // Bad arguments are reported as such, before any out-of-memory.
        self.free_slot(at, size)?;
        self.check_affordable(size)?;
        self.map_fitting(at, size, 1);
        Ok(())
    }

    /// The hal's `map_physical_pages`: [`Memory::map`] of each of `count` pages of `page`
    /// bytes from `at` on, stopping at the first failure. Returns the pages mapped and the
    /// failure. The pages that can all be mapped are mapped as one run.
    pub fn map_pages(&mut self, at: DevicePtr, page: u64, count: u64) -> PageRun {
        let fit = self.map_fitting(at, page, count);
        // Whatever is left fails on its first page (or maps, should `fit` be short): one by
        // one, for the exact error.
        for done in fit..count {
            if let Err(e) = self.map(DevicePtr(at.0 + done * page), page) {
                return (done, Err(e));
            }
        }
        (count, Ok(()))
    }

    /// The hal's `unmap_physical`: unmaps the mapping of exactly `size` bytes at `at` and
    /// frees its memory.
    pub fn unmap(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        let m = match self.mapping_at(at) {
            Some(m) if m.size == size => m,
            _ => {
                return Err(HalError::InvalidArgument(format!(
                    "unmap_physical: no mapping of {size} bytes at {at}"
                )))
            }
        };
        self.drop_mappings(at, size, 1);
        if !m.anonymous {
            self.physical.remove(&m.handle);
        }
        if self.store_data {
            super::host_budget::release(size);
        }
        self.used -= size;
        self.frees += 1;
        tracing::debug!(%at, size, handle = m.handle, used = self.used, "sim unmap_physical");
        Ok(())
    }

    /// The hal's `unmap_physical_pages`: [`Memory::unmap`] of each of `count` pages of `page`
    /// bytes from `at` on, from the last one down, stopping at the first failure. Returns the
    /// pages unmapped and the failure. Pages of one run of anonymous mappings go at once.
    pub fn unmap_pages(&mut self, at: DevicePtr, page: u64, count: u64) -> PageRun {
        let mut done = 0;
        while done < count {
            let left = count - done;
            let last = match page_of_run(at, page, left - 1) {
                Ok(last) => last,
                Err(e) => return (done, Err(e)),
            };
            let n = self.anonymous_pages_before(last, page, left);
            if n == 0 {
                if let Err(e) = self.unmap(last, page) {
                    return (done, Err(e));
                }
                done += 1;
                continue;
            }
            let first = DevicePtr(last.0 + page - n * page);
            self.drop_mappings(first, page, n);
            if self.store_data {
                super::host_budget::release(n * page);
            }
            self.used -= n * page;
            self.frees += n;
            done += n;
            tracing::debug!(at = %first, page, pages = n, used = self.used, "sim unmap_physical pages");
        }
        (done, Ok(()))
    }

    /// Maps as many of the `count` pages of `page` bytes from `at` on as could be mapped one
    /// after the other without failing (a lower bound: none when unsure), as one run of fresh
    /// anonymous memory; returns how many.
    fn map_fitting(&mut self, at: DevicePtr, page: u64, count: u64) -> u64 {
        if page == 0 || page % VMM_GRANULARITY != 0 {
            return 0;
        }
        let mut affordable = self.capacity.saturating_sub(self.used) / page;
        if self.store_data {
            let room = self
                .host_budget
                .saturating_sub(super::host_budget::in_use());
            affordable = affordable.min(room / page);
        }
        let Some((base, seg)) = self.segments.floor_mut(at.0) else {
            return 0;
        };
        let (offset, size) = (at.0 - base, seg.size);
        let Some(maps) = &mut seg.mappings else {
            return 0;
        };
        if offset % VMM_GRANULARITY != 0 || offset >= size {
            return 0;
        }
        let Some((i, next)) = maps.free_at(offset) else {
            return 0;
        };
        let fit = count.min((next.min(size) - offset) / page).min(affordable);
        if fit == 0 {
            return 0;
        }
        if self.store_data && super::host_budget::reserve(fit * page, self.host_budget).is_err() {
            // Another device took the room meanwhile: none mapped, the caller maps page by page.
            return 0;
        }
        let run = Run {
            page,
            count: fit,
            handle: self.next_physical,
            anonymous: true,
        };
        maps.insert_at(i, offset, run);
        self.next_physical += fit;
        self.used += fit * page;
        self.peak = self.peak.max(self.used);
        self.allocations += fit;
        tracing::debug!(%at, page, pages = fit, used = self.used, "sim map_physical");
        fit
    }

    /// Of the `count` pages of `page` bytes up to and including the one at `last`, how many
    /// (from `last` down) are anonymous mappings of exactly `page` bytes in one run.
    fn anonymous_pages_before(&self, last: DevicePtr, page: u64, count: u64) -> u64 {
        let Some((base, seg)) = self.segments.floor(last.0) else {
            return 0;
        };
        let Some(maps) = &seg.mappings else {
            return 0;
        };
        let offset = last.0 - base;
        match (maps.mapping_at(offset), maps.run_at(offset)) {
            (Some(m), Some((at, _))) if m.anonymous && m.size == page => {
                count.min((offset - at) / page + 1)
            }
            _ => 0,
        }
    }

    /// The mapping starting at `at`.
    fn mapping_at(&self, at: DevicePtr) -> Option<Mapping> {
        let (base, seg) = self.segments.floor(at.0)?;
        seg.mappings.as_ref()?.mapping_at(at.0 - base)
    }

    /// Removes the `count` mappings of `page` bytes from `at` on, which lie in one run, and
    /// drops their contents.
    fn drop_mappings(&mut self, at: DevicePtr, page: u64, count: u64) {
        let Some((base, seg)) = self.segments.floor_mut(at.0) else {
            return;
        };
        let offset = at.0 - base;
        if let Some(maps) = &mut seg.mappings {
            if let Some((run_at, run)) = maps.run_at(offset) {
                maps.remove(run_at, run, offset, count);
            }
        }
        if let Some(data) = &mut seg.data {
            let before = data.resident();
            data.discard(offset, count * page);
            self.resident -= before - data.resident();
        }
    }

    /// Where the anonymous mapping of `handle` is, if it is one (error paths only: a scan).
    fn anonymous_mapping(&self, handle: u64) -> Option<u64> {
        self.segments.iter().find_map(|(base, seg)| {
            let at = seg.mappings.as_ref()?.anonymous_handle(handle)?;
            Some(base + at)
        })
    }

    /// Checks that `[at, at + size)` is granular, inside one reservation and overlaps no
    /// mapping; returns its offset and the reservation's mappings.
    fn free_slot(&mut self, at: DevicePtr, size: u64) -> Result<(u64, &mut Mappings), HalError> {
        let outside = || {
            HalError::InvalidArgument(format!(
                "map: {size} bytes at {at} are not inside one live reservation"
            ))
        };
        let (base, seg) = self.segments.floor_mut(at.0).ok_or_else(outside)?;
        if at.0.saturating_add(size) > base + seg.size {
            return Err(outside());
        }
        let maps = seg.mappings.as_mut().ok_or_else(outside)?;
        let offset = at.0 - base;
        check_granular("map", offset, size)?;
        if maps.overlaps(offset, size) {
            return Err(HalError::InvalidArgument(format!(
                "map: {size} bytes at {at} overlap an existing mapping"
            )));
        }
        Ok((offset, maps))
    }
}

/// The error for a physical handle that is mapped at `at` where it must not be.
fn still_mapped(call: &str, handle: u64, at: u64) -> HalError {
    HalError::InvalidArgument(format!(
        "{call}: handle {handle} is still mapped at {}",
        DevicePtr(at)
    ))
}

/// The error for mapping a physical handle that is mapped already.
fn already_mapped(handle: u64) -> HalError {
    HalError::InvalidArgument(format!("map: physical handle {handle} is already mapped"))
}

/// Checks that an offset and a size of the virtual-memory API are granular (and the size
/// non-zero).
fn check_granular(call: &'static str, offset: u64, size: u64) -> Result<(), HalError> {
    if size == 0 || size % VMM_GRANULARITY != 0 || offset % VMM_GRANULARITY != 0 {
        return Err(HalError::InvalidArgument(format!(
            "{call}: size {size} and offset {offset} must be non-zero multiples of the \
             {VMM_GRANULARITY}-byte granularity"
        )));
    }
    Ok(())
}
