//! Every ACL function braid calls, with its C signature, and braid's own extensions that
//! `braid-acl-sim` exports next to them: the one list ([`acl_functions!`](crate::acl_functions))
//! that both `braid-backend-acl` (which resolves [`AclFunctions`] from the loaded library) and
//! `braid-acl-sim` (which checks its exports against it with
//! [`check_exports!`](crate::check_exports)) use.
//!
//! Required symbols are ACL's core (init, devices, streams, events, memory, copies); optional
//! ones are newer or feature-specific APIs (streams with config, synchronize with timeout,
//! events with the `Ex` flags, the `aclmdlRI*` capture API, virtual memory) and braid's
//! extensions (`braidSim*`: sanitizer reports, which CANN does not have).

use super::sharing::aclrtIpcEventHandle;
use super::types::{
    aclError, aclmdlRI, aclrtDrvMemHandle, aclrtEvent, aclrtPhysicalMemProp, aclrtStream,
    aclrtTaskGrp,
};
use std::ffi::{c_char, c_void};

/// Hands the list of ACL functions to another macro: `acl_functions!(path::m!(tokens))`
/// expands to `path::m! { tokens <the list> }`, the list being written as [`c_api!`]
/// takes it. This crate makes the table with `acl_functions!(crate::c_api!())`; an exporter
/// checks its functions with
/// `acl_functions!(braid_acl_sys::check_exports!(braid_acl_sys::acl::fns;))`.
///
/// The names the signatures use (`aclError`, `aclrtStream`, `c_void`, ...) must be in scope
/// where the list is expanded.
///
/// [`c_api!`]: crate::c_api
#[macro_export]
macro_rules! acl_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The function table of one ACL library (`libascendcl.so`, or `libbraid_acl_sim.so`).
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract (valid handles,
    /// pointers valid for the lengths given).
    pub struct AclFunctions;

    /// `aclError aclInit(const char *configPath)`.
    required fn aclInit(config_path: *const c_char) -> aclError;
    /// `const char *aclGetRecentErrMsg()`: the calling thread's last failure text, or null.
    required fn aclGetRecentErrMsg() -> *const c_char;
    /// `aclError aclrtSetDevice(int32_t deviceId)`.
    required fn aclrtSetDevice(device_id: i32) -> aclError;
    /// `aclError aclrtResetDevice(int32_t deviceId)`.
    required fn aclrtResetDevice(device_id: i32) -> aclError;
    /// `aclError aclrtGetDeviceCount(uint32_t *count)`.
    required fn aclrtGetDeviceCount(count: *mut u32) -> aclError;
    /// `aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)`.
    required fn aclrtGetMemInfo(attr: u32, free: *mut usize, total: *mut usize) -> aclError;
    /// `aclError aclrtSynchronizeDevice()`.
    required fn aclrtSynchronizeDevice() -> aclError;
    /// `aclError aclrtCreateStream(aclrtStream *stream)`.
    required fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError;
    /// `aclError aclrtDestroyStream(aclrtStream stream)`.
    required fn aclrtDestroyStream(stream: aclrtStream) -> aclError;
    /// `aclError aclrtSynchronizeStream(aclrtStream stream)`.
    required fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError;
    /// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`.
    required fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError;
    /// `aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)`.
    required fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError;
    /// `aclError aclrtDestroyEvent(aclrtEvent event)`.
    required fn aclrtDestroyEvent(event: aclrtEvent) -> aclError;
    /// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
    required fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError;
    /// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)`.
    required fn aclrtQueryEventStatus(event: aclrtEvent, status: *mut u32) -> aclError;
    /// `aclError aclrtSynchronizeEvent(aclrtEvent event)`.
    required fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError;
    /// `aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)`.
    required fn aclrtEventElapsedTime(ms: *mut f32, start: aclrtEvent, end: aclrtEvent) -> aclError;
    /// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`.
    required fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> aclError;
    /// `aclError aclrtFree(void *devPtr)`.
    required fn aclrtFree(dev_ptr: *mut c_void) -> aclError;
    /// `aclError aclrtMallocHost(void **hostPtr, size_t size)`.
    required fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> aclError;
    /// `aclError aclrtFreeHost(void *hostPtr)`.
    required fn aclrtFreeHost(host_ptr: *mut c_void) -> aclError;
    /// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
    /// aclrtMemcpyKind kind, aclrtStream stream)`.
    required fn aclrtMemcpyAsync(
        dst: *mut c_void,
        dest_max: usize,
        src: *const c_void,
        count: usize,
        kind: u32,
        stream: aclrtStream,
    ) -> aclError;
    /// `aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
    /// aclrtStream stream)`.
    required fn aclrtMemsetAsync(
        dev_ptr: *mut c_void,
        max_count: usize,
        value: i32,
        count: usize,
        stream: aclrtStream,
    ) -> aclError;

    /// `aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t
    /// flag)`.
    optional fn aclrtCreateStreamWithConfig(stream: *mut aclrtStream, priority: u32, flag: u32) -> aclError;
    /// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`.
    optional fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError;
    /// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)`.
    optional fn aclrtStreamQuery(stream: aclrtStream, status: *mut u32) -> aclError;
    /// `aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)`.
    optional fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError;
    /// `aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)`.
    optional fn aclmdlRICaptureBegin(stream: aclrtStream, mode: u32) -> aclError;
    /// `aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status,
    /// aclmdlRI *modelRI)`.
    optional fn aclmdlRICaptureGetInfo(stream: aclrtStream, status: *mut u32, model_ri: *mut aclmdlRI) -> aclError;
    /// `aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI)`.
    optional fn aclmdlRICaptureEnd(stream: aclrtStream, model_ri: *mut aclmdlRI) -> aclError;
    /// `aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)`.
    optional fn aclmdlRIExecuteAsync(model_ri: aclmdlRI, stream: aclrtStream) -> aclError;
    /// `aclError aclmdlRIDestroy(aclmdlRI modelRI)`.
    optional fn aclmdlRIDestroy(model_ri: aclmdlRI) -> aclError;
    /// `aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream)`: the stream captures
    /// (signatures confirmed in `acl/TASK_GROUPS.md`).
    optional fn aclmdlRICaptureTaskGrpBegin(stream: aclrtStream) -> aclError;
    /// `aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle)`.
    optional fn aclmdlRICaptureTaskGrpEnd(stream: aclrtStream, handle: *mut aclrtTaskGrp) -> aclError;
    /// `aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle)`: the
    /// stream does not capture.
    optional fn aclmdlRICaptureTaskUpdateBegin(stream: aclrtStream, handle: aclrtTaskGrp) -> aclError;
    /// `aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream)`.
    optional fn aclmdlRICaptureTaskUpdateEnd(stream: aclrtStream) -> aclError;
    /// `aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void
    /// *expectPtr, uint64_t flags)`.
    optional fn aclrtReserveMemAddress(
        vir_ptr: *mut *mut c_void,
        size: usize,
        alignment: usize,
        expect_ptr: *mut c_void,
        flags: u64,
    ) -> aclError;
    /// `aclError aclrtReleaseMemAddress(void *virPtr)`.
    optional fn aclrtReleaseMemAddress(vir_ptr: *mut c_void) -> aclError;
    /// `aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const
    /// aclrtPhysicalMemProp *prop, uint64_t flags)`.
    optional fn aclrtMallocPhysical(
        handle: *mut aclrtDrvMemHandle,
        size: usize,
        prop: *const aclrtPhysicalMemProp,
        flags: u64,
    ) -> aclError;
    /// `aclError aclrtFreePhysical(aclrtDrvMemHandle handle)`.
    optional fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError;
    /// `aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle
    /// handle, uint64_t flags)`.
    optional fn aclrtMapMem(
        vir_ptr: *mut c_void,
        size: usize,
        offset: usize,
        handle: aclrtDrvMemHandle,
        flags: u64,
    ) -> aclError;
    /// `aclError aclrtUnmapMem(void *virPtr)`.
    optional fn aclrtUnmapMem(vir_ptr: *mut c_void) -> aclError;
    /// `aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
    /// aclrtMemGranularityOptions option, size_t *granularity)` (the runtime only reads
    /// `prop`).
    optional fn aclrtMemGetAllocationGranularity(
        prop: *const aclrtPhysicalMemProp,
        option: u32,
        granularity: *mut usize,
    ) -> aclError;

    /// `aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t
    /// peerDeviceId)`: 1 when `deviceId` can exchange data with `peerDeviceId` (CANN API
    /// reference, `aclcppdevg_03_0052` and neighbours).
    optional fn aclrtDeviceCanAccessPeer(can_access_peer: *mut i32, device_id: i32, peer_device_id: i32) -> aclError;
    /// `aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)`: from the
    /// current device to `peerDeviceId` (which must differ from it); `flags` is reserved and
    /// must be 0.
    optional fn aclrtDeviceEnablePeerAccess(peer_device_id: i32, flags: u32) -> aclError;
    /// `aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)`.
    optional fn aclrtDeviceDisablePeerAccess(peer_device_id: i32) -> aclError;

    // Serving: capture modes per thread, and memory and events shared between processes
    // (signatures confirmed in docs/reference/acl-ipc-capture-mode.md).
    /// `aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode)`: sets the
    /// calling thread's capture mode to `*mode` and writes the previous one back.
    optional fn aclmdlRICaptureThreadExchangeMode(mode: *mut u32) -> aclError;
    /// `aclError aclrtDeviceGetBareTgid(int32_t *pid)`: the process id the IPC allow-lists
    /// take.
    optional fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError;
    /// `aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len,
    /// uint64_t flags)`: shares `size` bytes of device memory at `devPtr` under a key of `len`
    /// (65) bytes.
    optional fn aclrtIpcMemGetExportKey(
        dev_ptr: *mut c_void,
        size: usize,
        key: *mut c_char,
        len: usize,
        flags: u64,
    ) -> aclError;
    /// `aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)`: adds
    /// processes to the key's allow-list.
    optional fn aclrtIpcMemSetImportPid(key: *const c_char, pid: *mut i32, num: usize) -> aclError;
    /// `aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)`.
    optional fn aclrtIpcMemImportByKey(dev_ptr: *mut *mut c_void, key: *const c_char, flags: u64) -> aclError;
    /// `aclError aclrtIpcMemClose(const char *key)`: in an importer, unmaps the memory; in the
    /// exporter, stops sharing it.
    optional fn aclrtIpcMemClose(key: *const c_char) -> aclError;
    /// `aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle, aclrtMemHandleType
    /// handleType, uint64_t flags, uint64_t *shareableHandle)`.
    optional fn aclrtMemExportToShareableHandle(
        handle: aclrtDrvMemHandle,
        handle_type: u32,
        flags: u64,
        shareable_handle: *mut u64,
    ) -> aclError;
    /// `aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId,
    /// aclrtDrvMemHandle *handle)`.
    optional fn aclrtMemImportFromShareableHandle(
        shareable_handle: u64,
        device_id: i32,
        handle: *mut aclrtDrvMemHandle,
    ) -> aclError;
    /// `aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid, size_t
    /// pidNum)`.
    optional fn aclrtMemSetPidToShareableHandle(shareable_handle: u64, pid: *mut i32, pid_num: usize) -> aclError;
    /// `aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle)`: the
    /// handle of an event created with `ACL_EVENT_IPC`.
    optional fn aclrtIpcGetEventHandle(event: aclrtEvent, handle: *mut aclrtIpcEventHandle) -> aclError;
    /// `aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event)`.
    optional fn aclrtIpcOpenEventHandle(handle: aclrtIpcEventHandle, event: *mut aclrtEvent) -> aclError;


    /// braid's extension `aclError braidSimBusy(aclrtStream stream, uint64_t durationNs)`:
    /// occupies the simulated stream for a duration (braid's `Kernel::Busy`, which has no
    /// CANN operator).
    optional fn braidSimBusy(stream: aclrtStream, duration_ns: u64) -> aclError;
    /// braid's extension `aclError braidSimSanitizerReportCount(int32_t deviceId, uint64_t
    /// *count)`.
    optional fn braidSimSanitizerReportCount(device_id: i32, count: *mut u64) -> aclError;
    /// braid's extension `aclError braidSimSanitizerReport(int32_t deviceId, uint64_t index,
    /// char *buf, size_t bufLen, size_t *needed)`.
    optional fn braidSimSanitizerReport(
        device_id: i32,
        index: u64,
        buf: *mut c_char,
        buf_len: usize,
        needed: *mut usize,
    ) -> aclError;
    /// braid's extension `aclError braidSimClearSanitizerReports(int32_t deviceId)`.
    optional fn braidSimClearSanitizerReports(device_id: i32) -> aclError;
        }
    };
}

crate::acl_functions!(crate::c_api!());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_symbol_list_has_no_duplicates_and_the_required_core() {
        let symbols = AclFunctions::SYMBOLS;
        let mut names: Vec<&str> = symbols.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), symbols.len());
        assert_eq!(symbols.len(), 61);
        for required in [
            "aclInit",
            "aclrtSetDevice",
            "aclrtMalloc",
            "aclrtMallocHost",
            "aclrtFreeHost",
            "aclrtMemcpyAsync",
        ] {
            assert!(symbols.iter().any(|s| s.name == required && s.required));
        }
        for optional in [
            "aclrtCreateStreamWithConfig",
            "aclrtCreateEventExWithFlag",
            "aclmdlRICaptureBegin",
            "aclrtReserveMemAddress",
            "aclrtDeviceCanAccessPeer",
            "aclrtDeviceEnablePeerAccess",
            "aclrtDeviceDisablePeerAccess",
            "braidSimBusy",
            "braidSimSanitizerReportCount",
            "braidSimSanitizerReport",
            "braidSimClearSanitizerReports",
            "aclmdlRICaptureThreadExchangeMode",
            "aclrtDeviceGetBareTgid",
            "aclrtIpcMemGetExportKey",
            "aclrtIpcMemSetImportPid",
            "aclrtIpcMemImportByKey",
            "aclrtIpcMemClose",
            "aclrtMemExportToShareableHandle",
            "aclrtMemImportFromShareableHandle",
            "aclrtMemSetPidToShareableHandle",
            "aclrtIpcGetEventHandle",
            "aclrtIpcOpenEventHandle",
        ] {
            assert!(symbols.iter().any(|s| s.name == optional && !s.required));
        }
    }

    extern "C" fn fake_set_device(_device_id: i32) -> aclError {
        7
    }

    #[test]
    fn a_table_resolves_what_the_lookup_finds_and_names_what_it_lacks() {
        // Only aclrtSetDevice is found: every other required symbol is named, in order.
        let lookup = |name: &str| {
            if name == "aclrtSetDevice" {
                fake_set_device as *mut c_void
            } else {
                std::ptr::null_mut()
            }
        };
        // SAFETY: the only address returned is a function with aclrtSetDevice's signature.
        let missing = unsafe { AclFunctions::resolve(lookup) }.unwrap_err().0;
        let required: Vec<&str> = AclFunctions::SYMBOLS
            .iter()
            .filter(|s| s.required && s.name != "aclrtSetDevice")
            .map(|s| s.name)
            .collect();
        assert_eq!(missing, required);

        // Every required symbol found (all as the same fake), no optional one.
        let required_only = |name: &str| {
            if AclFunctions::SYMBOLS
                .iter()
                .any(|s| s.required && s.name == name)
            {
                fake_set_device as *mut c_void
            } else {
                std::ptr::null_mut()
            }
        };
        // SAFETY: the table is only used to call aclrtSetDevice, whose signature the fake has.
        let table = unsafe { AclFunctions::resolve(required_only) }.expect("complete");
        // SAFETY: the fake takes an integer and returns one.
        assert_eq!(unsafe { (table.aclrtSetDevice)(0) }, 7);
        let optional: Vec<&str> = AclFunctions::SYMBOLS
            .iter()
            .filter(|s| !s.required)
            .map(|s| s.name)
            .collect();
        assert_eq!(table.missing_optional(), optional);
        assert!(table.aclmdlRICaptureBegin.is_none());
    }
}
