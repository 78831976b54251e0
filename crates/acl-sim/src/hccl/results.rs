//! The text `HcclGetErrorString` gives for each `HcclResult` (braid's own wording), and the
//! results of the simulator's and the ACL runtime's failures.

use crate::errmsg::{fail, Fail};
use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::HcclResult;
use braid_stream_core::hal::HalError;
use std::ffi::CStr;

/// A simulator error of `call` as an HCCL failure: a refused argument (a mismatched
/// collective among them) is `HCCL_E_PARA`, an unsupported feature `HCCL_E_NOT_SUPPORT`, a
/// wait on a collective some ranks never issued `HCCL_E_TIMEOUT`,
/// memory `HCCL_E_MEMORY`, anything else the runtime's (`HCCL_E_RUNTIME`).
pub(crate) fn from_hal(call: &str, e: HalError) -> Fail {
    let code = match &e {
        HalError::InvalidArgument(_)
        | HalError::NativeInvalidArgument { .. }
        | HalError::CollectiveMismatch(_) => HCCL_E_PARA,
        HalError::Unsupported(_) => HCCL_E_NOT_SUPPORT,
        HalError::OutOfMemory { .. } | HalError::HostOutOfMemory { .. } => HCCL_E_MEMORY,
        HalError::CollectiveIncomplete(_) => HCCL_E_TIMEOUT,
        _ => HCCL_E_RUNTIME,
    };
    fail(code, format!("{call}: {e}"))
}

/// A failure of the ACL runtime under an HCCL call (an invalid stream, a stream of another
/// device than the thread's): `HCCL_E_RUNTIME`, the ACL code kept in the text; braid-acl-sim's
/// own internal error ([`crate::errmsg::guarded`]) is `HCCL_E_INTERNAL`. HCCL's own results
/// (below 100) pass unchanged.
pub(crate) fn from_acl(f: Fail) -> Fail {
    if (0..100).contains(&f.code) {
        return f;
    }
    let code = if f.code == braid_acl_sys::acl::codes::ACL_ERROR_INTERNAL_ERROR {
        HCCL_E_INTERNAL
    } else {
        HCCL_E_RUNTIME
    };
    fail(code, format!("{} (ACL error {})", f.message, f.code))
}

/// `HcclGetErrorString`'s text for `code`: what the result means (static, NUL-terminated).
pub(crate) fn error_string(code: HcclResult) -> &'static CStr {
    match code {
        HCCL_SUCCESS => c"success",
        HCCL_E_PARA => c"parameter error",
        HCCL_E_PTR => c"empty pointer",
        HCCL_E_MEMORY => c"memory error",
        HCCL_E_INTERNAL => c"internal error",
        HCCL_E_NOT_SUPPORT => c"not support feature",
        HCCL_E_NOT_FOUND => c"not found specific resource",
        HCCL_E_UNAVAIL => c"resource unavailable",
        HCCL_E_SYSCALL => c"call system interface error",
        HCCL_E_TIMEOUT => c"timeout",
        HCCL_E_OPEN_FILE_FAILURE => c"open file fail",
        HCCL_E_TCP_CONNECT => c"tcp connect fail",
        HCCL_E_ROCE_CONNECT => c"roce connect fail",
        HCCL_E_TCP_TRANSFER => c"tcp transfer fail",
        HCCL_E_ROCE_TRANSFER => c"roce transfer fail",
        HCCL_E_RUNTIME => c"call runtime api fail",
        HCCL_E_DRV => c"call driver api fail",
        HCCL_E_PROFILING => c"call profiling api fail",
        HCCL_E_CCE => c"call cce api fail",
        HCCL_E_NETWORK => c"call network api fail",
        HCCL_E_AGAIN => c"try again",
        HCCL_E_REMOTE => c"error cqe",
        _ => c"unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_has_its_own_text_and_unknown_ones_share_one() {
        let texts: Vec<&CStr> = RESULT_NAMES.iter().map(|(r, _)| error_string(*r)).collect();
        let mut unique = texts.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), RESULT_NAMES.len());
        assert!(!texts.contains(&c"unknown error"));
        assert_eq!(error_string(99), c"unknown error");
        assert_eq!(error_string(HCCL_E_PTR), c"empty pointer");
    }

    #[test]
    fn acl_failures_under_hccl_calls_keep_their_code_in_the_text() {
        let runtime = from_acl(fail(507_001, "aclrtX: bad stream"));
        assert_eq!(runtime.code, HCCL_E_RUNTIME);
        assert!(runtime.message.contains("ACL error 507001"));
        let internal: Result<(), Fail> = crate::errmsg::guarded(|| panic!("simulator bug"));
        let internal = from_acl(internal.unwrap_err());
        assert_eq!(internal.code, HCCL_E_INTERNAL);
        assert!(internal.message.contains("simulator bug"));
        assert_eq!(from_acl(fail(HCCL_E_PARA, "x")).code, HCCL_E_PARA);
    }
}
