//! Host waits (stream, event and device synchronizes, the wait of a blocking copy or fill)
//! run outside the registry's lock. A wait can last until other threads issue work: ranks of
//! one communicator that are threads of one process (torch_npu's process groups) issue their
//! parts of a collective while a rank already waits for it, and they need the registry to do
//! so. A registry call checks and enqueues under the lock and returns a [`Wait`]; the export
//! runs it once the lock is released ([`with_then_wait`]). A wait also waits for the blocking
//! host callbacks of what it covers to have run ([`crate::reports`]), then for the work they
//! launched.

use super::{sim_fail, with, Registry};
use crate::codes::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
use crate::errmsg::{fail, Fail};
use crate::reports::{self, Scope};
use braid_backend_sim::{SimDevice, SimEvent, SimStream};
use braid_stream_core::hal::{Device as _, Event as _, Stream as _};
use std::time::Duration;

/// What a wait waits for.
pub(crate) enum WaitOn {
    /// Everything enqueued on a stream.
    Stream(SimStream),
    /// Everything enqueued on a device.
    Device(SimDevice),
    /// An event's recorded work.
    Event(SimEvent),
}

/// A host wait to run outside the registry's lock.
pub(crate) struct Wait {
    call: &'static str,
    on: WaitOn,
    /// The streams whose blocking host callbacks it waits for, and for how long.
    callbacks: (Scope, Duration),
    /// The device whose simulated clock measures the wait, and the limit in ms (negative:
    /// none) past which the wait fails with `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`.
    limit: Option<(SimDevice, i32)>,
}

impl Wait {
    /// A wait of `call` on `on`, with no time limit, waiting for the blocking host callbacks
    /// of `scope` up to `timeout`.
    pub(crate) fn new(call: &'static str, on: WaitOn, scope: Scope, timeout: Duration) -> Self {
        Wait {
            call,
            on,
            callbacks: (scope, timeout),
            limit: None,
        }
    }

    /// The same wait failing when it lasts more than `timeout_ms` of `device`'s simulated
    /// time (a negative `timeout_ms`: no limit).
    pub(crate) fn limited(mut self, device: SimDevice, timeout_ms: i32) -> Self {
        self.limit = Some((device, timeout_ms));
        self
    }

    /// Waits.
    pub(crate) fn run(self) -> Result<(), Fail> {
        let before = self.limit.as_ref().map(|(d, _)| d.host_time_ns());
        loop {
            match &self.on {
                WaitOn::Stream(s) => s.synchronize(),
                WaitOn::Device(d) => d.synchronize(),
                WaitOn::Event(e) => e.synchronize(),
            }
            .map_err(|e| sim_fail(self.call, e))?;
            let (scope, timeout) = self.callbacks;
            if !reports::drain(self.call, scope, timeout)? {
                break;
            }
        }
        if let (Some((device, timeout_ms)), Some(before)) = (&self.limit, before) {
            let waited = device.host_time_ns().saturating_sub(before);
            if let Ok(limit) = u64::try_from(*timeout_ms) {
                if waited > limit.saturating_mul(1_000_000) {
                    return Err(fail(
                        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                        format!("{}: synchronize timed out after {timeout_ms} ms", self.call),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Runs `f` on the registry, then the wait it returns with the registry free for other
/// threads.
pub(crate) fn with_then_wait(
    f: impl FnOnce(&mut Registry) -> Result<Wait, Fail>,
) -> Result<(), Fail> {
    with(f)?.run()
}
