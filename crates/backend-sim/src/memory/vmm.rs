//! The virtual-memory API of the memory model: address reservations (no capacity), physical
//! memory by handle (counts against the capacity), and mappings of handles into reservations
//! (what makes reserved addresses accessible). The hal's `map_physical` / `unmap_physical`
//! combine allocating and mapping; ACL's separate `aclrtMallocPhysical` / `aclrtMapMem` use
//! the parts.

use super::{Backing, Mappings, Memory, Segment, VMM_GRANULARITY};
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DevicePtr;
use std::collections::BTreeMap;

impl Memory {
    /// Reserves `size` bytes of address space (a multiple of [`VMM_GRANULARITY`]) at a fresh
    /// address: no capacity is taken, and nothing in it is accessible until mapped.
    pub fn reserve(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        check_granular("reserve_address", 0, size)?;
        let base = self.next;
        let Some(next) = base.checked_add(size) else {
            return Err(HalError::InvalidArgument(format!(
                "the simulated address space is exhausted; cannot reserve {size} bytes"
            )));
        };
        self.next = next;
        let data = self.store_data.then(|| Backing::new(size));
        self.segments.insert(
            base,
            Segment {
                size,
                accounted: 0,
                data,
                mappings: Some(BTreeMap::new()),
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
                maps.len()
            ))),
            Some(_) => {
                self.segments.remove(ptr.0);
                tracing::debug!(%ptr, "sim release_address");
                Ok(())
            }
        }
    }

    /// Allocates `size` bytes of physical memory (a multiple of [`VMM_GRANULARITY`]) and
    /// returns its handle (never 0). It counts against the capacity from now on.
    pub fn alloc_physical(&mut self, size: u64) -> Result<u64, HalError> {
        check_granular("alloc_physical", 0, size)?;
        let free = self.capacity.saturating_sub(self.used);
        if size > free {
            return Err(HalError::OutOfMemory {
                requested: size,
                free,
                total: self.capacity,
            });
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
            None => Err(HalError::InvalidArgument(format!(
                "free_physical: {handle} is not a live physical memory handle"
            ))),
            Some((_, Some(at))) => Err(HalError::InvalidArgument(format!(
                "free_physical: handle {handle} is still mapped at {}",
                DevicePtr(*at)
            ))),
            Some(&(size, None)) => {
                self.physical.remove(&handle);
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
            Some((_, Some(_))) => {
                return Err(HalError::InvalidArgument(format!(
                    "map: physical handle {handle} is already mapped"
                )))
            }
            None => {
                return Err(HalError::InvalidArgument(format!(
                    "map: {handle} is not a live physical memory handle"
                )))
            }
        };
        let (offset, maps) = self.free_slot(at, size)?;
        maps.insert(offset, (size, handle));
        self.physical.insert(handle, (size, Some(at.0)));
        tracing::debug!(%at, size, handle, "sim map");
        Ok(())
    }

    /// Unmaps the mapping that starts at `at` and returns its handle (still allocated). Its
    /// contents are lost.
    pub fn unmap_at(&mut self, at: DevicePtr) -> Result<u64, HalError> {
        let no_mapping = || HalError::InvalidArgument(format!("unmap: no mapping starts at {at}"));
        let (base, seg) = self.segments.floor_mut(at.0).ok_or_else(no_mapping)?;
        let offset = at.0 - base;
        let maps = seg.mappings.as_mut().ok_or_else(no_mapping)?;
        let (size, handle) = maps.remove(&offset).ok_or_else(no_mapping)?;
        if let Some(data) = &mut seg.data {
            data.discard(offset, size);
        }
        self.physical.insert(handle, (size, None));
        tracing::debug!(%at, size, handle, "sim unmap");
        Ok(handle)
    }

    /// The hal's `map_physical`: allocates `size` bytes and maps them at `at`; on failure
    /// nothing is allocated or mapped.
    pub fn map(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        // Bad arguments are reported as such, before any out-of-memory.
        self.free_slot(at, size)?;
        let handle = self.alloc_physical(size)?;
        self.map_handle(at, handle)
    }

    /// The hal's `unmap_physical`: unmaps the mapping of exactly `size` bytes at `at` and
    /// frees its memory.
    pub fn unmap(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        if self.mapping_size(at) != Some(size) {
            return Err(HalError::InvalidArgument(format!(
                "unmap_physical: no mapping of {size} bytes at {at}"
            )));
        }
        let handle = self.unmap_at(at)?;
        self.free_physical(handle)
    }

    /// Size of the mapping starting at `at`.
    fn mapping_size(&self, at: DevicePtr) -> Option<u64> {
        let (base, seg) = self.segments.floor(at.0)?;
        seg.mappings.as_ref()?.get(&(at.0 - base)).map(|m| m.0)
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
        let overlaps = maps
            .range(..offset + size)
            .next_back()
            .is_some_and(|(&o, &(l, _))| o + l > offset);
        if overlaps {
            return Err(HalError::InvalidArgument(format!(
                "map: {size} bytes at {at} overlap an existing mapping"
            )));
        }
        Ok((offset, maps))
    }
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
