//! `HcclGetCommAsyncError`: a communicator's failure that came after its calls returned (a
//! collective that timed out or failed on the device), as torch_npu's watchdog polls it.

use super::comm::AclComm;
use braid_acl_sys::hccl::codes::HCCL_SUCCESS;
use braid_stream_core::hal::HalError;

impl AclComm {
    /// The communicator's asynchronous error (`HcclGetCommAsyncError`): `None` for
    /// `HCCL_SUCCESS`, else the typed error of that `HcclResult` (its name and
    /// `HcclGetErrorString`'s text). A failure of the query itself is its own error; a
    /// library without the symbol is [`HalError::Unsupported`].
    pub fn async_error(&self) -> Result<Option<HalError>, HalError> {
        const CALL: &str = "HcclGetCommAsyncError";
        self.device().shared.bind()?;
        match self.hccl.calls.comm_async_error(self.raw) {
            None => Err(HalError::Unsupported(
                "asynchronous communicator errors: this libhccl.so has no HcclGetCommAsyncError",
            )),
            Some(Err(code)) => Err(self.hccl.error(CALL, code)),
            Some(Ok(HCCL_SUCCESS)) => Ok(None),
            Some(Ok(code)) => Ok(Some(self.hccl.error(CALL, code))),
        }
    }
}
