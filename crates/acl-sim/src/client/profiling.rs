//! The exported profiling (`Msprof*`, [`MsprofFunctions`]) and legacy kernel (`rt*`,
//! [`RtFunctions`]) functions.
//!
//! - The profiler's clock and string hashes are real: `MsprofSysCycleTime` reads a monotonic
//!   clock (nanoseconds since the library was first asked), `MsprofGetHashId` is a stable
//!   64-bit hash of the bytes (FNV-1a), the same string always the same number.
//! - Reports and callbacks are refused with `MSPROF_ERROR` (-1): braid-acl-sim collects no
//!   CANN profiling data (its own timeline is `BRAID_ACL_SIM_TIMELINE`).
//! - `rt*` kernels are device binaries, which the simulator does not run:
//!   `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000).
//!
//! Each refusal leaves its message for `aclGetRecentErrMsg`.
//!
//! [`MsprofFunctions`]: braid_acl_sys::msprof::MsprofFunctions
//! [`RtFunctions`]: braid_acl_sys::rt::RtFunctions

use crate::codes::ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
use crate::errmsg::{fail, ret};
use braid_acl_sys::msprof::{ProfCommandHandle, MSPROF_ERROR};
use braid_acl_sys::rt::rtError_t;
use std::ffi::{c_char, c_void};
use std::sync::OnceLock;
use std::time::Instant;

fn no_profiling(call: &str) -> i32 {
    ret(Err(fail(
        MSPROF_ERROR,
        format!(
            "{call}: braid-acl-sim collects no CANN profiling data (see BRAID_ACL_SIM_TIMELINE)"
        ),
    )))
}

fn no_binaries(call: &str) -> rtError_t {
    ret(Err(fail(
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        format!("{call}: not supported by braid-acl-sim (it runs no device binaries)"),
    )))
}

/// `int32_t MsprofRegisterCallback(uint32_t moduleId, ProfCommandHandle handle)`: refused
/// (`MSPROF_ERROR`): profiling never starts, so the callback would never be called.
#[no_mangle]
pub extern "C" fn MsprofRegisterCallback(_module_id: u32, _handle: ProfCommandHandle) -> i32 {
    no_profiling("MsprofRegisterCallback")
}

/// `int32_t MsprofReportApi(uint32_t agingFlag, const struct MsprofApi *api)`: refused.
#[no_mangle]
pub extern "C" fn MsprofReportApi(_aging_flag: u32, _api: *const c_void) -> i32 {
    no_profiling("MsprofReportApi")
}

/// `int32_t MsprofReportCompactInfo(uint32_t agingFlag, const void *data, uint32_t
/// length)`: refused.
#[no_mangle]
pub extern "C" fn MsprofReportCompactInfo(
    _aging_flag: u32,
    _data: *const c_void,
    _length: u32,
) -> i32 {
    no_profiling("MsprofReportCompactInfo")
}

/// `int32_t MsprofReportAdditionalInfo(uint32_t agingFlag, const void *data, uint32_t
/// length)`: refused.
#[no_mangle]
pub extern "C" fn MsprofReportAdditionalInfo(
    _aging_flag: u32,
    _data: *const c_void,
    _length: u32,
) -> i32 {
    no_profiling("MsprofReportAdditionalInfo")
}

/// The FNV-1a hash of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `uint64_t MsprofGetHashId(const char *hashInfo, size_t length)`: the FNV-1a hash of the
/// `length` bytes (0 for a null pointer).
///
/// # Safety
/// `hash_info` is null or valid for `length` reads.
#[no_mangle]
pub unsafe extern "C" fn MsprofGetHashId(hash_info: *const c_char, length: usize) -> u64 {
    if hash_info.is_null() {
        return 0;
    }
    // SAFETY: non-null and valid for `length` reads (the caller's guarantee).
    fnv1a(unsafe { std::slice::from_raw_parts(hash_info.cast::<u8>(), length) })
}

/// `uint64_t MsprofSysCycleTime()`: nanoseconds of a monotonic clock.
#[no_mangle]
pub extern "C" fn MsprofSysCycleTime() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// `rtError_t rtDevBinaryRegister(const rtDevBinary_t *bin, void **hdl)`: 207000.
#[no_mangle]
pub extern "C" fn rtDevBinaryRegister(_bin: *const c_void, _hdl: *mut *mut c_void) -> rtError_t {
    no_binaries("rtDevBinaryRegister")
}

/// `rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char
/// *stubName, const void *kernelInfoExt, uint32_t funcMode)`: 207000.
#[no_mangle]
pub extern "C" fn rtFunctionRegister(
    _bin_handle: *mut c_void,
    _stub_func: *const c_void,
    _stub_name: *const c_char,
    _kernel_info_ext: *const c_void,
    _func_mode: u32,
) -> rtError_t {
    no_binaries("rtFunctionRegister")
}

/// `rtError_t rtKernelLaunch(const void *stubFunc, uint32_t numBlocks, void *args, uint32_t
/// argsSize, rtSmDesc_t *smDesc, rtStream_t stm)`: 207000.
#[no_mangle]
pub extern "C" fn rtKernelLaunch(
    _stub_func: *const c_void,
    _num_blocks: u32,
    _args: *mut c_void,
    _args_size: u32,
    _sm_desc: *mut c_void,
    _stm: *mut c_void,
) -> rtError_t {
    no_binaries("rtKernelLaunch")
}

/// `rtError_t rtGetC2cCtrlAddr(uint64_t *addr, uint32_t *len)`: 207000 (no device
/// binary could use the address).
#[no_mangle]
pub extern "C" fn rtGetC2cCtrlAddr(_addr: *mut u64, _len: *mut u32) -> rtError_t {
    no_binaries("rtGetC2cCtrlAddr")
}

braid_acl_sys::msprof_functions!(braid_acl_sys::check_exports!(braid_acl_sys::msprof::fns;));
braid_acl_sys::rt_functions!(braid_acl_sys::check_exports!(braid_acl_sys::rt::fns;));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a_and_stable() {
        // The published FNV-1a test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let name = b"aclnnAdd";
        // SAFETY: a live byte string of that length.
        let h = unsafe { MsprofGetHashId(name.as_ptr().cast(), name.len()) };
        assert_eq!(h, fnv1a(name));
        // SAFETY: a null pointer is allowed.
        assert_eq!(unsafe { MsprofGetHashId(std::ptr::null(), 3) }, 0);
    }
}
