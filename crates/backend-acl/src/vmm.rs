//! The hal's virtual-memory methods over ACL (`aclrtReserveMemAddress`,
//! `aclrtMallocPhysical` + `aclrtMapMem`, `aclrtUnmapMem` + `aclrtFreePhysical`,
//! `aclrtReleaseMemAddress`), for the allocator's expandable segments. Each `map_physical`
//! allocates one physical handle of its size and maps it; the handle is kept by address so
//! `unmap_physical` can free it.

use crate::device::AclDevice;
use crate::live;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DevicePtr;

/// The hal error for a missing virtual-memory symbol.
fn missing(call: &'static str) -> HalError {
    HalError::Unsupported(call)
}

/// A size as `usize`, or an invalid argument.
fn bytes(size: u64) -> Result<usize, HalError> {
    usize::try_from(size)
        .map_err(|_| HalError::InvalidArgument(format!("{size} bytes do not fit in size_t")))
}

impl AclDevice {
    pub(crate) fn vmm_granularity_impl(&self) -> Option<u64> {
        let sh = &self.shared;
        if let Err(err) = sh.bind() {
            tracing::warn!(%err, "no virtual memory: the device could not be bound");
            return None;
        }
        match sh.calls.vmm_granularity(sh.ordinal as i32)? {
            Ok(g) if g > 0 => Some(g),
            Ok(_) => None,
            Err(code) => {
                let err = sh.error("aclrtMemGetAllocationGranularity", code);
                tracing::warn!(%err, "no virtual memory: the granularity is unknown");
                None
            }
        }
    }

    pub(crate) fn reserve_address_impl(&self, size: u64) -> Result<DevicePtr, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let r = sh
            .calls
            .reserve_mem_address(bytes(size)?)
            .ok_or_else(|| missing("virtual memory (aclrtReserveMemAddress missing)"))?;
        let ptr = sh.result("aclrtReserveMemAddress", r)?;
        tracing::debug!(ptr = %DevicePtr(ptr), size, "ACL address range reserved");
        Ok(DevicePtr(ptr))
    }

    pub(crate) fn release_address_impl(&self, ptr: DevicePtr) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .release_mem_address(ptr.0)
            .ok_or_else(|| missing("virtual memory (aclrtReleaseMemAddress missing)"))?;
        Ok(sh.check("aclrtReleaseMemAddress", code)?)
    }

    pub(crate) fn map_physical_impl(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let len = bytes(size)?;
        let r = sh
            .calls
            .malloc_physical(len, sh.ordinal as i32)
            .ok_or_else(|| missing("virtual memory (aclrtMallocPhysical missing)"))?;
        let handle = match r {
            Ok(h) => h,
            Err(code) => return Err(self.alloc_error(sh.error("aclrtMallocPhysical", code), size)),
        };
        let mapped = sh
            .calls
            .map_mem(at.0, len, handle)
            .ok_or_else(|| missing("virtual memory (aclrtMapMem missing)"))
            .and_then(|code| Ok(sh.check("aclrtMapMem", code)?));
        if let Err(err) = mapped {
            // Nothing stays allocated for a failed mapping.
            if let Some(code) = sh.calls.free_physical(handle) {
                if let Err(free_err) = sh.check("aclrtFreePhysical", code) {
                    tracing::warn!(%free_err, "freeing the handle of a failed mapping failed");
                }
            }
            return Err(err);
        }
        sh.physical.lock().insert(at.0, (handle, size));
        live::note(sh.library_key(), sh.ordinal, at.0, size);
        tracing::debug!(%at, size, "ACL physical memory mapped");
        Ok(())
    }

    pub(crate) fn unmap_physical_impl(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let Some(handle) = sh
            .physical
            .lock()
            .get(&at.0)
            .filter(|m| m.1 == size)
            .map(|m| m.0)
        else {
            return Err(HalError::InvalidArgument(format!(
                "unmap_physical: no mapping of {size} bytes was made at {at} by map_physical"
            )));
        };
        let code = sh
            .calls
            .unmap_mem(at.0)
            .ok_or_else(|| missing("virtual memory (aclrtUnmapMem missing)"))?;
        sh.check("aclrtUnmapMem", code)?;
        // Unmapped: the handle is forgotten even if freeing it fails (it cannot be unmapped
        // again).
        sh.physical.lock().remove(&at.0);
        live::forget(sh.library_key(), at.0);
        let code = sh
            .calls
            .free_physical(handle)
            .ok_or_else(|| missing("virtual memory (aclrtFreePhysical missing)"))?;
        sh.check("aclrtFreePhysical", code)?;
        tracing::debug!(%at, size, "ACL physical memory unmapped and freed");
        Ok(())
    }
}
