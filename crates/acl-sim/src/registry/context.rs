//! `aclInit`, the devices a thread sets (`aclrtSetDevice`, `aclrtResetDevice`) and its
//! current device, which every call on a stream, event or memory is checked against (ACL's
//! context is per thread), and calls on a whole device: synchronize, the sanitizer's
//! reports.

use super::waits::{Wait, WaitOn};
use super::{Dev, Registry, CURRENT};
use crate::codes::*;
use crate::errmsg::{fail, Fail};

impl Registry {
    pub fn init(&mut self) -> Result<(), Fail> {
        if self.initialized {
            return Err(fail(
                ACL_ERROR_REPEAT_INITIALIZE,
                "aclInit: repeated initialization (for compatibility this error can be ignored)",
            ));
        }
        self.initialized = true;
        Ok(())
    }

    pub fn device_count(&self) -> u32 {
        self.device_count as u32
    }

    pub(super) fn device_index(&self, id: i32) -> Result<usize, Fail> {
        self.index_in_node(id, ACL_ERROR_RT_INVALID_DEVICEID, |count| {
            format!("invalid device id {id}: {count} devices")
        })
    }

    /// Device id `id` as an index of the node's devices, or the failure `code` with
    /// `message(device count)`: each API names a bad id its own way.
    pub(crate) fn index_in_node(
        &self,
        id: i32,
        code: i32,
        message: impl FnOnce(usize) -> String,
    ) -> Result<usize, Fail> {
        usize::try_from(id)
            .ok()
            .filter(|i| *i < self.device_count)
            .ok_or_else(|| fail(code, message(self.device_count)))
    }

    pub fn set_device(&mut self, id: i32) -> Result<(), Fail> {
        if !self.initialized {
            return Err(fail(
                ACL_ERROR_UNINITIALIZE,
                "aclrtSetDevice: aclInit has not been called",
            ));
        }
        let index = self.device_index(id)?;
        self.ensure_device("aclrtSetDevice", index)?.refcount += 1;
        CURRENT.with(|c| c.set(Some(index)));
        Ok(())
    }

    pub fn reset_device(&mut self, id: i32) -> Result<(), Fail> {
        let index = self.device_index(id)?;
        let Some(dev) = self.devices[index].as_mut().filter(|d| d.refcount > 0) else {
            return Err(fail(
                ACL_ERROR_RT_INVALID_DEVICEID,
                format!("aclrtResetDevice: device {id} was not set"),
            ));
        };
        dev.refcount -= 1;
        if dev.refcount == 0 {
            // Released: a refused launch no longer fails its waits.
            dev.refused = None;
            CURRENT.with(|c| {
                if c.get() == Some(index) {
                    c.set(None);
                }
            });
        }
        Ok(())
    }

    /// The device bound on this thread.
    pub(super) fn current(&self, call: &str) -> Result<usize, Fail> {
        CURRENT
            .with(|c| c.get())
            .filter(|i| self.devices.get(*i).is_some_and(|d| d.is_some()))
            .ok_or_else(|| {
                fail(
                    ACL_ERROR_RT_CONTEXT_NULL,
                    format!("{call}: no device is set on this thread (call aclrtSetDevice)"),
                )
            })
    }

    pub(super) fn dev(&self, index: usize) -> Result<&Dev, Fail> {
        self.devices
            .get(index)
            .and_then(|d| d.as_ref())
            .ok_or_else(|| fail(ACL_ERROR_RT_CONTEXT_NULL, "the device is not set"))
    }

    pub(super) fn dev_mut(&mut self, index: usize) -> Result<&mut Dev, Fail> {
        self.devices
            .get_mut(index)
            .and_then(|d| d.as_mut())
            .ok_or_else(|| fail(ACL_ERROR_RT_CONTEXT_NULL, "the device is not set"))
    }

    /// Checks an object of `device` is used with the device bound on this thread.
    pub(super) fn in_context(&self, call: &str, device: usize) -> Result<(), Fail> {
        let current = self.current(call)?;
        if current == device {
            Ok(())
        } else {
            Err(fail(
                ACL_ERROR_RT_STREAM_CONTEXT,
                format!(
                    "{call}: the object belongs to device {device} but this thread's current device is {current}"
                ),
            ))
        }
    }

    /// The device `id`, which must have been set (by any thread) at least once.
    pub(super) fn set_dev(&self, call: &str, id: i32) -> Result<&Dev, Fail> {
        let index = self.device_index(id)?;
        self.devices[index].as_ref().ok_or_else(|| {
            fail(
                ACL_ERROR_RT_CONTEXT_NULL,
                format!("{call}: device {id} has not been set (call aclrtSetDevice)"),
            )
        })
    }

    /// The sanitizer's kept reports on device `id`, rendered as `braid::sim_race_reports`
    /// renders them.
    pub fn sanitizer_reports(&self, call: &str, id: i32) -> Result<Vec<String>, Fail> {
        Ok(self
            .set_dev(call, id)?
            .sim
            .sanitizer_reports()
            .iter()
            .map(|r| r.to_string())
            .collect())
    }

    /// Forgets the sanitizer's reports on device `id` (its happens-before state is kept).
    pub fn clear_sanitizer_reports(&self, id: i32) -> Result<(), Fail> {
        self.set_dev("braidSimClearSanitizerReports", id)?
            .sim
            .clear_sanitizer_reports();
        Ok(())
    }

    /// The wait of a synchronize of the current device; a non-negative `timeout_ms` fails it
    /// with 507046 (`ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`, what CANN documents for a timed-out
    /// device synchronize) when it took longer in simulated time.
    pub fn synchronize_device(&mut self, timeout_ms: i32) -> Result<Wait, Fail> {
        let call = if timeout_ms < 0 {
            "aclrtSynchronizeDevice"
        } else {
            "aclrtSynchronizeDeviceWithTimeout"
        };
        let index = self.current(call)?;
        self.check_blocking(call, index, None)?;
        self.check_failed(call, index)?;
        let sim = self.dev(index)?.sim.clone();
        let scope = crate::reports::Scope::Device(index);
        Ok(Wait::new(
            call,
            WaitOn::Device(sim.clone()),
            scope,
            self.collective_timeout,
        )
        .limited(sim, timeout_ms))
    }
}
