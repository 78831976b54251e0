//! The ACL runtime functions a foreign client of a CANN install binds that braid itself
//! does not call: [`AclClientFunctions`]. torch_npu 2.14 links some of them at load time
//! (with `BIND_NOW`, so every one must exist) and looks the others up by name
//! (`reference/torch-npu-client.md`); `braid-acl-sim` exports them all, checked against
//! this list with [`check_exports!`](crate::check_exports), so a CANN client nobody here
//! wrote can load the simulator.
//!
//! Every symbol is optional: nothing in braid resolves this table except tests, and a CANN
//! release may lack the newer ones.

use super::client_types::{
    aclCANNPackageVersion, aclrtBinHandle, aclrtBinaryLoadOptions, aclrtContext, aclrtFuncHandle,
};
use super::types::{aclError, aclmdlRI, aclrtEvent, aclrtStream};
use std::ffi::{c_char, c_void};

/// Hands the list of the client ACL functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for braid's own.
#[macro_export]
macro_rules! acl_client_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The ACL runtime functions (`libascendcl.so`) CANN clients such as torch_npu bind
    /// beyond [`AclFunctions`](crate::acl::AclFunctions).
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclClientFunctions;

    /// `aclError aclFinalize()`: releases everything `aclInit` set up.
    optional fn aclFinalize() -> aclError;
    /// `aclError aclrtGetDevice(int32_t *deviceId)`: the calling thread's current device;
    /// `ACL_ERROR_RT_CONTEXT_NULL` when it has none.
    optional fn aclrtGetDevice(device_id: *mut i32) -> aclError;
    /// `aclError aclrtGetCurrentContext(aclrtContext *context)`: the calling thread's context.
    optional fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError;
    /// `aclError aclrtSetCurrentContext(aclrtContext context)`: makes `context` (and its
    /// device) current on the calling thread.
    optional fn aclrtSetCurrentContext(context: aclrtContext) -> aclError;
    /// `const char *aclrtGetSocName()`: the SoC's name (`Ascend910B4`), or null.
    optional fn aclrtGetSocName() -> *const c_char;
    /// `aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t
    /// *value)`.
    optional fn aclGetDeviceCapability(device_id: u32, device_info: i32, value: *mut i64) -> aclError;
    /// `aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t *value)`.
    optional fn aclGetCannAttribute(cann_attr: i32, value: *mut i32) -> aclError;
    /// `aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion
    /// *version)`.
    optional fn aclsysGetCANNVersion(name: i32, version: *mut aclCANNPackageVersion) -> aclError;
    /// `aclError aclsysGetVersionStr(char *pkgName, char *versionStr)`: `versionStr` holds
    /// `ACL_PKG_VERSION_MAX_SIZE` bytes.
    optional fn aclsysGetVersionStr(pkg_name: *mut c_char, version_str: *mut c_char) -> aclError;
    /// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: host callbacks
    /// launched on `stream` run on thread `threadId` (in its `aclrtProcessReport`).
    optional fn aclrtSubscribeReport(thread_id: u64, stream: aclrtStream) -> aclError;
    /// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`.
    optional fn aclrtUnSubscribeReport(thread_id: u64, stream: aclrtStream) -> aclError;
    /// `aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType
    /// blockType, aclrtStream stream)`: a host function as a task of `stream`.
    optional fn aclrtLaunchCallback(func: Option<unsafe extern "C" fn(*mut c_void)>, user_data: *mut c_void, block_type: i32, stream: aclrtStream) -> aclError;
    /// `aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)`: registers a
    /// host range as pinned.
    optional fn aclrtHostRegisterV2(ptr: *mut c_void, size: u64, flag: u32) -> aclError;
    /// `aclError aclrtHostUnregister(void *ptr)`.
    optional fn aclrtHostUnregister(ptr: *mut c_void) -> aclError;
    /// `aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type, void
    /// **devPtr)`: maps host memory for the device.
    optional fn aclrtHostRegister(ptr: *mut c_void, size: u64, reg_type: i32, dev_ptr: *mut *mut c_void) -> aclError;
    /// `aclError aclrtSetStreamAttribute(aclrtStream stream, aclrtStreamAttr stmAttrType,
    /// aclrtStreamAttrValue *value)`.
    optional fn aclrtSetStreamAttribute(stream: aclrtStream, attr: i32, value: *mut c_void) -> aclError;
    /// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
    /// aclrtMemcpyKind kind)`: returns when the copy is done.
    optional fn aclrtMemcpy(dst: *mut c_void, dest_max: usize, src: *const c_void, count: usize, kind: u32) -> aclError;
    /// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)`:
    /// returns when the fill is done.
    optional fn aclrtMemset(dev_ptr: *mut c_void, max_count: usize, value: i32, count: usize) -> aclError;
    /// `aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`:
    /// device memory aligned to 32 bytes, without `aclrtMalloc`'s padding.
    optional fn aclrtMallocAlign32(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> aclError;
    /// `aclError aclrtDestroyStreamForce(aclrtStream stream)`: destroys a stream without
    /// waiting for its work.
    optional fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError;
    /// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`.
    optional fn aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) -> aclError;
    /// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`: returns the event
    /// to its unrecorded state, in `stream`'s order.
    optional fn aclrtResetEvent(event: aclrtEvent, stream: aclrtStream) -> aclError;
    /// `aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)`: milliseconds, -1 for
    /// no limit.
    optional fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError;
    /// `aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)`.
    optional fn aclrtSetDeviceSatMode(mode: i32) -> aclError;
    /// `aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)`.
    optional fn aclrtGetDeviceSatMode(mode: *mut i32) -> aclError;
    /// `aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value)`: for the process.
    optional fn aclrtSetSysParamOpt(opt: i32, value: i64) -> aclError;
    /// `aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value)`: the process's
    /// value.
    optional fn aclrtGetSysParamOpt(opt: i32, value: *mut i64) -> aclError;
    /// `aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)`: for the
    /// current context.
    optional fn aclrtCtxSetSysParamOpt(opt: i32, value: i64) -> aclError;
    /// `aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)`: the current
    /// context's value.
    optional fn aclrtCtxGetSysParamOpt(opt: i32, value: *mut i64) -> aclError;
    /// `aclError aclrtSetOpExecuteTimeOut(uint32_t timeout)`: seconds.
    optional fn aclrtSetOpExecuteTimeOut(timeout: u32) -> aclError;
    /// `aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout)`:
    /// microseconds; the runtime writes the value it applies.
    optional fn aclrtSetOpExecuteTimeOutV2(timeout: u64, actual_timeout: *mut u64) -> aclError;
    /// `aclError aclrtSetOpWaitTimeout(uint32_t timeout)`: seconds an event wait may last.
    optional fn aclrtSetOpWaitTimeout(timeout: u32) -> aclError;
    /// `aclError aclrtProcessReport(int32_t timeout)`: runs the callbacks of
    /// `aclrtLaunchCallback` reported within `timeout` ms.
    optional fn aclrtProcessReport(timeout: i32) -> aclError;
    /// `aclError aclmdlRIGetId(aclmdlRI modelRI, uint32_t *modelRIId)`.
    optional fn aclmdlRIGetId(model_ri: aclmdlRI, model_ri_id: *mut u32) -> aclError;
    /// `aclError aclmdlInitDump()`.
    optional fn aclmdlInitDump() -> aclError;
    /// `aclError aclmdlSetDump(const char *dumpCfgPath)`.
    optional fn aclmdlSetDump(dump_cfg_path: *const c_char) -> aclError;
    /// `aclError aclmdlFinalizeDump()`.
    optional fn aclmdlFinalizeDump() -> aclError;
    /// `void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t
    /// line, const char *fmt, ...)`, declared without its variadic tail: an exporter
    /// receives the fixed arguments only (on the SysV x86-64 and AAPCS64 ABIs a callee that
    /// ignores the tail is compatible with a variadic caller).
    optional fn aclAppLog(log_level: i32, func: *const c_char, file: *const c_char, line: u32, fmt: *const c_char);
    /// `aclError aclrtBinaryLoadFromData(const void *data, size_t length, const
    /// aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)`: loads a device binary.
    optional fn aclrtBinaryLoadFromData(
        data: *const c_void,
        length: usize,
        options: *const aclrtBinaryLoadOptions,
        bin_handle: *mut aclrtBinHandle,
    ) -> aclError;
    /// `aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char
    /// *kernelName, aclrtFuncHandle *funcHandle)`.
    optional fn aclrtBinaryGetFunction(bin_handle: aclrtBinHandle, kernel_name: *const c_char, func_handle: *mut aclrtFuncHandle) -> aclError;
    /// `aclError aclrtGetFunctionAddr(aclrtFuncHandle funcHandle, void **aicAddr, void
    /// **aivAddr)`.
    optional fn aclrtGetFunctionAddr(func_handle: aclrtFuncHandle, aic_addr: *mut *mut c_void, aiv_addr: *mut *mut c_void) -> aclError;
        }
    };
}

crate::acl_client_functions!(crate::c_api!());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::AclFunctions;
    use crate::SymbolTable;

    #[test]
    fn the_client_list_is_optional_and_apart_from_braids_own() {
        let client = AclClientFunctions::SYMBOLS;
        assert_eq!(client.len(), 41);
        assert!(client.iter().all(|s| !s.required));
        let mut names: Vec<&str> = client
            .iter()
            .chain(AclFunctions::SYMBOLS)
            .map(|s| s.name)
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a symbol is declared in both lists");
    }
}
