//! What HCCL's exports need of the ACL runtime: the devices communicators are made on, and a
//! collective enqueued on an ACL stream (with the checks and capture bookkeeping of every
//! other work item).

use super::Registry;
use crate::errmsg::{fail, Fail};
use crate::hccl::from_hal;
use braid_acl_sys::hccl::codes::*;
use braid_backend_sim::{SimDevice, SimStream};
use braid_stream_core::hal::HalError;

impl Registry {
    /// The calling thread's current device: its id and simulator device.
    pub(crate) fn current_sim_device(&self, call: &str) -> Result<(usize, SimDevice), Fail> {
        let index = self.current(call)?;
        Ok((index, self.dev(index)?.sim.clone()))
    }

    /// The simulator device of device id `id` for a communicator (made if no call used it
    /// yet, as `HcclCommInitAll` sets the devices itself); `HCCL_E_PARA` when it is no
    /// device.
    pub(crate) fn comm_device(&mut self, call: &str, id: i32) -> Result<SimDevice, Fail> {
        let index = self.index_in_node(id, HCCL_E_PARA, |count| {
            format!("{call}: device {id} is not in [0, {count})")
        })?;
        Ok(self.ensure_device(call, index)?.sim.clone())
    }

    /// Enqueues one rank's part of a collective with `f` on the ACL stream `handle`, which
    /// must be a stream of `device` (the communicator's); a stream that is capturing records
    /// it like any task.
    pub(crate) fn enqueue_collective(
        &mut self,
        call: &str,
        handle: usize,
        device: usize,
        f: impl FnOnce(&SimStream) -> Result<(), HalError>,
    ) -> Result<(), Fail> {
        let s = self.stream(call, handle)?;
        if s.device != device {
            return Err(fail(
                HCCL_E_PARA,
                format!(
                    "{call}: the stream belongs to device {}, the communicator to device {device}",
                    s.device
                ),
            ));
        }
        self.check_default_stream(call, s.device, handle)?;
        f(&s.sim).map_err(|e| from_hal(call, e))?;
        if let Some(cap) = s.capture.and_then(|c| self.captures.get_mut(&c)) {
            cap.task(handle);
        }
        Ok(())
    }
}
