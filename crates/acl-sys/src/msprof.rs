//! CANN's profiling reporting API (`Msprof*`, `toolchain/prof_api.h`, exported by the CANN
//! install's profiling library): [`MsprofFunctions`]. torch_npu links these at load time
//! (its inductor launch path reports kernel launches through them); braid does not call
//! them, and `braid-acl-sim` exports them with documented behaviour, checked against this
//! list.
//!
//! Return codes: `MSPROF_ERROR_NONE` (0) is success; the simulator refuses what it does not
//! collect with [`MSPROF_ERROR`].
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

/// `MsprofErrorCode::MSPROF_ERROR_NONE`.
pub const MSPROF_ERROR_NONE: i32 = 0;
/// The profiling library's generic failure (`MSPROF_ERROR`, -1).
pub const MSPROF_ERROR: i32 = -1;

/// `ProfCommandHandle`: `int32_t (*)(uint32_t type, void *data, uint32_t len)`, the callback
/// a module registers to be told when profiling starts and stops.
pub type ProfCommandHandle =
    Option<unsafe extern "C" fn(kind: u32, data: *mut c_void, len: u32) -> i32>;

/// Hands the list of profiling functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! msprof_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// CANN's profiling reporting functions.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct MsprofFunctions;

    /// `int32_t MsprofRegisterCallback(uint32_t moduleId, ProfCommandHandle handle)`.
    optional fn MsprofRegisterCallback(module_id: u32, handle: ProfCommandHandle) -> i32;
    /// `int32_t MsprofReportApi(uint32_t agingFlag, const struct MsprofApi *api)`.
    optional fn MsprofReportApi(aging_flag: u32, api: *const c_void) -> i32;
    /// `int32_t MsprofReportCompactInfo(uint32_t agingFlag, const void *data, uint32_t
    /// length)`.
    optional fn MsprofReportCompactInfo(aging_flag: u32, data: *const c_void, length: u32) -> i32;
    /// `int32_t MsprofReportAdditionalInfo(uint32_t agingFlag, const void *data, uint32_t
    /// length)`.
    optional fn MsprofReportAdditionalInfo(aging_flag: u32, data: *const c_void, length: u32) -> i32;
    /// `uint64_t MsprofGetHashId(const char *hashInfo, size_t length)`: a number naming a
    /// string in reports.
    optional fn MsprofGetHashId(hash_info: *const c_char, length: usize) -> u64;
    /// `uint64_t MsprofSysCycleTime()`: the profiler's clock.
    optional fn MsprofSysCycleTime() -> u64;
        }
    };
}

crate::msprof_functions!(crate::c_api!());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_profiling_functions_are_six_optional_symbols() {
        assert_eq!(MsprofFunctions::SYMBOLS.len(), 6);
        assert!(MsprofFunctions::SYMBOLS.iter().all(|s| !s.required));
    }
}
