//! The exported C symbols. Each checks its pointers, then calls the registry; the registry has
//! the semantics.
//!
//! Every export has the signature `braid-acl-sys` declares for it (the same declaration the
//! ACL backend resolves): [`check_exports!`](braid_acl_sys::check_exports) at the end of this
//! file fails to compile when one is missing or drifts. Serving's sharing calls and the task
//! groups have rooms of their own.

pub mod sharing;
pub mod task_groups;

use crate::codes::*;
use crate::errmsg::{fail, ret, take_recent, Fail};
use crate::registry::{with, with_then_wait};
#[allow(unused_imports)] // the names `check_exports!` checks
use sharing::*;
use std::ffi::{c_char, c_void};
#[allow(unused_imports)] // named by `check_exports!` below
use task_groups::*;

/// Runs `f` and writes its value through the out pointer `p`.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
pub(crate) unsafe fn out<T>(
    call: &str,
    p: *mut T,
    f: impl FnOnce() -> Result<T, Fail>,
) -> aclError {
    if p.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: null output pointer"),
        )));
    }
    match f() {
        Ok(v) => {
            // SAFETY: non-null, and the caller guarantees it is valid for a write of `T`.
            unsafe { p.write(v) };
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

pub(crate) fn h(p: *mut c_void) -> usize {
    p as usize
}

pub(crate) fn ptr_of(handle: usize) -> *mut c_void {
    handle as *mut c_void
}

/// `aclError aclInit(const char *configPath)`: the first call succeeds, later calls return
/// `ACL_ERROR_REPEAT_INITIALIZE` (100002), as ACL does. The config file is ignored.
#[no_mangle]
pub extern "C" fn aclInit(_config_path: *const c_char) -> aclError {
    ret(with(|r| r.init()))
}

/// `const char *aclGetRecentErrMsg()`: the text of this thread's last failure, fetched and
/// cleared; null when there is none. Valid until the next call on this thread.
#[no_mangle]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    take_recent()
}

/// `aclError aclrtSetDevice(int32_t deviceId)`: binds the device to this thread (reference
/// counted).
#[no_mangle]
pub extern "C" fn aclrtSetDevice(device_id: i32) -> aclError {
    ret(with(|r| r.set_device(device_id)))
}

/// `aclError aclrtResetDevice(int32_t deviceId)`.
#[no_mangle]
pub extern "C" fn aclrtResetDevice(device_id: i32) -> aclError {
    ret(with(|r| r.reset_device(device_id)))
}

/// `aclError aclrtGetDeviceCount(uint32_t *count)`.
///
/// # Safety
/// `count` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    // SAFETY: the caller's guarantee on `count`.
    unsafe {
        out("aclrtGetDeviceCount", count, || {
            with(|r| Ok(r.device_count()))
        })
    }
}

/// `aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)`.
///
/// # Safety
/// `free` and `total` are null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetMemInfo(
    attr: u32,
    free: *mut usize,
    total: *mut usize,
) -> aclError {
    if free.is_null() || total.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            "aclrtGetMemInfo: null output pointer",
        )));
    }
    match with(|r| r.mem_info(attr)) {
        Ok((f, t)) => {
            // SAFETY: both non-null and valid for writes (the caller's guarantee).
            unsafe {
                free.write(usize::try_from(f).unwrap_or(usize::MAX));
                total.write(usize::try_from(t).unwrap_or(usize::MAX));
            }
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclrtSynchronizeDevice()`.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    ret(with_then_wait(|r| r.synchronize_device(-1)))
}

/// `aclError aclrtCreateStream(aclrtStream *stream)`.
///
/// # Safety
/// `stream` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut *mut c_void) -> aclError {
    // SAFETY: the caller's guarantee on `stream`.
    unsafe {
        out("aclrtCreateStream", stream, || {
            with(|r| r.create_stream(0)).map(ptr_of)
        })
    }
}

/// `aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t
/// flag)`. The flags are accepted and have no simulated effect; the priority is kept.
///
/// # Safety
/// `stream` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(
    stream: *mut *mut c_void,
    priority: u32,
    _flag: u32,
) -> aclError {
    // SAFETY: the caller's guarantee on `stream`.
    unsafe {
        out("aclrtCreateStreamWithConfig", stream, || {
            with(|r| r.create_stream(priority)).map(ptr_of)
        })
    }
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`. Destroying a capture's origin stream
/// abandons the capture.
#[no_mangle]
pub extern "C" fn aclrtDestroyStream(stream: *mut c_void) -> aclError {
    ret(with(|r| r.destroy_stream(h(stream))))
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`; 107041 during a capture that forbids
/// it.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeStream(stream: *mut c_void) -> aclError {
    ret(with_then_wait(|r| r.synchronize_stream(h(stream), -1)))
}

/// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`: 507046
/// when the wait exceeds `timeout` ms of simulated time (-1: no limit).
#[no_mangle]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(stream: *mut c_void, timeout: i32) -> aclError {
    ret(with_then_wait(|r| r.synchronize_stream(h(stream), timeout)))
}

/// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)`.
///
/// # Safety
/// `status` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamQuery(stream: *mut c_void, status: *mut u32) -> aclError {
    // SAFETY: the caller's guarantee on `status`.
    unsafe {
        out("aclrtStreamQuery", status, || {
            with(|r| r.stream_query(h(stream)))
        })
    }
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`: fails for events
/// created without `ACL_EVENT_SYNC`; waiting on an event recorded in a capture joins it.
#[no_mangle]
pub extern "C" fn aclrtStreamWaitEvent(stream: *mut c_void, event: *mut c_void) -> aclError {
    ret(with(|r| r.stream_wait_event(h(stream), h(event))))
}

/// `aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)`.
///
/// # Safety
/// `event` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut *mut c_void, flag: u32) -> aclError {
    // SAFETY: the caller's guarantee on `event`.
    unsafe {
        out("aclrtCreateEventWithFlag", event, || {
            with(|r| r.create_event(flag)).map(ptr_of)
        })
    }
}

/// `aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)`.
///
/// # Safety
/// `event` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(
    event: *mut *mut c_void,
    flag: u32,
) -> aclError {
    // SAFETY: the caller's guarantee on `event`.
    unsafe {
        out("aclrtCreateEventExWithFlag", event, || {
            with(|r| r.create_event(flag)).map(ptr_of)
        })
    }
}

/// `aclError aclrtDestroyEvent(aclrtEvent event)`.
#[no_mangle]
pub extern "C" fn aclrtDestroyEvent(event: *mut c_void) -> aclError {
    ret(with(|r| r.destroy_event(h(event))))
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn aclrtRecordEvent(event: *mut c_void, stream: *mut c_void) -> aclError {
    ret(with(|r| r.record_event(h(event), h(stream))))
}

/// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)`.
///
/// # Safety
/// `status` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventStatus(event: *mut c_void, status: *mut u32) -> aclError {
    // SAFETY: the caller's guarantee on `status`.
    unsafe {
        out("aclrtQueryEventStatus", status, || {
            with(|r| r.query_event_status(h(event)))
        })
    }
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event)`.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeEvent(event: *mut c_void) -> aclError {
    ret(with_then_wait(|r| r.synchronize_event(h(event))))
}

/// `aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)`:
/// both events need `ACL_EVENT_TIME_LINE`.
///
/// # Safety
/// `ms` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> aclError {
    // SAFETY: the caller's guarantee on `ms`.
    unsafe {
        out("aclrtEventElapsedTime", ms, || {
            with(|r| r.elapsed_ms(h(start), h(end)))
        })
    }
}

/// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`: device
/// OOM is `ACL_ERROR_RT_DEVICE_OOM` (207018). The policy has no simulated effect.
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMalloc(
    dev_ptr: *mut *mut c_void,
    size: usize,
    _policy: u32,
) -> aclError {
    // SAFETY: the caller's guarantee on `dev_ptr`.
    unsafe {
        out("aclrtMalloc", dev_ptr, || {
            with(|r| r.malloc("aclrtMalloc", size)).map(|p| p as usize as *mut c_void)
        })
    }
}

/// `aclError aclrtFree(void *devPtr)`.
#[no_mangle]
pub extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> aclError {
    ret(with(|r| r.free(dev_ptr as u64)))
}

/// `aclError aclrtMallocHost(void **hostPtr, size_t size)`: page-locked host memory for
/// asynchronous copies; exhaustion is `ACL_ERROR_RT_MEMORY_ALLOCATION` (207001).
///
/// # Safety
/// `host_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> aclError {
    // SAFETY: the caller's guarantee on `host_ptr`.
    unsafe {
        out("aclrtMallocHost", host_ptr, || {
            with(|r| r.malloc_host(size)).map(ptr_of)
        })
    }
}

/// `aclError aclrtFreeHost(void *hostPtr)`: a pointer that is not a live `aclrtMallocHost`
/// allocation is `ACL_ERROR_RT_PARAM_INVALID`.
#[no_mangle]
pub extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> aclError {
    ret(with(|r| r.free_host(h(host_ptr))))
}

/// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`.
///
/// # Safety
/// Host memory among `dst`/`src` (per `kind`) is valid for `count` bytes until the copy has
/// run, as ACL requires.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: *mut c_void,
) -> aclError {
    ret(with(|r| {
        // SAFETY: the caller's guarantee on the host memory.
        unsafe {
            r.memcpy_async(
                "aclrtMemcpyAsync",
                dst as u64,
                dest_max,
                src as u64,
                count,
                kind,
                h(stream),
            )
        }
    }))
}

/// `aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
/// aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn aclrtMemsetAsync(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
    stream: *mut c_void,
) -> aclError {
    ret(with(|r| {
        r.memset_async(
            "aclrtMemsetAsync",
            dev_ptr as u64,
            max_count,
            value,
            count,
            h(stream),
        )
    }))
}

/// `aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)`.
#[no_mangle]
pub extern "C" fn aclmdlRICaptureBegin(stream: *mut c_void, mode: u32) -> aclError {
    ret(with(|r| r.capture_begin(h(stream), mode)))
}

/// `aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode)`: sets the calling
/// thread's capture mode to `*mode` and writes the previous one back. Null is
/// `ACL_ERROR_INVALID_PARAM`, so is an unknown mode (nothing changes then).
///
/// # Safety
/// `mode` is null or valid for a read and a write.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureThreadExchangeMode(mode: *mut u32) -> aclError {
    const CALL: &str = "aclmdlRICaptureThreadExchangeMode";
    if mode.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: null mode pointer"),
        )));
    }
    // SAFETY: non-null and valid for a read (the caller's guarantee).
    let asked = unsafe { mode.read() };
    // SAFETY: as above, valid for a write.
    unsafe { out(CALL, mode, || crate::registry::exchange_thread_mode(asked)) }
}

/// `aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status,
/// aclmdlRI *modelRI)`: the model is null when the stream is not capturing.
///
/// # Safety
/// `status` and `model_ri` are null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureGetInfo(
    stream: *mut c_void,
    status: *mut u32,
    model_ri: *mut *mut c_void,
) -> aclError {
    if status.is_null() || model_ri.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            "aclmdlRICaptureGetInfo: null output pointer",
        )));
    }
    match with(|r| r.capture_get_info(h(stream))) {
        Ok((s, m)) => {
            // SAFETY: both non-null and valid for writes (the caller's guarantee).
            unsafe {
                status.write(s);
                model_ri.write(ptr_of(m));
            }
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI)`: 107025 when a stream
/// that joined the capture was not joined back to the origin stream.
///
/// # Safety
/// `model_ri` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureEnd(
    stream: *mut c_void,
    model_ri: *mut *mut c_void,
) -> aclError {
    // SAFETY: the caller's guarantee on `model_ri`.
    unsafe {
        out("aclmdlRICaptureEnd", model_ri, || {
            with(|r| r.capture_end(h(stream))).map(ptr_of)
        })
    }
}

/// `aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn aclmdlRIExecuteAsync(model_ri: *mut c_void, stream: *mut c_void) -> aclError {
    ret(with(|r| r.model_execute(h(model_ri), h(stream))))
}

/// `aclError aclmdlRIDestroy(aclmdlRI modelRI)`.
#[no_mangle]
pub extern "C" fn aclmdlRIDestroy(model_ri: *mut c_void) -> aclError {
    ret(with(|r| r.model_destroy(h(model_ri))))
}

/// `aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void
/// *expectPtr, uint64_t flags)`: reserves address space on the current device (no memory).
/// `alignment` must be 0 and `expectPtr` null; `flags` 0 or 1 (torch_npu passes 1).
///
/// # Safety
/// `vir_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtReserveMemAddress(
    vir_ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expect_ptr: *mut c_void,
    flags: u64,
) -> aclError {
    // SAFETY: the caller's guarantee on `vir_ptr`.
    unsafe {
        out("aclrtReserveMemAddress", vir_ptr, || {
            with(|r| r.reserve_mem_address(size, alignment, h(expect_ptr), flags))
                .map(|p| p as usize as *mut c_void)
        })
    }
}

/// `aclError aclrtReleaseMemAddress(void *virPtr)`: nothing may be mapped in it.
#[no_mangle]
pub extern "C" fn aclrtReleaseMemAddress(vir_ptr: *mut c_void) -> aclError {
    ret(with(|r| r.release_mem_address(vir_ptr as u64)))
}

/// `aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const
/// aclrtPhysicalMemProp *prop, uint64_t flags)`: physical memory on the device
/// `prop->location.id` (which must be set); counts against its memory. Device OOM is
/// `ACL_ERROR_RT_DEVICE_OOM`.
///
/// # Safety
/// `handle` is null or valid for a write; `prop` is null or points to an
/// `aclrtPhysicalMemProp`.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocPhysical(
    handle: *mut *mut c_void,
    size: usize,
    prop: *const aclrtPhysicalMemProp,
    flags: u64,
) -> aclError {
    const CALL: &str = "aclrtMallocPhysical";
    if prop.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: null prop"),
        )));
    }
    // SAFETY: non-null, and the caller guarantees it points to an `aclrtPhysicalMemProp`.
    let prop = unsafe { prop.read_unaligned() };
    // SAFETY: the caller's guarantee on `handle`.
    unsafe {
        out(CALL, handle, || {
            with(|r| r.malloc_physical(size, &prop, flags)).map(ptr_of)
        })
    }
}

/// `aclError aclrtFreePhysical(aclrtDrvMemHandle handle)`: the handle must not be mapped.
#[no_mangle]
pub extern "C" fn aclrtFreePhysical(handle: *mut c_void) -> aclError {
    ret(with(|r| r.free_physical(h(handle))))
}

/// `aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
/// uint64_t flags)`: maps the whole handle (`size` its size, `offset` and `flags` 0) at
/// `virPtr` inside a reservation of the handle's device.
#[no_mangle]
pub extern "C" fn aclrtMapMem(
    vir_ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: *mut c_void,
    flags: u64,
) -> aclError {
    ret(with(|r| {
        r.map_mem(vir_ptr as u64, size, offset, h(handle), flags)
    }))
}

/// `aclError aclrtUnmapMem(void *virPtr)`: unmaps the mapping starting at `virPtr` on the
/// current device; its handle stays allocated (free it with `aclrtFreePhysical`).
#[no_mangle]
pub extern "C" fn aclrtUnmapMem(vir_ptr: *mut c_void) -> aclError {
    ret(with(|r| r.unmap_mem(vir_ptr as u64)))
}

/// `aclrtMemGetAllocationGranularity`: 2 MiB (the simulator's segment alignment, a huge page).
///
/// # Safety
/// `granularity` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
    _prop: *const aclrtPhysicalMemProp,
    _option: u32,
    granularity: *mut usize,
) -> aclError {
    // SAFETY: the caller's guarantee on `granularity`.
    unsafe {
        out("aclrtMemGetAllocationGranularity", granularity, || {
            Ok(crate::registry::RESERVE_GRANULARITY as usize)
        })
    }
}

/// `aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t
/// peerDeviceId)`: 1 for two different devices of the simulated node.
///
/// # Safety
/// `can_access_peer` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    can_access_peer: *mut i32,
    device_id: i32,
    peer_device_id: i32,
) -> aclError {
    // SAFETY: the caller's guarantee on `can_access_peer`.
    unsafe {
        out("aclrtDeviceCanAccessPeer", can_access_peer, || {
            with(|r| r.can_access_peer(device_id, peer_device_id))
        })
    }
}

/// `aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)`: the current
/// device may access `peerDeviceId`'s memory (device-to-device copies across the two).
#[no_mangle]
pub extern "C" fn aclrtDeviceEnablePeerAccess(peer_device_id: i32, flags: u32) -> aclError {
    ret(with(|r| r.enable_peer_access(peer_device_id, flags)))
}

/// `aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)`.
#[no_mangle]
pub extern "C" fn aclrtDeviceDisablePeerAccess(peer_device_id: i32) -> aclError {
    ret(with(|r| r.disable_peer_access(peer_device_id)))
}

/// braid's extension `aclError braidSimBusy(aclrtStream stream, uint64_t durationNs)`:
/// occupies the simulated stream for `durationNs` (braid's `Kernel::Busy`; CANN has no such
/// operator, and braid's built-in kernels otherwise run through aclnn).
#[no_mangle]
pub extern "C" fn braidSimBusy(stream: *mut c_void, duration_ns: u64) -> aclError {
    ret(with(|r| r.busy(h(stream), duration_ns)))
}

/// braid's extension `aclError braidSimSanitizerReportCount(int32_t deviceId, uint64_t
/// *count)`: how many reports the simulator's sanitizer keeps for device `deviceId` (races,
/// uses after free, out-of-bounds accesses; see `braid_backend_sim::SanitizerMode`). The
/// device must have been set once. CANN has no such function.
///
/// # Safety
/// `count` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn braidSimSanitizerReportCount(device_id: i32, count: *mut u64) -> aclError {
    const CALL: &str = "braidSimSanitizerReportCount";
    // SAFETY: the caller's guarantee on `count`.
    unsafe {
        out(CALL, count, || {
            with(|r| r.sanitizer_reports(CALL, device_id)).map(|v| v.len() as u64)
        })
    }
}

/// braid's extension `aclError braidSimSanitizerReport(int32_t deviceId, uint64_t index,
/// char *buf, size_t bufLen, size_t *needed)`: the text of report `index` (below
/// `braidSimSanitizerReportCount`) of device `deviceId`. `*needed` receives the text's length
/// plus one (for the NUL); when `buf` is non-null the NUL-terminated text is written there,
/// which fails with `ACL_ERROR_INVALID_PARAM` if `bufLen` is less than `*needed`. Call it with
/// a null `buf` to learn the size.
///
/// # Safety
/// `needed` is null or valid for a write; `buf` is null or valid for writes of `buf_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn braidSimSanitizerReport(
    device_id: i32,
    index: u64,
    buf: *mut c_char,
    buf_len: usize,
    needed: *mut usize,
) -> aclError {
    const CALL: &str = "braidSimSanitizerReport";
    if needed.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: null output pointer"),
        )));
    }
    let text = with(|r| r.sanitizer_reports(CALL, device_id)).and_then(|reports| {
        usize::try_from(index)
            .ok()
            .and_then(|i| reports.into_iter().nth(i))
            .ok_or_else(|| {
                fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!("{CALL}: device {device_id} has no report {index}"),
                )
            })
    });
    let text = match text {
        Ok(t) => t.replace('\0', " "),
        Err(e) => return ret(Err(e)),
    };
    let size = text.len() + 1;
    // SAFETY: non-null, and valid for a write (the caller's guarantee).
    unsafe { needed.write(size) };
    if buf.is_null() {
        return ACL_SUCCESS;
    }
    if buf_len < size {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: the buffer has {buf_len} bytes, the report needs {size}"),
        )));
    }
    // SAFETY: `buf` is valid for `buf_len >= size` bytes (the caller's guarantee) and does not
    // overlap the freshly made `text`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        buf.add(text.len()).write(0);
    }
    ACL_SUCCESS
}

/// braid's extension `aclError braidSimClearSanitizerReports(int32_t deviceId)`: forgets the
/// sanitizer's reports of device `deviceId` (its happens-before state is kept). Simulated
/// devices live as long as the process, as ACL devices do; braid clears the reports when it
/// opens a device for a scenario, so each run counts only its own.
#[no_mangle]
pub extern "C" fn braidSimClearSanitizerReports(device_id: i32) -> aclError {
    ret(with(|r| r.clear_sanitizer_reports(device_id)))
}

braid_acl_sys::acl_functions!(braid_acl_sys::check_exports!(braid_acl_sys::acl::fns;));
