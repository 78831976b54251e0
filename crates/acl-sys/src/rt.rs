//! The legacy runtime's kernel API (`rt*`, `runtime/kernel.h`, `runtime/rt_ffts.h`, exported
//! by the CANN runtime library): [`RtFunctions`]. torch_npu links these at load time for its
//! inductor kernels (device binaries compiled by bisheng); braid does not call them, and
//! `braid-acl-sim` exports them refusing with [`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`]
//! (the simulator runs no device binaries), checked against this list.
//!
//! `rtError_t` is an `int32_t` with the runtime's codes.
//!
//! [`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`]: crate::acl::codes::ACL_ERROR_RT_FEATURE_NOT_SUPPORT
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

/// `rtError_t`.
pub type rtError_t = i32;

/// Hands the list of legacy runtime functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! rt_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The legacy runtime's kernel functions.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct RtFunctions;

    /// `rtError_t rtDevBinaryRegister(const rtDevBinary_t *bin, void **hdl)`.
    optional fn rtDevBinaryRegister(bin: *const c_void, hdl: *mut *mut c_void) -> rtError_t;
    /// `rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char
    /// *stubName, const void *kernelInfoExt, uint32_t funcMode)`.
    optional fn rtFunctionRegister(
        bin_handle: *mut c_void,
        stub_func: *const c_void,
        stub_name: *const c_char,
        kernel_info_ext: *const c_void,
        func_mode: u32,
    ) -> rtError_t;
    /// `rtError_t rtKernelLaunch(const void *stubFunc, uint32_t numBlocks, void *args,
    /// uint32_t argsSize, rtSmDesc_t *smDesc, rtStream_t stm)`.
    optional fn rtKernelLaunch(
        stub_func: *const c_void,
        num_blocks: u32,
        args: *mut c_void,
        args_size: u32,
        sm_desc: *mut c_void,
        stm: *mut c_void,
    ) -> rtError_t;
    /// `rtError_t rtGetC2cCtrlAddr(uint64_t *addr, uint32_t *len)`.
    optional fn rtGetC2cCtrlAddr(addr: *mut u64, len: *mut u32) -> rtError_t;
        }
    };
}

crate::rt_functions!(crate::c_api!());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_legacy_runtime_functions_are_four_optional_symbols() {
        assert_eq!(RtFunctions::SYMBOLS.len(), 4);
        assert!(RtFunctions::SYMBOLS.iter().all(|s| !s.required));
    }
}
