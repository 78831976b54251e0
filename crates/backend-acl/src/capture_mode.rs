//! The calling thread's capture mode in ACL (`aclmdlRICaptureThreadExchangeMode`), so the
//! runtime allows what the front layer's rule allows (`braid_stream_core::capture_mode`).

use crate::device::AclDevice;
use crate::stream::capture_mode_number;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::CaptureMode;

impl AclDevice {
    /// Sets this thread's mode in ACL. Without the symbol (CANN before the capture API's
    /// thread modes) every thread stays in ACL's default, global mode: asking for it succeeds,
    /// asking for another mode is [`HalError::Unsupported`], so the front layer keeps the
    /// thread's mode unchanged rather than promise what the runtime would refuse.
    pub(crate) fn set_thread_capture_mode_impl(&self, mode: CaptureMode) -> Result<(), HalError> {
        let sh = &self.shared;
        match sh
            .calls
            .capture_thread_exchange_mode(capture_mode_number(mode))
        {
            Some(r) => {
                let previous = sh.result("aclmdlRICaptureThreadExchangeMode", r)?;
                tracing::trace!(previous, %mode, "ACL thread capture mode set");
                Ok(())
            }
            None if mode == CaptureMode::Global => Ok(()),
            None => Err(HalError::Unsupported(
                "capture modes per thread: this ACL library has no aclmdlRICaptureThreadExchangeMode",
            )),
        }
    }
}
