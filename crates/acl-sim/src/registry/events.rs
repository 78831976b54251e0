//! Events (`aclrtCreateEventExWithFlag`, record, wait, query, synchronize, elapsed time):
//! each remembers whether it was last recorded eagerly or inside a capture, and where in
//! the capture, so a wait on it joins the waiting stream to that capture.

use super::waits::{Wait, WaitOn};
use super::{sim_fail, EventEntry, Recorded, Registry};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_stream_core::hal::{Device as _, Event as _, Stream as _};
use braid_stream_core::types::EventFlags;

impl Registry {
    pub(super) fn event(&self, call: &str, handle: usize) -> Result<&EventEntry, Fail> {
        let e = self.events.get(&handle).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{call}: invalid event handle {handle:#x}"),
            )
        })?;
        self.in_context(call, e.device)?;
        Ok(e)
    }

    pub fn create_event(&mut self, flags: u32) -> Result<usize, Fail> {
        let device = self.current("aclrtCreateEventExWithFlag")?;
        if flags & ACL_EVENT_IPC != 0 {
            return self.create_ipc_event(device, flags);
        }
        let sim = self
            .dev(device)?
            .sim
            .create_event(EventFlags {
                timing: flags & ACL_EVENT_TIME_LINE != 0,
                // External events are not modelled through acl-sim: braid's ACL backend
                // refuses them before any call (see its `create_event`).
                external: false,
            })
            .map_err(|e| sim_fail("aclrtCreateEventExWithFlag", e))?;
        let h = self.handle();
        self.events.insert(
            h,
            EventEntry {
                device,
                sim,
                flags,
                recorded: Recorded::Never,
            },
        );
        Ok(h)
    }

    /// `aclrtResetEvent`: the event returns to its unrecorded state (waits on it no longer
    /// wait, a query reports it complete as for a new event). Work already waiting on it keeps
    /// waiting for the recording it saw. `stream` must be a stream of the event's device; a
    /// reset inside a capture is not simulated (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`).
    pub fn reset_event(&mut self, event: usize, stream: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtResetEvent";
        let (device, flags) = {
            let e = self.event(CALL, event)?;
            (e.device, e.flags)
        };
        let s = self.stream(CALL, stream)?;
        if s.device != device {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CONTEXT,
                format!("{CALL}: the event and the stream belong to different devices"),
            ));
        }
        if s.capture.is_some() {
            return Err(fail(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                format!("{CALL}: resetting an event inside a capture is not simulated"),
            ));
        }
        let fresh = self
            .dev(device)?
            .sim
            .create_event(EventFlags {
                timing: flags & ACL_EVENT_TIME_LINE != 0,
                external: false,
            })
            .map_err(|e| sim_fail(CALL, e))?;
        if let Some(e) = self.events.get_mut(&event) {
            e.sim = fresh;
            e.recorded = Recorded::Never;
        }
        Ok(())
    }

    pub fn destroy_event(&mut self, handle: usize) -> Result<(), Fail> {
        self.event("aclrtDestroyEvent", handle)?;
        self.events.remove(&handle);
        Ok(())
    }

    pub fn record_event(&mut self, event: usize, stream: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtRecordEvent";
        let e_device = self.event(CALL, event)?.device;
        let s = self.stream(CALL, stream)?;
        if s.device != e_device {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CONTEXT,
                "aclrtRecordEvent: the event and the stream belong to different devices",
            ));
        }
        self.check_default_stream(CALL, s.device, stream)?;
        let sim_event = self.event(CALL, event)?.sim.clone();
        s.sim.record(&sim_event).map_err(|e| sim_fail(CALL, e))?;
        let recorded = match s.capture {
            Some(c) => Recorded::Captured {
                capture: c,
                clock: self
                    .captures
                    .get(&c)
                    .map(|cap| cap.snapshot(stream))
                    .unwrap_or_default(),
            },
            None => Recorded::Eager,
        };
        if let Some(e) = self.events.get_mut(&event) {
            e.recorded = recorded;
        }
        Ok(())
    }

    pub fn stream_wait_event(&mut self, stream: usize, event: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtStreamWaitEvent";
        let s = self.stream(CALL, stream)?;
        // The event may be another device's of the node (a cross-device wait).
        let e = self.event_of_any_device(CALL, event)?;
        if e.flags & (ACL_EVENT_SYNC | ACL_EVENT_IPC) == 0 {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                "aclrtStreamWaitEvent: the event was created without ACL_EVENT_SYNC and cannot be waited on",
            ));
        }
        let (sim_event, recorded) = (e.sim.clone(), e.recorded.clone());
        self.check_default_stream(CALL, s.device, stream)?;
        if let (None, Recorded::Captured { .. }) = (s.capture, &recorded) {
            if stream == 0 {
                return Err(fail(
                    ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                    "aclrtStreamWaitEvent: the default stream cannot join a capture",
                ));
            }
        }
        // Which waits a capture refuses is the simulator's to say (braid's one capture rule);
        // its typed refusal becomes ACL's capture-dependency error.
        s.sim.wait(&sim_event).map_err(|e| sim_fail(CALL, e))?;
        if let Recorded::Captured { capture, clock } = recorded {
            if let Some(cap) = self.captures.get_mut(&capture) {
                cap.wait(stream, &clock);
            }
            if let Some(entry) = self.streams.get_mut(&stream) {
                entry.capture = Some(capture);
            }
        }
        Ok(())
    }

    /// The capture an event was last recorded in, if it is still active.
    pub(super) fn event_capture(&self, e: &EventEntry) -> Option<u64> {
        match &e.recorded {
            Recorded::Captured { capture, .. } if self.captures.contains_key(capture) => {
                Some(*capture)
            }
            _ => None,
        }
    }

    pub fn query_event_status(&mut self, event: usize) -> Result<u32, Fail> {
        const CALL: &str = "aclrtQueryEventStatus";
        let e = self.event(CALL, event)?;
        self.check_blocking(CALL, e.device, self.event_capture(e))?;
        let done = e.sim.query().map_err(|err| sim_fail(CALL, err))?;
        Ok(if done {
            ACL_EVENT_RECORDED_STATUS_COMPLETE
        } else {
            ACL_EVENT_RECORDED_STATUS_NOT_READY
        })
    }

    /// The wait of an event synchronize.
    pub fn synchronize_event(&mut self, event: usize) -> Result<Wait, Fail> {
        const CALL: &str = "aclrtSynchronizeEvent";
        let e = self.event(CALL, event)?;
        self.check_blocking(CALL, e.device, self.event_capture(e))?;
        self.check_failed(CALL, e.device)?;
        // The event's recording stream is not kept: the wait covers its device's callbacks.
        let scope = crate::reports::Scope::Device(e.device);
        Ok(Wait::new(
            CALL,
            WaitOn::Event(e.sim.clone()),
            scope,
            self.collective_timeout,
        ))
    }

    pub fn elapsed_ms(&mut self, start: usize, end: usize) -> Result<f32, Fail> {
        const CALL: &str = "aclrtEventElapsedTime";
        let a = self.event(CALL, start)?;
        let b = self.event(CALL, end)?;
        if a.device != b.device {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                "aclrtEventElapsedTime: the events belong to different devices",
            ));
        }
        for (name, e) in [("start", a), ("end", b)] {
            if e.flags & ACL_EVENT_TIME_LINE == 0 {
                return Err(fail(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("aclrtEventElapsedTime: the {name} event was created without ACL_EVENT_TIME_LINE"),
                ));
            }
            if !matches!(e.recorded, Recorded::Eager) {
                return Err(fail(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("aclrtEventElapsedTime: the {name} event was not recorded outside a capture"),
                ));
            }
        }
        a.sim.elapsed_ms(&b.sim).map_err(|e| sim_fail(CALL, e))
    }
}
