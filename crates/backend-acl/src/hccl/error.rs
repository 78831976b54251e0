//! How HCCL's results become errors: the result, its name (`HCCL_E_PARA`, ...), the call,
//! `HcclGetErrorString`'s text and `aclGetRecentErrMsg`'s, as an [`AclError`]; into the hal
//! as [`HalError::Native`], except a refused parameter (`HCCL_E_PARA`), which is
//! [`HalError::NativeInvalidArgument`] so that callers tell bad input from a failing runtime
//! without reading names.

use super::calls::{HcclCalls, HcclRef};
use super::HcclApi;
use crate::device::AclDevice;
use crate::error::AclError;
use braid_acl_sys::hccl::codes::{HCCL_E_PARA, HCCL_SUCCESS};
use braid_acl_sys::hccl::{result_name, HcclResult};
use braid_stream_core::hal::HalError;
use std::sync::Arc;

/// The error of `call` that returned `code`, with HCCL's `text` for the code and the ACL
/// runtime's `recent` message (either may be empty).
pub(crate) fn error_of(
    call: &'static str,
    code: HcclResult,
    text: String,
    recent: String,
) -> AclError {
    let message = match (text.is_empty(), recent.is_empty()) {
        (_, true) => text,
        (true, false) => recent,
        (false, false) => format!("{text}; {recent}"),
    };
    let err = AclError {
        code,
        name: result_name(code),
        call,
        message,
    };
    tracing::debug!(%err, "HCCL call failed");
    err
}

/// An HCCL failure as the hal sees it (see the module docs).
pub(crate) fn into_hal(err: AclError) -> HalError {
    if err.code != HCCL_E_PARA {
        return err.into();
    }
    match HalError::from(err) {
        HalError::Native {
            code,
            name,
            message,
        } => HalError::NativeInvalidArgument {
            code,
            name,
            message,
        },
        other => other,
    }
}

/// A device's HCCL calls, and their results as typed errors.
#[derive(Clone)]
pub(crate) struct Hccl {
    pub(crate) calls: Arc<dyn HcclCalls>,
}

impl Hccl {
    /// The HCCL calls of `device`'s library (loaded at its first communicator).
    pub(crate) fn of(device: &AclDevice) -> Result<Hccl, HalError> {
        Ok(Hccl {
            calls: device.shared.hccl()?,
        })
    }

    /// The calls of a loaded table.
    pub(crate) fn loaded(api: &'static HcclApi) -> Arc<dyn HcclCalls> {
        Arc::new(HcclRef(api))
    }

    /// The error of `call` that returned `code`.
    pub(crate) fn acl_error(&self, call: &'static str, code: HcclResult) -> AclError {
        let text = self.calls.error_string(code);
        error_of(call, code, text, self.calls.recent_error_message())
    }

    /// The typed error of `call` that returned `code`, as the hal sees it.
    pub(crate) fn error(&self, call: &'static str, code: HcclResult) -> HalError {
        into_hal(self.acl_error(call, code))
    }

    /// `Ok` for `HCCL_SUCCESS`, else the typed error of `call`.
    pub(crate) fn check(&self, call: &'static str, code: HcclResult) -> Result<(), HalError> {
        if code == HCCL_SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, code))
        }
    }

    /// Maps the result code of a call with a value.
    pub(crate) fn result<T>(
        &self,
        call: &'static str,
        r: Result<T, HcclResult>,
    ) -> Result<T, HalError> {
        r.map_err(|code| self.error(call, code))
    }
}
