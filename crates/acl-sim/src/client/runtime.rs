//! The exported ACL runtime functions of [`AclClientFunctions`]: each checks its pointers,
//! then calls the registry (`registry::system` and the rooms of streams, events, memory and
//! models), or refuses what the simulator has no meaning for with CANN's own "not
//! supported" code, `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000), and a message naming the
//! call.
//!
//! [`AclClientFunctions`]: braid_acl_sys::acl::AclClientFunctions

use crate::codes::*;
use crate::errmsg::{fail, ret};
use crate::exports::{h, out, ptr_of};
use crate::registry::{with, with_then_wait};
use braid_acl_sys::acl::{aclrtBinHandle, aclrtBinaryLoadOptions, aclrtContext, aclrtFuncHandle};
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::OnceLock;
// Declared in the same table as this module's calls (checked at the end of this file).
pub use super::host::{
    aclrtHostRegister, aclrtHostRegisterV2, aclrtHostUnregister, aclrtLaunchCallback,
    aclrtProcessReport, aclrtSetStreamAttribute, aclrtSubscribeReport, aclrtUnSubscribeReport,
};
pub use super::version::{aclsysGetCANNVersion, aclsysGetVersionStr};

/// The failure of a call the simulator has no meaning for.
fn not_supported(call: &str, why: &str) -> aclError {
    ret(Err(fail(
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        format!("{call}: not supported by braid-acl-sim ({why})"),
    )))
}

/// `aclError aclFinalize()`: writes the sanitizer's reports and the timeline where
/// `BRAID_ACL_SIM_RACE_REPORT` and `BRAID_ACL_SIM_TIMELINE` ask; a second call is
/// `ACL_ERROR_REPEAT_FINALIZE`. The simulated devices stay usable.
#[no_mangle]
pub extern "C" fn aclFinalize() -> aclError {
    ret(with(|r| r.finalize()))
}

/// `aclError aclrtGetDevice(int32_t *deviceId)`: `ACL_ERROR_RT_CONTEXT_NULL` when the
/// calling thread has no current device.
///
/// # Safety
/// `device_id` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDevice(device_id: *mut i32) -> aclError {
    // SAFETY: the caller's guarantee on `device_id`.
    unsafe { out("aclrtGetDevice", device_id, || with(|r| r.get_device())) }
}

/// `aclError aclrtGetCurrentContext(aclrtContext *context)`: the context of the calling
/// thread's current device (one per device).
///
/// # Safety
/// `context` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    // SAFETY: the caller's guarantee on `context`.
    unsafe {
        out("aclrtGetCurrentContext", context, || {
            with(|r| r.current_context()).map(ptr_of)
        })
    }
}

/// `aclError aclrtSetCurrentContext(aclrtContext context)`: makes the context's device the
/// calling thread's current device.
#[no_mangle]
pub extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    ret(with(|r| r.set_current_context(h(context))))
}

/// `const char *aclrtGetSocName()`: `BRAID_ACL_SIM_SOC` (default `Ascend910B4`); null, with
/// the message in `aclGetRecentErrMsg`, when the settings are invalid.
#[no_mangle]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    static NAME: OnceLock<CString> = OnceLock::new();
    match with(|r| Ok(r.soc_name())) {
        Ok(name) => NAME
            .get_or_init(|| CString::new(name).unwrap_or_default())
            .as_ptr(),
        Err(e) => {
            ret(Err(e));
            std::ptr::null()
        }
    }
}

/// `aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t
/// *value)`: the cube and vector core counts of the simulator's device profile; the L2 size
/// is not modelled (207000).
///
/// # Safety
/// `value` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclGetDeviceCapability(
    device_id: u32,
    device_info: i32,
    value: *mut i64,
) -> aclError {
    // SAFETY: the caller's guarantee on `value`.
    unsafe {
        out("aclGetDeviceCapability", value, || {
            with(|r| r.device_capability(device_id, device_info))
        })
    }
}

/// `aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t *value)`.
///
/// # Safety
/// `value` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclGetCannAttribute(cann_attr: i32, value: *mut i32) -> aclError {
    // SAFETY: the caller's guarantee on `value`.
    unsafe {
        out("aclGetCannAttribute", value, || {
            with(|r| r.cann_attribute(cann_attr))
        })
    }
}

/// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind)`: the copy runs on the current device's default stream and the
/// call returns when it is done.
///
/// # Safety
/// Host memory among `dst`/`src` (per `kind`) is valid for `count` bytes during the call.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
) -> aclError {
    ret(with_then_wait(|r| {
        // SAFETY: the caller's guarantee on the host memory, which stays valid while this
        // call waits for the copy.
        unsafe { r.memcpy_blocking(dst as u64, dest_max, src as u64, count, kind) }
    }))
}

/// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)`: the
/// fill runs on the current device's default stream and the call returns when it is done.
#[no_mangle]
pub extern "C" fn aclrtMemset(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
) -> aclError {
    ret(with_then_wait(|r| {
        r.memset_blocking(dev_ptr as u64, max_count, value, count)
    }))
}

/// `aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`:
/// as `aclrtMalloc` (the simulator's segments are aligned and unpadded).
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocAlign32(
    dev_ptr: *mut *mut c_void,
    size: usize,
    _policy: u32,
) -> aclError {
    const CALL: &str = "aclrtMallocAlign32";
    // SAFETY: the caller's guarantee on `dev_ptr`.
    unsafe {
        out(CALL, dev_ptr, || {
            with(|r| r.malloc(CALL, size)).map(|p| p as usize as *mut c_void)
        })
    }
}

/// `aclError aclrtDestroyStreamForce(aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn aclrtDestroyStreamForce(stream: *mut c_void) -> aclError {
    ret(with(|r| r.destroy_stream_force(h(stream))))
}

/// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`.
#[no_mangle]
pub extern "C" fn aclrtSetStreamFailureMode(stream: *mut c_void, mode: u64) -> aclError {
    ret(with(|r| r.set_stream_failure_mode(h(stream), mode)))
}

/// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn aclrtResetEvent(event: *mut c_void, stream: *mut c_void) -> aclError {
    ret(with(|r| r.reset_event(h(event), h(stream))))
}

/// `aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)`: 507046 when the wait
/// exceeds `timeout` ms of simulated time (-1: no limit).
#[no_mangle]
pub extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError {
    ret(with_then_wait(|r| r.synchronize_device(timeout)))
}

/// `aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)`.
#[no_mangle]
pub extern "C" fn aclrtSetDeviceSatMode(mode: i32) -> aclError {
    ret(with(|r| r.set_overflow_mode(mode)))
}

/// `aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)`.
///
/// # Safety
/// `mode` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceSatMode(mode: *mut i32) -> aclError {
    // SAFETY: the caller's guarantee on `mode`.
    unsafe {
        out("aclrtGetDeviceSatMode", mode, || {
            with(|r| Ok(r.overflow_mode()))
        })
    }
}

/// `aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value)`.
#[no_mangle]
pub extern "C" fn aclrtSetSysParamOpt(opt: i32, value: i64) -> aclError {
    ret(with(|r| r.set_sys_param(opt, value)))
}

/// `aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value)`.
///
/// # Safety
/// `value` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetSysParamOpt(opt: i32, value: *mut i64) -> aclError {
    // SAFETY: the caller's guarantee on `value`.
    unsafe { out("aclrtGetSysParamOpt", value, || with(|r| r.sys_param(opt))) }
}

/// `aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)`.
#[no_mangle]
pub extern "C" fn aclrtCtxSetSysParamOpt(opt: i32, value: i64) -> aclError {
    ret(with(|r| r.ctx_set_sys_param(opt, value)))
}

/// `aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)`.
///
/// # Safety
/// `value` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCtxGetSysParamOpt(opt: i32, value: *mut i64) -> aclError {
    // SAFETY: the caller's guarantee on `value`.
    unsafe {
        out("aclrtCtxGetSysParamOpt", value, || {
            with(|r| r.ctx_sys_param(opt))
        })
    }
}

/// `aclError aclrtSetOpExecuteTimeOut(uint32_t timeout)`: taken (seconds; the simulator's
/// operators end in virtual time and never time out). Like CANN's, it may be called before
/// `aclInit` (torch_npu does).
#[no_mangle]
pub extern "C" fn aclrtSetOpExecuteTimeOut(_timeout: u32) -> aclError {
    ret(with(|_| Ok(())))
}

/// `aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout)`: taken
/// as given (microseconds), which `*actualTimeout` reports.
///
/// # Safety
/// `actual_timeout` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetOpExecuteTimeOutV2(
    timeout: u64,
    actual_timeout: *mut u64,
) -> aclError {
    const CALL: &str = "aclrtSetOpExecuteTimeOutV2";
    // SAFETY: the caller's guarantee on `actual_timeout`.
    unsafe { out(CALL, actual_timeout, || with(|_| Ok(timeout))) }
}

/// `aclError aclrtSetOpWaitTimeout(uint32_t timeout)`: taken (seconds; a wait on an event
/// ends in virtual time), before `aclInit` too (torch_npu's HCCL process group calls it
/// first).
#[no_mangle]
pub extern "C" fn aclrtSetOpWaitTimeout(_timeout: u32) -> aclError {
    ret(with(|_| Ok(())))
}

/// `aclError aclmdlRIGetId(aclmdlRI modelRI, uint32_t *modelRIId)`.
///
/// # Safety
/// `model_ri_id` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIGetId(model_ri: *mut c_void, model_ri_id: *mut u32) -> aclError {
    // SAFETY: the caller's guarantee on `model_ri_id`.
    unsafe {
        out("aclmdlRIGetId", model_ri_id, || {
            with(|r| r.model_id(h(model_ri)))
        })
    }
}

/// `aclError aclmdlInitDump()`: operator dumps are not simulated (207000).
#[no_mangle]
pub extern "C" fn aclmdlInitDump() -> aclError {
    not_supported("aclmdlInitDump", "operator dumps are not simulated")
}

/// `aclError aclmdlSetDump(const char *dumpCfgPath)`: 207000.
#[no_mangle]
pub extern "C" fn aclmdlSetDump(_dump_cfg_path: *const c_char) -> aclError {
    not_supported("aclmdlSetDump", "operator dumps are not simulated")
}

/// `aclError aclmdlFinalizeDump()`: 207000.
#[no_mangle]
pub extern "C" fn aclmdlFinalizeDump() -> aclError {
    not_supported("aclmdlFinalizeDump", "operator dumps are not simulated")
}

/// `void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line,
/// const char *fmt, ...)`: the application's log line, as a `tracing` event at the
/// matching level (the format string, unexpanded: the variadic arguments are not read).
///
/// # Safety
/// Each pointer is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclAppLog(
    log_level: i32,
    func: *const c_char,
    file: *const c_char,
    line: u32,
    fmt: *const c_char,
) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: non-null and NUL-terminated (the caller's guarantee).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let (func, file, fmt) = (text(func), text(file), text(fmt));
    match log_level {
        0 => tracing::debug!(target: "acl_app", %func, %file, line, "{fmt}"),
        1 => tracing::info!(target: "acl_app", %func, %file, line, "{fmt}"),
        2 => tracing::warn!(target: "acl_app", %func, %file, line, "{fmt}"),
        _ => tracing::error!(target: "acl_app", %func, %file, line, "{fmt}"),
    }
}

/// `aclError aclrtBinaryLoadFromData(const void *data, size_t length, const
/// aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)`: the simulator runs no
/// device binaries (207000).
#[no_mangle]
pub extern "C" fn aclrtBinaryLoadFromData(
    _data: *const c_void,
    _length: usize,
    _options: *const aclrtBinaryLoadOptions,
    _bin_handle: *mut aclrtBinHandle,
) -> aclError {
    not_supported("aclrtBinaryLoadFromData", "it runs no device binaries")
}

/// `aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName,
/// aclrtFuncHandle *funcHandle)`: 207000.
#[no_mangle]
pub extern "C" fn aclrtBinaryGetFunction(
    _bin_handle: aclrtBinHandle,
    _kernel_name: *const c_char,
    _func_handle: *mut aclrtFuncHandle,
) -> aclError {
    not_supported("aclrtBinaryGetFunction", "it runs no device binaries")
}

/// `aclError aclrtGetFunctionAddr(aclrtFuncHandle funcHandle, void **aicAddr, void
/// **aivAddr)`: 207000.
#[no_mangle]
pub extern "C" fn aclrtGetFunctionAddr(
    _func_handle: aclrtFuncHandle,
    _aic_addr: *mut *mut c_void,
    _aiv_addr: *mut *mut c_void,
) -> aclError {
    not_supported("aclrtGetFunctionAddr", "it runs no device binaries")
}

braid_acl_sys::acl_client_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::acl::client::fns;)
);
