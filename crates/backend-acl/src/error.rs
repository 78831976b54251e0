//! ACL error numbers, their names, and [`AclError`].
//!
//! The numbers and names are CANN's, declared once in `braid-acl-sys` ([`codes`],
//! [`code_name`]) and re-exported here.

use braid_stream_core::hal::HalError;

pub use braid_acl_sys::acl::{code_name, codes, CODE_NAMES, UNKNOWN_CODE_NAME};

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
