//! Memory shared with other processes ([`crate::ipc`]): ranges of a plain segment whose bytes
//! live in a shared file, segments imported from another process, and physical memory of the
//! virtual-memory API made shareable. Sharing changes where bytes live, never addresses,
//! accounting or accessibility. In timing-only mode nothing is stored, so nothing is shared.

use super::Memory;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use memmap2::MmapMut;

impl Memory {
    /// The base of the plain segment (from `alloc`) wholly containing the non-empty `s`.
    pub fn plain_segment_of(&self, s: DeviceSlice) -> Result<u64, String> {
        let (base, seg) = self
            .segments
            .floor(s.ptr.0)
            .filter(|(base, seg)| s.len > 0 && s.end() <= base + seg.size)
            .ok_or_else(|| format!("{s} is not inside one live allocation of this device"))?;
        if seg.mappings.is_some() {
            return Err(format!(
                "{s} is memory of the virtual-memory API: share its physical memory (a shareable handle) instead"
            ));
        }
        Ok(base)
    }

    /// Makes the bytes of `[base + offset, base + offset + map.len())` live in `map` from now
    /// on, copying them there first. Data mode only; timing-only stores nothing.
    pub fn share_range(&mut self, base: u64, offset: u64, map: MmapMut) -> Result<(), String> {
        match self.segments.get_mut(base).and_then(|s| s.data.as_mut()) {
            Some(data) => data.overlay(offset, map, true),
            None => Ok(()),
        }
    }

    /// Takes the bytes of the range at `offset` of plain segment `base` back from the map
    /// they were shared through (its bytes are copied back first), so that it can be shared
    /// anew. Nothing where no range is shared there.
    pub fn unshare_range(&mut self, base: u64, offset: u64) {
        if let Some(data) = self.segments.get_mut(base).and_then(|s| s.data.as_mut()) {
            data.remove_overlay(offset, true);
        }
    }

    /// A new plain segment of `size` bytes whose bytes are `map`'s (memory another process
    /// exported), at a fresh address; it counts against the capacity like an allocation.
    pub fn import_segment(&mut self, size: u64, map: MmapMut) -> Result<DevicePtr, HalError> {
        let ptr = self.alloc(size)?;
        if let Some(data) = self.segments.get_mut(ptr.0).and_then(|s| s.data.as_mut()) {
            if let Err(e) = data.overlay(0, map, false) {
                let _ = self.free(ptr);
                return Err(HalError::InvalidArgument(e));
            }
        }
        Ok(ptr)
    }

    /// Makes physical memory `handle` live in `map`: where it is mapped now its bytes move
    /// there, and every later mapping uses it. Refused for a handle that is not live.
    pub fn share_physical(&mut self, handle: u64, map: MmapMut) -> Result<(), HalError> {
        let Some(&(size, at)) = self.physical.get(&handle) else {
            return Err(HalError::InvalidArgument(format!(
                "{handle} is not a live physical memory handle"
            )));
        };
        if map.len() as u64 != size {
            return Err(HalError::InvalidArgument(format!(
                "the shared map of handle {handle} has {} bytes, the handle {size}",
                map.len()
            )));
        }
        if let Some(at) = at {
            if let Some((base, seg)) = self.segments.floor_mut(at) {
                if let Some(data) = seg.data.as_mut() {
                    data.overlay(at - base, map, true)
                        .map_err(HalError::InvalidArgument)?;
                }
            }
        }
        self.shared_physical.insert(handle);
        Ok(())
    }

    /// Puts `map` (the shared bytes of a handle) under that handle's new mapping at `at`.
    pub fn overlay_mapping(&mut self, at: DevicePtr, map: MmapMut) -> Result<(), HalError> {
        if let Some((base, seg)) = self.segments.floor_mut(at.0) {
            if let Some(data) = seg.data.as_mut() {
                data.overlay(at.0 - base, map, false)
                    .map_err(HalError::InvalidArgument)?;
            }
        }
        Ok(())
    }

    /// Takes the shared bytes out from under the mapping at `at`, before it goes (its
    /// contents are lost here, not in the other processes).
    pub(super) fn remove_overlay_at(&mut self, at: DevicePtr) {
        if let Some((base, seg)) = self.segments.floor_mut(at.0) {
            if let Some(data) = seg.data.as_mut() {
                data.remove_overlay(at.0 - base, false);
            }
        }
    }

    /// The size of live physical memory `handle`.
    pub fn physical_size(&self, handle: u64) -> Option<u64> {
        self.physical.get(&handle).map(|&(size, _)| size)
    }
}
