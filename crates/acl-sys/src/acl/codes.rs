//! ACL's return codes (`aclError`) and their names.
//!
//! The numbers and names are CANN's (`acl_base_rt.h` for the ACL-level codes,
//! `error_codes/rt_error_codes.h` for the runtime's); see `reference/acl-runtime.md` §1.3.
//! Each code is written once, in one list, which makes both the constant and its entry
//! in [`CODE_NAMES`].

use super::aclError;

/// Declares every code as a constant and lists them, with their names, in [`CODE_NAMES`].
macro_rules! acl_codes {
    ($($name:ident = $value:expr;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`.")]
            pub const $name: aclError = $value;
        )*
        /// Every code braid knows, with its name.
        pub const CODE_NAMES: &[(aclError, &str)] = &[$(($name, stringify!($name))),*];
    };
}

acl_codes! {
    ACL_SUCCESS = 0;
    ACL_ERROR_INVALID_PARAM = 100_000;
    ACL_ERROR_UNINITIALIZE = 100_001;
    ACL_ERROR_REPEAT_INITIALIZE = 100_002;
    ACL_ERROR_OP_NOT_FOUND = 100_024;
    ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100_026;
    ACL_ERROR_REPEAT_FINALIZE = 100_037;
    ACL_ERROR_RT_PARAM_INVALID = 107_000;
    ACL_ERROR_RT_INVALID_DEVICEID = 107_001;
    ACL_ERROR_RT_CONTEXT_NULL = 107_002;
    ACL_ERROR_RT_STREAM_CONTEXT = 107_003;
    ACL_ERROR_RT_STREAM_SUBSCRIBE = 107_011;
    ACL_ERROR_RT_THREAD_SUBSCRIBE = 107_012;
    ACL_ERROR_RT_STREAM_NO_CB_REG = 107_015;
    ACL_ERROR_RT_INVALID_HANDLE = 107_017;
    ACL_ERROR_RT_WAIT_TIMEOUT = 107_019;
    ACL_ERROR_RT_TASK_TIMEOUT = 107_020;
    ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107_024;
    ACL_ERROR_RT_STREAM_UNJOINED = 107_025;
    ACL_ERROR_RT_MODEL_CAPTURED = 107_026;
    ACL_ERROR_RT_STREAM_CAPTURED = 107_027;
    ACL_ERROR_RT_EVENT_CAPTURED = 107_028;
    ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107_029;
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107_030;
    ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT = 107_031;
    ACL_ERROR_RT_STREAM_CAPTURE_CONFLICT = 107_032;
    ACL_ERROR_RT_STREAM_TASK_GROUP_STATUS = 107_033;
    ACL_ERROR_RT_STREAM_TASK_GROUP_INTR = 107_034;
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107_036;
    ACL_ERROR_RT_MODEL_RUNNING = 107_037;
    ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107_038;
    ACL_ERROR_RT_MODEL_UPDATE_FAILED = 107_040;
    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC = 107_041;
    ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING = 107_045;
    ACL_ERROR_BAD_ALLOC = 200_000;
    ACL_ERROR_API_NOT_SUPPORT = 200_001;
    ACL_ERROR_INVALID_DEVICE = 200_002;
    ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200_003;
    ACL_ERROR_RESOURCE_NOT_MATCH = 200_004;
    ACL_ERROR_INVALID_RESOURCE_HANDLE = 200_005;
    ACL_ERROR_FEATURE_UNSUPPORTED = 200_006;
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207_000;
    ACL_ERROR_RT_MEMORY_ALLOCATION = 207_001;
    ACL_ERROR_RT_MEMORY_FREE = 207_002;
    ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207_005;
    ACL_ERROR_RT_NO_EVENT_RESOURCE = 207_007;
    ACL_ERROR_RT_NO_STREAM_RESOURCE = 207_008;
    ACL_ERROR_RT_NO_MODEL_RESOURCE = 207_010;
    ACL_ERROR_RT_DEVICE_OOM = 207_018;
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP = 207_019;
    ACL_ERROR_STORAGE_OVER_LIMIT = 300_000;
    ACL_ERROR_INTERNAL_ERROR = 500_000;
    ACL_ERROR_FAILURE = 500_001;
    ACL_ERROR_GE_FAILURE = 500_002;
    ACL_ERROR_RT_FAILURE = 500_003;
    ACL_ERROR_DRV_FAILURE = 500_004;
    ACL_ERROR_RT_INTERNAL_ERROR = 507_000;
    ACL_ERROR_RT_MODEL_EXECUTE = 507_011;
    ACL_ERROR_RT_REPORT_TIMEOUT = 507_012;
    ACL_ERROR_RT_AICORE_EXCEPTION = 507_015;
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507_046;
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507_047;
    ACL_ERROR_RT_FFTS_PLUS_TIMEOUT = 507_048;
    ACL_ERROR_RT_DEVICE_MEM_ERROR = 507_053;
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507_903;
}

/// Name of an unknown code.
pub const UNKNOWN_CODE_NAME: &str = "ACL_ERROR_UNKNOWN";

/// The symbolic name of an ACL return code ([`UNKNOWN_CODE_NAME`] for codes braid does not
/// know).
pub fn code_name(code: aclError) -> &'static str {
    CODE_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(UNKNOWN_CODE_NAME, |(_, name)| name)
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
            (107_015, "ACL_ERROR_RT_STREAM_NO_CB_REG"),
            (507_012, "ACL_ERROR_RT_REPORT_TIMEOUT"),
            (0, "ACL_SUCCESS"),
        ] {
            assert_eq!(code_name(code), name);
        }
        assert_eq!(code_name(123), UNKNOWN_CODE_NAME);
        let unique: BTreeSet<i32> = CODE_NAMES.iter().map(|(c, _)| *c).collect();
        assert_eq!(unique.len(), CODE_NAMES.len(), "a code is listed twice");
        // Every 507xxx device error of the reference is named, and the report timeout.
        let device_errors = CODE_NAMES.iter().filter(|(c, _)| *c / 1000 == 507).count();
        assert_eq!(device_errors, 9);
    }
}
