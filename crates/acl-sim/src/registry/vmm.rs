//! ACL's virtual-memory API (`aclrtReserveMemAddress`, `aclrtMallocPhysical`, `aclrtMapMem`,
//! ...) on the simulator's reservations and physical memory handles, with CANN's documented
//! constraints: reserve with alignment 0 and no requested address, physical memory on a set
//! device with flags 0, map a whole handle at offset 0 with flags 0, no free of a mapped
//! handle, unmap before release.

use super::{sim_fail, Registry};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_stream_core::hal::Device as _;
use braid_stream_core::types::DevicePtr;

/// The granule of the address space (`aclrtMemGetAllocationGranularity`'s answer): the
/// simulator's segment alignment, a 2 MiB huge page.
pub(crate) const RESERVE_GRANULARITY: u64 = 2 << 20;

/// A physical memory handle given to the caller.
pub(super) struct Physical {
    pub(super) device: usize,
    /// The simulator's handle.
    pub(super) sim: u64,
    pub(super) size: u64,
}

impl Physical {
    /// Physical memory `sim` of `device`, of `size` bytes.
    pub(super) fn new(device: usize, sim: u64, size: u64) -> Self {
        Physical { device, sim, size }
    }
}

impl Registry {
    /// The device whose address space a reservation call of this thread uses: the current
    /// device, or device 0 on a thread that set none (address space is the process's: torch_npu
    /// probes `aclrtReserveMemAddress` while parsing its allocator configuration, before it
    /// sets a device, and expects it to work).
    fn address_space(&mut self, call: &str) -> Result<usize, Fail> {
        match self.current(call) {
            Ok(device) => Ok(device),
            Err(_) if self.initialized => {
                self.ensure_device(call, 0)?;
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// `aclrtReserveMemAddress`: reserves `size` bytes of the current device's address space
    /// (device 0's on a thread with no current device).
    pub fn reserve_mem_address(
        &mut self,
        size: usize,
        alignment: usize,
        expect_ptr: usize,
        flags: u64,
    ) -> Result<u64, Fail> {
        const CALL: &str = "aclrtReserveMemAddress";
        let device = self.address_space(CALL)?;
        if size == 0 || alignment != 0 || flags > 1 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!(
                    "{CALL}: size must be non-zero, alignment 0 and flags 0 or 1 \
                     (got size {size}, alignment {alignment}, flags {flags})"
                ),
            ));
        }
        if expect_ptr != 0 {
            return Err(fail(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                format!("{CALL}: a requested address (expectPtr) is not simulated"),
            ));
        }
        // The address space is handed out in whole granules: a smaller size is rounded up
        // (torch_npu probes with 512 bytes and expects a reservation).
        let size = (size as u64).div_ceil(RESERVE_GRANULARITY) * RESERVE_GRANULARITY;
        let dev = self.dev_mut(device)?;
        let ptr = dev
            .sim
            .reserve_address(size)
            .map_err(|e| sim_fail(CALL, e))?;
        dev.reservations.insert(ptr.0, size);
        Ok(ptr.0)
    }

    /// `aclrtReleaseMemAddress`: releases a reservation of the current device (device 0 on
    /// a thread with none) with nothing mapped in it.
    pub fn release_mem_address(&mut self, ptr: u64) -> Result<(), Fail> {
        const CALL: &str = "aclrtReleaseMemAddress";
        let device = self.address_space(CALL)?;
        let dev = self.dev_mut(device)?;
        if !dev.reservations.contains_key(&ptr) {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{CALL}: {ptr:#x} is not a reservation of device {device}"),
            ));
        }
        // SAFETY: `ptr` is a live reservation of this device (checked above); the simulator
        // refuses it while something is mapped, and stays memory safe for any queued work.
        unsafe { dev.sim.release_address(DevicePtr(ptr)) }.map_err(|e| sim_fail(CALL, e))?;
        dev.reservations.remove(&ptr);
        Ok(())
    }

    /// `aclrtMallocPhysical`: `size` bytes of physical memory on the device `prop` names.
    pub fn malloc_physical(
        &mut self,
        size: usize,
        prop: &aclrtPhysicalMemProp,
        flags: u64,
    ) -> Result<usize, Fail> {
        const CALL: &str = "aclrtMallocPhysical";
        if size == 0 || flags != 0 || prop.location_type != ACL_MEM_LOCATION_TYPE_DEVICE {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!(
                    "{CALL}: size must be non-zero, flags 0 and the location a device \
                     (got size {size}, flags {flags}, location type {})",
                    prop.location_type
                ),
            ));
        }
        let device = self.device_index(prop.location_id as i32)?;
        let dev = self.dev(device)?;
        let sim = dev
            .sim
            .alloc_physical(size as u64)
            .map_err(|e| sim_fail(CALL, e))?;
        let handle = self.handle();
        self.physical.insert(
            handle,
            Physical {
                device,
                sim,
                size: size as u64,
            },
        );
        Ok(handle)
    }

    /// `aclrtFreePhysical`: frees an unmapped handle.
    pub fn free_physical(&mut self, handle: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtFreePhysical";
        let p = self.physical_entry(CALL, handle)?;
        let (device, sim) = (p.device, p.sim);
        self.dev(device)?
            .sim
            .free_physical(sim)
            .map_err(|e| sim_fail(CALL, e))?;
        self.physical.remove(&handle);
        Ok(())
    }

    /// `aclrtMapMem`: maps all of `handle` at `ptr` (`offset` 0, `flags` 0, `size` the
    /// handle's size) in a reservation of the handle's device.
    pub fn map_mem(
        &mut self,
        ptr: u64,
        size: usize,
        offset: usize,
        handle: usize,
        flags: u64,
    ) -> Result<(), Fail> {
        const CALL: &str = "aclrtMapMem";
        let p = self.physical_entry(CALL, handle)?;
        let (device, sim, handle_size) = (p.device, p.sim, p.size);
        if offset != 0 || flags != 0 || size as u64 != handle_size {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!(
                    "{CALL}: offset and flags must be 0 and size the handle's {handle_size} bytes \
                     (got offset {offset}, flags {flags}, size {size})"
                ),
            ));
        }
        self.dev(device)?
            .sim
            .map_handle(DevicePtr(ptr), sim)
            .map_err(|e| sim_fail(CALL, e))
    }

    /// `aclrtUnmapMem`: unmaps the mapping that starts at `ptr` on the current device (its
    /// handle stays allocated).
    pub fn unmap_mem(&mut self, ptr: u64) -> Result<(), Fail> {
        const CALL: &str = "aclrtUnmapMem";
        let device = self.current(CALL)?;
        self.dev(device)?
            .sim
            .unmap(DevicePtr(ptr))
            .map(|_| ())
            .map_err(|e| sim_fail(CALL, e))
    }

    pub(super) fn physical_entry(&self, call: &str, handle: usize) -> Result<&Physical, Fail> {
        self.physical.get(&handle).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{call}: {handle:#x} is not a live physical memory handle"),
            )
        })
    }
}
