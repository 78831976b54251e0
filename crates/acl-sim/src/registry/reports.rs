//! The registry's side of host callbacks ([`crate::reports`]): which stream a handle names,
//! and the callback's task on it, with the marker an eager one leaves for
//! `aclrtProcessReport`.

use super::{sim_fail, Registry};
use crate::errmsg::Fail;
use crate::reports::{Launched, StreamKey};
use braid_backend_sim::{host_op, HostGate, SimBackend, SimEvent};
use braid_stream_core::hal::{Device as _, OpCost, Stream as _};
use braid_stream_core::types::EventFlags;
use braid_stream_core::CustomOp;

/// The device time a callback's task takes on its stream (the report to the host thread).
const CALLBACK_NS: u64 = 1_000;

impl Registry {
    /// The stream `handle` names (0: the current device's default stream).
    pub fn report_stream(&self, call: &str, handle: usize) -> Result<StreamKey, Fail> {
        let s = self.stream(call, handle)?;
        Ok(StreamKey {
            device: s.device,
            index: s.sim.index(),
        })
    }

    /// Whether stream `handle` records into a capture.
    pub fn is_capturing(&self, call: &str, handle: usize) -> Result<bool, Fail> {
        Ok(self.stream(call, handle)?.capture.is_some())
    }

    /// Enqueues `callback`'s task on stream `handle`: an operator whose body reports it when
    /// the stream reaches it (each replay too, when captured). Outside a capture, also
    /// records a marker event after it, which `aclrtProcessReport` waits on to bring the
    /// stream's simulated time up to the callback, and, for a blocking callback
    /// (`callback.gated`), puts a host gate after that, which holds the stream's later work
    /// until the callback has run.
    pub fn launch_callback(
        &mut self,
        call: &str,
        handle: usize,
        callback: Launched,
    ) -> Result<(Option<SimEvent>, Option<HostGate>), Fail> {
        let op = CustomOp::<SimBackend>::new("aclrtLaunchCallback")
            .cost(OpCost::Fixed { ns: CALLBACK_NS })
            .body(host_op(move |_, _| callback.report()));
        self.submit(call, handle, |sim| sim.launch_operator(&op.lower()))?;
        let s = self.stream(call, handle)?;
        if s.capture.is_some() {
            return Ok((None, None));
        }
        let marker = self
            .dev(s.device)?
            .sim
            .create_event(EventFlags::default())
            .map_err(|e| sim_fail(call, e))?;
        s.sim.record(&marker).map_err(|e| sim_fail(call, e))?;
        let gate = match callback.gated {
            Some(_) => Some(s.sim.hold_gate().map_err(|e| sim_fail(call, e))?),
            None => None,
        };
        Ok((Some(marker), gate))
    }
}
