//! [`AclCalls`]: the ACL calls the hal makes, as a trait over plain Rust values.
//!
//! The real implementation forwards to an [`AclApi`] table (out parameters become return
//! values, an absent optional symbol becomes `None`); unit tests use the generated
//! `MockAclCalls`, so every error path, fallback and thread binding of the hal wrapper is
//! tested without a library. Codes are raw `aclError`s: turning them into [`crate::AclError`]
//! (with `aclGetRecentErrMsg`) is the wrapper's job.

use crate::api::AclApi;
use crate::ffi::{
    aclError, aclrtIpcEventHandle, aclrtPhysicalMemProp, ACL_HBM_MEM_HUGE, ACL_IPC_MEM_KEY_LEN,
    ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_MODEL_RI_CAPTURE_STATUS_NONE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
};
use std::ffi::{c_char, c_void, CStr};
use std::ptr;

/// An opaque ACL handle (`aclrtStream`, `aclrtEvent`, `aclmdlRI`) as an address; 0 is null
/// (for streams: the default stream).
pub(crate) type Handle = usize;

/// Converts a return code into `Result`.
fn ok(code: aclError) -> Result<(), aclError> {
    if code == 0 {
        Ok(())
    } else {
        Err(code)
    }
}

#[cfg_attr(test, mockall::automock)]
pub(crate) trait AclCalls: Send + Sync {
    /// `aclGetRecentErrMsg`, copied ("" when the runtime has none).
    fn recent_error_message(&self) -> String;
    /// `aclInit(NULL)`.
    fn init(&self) -> aclError;
    /// `aclrtGetDeviceCount`.
    fn device_count(&self) -> Result<u32, aclError>;
    /// `aclrtSetDevice`.
    fn set_device(&self, device: i32) -> aclError;
    /// `aclrtResetDevice`.
    fn reset_device(&self, device: i32) -> aclError;
    /// `aclrtGetMemInfo(attr)`: (free, total).
    fn mem_info(&self, attr: u32) -> Result<(u64, u64), aclError>;
    /// `aclrtSynchronizeDevice`.
    fn synchronize_device(&self) -> aclError;
    /// `aclrtCreateStream`.
    fn create_stream(&self) -> Result<Handle, aclError>;
    /// `aclrtCreateStreamWithConfig`; `None` without the symbol.
    fn create_stream_with_config(
        &self,
        priority: u32,
        flags: u32,
    ) -> Option<Result<Handle, aclError>>;
    /// `aclrtDestroyStream`.
    fn destroy_stream(&self, stream: Handle) -> aclError;
    /// `aclrtSynchronizeStream`.
    fn synchronize_stream(&self, stream: Handle) -> aclError;
    /// `aclrtSynchronizeStreamWithTimeout`; `None` without the symbol.
    fn synchronize_stream_with_timeout(&self, stream: Handle, timeout_ms: i32) -> Option<aclError>;
    /// `aclrtStreamQuery`: the `aclrtStreamStatus`; `None` without the symbol.
    fn stream_query(&self, stream: Handle) -> Option<Result<u32, aclError>>;
    /// `aclrtStreamWaitEvent`.
    fn stream_wait_event(&self, stream: Handle, event: Handle) -> aclError;
    /// `aclrtCreateEventExWithFlag`; `None` without the symbol.
    fn create_event_ex_with_flag(&self, flags: u32) -> Option<Result<Handle, aclError>>;
    /// `aclrtCreateEventWithFlag`.
    fn create_event_with_flag(&self, flags: u32) -> Result<Handle, aclError>;
    /// `aclrtDestroyEvent`.
    fn destroy_event(&self, event: Handle) -> aclError;
    /// `aclrtRecordEvent`.
    fn record_event(&self, event: Handle, stream: Handle) -> aclError;
    /// `aclrtQueryEventStatus`: the `aclrtEventRecordedStatus`.
    fn query_event_status(&self, event: Handle) -> Result<u32, aclError>;
    /// `aclrtSynchronizeEvent`.
    fn synchronize_event(&self, event: Handle) -> aclError;
    /// `aclrtEventElapsedTime`.
    fn event_elapsed_time(&self, start: Handle, end: Handle) -> Result<f32, aclError>;
    /// `aclrtMalloc`.
    fn malloc(&self, size: usize, policy: u32) -> Result<u64, aclError>;
    /// `aclrtFree`.
    fn free(&self, ptr: u64) -> aclError;
    /// `aclrtMallocHost`: page-locked host memory, as an address.
    fn malloc_host(&self, size: usize) -> Result<usize, aclError>;
    /// `aclrtFreeHost`.
    fn free_host(&self, ptr: usize) -> aclError;
    /// `aclrtMemcpyAsync`; host addresses are passed as numbers.
    ///
    /// # Safety
    /// Host memory named by `dst` or `src` (per `kind`) is valid for `count` bytes until the
    /// copy has run.
    unsafe fn memcpy_async(
        &self,
        dst: u64,
        dst_max: usize,
        src: u64,
        count: usize,
        kind: u32,
        stream: Handle,
    ) -> aclError;
    /// `aclrtMemsetAsync` on device memory.
    fn memset_async(
        &self,
        dst: u64,
        max_count: usize,
        value: i32,
        count: usize,
        stream: Handle,
    ) -> aclError;
    /// `aclmdlRICaptureBegin`; `None` without the symbol.
    fn capture_begin(&self, stream: Handle, mode: u32) -> Option<aclError>;
    /// `aclmdlRICaptureGetInfo`: (status, model); `None` without the symbol.
    fn capture_get_info(&self, stream: Handle) -> Option<Result<(u32, Handle), aclError>>;
    /// `aclmdlRICaptureEnd`: the model; `None` without the symbol.
    fn capture_end(&self, stream: Handle) -> Option<Result<Handle, aclError>>;
    /// `aclmdlRIExecuteAsync`; `None` without the symbol.
    fn model_execute_async(&self, model: Handle, stream: Handle) -> Option<aclError>;
    /// `aclmdlRIDestroy`; `None` without the symbol.
    fn model_destroy(&self, model: Handle) -> Option<aclError>;
    /// `aclmdlRICaptureTaskGrpBegin`; `None` without the symbol.
    fn task_grp_begin(&self, stream: Handle) -> Option<aclError>;
    /// `aclmdlRICaptureTaskGrpEnd`: the group; `None` without the symbol.
    fn task_grp_end(&self, stream: Handle) -> Option<Result<Handle, aclError>>;
    /// `aclmdlRICaptureTaskUpdateBegin`; `None` without the symbol.
    fn task_update_begin(&self, stream: Handle, group: Handle) -> Option<aclError>;
    /// `aclmdlRICaptureTaskUpdateEnd`; `None` without the symbol.
    fn task_update_end(&self, stream: Handle) -> Option<aclError>;
    /// `aclrtDeviceCanAccessPeer(device, peer)`: the `canAccessPeer` value; `None` without
    /// the symbol.
    fn can_access_peer(&self, device: i32, peer: i32) -> Option<Result<i32, aclError>>;
    /// `aclrtDeviceEnablePeerAccess(peer, flags)` from the current device; `None` without
    /// the symbol.
    fn enable_peer_access(&self, peer: i32, flags: u32) -> Option<aclError>;
    /// braid's `braidSimBusy` extension; `None` without the symbol.
    fn busy(&self, stream: Handle, duration_ns: u64) -> Option<aclError>;
    /// The loaded ACL table behind these calls, for loading aclnn next to it (`None` for
    /// test doubles).
    fn acl_api(&self) -> Option<&'static AclApi>;
    /// braid's `braidSimSanitizerReportCount` extension; `None` without the symbol.
    fn sanitizer_report_count(&self, device: i32) -> Option<Result<u64, aclError>>;
    /// braid's `braidSimSanitizerReport` extension (the text of report `index`); `None`
    /// without the symbol.
    fn sanitizer_report(&self, device: i32, index: u64) -> Option<Result<String, aclError>>;
    /// braid's `braidSimClearSanitizerReports` extension; `None` without the symbol.
    fn clear_sanitizer_reports(&self, device: i32) -> Option<aclError>;
    /// The page size of the virtual-memory API for HBM huge pages of `device`
    /// (`aclrtMemGetAllocationGranularity`, minimum; 2 MiB where that symbol is missing);
    /// `None` without the virtual-memory symbols.
    fn vmm_granularity(&self, device: i32) -> Option<Result<u64, aclError>>;
    /// `aclrtReserveMemAddress` (alignment 0, system-chosen address, flags 0): the address;
    /// `None` without the symbol.
    fn reserve_mem_address(&self, size: usize) -> Option<Result<u64, aclError>>;
    /// `aclrtReleaseMemAddress`; `None` without the symbol.
    fn release_mem_address(&self, ptr: u64) -> Option<aclError>;
    /// `aclrtMallocPhysical` of HBM huge pages on `device`: the handle; `None` without the
    /// symbol.
    fn malloc_physical(&self, size: usize, device: i32) -> Option<Result<Handle, aclError>>;
    /// `aclrtFreePhysical`; `None` without the symbol.
    fn free_physical(&self, handle: Handle) -> Option<aclError>;
    /// `aclrtMapMem` of all `size` bytes of `handle` at `ptr` (offset 0, flags 0); `None`
    /// without the symbol.
    fn map_mem(&self, ptr: u64, size: usize, handle: Handle) -> Option<aclError>;
    /// `aclrtUnmapMem`; `None` without the symbol.
    fn unmap_mem(&self, ptr: u64) -> Option<aclError>;

    // Serving: capture modes per thread.
    /// `aclmdlRICaptureThreadExchangeMode`: sets the calling thread's mode, returns the
    /// previous one; `None` without the symbol.
    fn capture_thread_exchange_mode(&self, mode: u32) -> Option<Result<u32, aclError>>;

    // Serving: sharing with other processes.
    /// `aclrtDeviceGetBareTgid`; `None` without the symbol.
    fn bare_tgid(&self) -> Option<Result<i32, aclError>>;
    /// `aclrtIpcMemGetExportKey` of `size` bytes at `ptr` (a 65-byte key buffer): the key;
    /// `None` without the symbol.
    fn ipc_mem_get_export_key(
        &self,
        ptr: u64,
        size: usize,
        flags: u64,
    ) -> Option<Result<String, aclError>>;
    /// `aclrtIpcMemSetImportPid`; `None` without the symbol.
    fn ipc_mem_set_import_pid(&self, key: &str, pids: &[i32]) -> Option<aclError>;
    /// `aclrtIpcMemImportByKey`: the address; `None` without the symbol.
    fn ipc_mem_import_by_key(&self, key: &str, flags: u64) -> Option<Result<u64, aclError>>;
    /// `aclrtIpcMemClose`; `None` without the symbol.
    fn ipc_mem_close(&self, key: &str) -> Option<aclError>;
    /// `aclrtMemExportToShareableHandle` (handle type NONE): the shareable handle; `None`
    /// without the symbol.
    fn mem_export_to_shareable_handle(
        &self,
        handle: Handle,
        flags: u64,
    ) -> Option<Result<u64, aclError>>;
    /// `aclrtMemImportFromShareableHandle`: the physical handle; `None` without the symbol.
    fn mem_import_from_shareable_handle(
        &self,
        shareable: u64,
        device: i32,
    ) -> Option<Result<Handle, aclError>>;
    /// `aclrtMemSetPidToShareableHandle`; `None` without the symbol.
    fn mem_set_pid_to_shareable_handle(&self, shareable: u64, pids: &[i32]) -> Option<aclError>;
    /// `aclrtIpcGetEventHandle`: the handle's bytes; `None` without the symbol.
    fn ipc_get_event_handle(&self, event: Handle) -> Option<Result<[u8; 64], aclError>>;
    /// `aclrtIpcOpenEventHandle`: the event; `None` without the symbol.
    fn ipc_open_event_handle(&self, handle: [u8; 64]) -> Option<Result<Handle, aclError>>;
}

/// The physical memory `aclrtMallocPhysical` is asked for: HBM huge pages, pinned, on
/// `device` (what torch_npu asks for).
fn physical_prop(device: i32) -> aclrtPhysicalMemProp {
    aclrtPhysicalMemProp {
        handle_type: ACL_MEM_HANDLE_TYPE_NONE,
        allocation_type: ACL_MEM_ALLOCATION_TYPE_PINNED,
        mem_attr: ACL_HBM_MEM_HUGE,
        location_id: device as u32,
        location_type: ACL_MEM_LOCATION_TYPE_DEVICE,
        reserve: 0,
    }
}

/// The real table, as the hal's calls.
pub(crate) struct ApiRef(pub(crate) &'static AclApi);

fn stream_ptr(h: Handle) -> *mut c_void {
    h as *mut c_void
}

/// Calls the table. Every `unsafe` call below passes handles the backend obtained from this
/// library (or null for the default stream) and out pointers to live locals.
impl AclCalls for ApiRef {
    fn recent_error_message(&self) -> String {
        self.0.recent_error_message()
    }

    fn init(&self) -> aclError {
        // SAFETY: a null config path is allowed.
        unsafe { (self.0.aclInit)(ptr::null()) }
    }

    fn device_count(&self) -> Result<u32, aclError> {
        let mut count = 0u32;
        // SAFETY: `count` is a live out parameter.
        ok(unsafe { (self.0.aclrtGetDeviceCount)(&mut count) })?;
        Ok(count)
    }

    fn set_device(&self, device: i32) -> aclError {
        // SAFETY: plain integer argument.
        unsafe { (self.0.aclrtSetDevice)(device) }
    }

    fn reset_device(&self, device: i32) -> aclError {
        // SAFETY: plain integer argument.
        unsafe { (self.0.aclrtResetDevice)(device) }
    }

    fn mem_info(&self, attr: u32) -> Result<(u64, u64), aclError> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: live out parameters.
        ok(unsafe { (self.0.aclrtGetMemInfo)(attr, &mut free, &mut total) })?;
        Ok((free as u64, total as u64))
    }

    fn synchronize_device(&self) -> aclError {
        // SAFETY: no arguments.
        unsafe { (self.0.aclrtSynchronizeDevice)() }
    }

    fn create_stream(&self) -> Result<Handle, aclError> {
        let mut s: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter.
        ok(unsafe { (self.0.aclrtCreateStream)(&mut s) })?;
        Ok(s as Handle)
    }

    fn create_stream_with_config(
        &self,
        priority: u32,
        flags: u32,
    ) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclrtCreateStreamWithConfig?;
        let mut s: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter.
        Some(ok(unsafe { f(&mut s, priority, flags) }).map(|()| s as Handle))
    }

    fn destroy_stream(&self, stream: Handle) -> aclError {
        // SAFETY: a stream handle from this library.
        unsafe { (self.0.aclrtDestroyStream)(stream_ptr(stream)) }
    }

    fn synchronize_stream(&self, stream: Handle) -> aclError {
        // SAFETY: a stream handle from this library, or null (default stream).
        unsafe { (self.0.aclrtSynchronizeStream)(stream_ptr(stream)) }
    }

    fn synchronize_stream_with_timeout(&self, stream: Handle, timeout_ms: i32) -> Option<aclError> {
        let f = self.0.aclrtSynchronizeStreamWithTimeout?;
        // SAFETY: a stream handle from this library, or null (default stream).
        Some(unsafe { f(stream_ptr(stream), timeout_ms) })
    }

    fn stream_query(&self, stream: Handle) -> Option<Result<u32, aclError>> {
        let f = self.0.aclrtStreamQuery?;
        let mut status = 0u32;
        // SAFETY: a stream handle from this library; live out parameter.
        Some(ok(unsafe { f(stream_ptr(stream), &mut status) }).map(|()| status))
    }

    fn stream_wait_event(&self, stream: Handle, event: Handle) -> aclError {
        // SAFETY: handles from this library.
        unsafe { (self.0.aclrtStreamWaitEvent)(stream_ptr(stream), event as *mut c_void) }
    }

    fn create_event_ex_with_flag(&self, flags: u32) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclrtCreateEventExWithFlag?;
        let mut e: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter.
        Some(ok(unsafe { f(&mut e, flags) }).map(|()| e as Handle))
    }

    fn create_event_with_flag(&self, flags: u32) -> Result<Handle, aclError> {
        let mut e: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter.
        ok(unsafe { (self.0.aclrtCreateEventWithFlag)(&mut e, flags) })?;
        Ok(e as Handle)
    }

    fn destroy_event(&self, event: Handle) -> aclError {
        // SAFETY: an event handle from this library.
        unsafe { (self.0.aclrtDestroyEvent)(event as *mut c_void) }
    }

    fn record_event(&self, event: Handle, stream: Handle) -> aclError {
        // SAFETY: handles from this library.
        unsafe { (self.0.aclrtRecordEvent)(event as *mut c_void, stream_ptr(stream)) }
    }

    fn query_event_status(&self, event: Handle) -> Result<u32, aclError> {
        let mut status = 0u32;
        // SAFETY: an event handle from this library; live out parameter.
        ok(unsafe { (self.0.aclrtQueryEventStatus)(event as *mut c_void, &mut status) })?;
        Ok(status)
    }

    fn synchronize_event(&self, event: Handle) -> aclError {
        // SAFETY: an event handle from this library.
        unsafe { (self.0.aclrtSynchronizeEvent)(event as *mut c_void) }
    }

    fn event_elapsed_time(&self, start: Handle, end: Handle) -> Result<f32, aclError> {
        let mut ms = 0f32;
        // SAFETY: event handles from this library; live out parameter.
        ok(unsafe {
            (self.0.aclrtEventElapsedTime)(&mut ms, start as *mut c_void, end as *mut c_void)
        })?;
        Ok(ms)
    }

    fn malloc(&self, size: usize, policy: u32) -> Result<u64, aclError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter.
        ok(unsafe { (self.0.aclrtMalloc)(&mut p, size, policy) })?;
        Ok(p as u64)
    }

    fn free(&self, ptr: u64) -> aclError {
        // SAFETY: the caller passes an address from `aclrtMalloc` (the hal's `free` contract).
        unsafe { (self.0.aclrtFree)(ptr as *mut c_void) }
    }

    fn malloc_host(&self, size: usize) -> Result<usize, aclError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter.
        ok(unsafe { (self.0.aclrtMallocHost)(&mut p, size) })?;
        Ok(p as usize)
    }

    fn free_host(&self, ptr: usize) -> aclError {
        // SAFETY: the caller passes an address from `aclrtMallocHost` (the hal's `free_host`
        // contract).
        unsafe { (self.0.aclrtFreeHost)(ptr as *mut c_void) }
    }

    unsafe fn memcpy_async(
        &self,
        dst: u64,
        dst_max: usize,
        src: u64,
        count: usize,
        kind: u32,
        stream: Handle,
    ) -> aclError {
        // SAFETY: the caller guarantees host memory among `dst`/`src` is valid for `count`
        // bytes until the copy has run; device addresses are only interpreted by ACL.
        unsafe {
            (self.0.aclrtMemcpyAsync)(
                dst as *mut c_void,
                dst_max,
                src as *const c_void,
                count,
                kind,
                stream_ptr(stream),
            )
        }
    }

    fn memset_async(
        &self,
        dst: u64,
        max_count: usize,
        value: i32,
        count: usize,
        stream: Handle,
    ) -> aclError {
        // SAFETY: `dst` is a device address, only interpreted by ACL (which checks it).
        unsafe {
            (self.0.aclrtMemsetAsync)(
                dst as *mut c_void,
                max_count,
                value,
                count,
                stream_ptr(stream),
            )
        }
    }

    fn capture_begin(&self, stream: Handle, mode: u32) -> Option<aclError> {
        let f = self.0.aclmdlRICaptureBegin?;
        // SAFETY: a stream handle from this library.
        Some(unsafe { f(stream_ptr(stream), mode) })
    }

    fn capture_get_info(&self, stream: Handle) -> Option<Result<(u32, Handle), aclError>> {
        let f = self.0.aclmdlRICaptureGetInfo?;
        let mut status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
        let mut model: *mut c_void = ptr::null_mut();
        // SAFETY: a stream handle from this library; live out parameters.
        Some(
            ok(unsafe { f(stream_ptr(stream), &mut status, &mut model) })
                .map(|()| (status, model as Handle)),
        )
    }

    fn capture_end(&self, stream: Handle) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclmdlRICaptureEnd?;
        let mut model: *mut c_void = ptr::null_mut();
        // SAFETY: a stream handle from this library; live out parameter.
        Some(ok(unsafe { f(stream_ptr(stream), &mut model) }).map(|()| model as Handle))
    }

    fn model_execute_async(&self, model: Handle, stream: Handle) -> Option<aclError> {
        let f = self.0.aclmdlRIExecuteAsync?;
        // SAFETY: handles from this library.
        Some(unsafe { f(model as *mut c_void, stream_ptr(stream)) })
    }

    fn task_grp_begin(&self, stream: Handle) -> Option<aclError> {
        let f = self.0.aclmdlRICaptureTaskGrpBegin?;
        // SAFETY: a stream handle from this library.
        Some(unsafe { f(stream_ptr(stream)) })
    }

    fn task_grp_end(&self, stream: Handle) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclmdlRICaptureTaskGrpEnd?;
        let mut group: *mut c_void = ptr::null_mut();
        // SAFETY: a stream handle from this library; live out parameter.
        Some(ok(unsafe { f(stream_ptr(stream), &mut group) }).map(|()| group as Handle))
    }

    fn task_update_begin(&self, stream: Handle, group: Handle) -> Option<aclError> {
        let f = self.0.aclmdlRICaptureTaskUpdateBegin?;
        // SAFETY: a stream and a task-group handle from this library.
        Some(unsafe { f(stream_ptr(stream), group as *mut c_void) })
    }

    fn task_update_end(&self, stream: Handle) -> Option<aclError> {
        let f = self.0.aclmdlRICaptureTaskUpdateEnd?;
        // SAFETY: a stream handle from this library.
        Some(unsafe { f(stream_ptr(stream)) })
    }

    fn model_destroy(&self, model: Handle) -> Option<aclError> {
        let f = self.0.aclmdlRIDestroy?;
        // SAFETY: a model handle from this library.
        Some(unsafe { f(model as *mut c_void) })
    }

    fn acl_api(&self) -> Option<&'static AclApi> {
        Some(self.0)
    }

    fn can_access_peer(&self, device: i32, peer: i32) -> Option<Result<i32, aclError>> {
        let f = self.0.aclrtDeviceCanAccessPeer?;
        let mut can = 0i32;
        // SAFETY: `can` is valid for a write.
        Some(ok(unsafe { f(&mut can, device, peer) }).map(|()| can))
    }

    fn enable_peer_access(&self, peer: i32, flags: u32) -> Option<aclError> {
        let f = self.0.aclrtDeviceEnablePeerAccess?;
        // SAFETY: plain values.
        Some(unsafe { f(peer, flags) })
    }

    fn busy(&self, stream: Handle, duration_ns: u64) -> Option<aclError> {
        let f = self.0.braidSimBusy?;
        // SAFETY: a stream handle from this library.
        Some(unsafe { f(stream_ptr(stream), duration_ns) })
    }

    fn sanitizer_report_count(&self, device: i32) -> Option<Result<u64, aclError>> {
        let f = self.0.braidSimSanitizerReportCount?;
        let mut count = 0u64;
        // SAFETY: plain integer argument; live out parameter.
        Some(ok(unsafe { f(device, &mut count) }).map(|()| count))
    }

    fn sanitizer_report(&self, device: i32, index: u64) -> Option<Result<String, aclError>> {
        let f = self.0.braidSimSanitizerReport?;
        let mut needed = 0usize;
        // SAFETY: a null buffer only asks for the size; live out parameter.
        if let Err(code) = ok(unsafe { f(device, index, ptr::null_mut(), 0, &mut needed) }) {
            return Some(Err(code));
        }
        let mut buf = vec![0u8; needed.max(1)];
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes; live out parameter.
        let code = unsafe {
            f(
                device,
                index,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut needed,
            )
        };
        Some(ok(code).map(|()| {
            CStr::from_bytes_until_nul(&buf)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()
        }))
    }

    fn clear_sanitizer_reports(&self, device: i32) -> Option<aclError> {
        let f = self.0.braidSimClearSanitizerReports?;
        // SAFETY: plain integer argument.
        Some(unsafe { f(device) })
    }

    fn vmm_granularity(&self, device: i32) -> Option<Result<u64, aclError>> {
        let api = self.0;
        let complete = api.aclrtReserveMemAddress.is_some()
            && api.aclrtReleaseMemAddress.is_some()
            && api.aclrtMallocPhysical.is_some()
            && api.aclrtFreePhysical.is_some()
            && api.aclrtMapMem.is_some()
            && api.aclrtUnmapMem.is_some();
        if !complete {
            return None;
        }
        let Some(f) = api.aclrtMemGetAllocationGranularity else {
            return Some(Ok(2 << 20));
        };
        let prop = physical_prop(device);
        let mut granularity = 0usize;
        // SAFETY: `prop` and the out parameter are live for the call.
        Some(
            ok(unsafe {
                f(
                    &prop,
                    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
                    &mut granularity,
                )
            })
            .map(|()| granularity as u64),
        )
    }

    fn reserve_mem_address(&self, size: usize) -> Option<Result<u64, aclError>> {
        let f = self.0.aclrtReserveMemAddress?;
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: live out parameter; a null expected address lets the runtime choose.
        Some(ok(unsafe { f(&mut p, size, 0, ptr::null_mut(), 0) }).map(|()| p as u64))
    }

    fn release_mem_address(&self, ptr: u64) -> Option<aclError> {
        let f = self.0.aclrtReleaseMemAddress?;
        // SAFETY: the caller passes an address from `aclrtReserveMemAddress` (the hal's
        // `release_address` contract).
        Some(unsafe { f(ptr as *mut c_void) })
    }

    fn malloc_physical(&self, size: usize, device: i32) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclrtMallocPhysical?;
        let prop = physical_prop(device);
        let mut handle: *mut c_void = ptr::null_mut();
        // SAFETY: `prop` and the out parameter are live for the call.
        Some(ok(unsafe { f(&mut handle, size, &prop, 0) }).map(|()| handle as Handle))
    }

    fn free_physical(&self, handle: Handle) -> Option<aclError> {
        let f = self.0.aclrtFreePhysical?;
        // SAFETY: a handle from `aclrtMallocPhysical` of this library.
        Some(unsafe { f(handle as *mut c_void) })
    }

    fn map_mem(&self, ptr: u64, size: usize, handle: Handle) -> Option<aclError> {
        let f = self.0.aclrtMapMem?;
        // SAFETY: a handle from `aclrtMallocPhysical` and an address in a reservation of
        // this library; the runtime checks both.
        Some(unsafe { f(ptr as *mut c_void, size, 0, handle as *mut c_void, 0) })
    }

    fn unmap_mem(&self, ptr: u64) -> Option<aclError> {
        let f = self.0.aclrtUnmapMem?;
        // SAFETY: the caller passes a mapped address (the hal's `unmap_physical` contract).
        Some(unsafe { f(ptr as *mut c_void) })
    }

    fn capture_thread_exchange_mode(&self, mode: u32) -> Option<Result<u32, aclError>> {
        let f = self.0.aclmdlRICaptureThreadExchangeMode?;
        let mut inout = mode;
        // SAFETY: `inout` is live for a read and a write.
        Some(ok(unsafe { f(&mut inout) }).map(|()| inout))
    }

    fn bare_tgid(&self) -> Option<Result<i32, aclError>> {
        let f = self.0.aclrtDeviceGetBareTgid?;
        let mut pid = 0i32;
        // SAFETY: live out parameter.
        Some(ok(unsafe { f(&mut pid) }).map(|()| pid))
    }

    fn ipc_mem_get_export_key(
        &self,
        ptr: u64,
        size: usize,
        flags: u64,
    ) -> Option<Result<String, aclError>> {
        let f = self.0.aclrtIpcMemGetExportKey?;
        let mut key = [0 as c_char; ACL_IPC_MEM_KEY_LEN];
        // SAFETY: `key` is valid for writes of its length; the address is only interpreted
        // by ACL, which checks it.
        let code = unsafe { f(ptr as *mut c_void, size, key.as_mut_ptr(), key.len(), flags) };
        Some(ok(code).map(|()| {
            let bytes: Vec<u8> = key
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }))
    }

    fn ipc_mem_set_import_pid(&self, key: &str, pids: &[i32]) -> Option<aclError> {
        let f = self.0.aclrtIpcMemSetImportPid?;
        let key = c_key(key);
        let mut pids = pids.to_vec();
        // SAFETY: a NUL-terminated key and `pids.len()` readable ids, live for the call.
        Some(unsafe { f(key.as_ptr(), pids.as_mut_ptr(), pids.len()) })
    }

    fn ipc_mem_import_by_key(&self, key: &str, flags: u64) -> Option<Result<u64, aclError>> {
        let f = self.0.aclrtIpcMemImportByKey?;
        let key = c_key(key);
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: a NUL-terminated key; live out parameter.
        Some(ok(unsafe { f(&mut p, key.as_ptr(), flags) }).map(|()| p as u64))
    }

    fn ipc_mem_close(&self, key: &str) -> Option<aclError> {
        let f = self.0.aclrtIpcMemClose?;
        let key = c_key(key);
        // SAFETY: a NUL-terminated key.
        Some(unsafe { f(key.as_ptr()) })
    }

    fn mem_export_to_shareable_handle(
        &self,
        handle: Handle,
        flags: u64,
    ) -> Option<Result<u64, aclError>> {
        let f = self.0.aclrtMemExportToShareableHandle?;
        let mut shareable = 0u64;
        // SAFETY: a physical handle of this library; live out parameter.
        Some(
            ok(unsafe {
                f(
                    handle as *mut c_void,
                    ACL_MEM_HANDLE_TYPE_NONE,
                    flags,
                    &mut shareable,
                )
            })
            .map(|()| shareable),
        )
    }

    fn mem_import_from_shareable_handle(
        &self,
        shareable: u64,
        device: i32,
    ) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclrtMemImportFromShareableHandle?;
        let mut handle: *mut c_void = ptr::null_mut();
        // SAFETY: plain values; live out parameter.
        Some(ok(unsafe { f(shareable, device, &mut handle) }).map(|()| handle as Handle))
    }

    fn mem_set_pid_to_shareable_handle(&self, shareable: u64, pids: &[i32]) -> Option<aclError> {
        let f = self.0.aclrtMemSetPidToShareableHandle?;
        let mut pids = pids.to_vec();
        // SAFETY: `pids.len()` readable ids, live for the call.
        Some(unsafe { f(shareable, pids.as_mut_ptr(), pids.len()) })
    }

    fn ipc_get_event_handle(&self, event: Handle) -> Option<Result<[u8; 64], aclError>> {
        let f = self.0.aclrtIpcGetEventHandle?;
        let mut handle = aclrtIpcEventHandle::default();
        // SAFETY: an event handle of this library; live out parameter.
        Some(
            ok(unsafe { f(event as *mut c_void, &mut handle) })
                .map(|()| handle.reserved.map(|c| c as u8)),
        )
    }

    fn ipc_open_event_handle(&self, handle: [u8; 64]) -> Option<Result<Handle, aclError>> {
        let f = self.0.aclrtIpcOpenEventHandle?;
        let handle = aclrtIpcEventHandle {
            reserved: handle.map(|b| b as c_char),
        };
        let mut event: *mut c_void = ptr::null_mut();
        // SAFETY: the handle is passed by value; live out parameter.
        Some(ok(unsafe { f(handle, &mut event) }).map(|()| event as Handle))
    }
}

/// `key` as a C string (empty for a key with a NUL inside, which no ACL key has: ACL then
/// refuses it).
fn c_key(key: &str) -> std::ffi::CString {
    std::ffi::CString::new(key).unwrap_or_default()
}
