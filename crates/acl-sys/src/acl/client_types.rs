//! The C types and values of the ACL functions foreign clients bind beyond what braid calls
//! ([`client`](super::client)): contexts, the old single-operator path's descriptors,
//! system parameters, SoC capabilities and package versions. Values from CANN's
//! `acl_base.h`, `acl_rt.h` and `acl_op_compiler.h` (`reference/acl-runtime.md`).
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

/// `aclrtContext`: a device's context (opaque).
pub type aclrtContext = *mut c_void;
/// `aclrtBinHandle`: a loaded device binary (opaque).
pub type aclrtBinHandle = *mut c_void;
/// `aclrtFuncHandle`: a kernel of a loaded device binary (opaque).
pub type aclrtFuncHandle = *mut c_void;

/// `aclTensorDesc`: a tensor description of the old single-operator path.
#[repr(C)]
pub struct aclTensorDesc {
    _opaque: [u8; 0],
}

/// `aclDataBuffer`: a device address and size of the old single-operator path.
#[repr(C)]
pub struct aclDataBuffer {
    _opaque: [u8; 0],
}

/// `aclopAttr`: the attributes of an operator of the old single-operator path.
#[repr(C)]
pub struct aclopAttr {
    _opaque: [u8; 0],
}

/// `aclrtBinaryLoadOptions` (only passed by pointer).
#[repr(C)]
pub struct aclrtBinaryLoadOptions {
    _opaque: [u8; 0],
}

/// `aclDeviceInfo::ACL_DEVICE_INFO_AI_CORE_NUM`: matrix (cube) cores.
pub const ACL_DEVICE_INFO_AI_CORE_NUM: i32 = 0;
/// `aclDeviceInfo::ACL_DEVICE_INFO_VECTOR_CORE_NUM`.
pub const ACL_DEVICE_INFO_VECTOR_CORE_NUM: i32 = 1;
/// `aclDeviceInfo::ACL_DEVICE_INFO_L2_SIZE`: bytes.
pub const ACL_DEVICE_INFO_L2_SIZE: i32 = 2;

/// `aclSysParamOpt::ACL_OPT_DETERMINISTIC`.
pub const ACL_OPT_DETERMINISTIC: i32 = 0;
/// `aclSysParamOpt::ACL_OPT_ENABLE_DEBUG_KERNEL`.
pub const ACL_OPT_ENABLE_DEBUG_KERNEL: i32 = 1;
/// `aclSysParamOpt::ACL_OPT_STRONG_CONSISTENCY`.
pub const ACL_OPT_STRONG_CONSISTENCY: i32 = 2;

/// `aclCannAttr::ACL_CANN_ATTR_INF_NAN`: the SoC computes with infinities and NaNs (not
/// saturation).
pub const ACL_CANN_ATTR_INF_NAN: i32 = 0;
/// `aclCannAttr::ACL_CANN_ATTR_BF16`: the SoC supports bfloat16.
pub const ACL_CANN_ATTR_BF16: i32 = 1;
/// `aclCannAttr::ACL_CANN_ATTR_JIT_COMPILE`: operators are compiled just in time.
pub const ACL_CANN_ATTR_JIT_COMPILE: i32 = 2;

/// `aclrtFloatOverflowMode::ACL_RT_OVERFLOW_MODE_SATURATION`.
pub const ACL_RT_OVERFLOW_MODE_SATURATION: i32 = 0;
/// `aclrtFloatOverflowMode::ACL_RT_OVERFLOW_MODE_INFNAN`.
pub const ACL_RT_OVERFLOW_MODE_INFNAN: i32 = 1;

/// `aclrtStreamFailureMode::ACL_CONTINUE_ON_FAILURE`.
pub const ACL_CONTINUE_ON_FAILURE: u64 = 0;
/// `aclrtStreamFailureMode::ACL_STOP_ON_FAILURE`.
pub const ACL_STOP_ON_FAILURE: u64 = 1;

/// `aclrtStreamAttr::ACL_STREAM_ATTR_CACHE_OP_INFO` (spelt `ACL_STREAM_ATTR_CACHE_OP_IFNO` in
/// `acl_rt.h`): the stream's switch for caching operator information (`cacheOpInfoSwitch`,
/// a `uint32_t` 0 or 1, in `aclrtStreamAttrValue`), which torch_npu sets on capturing streams.
/// Attributes 2 and 3 are the overflow check and the custom tag.
pub const ACL_STREAM_ATTR_CACHE_OP_INFO: i32 = 4;
/// `aclrtStreamAttr::ACL_STREAM_ATTR_FAILURE_MODE`: the stream's failure mode
/// (`failureMode`, a `uint64_t`: [`ACL_CONTINUE_ON_FAILURE`] or [`ACL_STOP_ON_FAILURE`]).
pub const ACL_STREAM_ATTR_FAILURE_MODE: i32 = 1;

/// `aclrtCallbackBlockType::ACL_CALLBACK_NO_BLOCK`: the stream goes on while the host
/// function runs.
pub const ACL_CALLBACK_NO_BLOCK: i32 = 0;
/// `aclrtCallbackBlockType::ACL_CALLBACK_BLOCK`: the stream waits for the host function.
pub const ACL_CALLBACK_BLOCK: i32 = 1;

/// `aclCompileOpt::ACL_OP_JIT_COMPILE`, one of the options of `aclSetCompileopt`; the last
/// option is `ACL_OP_DEBUG_OPTION` ([`ACL_COMPILE_OPT_COUNT`] - 1).
pub const ACL_OP_JIT_COMPILE: i32 = 10;
/// The number of `aclCompileOpt` values (`ACL_PRECISION_MODE` = 0 to `ACL_OP_DEBUG_OPTION`
/// = 16).
pub const ACL_COMPILE_OPT_COUNT: i32 = 17;

/// `aclCANNPackageName::ACL_PKG_NAME_CANN`; the names run to `ACL_PKG_NAME_DRIVER` (7).
pub const ACL_PKG_NAME_CANN: i32 = 0;
/// `aclCANNPackageName::ACL_PKG_NAME_DRIVER`, the last package name.
pub const ACL_PKG_NAME_DRIVER: i32 = 7;

/// `ACL_PKG_VERSION_MAX_SIZE`.
pub const ACL_PKG_VERSION_MAX_SIZE: usize = 128;
/// `ACL_PKG_VERSION_PARTS_MAX_SIZE`.
pub const ACL_PKG_VERSION_PARTS_MAX_SIZE: usize = 64;

/// `aclCANNPackageVersion`: a package's version as NUL-terminated strings.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclCANNPackageVersion {
    /// `char version[ACL_PKG_VERSION_MAX_SIZE]`: the whole version (`8.5.0`).
    pub version: [c_char; ACL_PKG_VERSION_MAX_SIZE],
    /// `char majorVersion[ACL_PKG_VERSION_PARTS_MAX_SIZE]`.
    pub major_version: [c_char; ACL_PKG_VERSION_PARTS_MAX_SIZE],
    /// `char minorVersion[ACL_PKG_VERSION_PARTS_MAX_SIZE]`.
    pub minor_version: [c_char; ACL_PKG_VERSION_PARTS_MAX_SIZE],
    /// `char releaseVersion[ACL_PKG_VERSION_PARTS_MAX_SIZE]`.
    pub release_version: [c_char; ACL_PKG_VERSION_PARTS_MAX_SIZE],
    /// `char patchVersion[ACL_PKG_VERSION_PARTS_MAX_SIZE]`.
    pub patch_version: [c_char; ACL_PKG_VERSION_PARTS_MAX_SIZE],
    /// `char reserved[ACL_PKG_VERSION_MAX_SIZE]`.
    pub reserved: [c_char; ACL_PKG_VERSION_MAX_SIZE],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_version_has_the_c_layout() {
        // Two 128-byte strings and four 64-byte ones.
        assert_eq!(
            std::mem::size_of::<aclCANNPackageVersion>(),
            2 * 128 + 4 * 64
        );
        assert_eq!(
            std::mem::offset_of!(aclCANNPackageVersion, major_version),
            128
        );
        assert_eq!(
            std::mem::offset_of!(aclCANNPackageVersion, reserved),
            128 + 4 * 64
        );
    }
}
