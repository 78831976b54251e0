//! Never silent zeros: a launch braid-acl-sim refuses fails its device until the device is
//! reset.
//!
//! torch_npu launches operators from its task-queue thread; when a launch there fails,
//! torch_npu drops the tasks queued behind it and may lose the error itself, so a program
//! would read back memory nothing wrote as if it held results. braid-acl-sim refuses more
//! launches than a CANN install does (the operators it does not compute), so it makes the
//! loss loud: the first refused launch on a device (an `aclopCompileAndExecute`, an aclnn
//! operator's launch) is kept, and every later host wait on that device — a stream, event or
//! device synchronize, a blocking copy or fill — fails with the refusal's code and a message
//! naming that first refused operator, until `aclrtResetDevice` releases the device (its last
//! reference), as a device exception does on an NPU.

use super::Registry;
use crate::errmsg::{fail, Fail};

impl Registry {
    /// Keeps `failure` as the first refused launch of the device of `stream` (the calling
    /// thread's current device for the default stream); nothing when the device is unknown.
    pub fn note_refused_launch(&mut self, stream: usize, failure: &Fail) {
        let device = match stream {
            0 => self.current("").ok(),
            s => self.streams.get(&s).map(|e| e.device),
        };
        let Some(dev) = device.and_then(|d| self.devices.get_mut(d)?.as_mut()) else {
            return;
        };
        if dev.refused.is_none() {
            tracing::error!(
                message = %failure.message,
                "braid-acl-sim refused a launch: the device fails every later wait until it is reset"
            );
            dev.refused = Some(failure.clone());
        }
    }

    /// Fails `call`, a host wait on `device`, when a launch on it was refused.
    pub(super) fn check_failed(&self, call: &str, device: usize) -> Result<(), Fail> {
        let refused = self
            .devices
            .get(device)
            .and_then(|d| d.as_ref())
            .and_then(|d| d.refused.as_ref());
        match refused {
            None => Ok(()),
            Some(first) => Err(fail(
                first.code,
                format!(
                    "{call}: device {device} failed: a launch on it was refused, so the work queued after it did not run and its results were never computed; the first refusal: {} (reset the device with aclrtResetDevice, or start the process again)",
                    first.message
                ),
            )),
        }
    }
}
