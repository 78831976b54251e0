//! ACL error numbers, their names, and [`AclError`].
//!
//! The numbers and names are CANN's (`acl_base_rt.h` for the ACL-level codes,
//! `error_codes/rt_error_codes.h` for the runtime's); see `reference/acl-runtime.md` §1.3.

use braid_stream_core::hal::HalError;

/// ACL's return codes, by name.
#[allow(missing_docs)]
pub mod codes {
    pub const ACL_SUCCESS: i32 = 0;
    pub const ACL_ERROR_INVALID_PARAM: i32 = 100_000;
    pub const ACL_ERROR_UNINITIALIZE: i32 = 100_001;
    pub const ACL_ERROR_REPEAT_INITIALIZE: i32 = 100_002;
    pub const ACL_ERROR_REPEAT_FINALIZE: i32 = 100_037;
    pub const ACL_ERROR_RT_PARAM_INVALID: i32 = 107_000;
    pub const ACL_ERROR_RT_INVALID_DEVICEID: i32 = 107_001;
    pub const ACL_ERROR_RT_CONTEXT_NULL: i32 = 107_002;
    pub const ACL_ERROR_RT_STREAM_CONTEXT: i32 = 107_003;
    pub const ACL_ERROR_RT_INVALID_HANDLE: i32 = 107_017;
    pub const ACL_ERROR_RT_WAIT_TIMEOUT: i32 = 107_019;
    pub const ACL_ERROR_RT_TASK_TIMEOUT: i32 = 107_020;
    pub const ACL_ERROR_RT_CAPTURE_DEPENDENCY: i32 = 107_024;
    pub const ACL_ERROR_RT_STREAM_UNJOINED: i32 = 107_025;
    pub const ACL_ERROR_RT_MODEL_CAPTURED: i32 = 107_026;
    pub const ACL_ERROR_RT_STREAM_CAPTURED: i32 = 107_027;
    pub const ACL_ERROR_RT_EVENT_CAPTURED: i32 = 107_028;
    pub const ACL_ERROR_RT_STREAM_NOT_CAPTURED: i32 = 107_029;
    pub const ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT: i32 = 107_030;
    pub const ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT: i32 = 107_031;
    pub const ACL_ERROR_RT_STREAM_CAPTURE_CONFLICT: i32 = 107_032;
    pub const ACL_ERROR_RT_STREAM_TASK_GROUP_STATUS: i32 = 107_033;
    pub const ACL_ERROR_RT_STREAM_TASK_GROUP_INTR: i32 = 107_034;
    pub const ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED: i32 = 107_036;
    pub const ACL_ERROR_RT_MODEL_RUNNING: i32 = 107_037;
    pub const ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD: i32 = 107_038;
    pub const ACL_ERROR_RT_MODEL_UPDATE_FAILED: i32 = 107_040;
    pub const ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC: i32 = 107_041;
    pub const ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING: i32 = 107_045;
    pub const ACL_ERROR_BAD_ALLOC: i32 = 200_000;
    pub const ACL_ERROR_API_NOT_SUPPORT: i32 = 200_001;
    pub const ACL_ERROR_INVALID_DEVICE: i32 = 200_002;
    pub const ACL_ERROR_MEMORY_ADDRESS_UNALIGNED: i32 = 200_003;
    pub const ACL_ERROR_RESOURCE_NOT_MATCH: i32 = 200_004;
    pub const ACL_ERROR_INVALID_RESOURCE_HANDLE: i32 = 200_005;
    pub const ACL_ERROR_FEATURE_UNSUPPORTED: i32 = 200_006;
    pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207_000;
    pub const ACL_ERROR_RT_MEMORY_ALLOCATION: i32 = 207_001;
    pub const ACL_ERROR_RT_MEMORY_FREE: i32 = 207_002;
    pub const ACL_ERROR_RT_RESOURCE_ALLOC_FAIL: i32 = 207_005;
    pub const ACL_ERROR_RT_NO_EVENT_RESOURCE: i32 = 207_007;
    pub const ACL_ERROR_RT_NO_STREAM_RESOURCE: i32 = 207_008;
    pub const ACL_ERROR_RT_NO_MODEL_RESOURCE: i32 = 207_010;
    pub const ACL_ERROR_RT_DEVICE_OOM: i32 = 207_018;
    pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP: i32 = 207_019;
    pub const ACL_ERROR_STORAGE_OVER_LIMIT: i32 = 300_000;
    pub const ACL_ERROR_INTERNAL_ERROR: i32 = 500_000;
    pub const ACL_ERROR_FAILURE: i32 = 500_001;
    pub const ACL_ERROR_GE_FAILURE: i32 = 500_002;
    pub const ACL_ERROR_RT_FAILURE: i32 = 500_003;
    pub const ACL_ERROR_DRV_FAILURE: i32 = 500_004;
    pub const ACL_ERROR_RT_INTERNAL_ERROR: i32 = 507_000;
    pub const ACL_ERROR_RT_MODEL_EXECUTE: i32 = 507_011;
    pub const ACL_ERROR_RT_AICORE_EXCEPTION: i32 = 507_015;
    pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: i32 = 507_046;
    pub const ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: i32 = 507_047;
    pub const ACL_ERROR_RT_FFTS_PLUS_TIMEOUT: i32 = 507_048;
    pub const ACL_ERROR_RT_DEVICE_MEM_ERROR: i32 = 507_053;
    pub const ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED: i32 = 507_903;
}

macro_rules! code_table {
    ($($name:ident),* $(,)?) => {
        /// Every code braid knows, with its name.
        pub const CODE_NAMES: &[(i32, &str)] = &[$((codes::$name, stringify!($name))),*];
    };
}

code_table!(
    ACL_SUCCESS,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_UNINITIALIZE,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_REPEAT_FINALIZE,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_STREAM_CONTEXT,
    ACL_ERROR_RT_INVALID_HANDLE,
    ACL_ERROR_RT_WAIT_TIMEOUT,
    ACL_ERROR_RT_TASK_TIMEOUT,
    ACL_ERROR_RT_CAPTURE_DEPENDENCY,
    ACL_ERROR_RT_STREAM_UNJOINED,
    ACL_ERROR_RT_MODEL_CAPTURED,
    ACL_ERROR_RT_STREAM_CAPTURED,
    ACL_ERROR_RT_EVENT_CAPTURED,
    ACL_ERROR_RT_STREAM_NOT_CAPTURED,
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
    ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
    ACL_ERROR_RT_STREAM_CAPTURE_CONFLICT,
    ACL_ERROR_RT_STREAM_TASK_GROUP_STATUS,
    ACL_ERROR_RT_STREAM_TASK_GROUP_INTR,
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
    ACL_ERROR_RT_MODEL_RUNNING,
    ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
    ACL_ERROR_RT_MODEL_UPDATE_FAILED,
    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC,
    ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING,
    ACL_ERROR_BAD_ALLOC,
    ACL_ERROR_API_NOT_SUPPORT,
    ACL_ERROR_INVALID_DEVICE,
    ACL_ERROR_MEMORY_ADDRESS_UNALIGNED,
    ACL_ERROR_RESOURCE_NOT_MATCH,
    ACL_ERROR_INVALID_RESOURCE_HANDLE,
    ACL_ERROR_FEATURE_UNSUPPORTED,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_RT_MEMORY_FREE,
    ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
    ACL_ERROR_RT_NO_EVENT_RESOURCE,
    ACL_ERROR_RT_NO_STREAM_RESOURCE,
    ACL_ERROR_RT_NO_MODEL_RESOURCE,
    ACL_ERROR_RT_DEVICE_OOM,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP,
    ACL_ERROR_STORAGE_OVER_LIMIT,
    ACL_ERROR_INTERNAL_ERROR,
    ACL_ERROR_FAILURE,
    ACL_ERROR_GE_FAILURE,
    ACL_ERROR_RT_FAILURE,
    ACL_ERROR_DRV_FAILURE,
    ACL_ERROR_RT_INTERNAL_ERROR,
    ACL_ERROR_RT_MODEL_EXECUTE,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
    ACL_ERROR_RT_FFTS_PLUS_TIMEOUT,
    ACL_ERROR_RT_DEVICE_MEM_ERROR,
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
);

/// Name of an unknown code.
pub const UNKNOWN_CODE_NAME: &str = "ACL_ERROR_UNKNOWN";

/// The symbolic name of an ACL return code ([`UNKNOWN_CODE_NAME`] for codes braid does not
/// know).
pub fn code_name(code: i32) -> &'static str {
    CODE_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(UNKNOWN_CODE_NAME, |(_, name)| name)
}

/// Whether `code` means the device (or the runtime's allocator) ran out of memory:
/// `ACL_ERROR_RT_DEVICE_OOM` (207018), `ACL_ERROR_RT_MEMORY_ALLOCATION` (207001) or
/// `ACL_ERROR_BAD_ALLOC` (200000).
pub fn is_out_of_memory(code: i32) -> bool {
    matches!(
        code,
        codes::ACL_ERROR_RT_DEVICE_OOM
            | codes::ACL_ERROR_RT_MEMORY_ALLOCATION
            | codes::ACL_ERROR_BAD_ALLOC
    )
}

/// A failed ACL call: the number, its name, the call, and `aclGetRecentErrMsg()`'s text.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{call} failed with {name} ({code}){}", if .message.is_empty() { String::new() } else { format!(": {}", .message) })]
pub struct AclError {
    /// ACL's return code.
    pub code: i32,
    /// Its symbolic name ([`code_name`]).
    pub name: &'static str,
    /// The ACL function that returned it.
    pub call: &'static str,
    /// The runtime's text for the failure (empty when it gave none).
    pub message: String,
}

impl AclError {
    /// An error for `code` returned by `call`, with the runtime's `message`.
    pub fn new(call: &'static str, code: i32, message: impl Into<String>) -> Self {
        AclError {
            code,
            name: code_name(code),
            call,
            message: message.into(),
        }
    }

    /// Whether this is one of the out-of-memory codes ([`is_out_of_memory`]).
    pub fn is_out_of_memory(&self) -> bool {
        is_out_of_memory(self.code)
    }
}

impl From<AclError> for HalError {
    fn from(err: AclError) -> Self {
        let message = if err.message.is_empty() {
            err.call.to_string()
        } else {
            format!("{}: {}", err.call, err.message)
        };
        HalError::Native {
            code: err.code,
            name: err.name,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_code_of_the_reference_has_its_name() {
        for (code, name) in [
            (107_025, "ACL_ERROR_RT_STREAM_UNJOINED"),
            (107_041, "ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC"),
            (207_005, "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL"),
            (207_018, "ACL_ERROR_RT_DEVICE_OOM"),
            (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"),
            (507_903, "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED"),
            (100_002, "ACL_ERROR_REPEAT_INITIALIZE"),
            (0, "ACL_SUCCESS"),
        ] {
            assert_eq!(code_name(code), name);
        }
        assert_eq!(code_name(123), UNKNOWN_CODE_NAME);
        let unique: BTreeSet<i32> = CODE_NAMES.iter().map(|(c, _)| *c).collect();
        assert_eq!(unique.len(), CODE_NAMES.len(), "a code is listed twice");
        // Every 507xxx device error of the reference is named.
        let device_errors = CODE_NAMES.iter().filter(|(c, _)| *c / 1000 == 507).count();
        assert_eq!(device_errors, 8);
    }

    #[test]
    fn errors_keep_number_name_and_message_into_the_hal() {
        let err = AclError::new(
            "aclmdlRICaptureEnd",
            107_025,
            "capture model contains a stream that was not joined to the original stream",
        );
        assert!(err.to_string().contains("107025"), "{err}");
        assert!(err.to_string().contains("not joined"), "{err}");
        match HalError::from(err) {
            HalError::Native {
                code,
                name,
                message,
            } => {
                assert_eq!(code, 107_025);
                assert_eq!(name, "ACL_ERROR_RT_STREAM_UNJOINED");
                assert!(message.starts_with("aclmdlRICaptureEnd: capture model"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(AclError::new("aclrtMalloc", 207_018, "").is_out_of_memory());
        assert!(is_out_of_memory(207_001) && is_out_of_memory(200_000));
        assert!(!is_out_of_memory(207_005));
        assert_eq!(
            AclError::new("aclrtFree", 107_000, "").to_string(),
            "aclrtFree failed with ACL_ERROR_RT_PARAM_INVALID (107000)"
        );
    }
}
