//! [`AclEvent`]: the hal event over `aclrtEvent`.

use crate::calls::Handle;
use crate::device::Shared;
use crate::ffi::ACL_EVENT_RECORDED_STATUS_COMPLETE;
use crate::native::Ownership;
use crate::AclBackend;
use braid_stream_core::hal::{self, HalError};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One ACL event, created with `aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)` (plus
/// `ACL_EVENT_TIME_LINE` for timing events), or `aclrtCreateEventWithFlag` where the Ex variant
/// is missing. Destroyed on drop; a failure is reported by the device's next call.
pub struct AclEvent {
    shared: Arc<Shared>,
    pub(crate) raw: Handle,
    recorded: AtomicBool,
    owned: bool,
}

impl fmt::Debug for AclEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclEvent")
            .field("device", &self.shared.ordinal)
            .field("raw", &format_args!("{:#x}", self.raw))
            .finish()
    }
}

impl AclEvent {
    pub(crate) fn new(shared: Arc<Shared>, raw: Handle) -> Self {
        AclEvent {
            shared,
            raw,
            recorded: AtomicBool::new(false),
            owned: true,
        }
    }

    /// An event another library created (see [`crate::AclDevice::wrap_event`]): it may have
    /// been recorded already, and only an owned one is destroyed on drop.
    pub(crate) fn foreign(shared: Arc<Shared>, raw: Handle, ownership: Ownership) -> Self {
        AclEvent {
            shared,
            raw,
            recorded: AtomicBool::new(true),
            owned: ownership == Ownership::Owned,
        }
    }

    pub(crate) fn mark_recorded(&self) {
        self.recorded.store(true, Ordering::Release);
    }

    fn was_recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }

    /// The raw `aclrtEvent`, for calls braid does not wrap.
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.raw as *mut std::ffi::c_void
    }
}

impl Drop for AclEvent {
    fn drop(&mut self) {
        if self.owned {
            let raw = self.raw;
            self.shared
                .release("aclrtDestroyEvent", |c| c.destroy_event(raw));
        }
    }
}

impl hal::Event for AclEvent {
    type B = AclBackend;

    fn query(&self) -> Result<bool, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        // A never-recorded event is complete (the hal's rule); ACL is not asked.
        if !self.was_recorded() {
            return Ok(true);
        }
        let status = sh.result(
            "aclrtQueryEventStatus",
            sh.calls.query_event_status(self.raw),
        )?;
        Ok(status == ACL_EVENT_RECORDED_STATUS_COMPLETE)
    }

    fn synchronize(&self) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        if !self.was_recorded() {
            return Ok(());
        }
        Ok(sh.check(
            "aclrtSynchronizeEvent",
            sh.calls.synchronize_event(self.raw),
        )?)
    }

    fn elapsed_ms(&self, end: &AclEvent) -> Result<f32, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        Ok(sh.result(
            "aclrtEventElapsedTime",
            sh.calls.event_elapsed_time(self.raw, end.raw),
        )?)
    }
}
