//! Device memory (`aclrtMalloc`, `aclrtFree`, `aclrtGetMemInfo`), pinned host memory
//! (`aclrtMallocHost`, `aclrtFreeHost`), and copies and fills on a stream
//! (`aclrtMemcpyAsync`, `aclrtMemsetAsync`). The live segments and reservations of each
//! device are kept here, so a copy of kind `ACL_MEMCPY_DEFAULT` can tell device memory from
//! host memory.

use super::waits::{Wait, WaitOn};
use super::{sim_fail, Registry};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::types::{DevicePtr, HostPtr};
use std::collections::BTreeMap;

impl Registry {
    /// `aclrtGetMemInfo`: the free and total memory of the calling thread's current device,
    /// or of device 0 on a thread that set none (the runtime's default device: torch_npu
    /// asks before its first `aclrtSetDevice` when a memory fraction is configured).
    pub fn mem_info(&mut self, attr: u32) -> Result<(u64, u64), Fail> {
        const CALL: &str = "aclrtGetMemInfo";
        let device = match self.current(CALL) {
            Ok(d) => d,
            Err(_) => {
                self.ensure_device(CALL, 0)?;
                0
            }
        };
        let dev = self.dev(device)?;
        if matches!(attr, ACL_DDR_MEM | ACL_DDR_MEM_HUGE | ACL_DDR_MEM_NORMAL) {
            return Ok((0, 0));
        }
        let info = dev
            .sim
            .mem_info()
            .map_err(|e| sim_fail("aclrtGetMemInfo", e))?;
        Ok((info.free, info.total))
    }

    /// `aclrtMalloc` and `aclrtMallocAlign32` (`call`): the simulator's segments are
    /// aligned far beyond 32 bytes and carry no padding, so the two are one allocation.
    pub fn malloc(&mut self, call: &str, size: usize) -> Result<u64, Fail> {
        let device = self.current(call)?;
        if size == 0 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: size must not be 0"),
            ));
        }
        let dev = self.dev_mut(device)?;
        let ptr = dev.sim.alloc(size as u64).map_err(|e| sim_fail(call, e))?;
        dev.allocations.insert(ptr.0, size as u64);
        Ok(ptr.0)
    }

    pub fn free(&mut self, ptr: u64) -> Result<(), Fail> {
        const CALL: &str = "aclrtFree";
        let device = self.current(CALL)?;
        if self.is_ipc_import(device, ptr) {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("aclrtFree: {ptr:#x} is memory imported from another process: release it with aclrtIpcMemClose"),
            ));
        }
        let dev = self.dev_mut(device)?;
        if dev.allocations.remove(&ptr).is_none() {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("aclrtFree: {ptr:#x} is not a live allocation of device {device}"),
            ));
        }
        // SAFETY: the segment was a live allocation of this device and is forgotten above, so it
        // is freed once.
        unsafe { dev.sim.free(DevicePtr(ptr)) }.map_err(|e| sim_fail(CALL, e))
    }

    /// `aclrtMallocHost`: pinned memory from the current device's simulator.
    pub fn malloc_host(&mut self, size: usize) -> Result<usize, Fail> {
        const CALL: &str = "aclrtMallocHost";
        let device = self.current(CALL)?;
        if size == 0 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                "aclrtMallocHost: size must not be 0",
            ));
        }
        let ptr = self
            .dev(device)?
            .sim
            .alloc_host(size as u64)
            .map_err(|e| match e {
                HalError::OutOfMemory { .. } => fail(
                    ACL_ERROR_RT_MEMORY_ALLOCATION,
                    format!("{CALL}: host memory exhausted: {e}"),
                ),
                other => sim_fail(CALL, other),
            })?;
        self.host_allocations.insert(ptr.addr(), device);
        Ok(ptr.addr())
    }

    /// `aclrtFreeHost`: waits for the device's work first (the simulator's `free_host`).
    pub fn free_host(&mut self, addr: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtFreeHost";
        self.current(CALL)?;
        let (Some(ptr), Some(&device)) = (
            HostPtr::new(addr as *mut u8),
            self.host_allocations.get(&addr),
        ) else {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{CALL}: {addr:#x} is not a live aclrtMallocHost allocation"),
            ));
        };
        // SAFETY: `ptr` is a live pinned allocation of that device's simulator (listed above,
        // forgotten below), so it is freed once; the caller promises no queued work still needs
        // it, and the simulator waits for its work anyway.
        unsafe { self.dev(device)?.sim.free_host(ptr) }.map_err(|e| sim_fail(CALL, e))?;
        self.host_allocations.remove(&addr);
        Ok(())
    }

    /// Whether `[addr, addr + len)` lies in a live segment or reservation of the current
    /// device (the simulator counts accesses to unmapped reserved memory as invalid).
    pub(super) fn is_device(&self, device: usize, addr: u64, len: u64) -> bool {
        let inside = |ranges: &BTreeMap<u64, u64>| {
            ranges
                .range(..=addr)
                .next_back()
                .is_some_and(|(base, size)| addr.saturating_add(len) <= base + size)
        };
        self.dev(device)
            .is_ok_and(|d| inside(&d.allocations) || inside(&d.reservations))
    }

    /// `aclrtMemcpyAsync`, or the copy of `aclrtMemcpy` (`call`).
    ///
    /// # Safety
    /// Host memory among `dst`/`src` (per `kind`) is valid for `count` bytes until the copy has
    /// run (host-to-host copies run at once).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn memcpy_async(
        &mut self,
        call: &'static str,
        dst: u64,
        dst_max: usize,
        src: u64,
        count: usize,
        kind: u32,
        stream: usize,
    ) -> Result<(), Fail> {
        if count > dst_max {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: count {count} exceeds destMax {dst_max}"),
            ));
        }
        if count > 0 && (dst == 0 || src == 0) {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: null pointer"),
            ));
        }
        let s = self.stream(call, stream)?;
        let len = count as u64;
        let kind = if kind == ACL_MEMCPY_DEFAULT {
            match (
                self.owner(dst, len).is_some(),
                self.owner(src, len).is_some(),
            ) {
                (true, true) => ACL_MEMCPY_DEVICE_TO_DEVICE,
                (true, false) => ACL_MEMCPY_HOST_TO_DEVICE,
                (false, true) => ACL_MEMCPY_DEVICE_TO_HOST,
                (false, false) => ACL_MEMCPY_HOST_TO_HOST,
            }
        } else {
            kind
        };
        match kind {
            ACL_MEMCPY_HOST_TO_HOST => {
                // SAFETY: the caller guarantees both host ranges are valid for `count` bytes;
                // `ptr::copy` allows overlap.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
                Ok(())
            }
            ACL_MEMCPY_HOST_TO_DEVICE => self.submit(call, stream, |sim| {
                // SAFETY: the caller keeps `src` valid for `count` bytes until the copy runs.
                unsafe { sim.memcpy_h2d(DevicePtr(dst), src as *const u8, len) }
            }),
            ACL_MEMCPY_DEVICE_TO_HOST => self.submit(call, stream, |sim| {
                // SAFETY: the caller keeps `dst` valid for writes of `count` bytes until the
                // copy runs.
                unsafe { sim.memcpy_d2h(dst as *mut u8, DevicePtr(src), len) }
            }),
            ACL_MEMCPY_DEVICE_TO_DEVICE => {
                self.check_peer_copy(call, s.device, dst, src, len)?;
                self.submit(call, stream, |sim| {
                    sim.memcpy_d2d(DevicePtr(dst), DevicePtr(src), len)
                })
            }
            other => Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: unsupported copy kind {other}"),
            )),
        }
    }

    /// `aclrtMemsetAsync`, or the fill of `aclrtMemset` (`call`).
    pub fn memset_async(
        &mut self,
        call: &'static str,
        dst: u64,
        max_count: usize,
        value: i32,
        count: usize,
        stream: usize,
    ) -> Result<(), Fail> {
        if count > max_count {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: count {count} exceeds maxCount {max_count}"),
            ));
        }
        self.submit(call, stream, |sim| {
            sim.memset(DevicePtr(dst), value as u8, count as u64)
        })
    }

    /// `aclrtMemcpy`: the copy on the current device's default stream, and the wait for it
    /// (as for any work on that stream, which is what it orders after) the host runs. A blocking
    /// copy is refused during a capture that forbids it (107041).
    ///
    /// # Safety
    /// As [`Registry::memcpy_async`], with the host memory valid until the returned wait has
    /// run.
    pub unsafe fn memcpy_blocking(
        &mut self,
        dst: u64,
        dst_max: usize,
        src: u64,
        count: usize,
        kind: u32,
    ) -> Result<Wait, Fail> {
        const CALL: &str = "aclrtMemcpy";
        let device = self.current(CALL)?;
        self.check_blocking(CALL, device, None)?;
        self.check_failed(CALL, device)?;
        // SAFETY: the caller's guarantee; the copy is waited for before returning.
        unsafe { self.memcpy_async(CALL, dst, dst_max, src, count, kind, 0) }?;
        self.wait_default_stream(CALL, device)
    }

    /// `aclrtMemset`: the fill on the current device's default stream, and the wait for it.
    pub fn memset_blocking(
        &mut self,
        dst: u64,
        max_count: usize,
        value: i32,
        count: usize,
    ) -> Result<Wait, Fail> {
        const CALL: &str = "aclrtMemset";
        let device = self.current(CALL)?;
        self.check_blocking(CALL, device, None)?;
        self.check_failed(CALL, device)?;
        self.memset_async(CALL, dst, max_count, value, count, 0)?;
        self.wait_default_stream(CALL, device)
    }

    fn wait_default_stream(&self, call: &'static str, device: usize) -> Result<Wait, Fail> {
        let stream = self.dev(device)?.default_stream.clone();
        let scope = crate::reports::Scope::Stream(crate::reports::StreamKey {
            device,
            index: stream.index(),
        });
        Ok(Wait::new(
            call,
            WaitOn::Stream(stream),
            scope,
            self.collective_timeout,
        ))
    }
}

impl Registry {
    /// `aclrtHostRegisterV2`: registers `[ptr, ptr + size)` of host memory as pinned. The
    /// simulator copies every host range the same way, so registration is kept (and checked:
    /// no range twice, no overlap) for `aclrtHostUnregister`.
    pub fn host_register(&mut self, ptr: u64, size: u64) -> Result<(), Fail> {
        const CALL: &str = "aclrtHostRegisterV2";
        if ptr == 0 || size == 0 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: ptr is null or size is 0"),
            ));
        }
        let end = ptr.checked_add(size).ok_or_else(|| {
            fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: {ptr:#x} + {size} overflows"),
            )
        })?;
        let before = self.registered_host.range(..end).next_back();
        if let Some((&at, &len)) = before.filter(|(&at, &len)| at + len > ptr) {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!(
                    "{CALL}: [{ptr:#x}, {end:#x}) overlaps the registered range [{at:#x}, {:#x})",
                    at + len
                ),
            ));
        }
        self.registered_host.insert(ptr, size);
        Ok(())
    }

    /// `aclrtHostUnregister`: forgets a range `aclrtHostRegisterV2` registered.
    pub fn host_unregister(&mut self, ptr: u64) -> Result<(), Fail> {
        self.registered_host
            .remove(&ptr)
            .map(|_| ())
            .ok_or_else(|| {
                fail(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("aclrtHostUnregister: {ptr:#x} is not a registered host range"),
                )
            })
    }
}
