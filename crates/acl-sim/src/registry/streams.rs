//! Streams (`aclrtCreateStream`, `aclrtDestroyStream`, synchronize and query) and the one
//! path every task takes onto a stream (`Registry::submit`: the default-stream rule during
//! a capture, the simulator's call, the capture's bookkeeping), with the tasks that are
//! neither copies nor models: braid's busy kernel and aclnn operators.

use super::waits::{Wait, WaitOn};
use super::{sim_fail, Registry, StreamEntry, StreamRef};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use crate::outputs::StreamNames;
use crate::reports::{self, Scope, StreamKey};
use braid_backend_sim::SimStream;
use braid_stream_core::hal::{Device as _, HalError, Stream as _};

impl Registry {
    pub(super) fn stream(&self, call: &str, handle: usize) -> Result<StreamRef, Fail> {
        if handle == 0 {
            let device = self.current(call)?;
            return Ok(StreamRef {
                device,
                sim: self.dev(device)?.default_stream.clone(),
                capture: None,
            });
        }
        let e = self.streams.get(&handle).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{call}: invalid stream handle {handle:#x}"),
            )
        })?;
        self.in_context(call, e.device)?;
        Ok(StreamRef {
            device: e.device,
            sim: e.sim.clone(),
            capture: e.capture,
        })
    }

    /// The `aclrtStream` handle of every stream by (device, simulator stream index), the
    /// destroyed ones included; the default streams are handle 0.
    pub(super) fn stream_names(&self) -> StreamNames {
        let retired = self.retired_streams.iter().map(|(k, h)| (*k, *h));
        let defaults = self.devices.iter().enumerate().filter_map(|(i, d)| {
            d.as_ref()
                .map(|d| ((i as u32, d.default_stream.index()), 0usize))
        });
        let created = self
            .streams
            .iter()
            .map(|(h, e)| ((e.device as u32, e.sim.index()), *h));
        retired.chain(defaults).chain(created).collect()
    }

    pub fn create_stream(&mut self, priority: u32) -> Result<usize, Fail> {
        let device = self.current("aclrtCreateStream")?;
        let sim = self
            .dev(device)?
            .sim
            .create_stream(i32::try_from(priority).unwrap_or(i32::MAX))
            .map_err(|e| sim_fail("aclrtCreateStream", e))?;
        let h = self.handle();
        self.streams.insert(
            h,
            StreamEntry {
                device,
                sim,
                capture: None,
            },
        );
        Ok(h)
    }

    pub fn destroy_stream(&mut self, handle: usize) -> Result<(), Fail> {
        if handle == 0 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                "aclrtDestroyStream: the default stream cannot be destroyed",
            ));
        }
        let s = self.stream("aclrtDestroyStream", handle)?;
        if let Some(c) = s.capture {
            let is_origin = self
                .captures
                .get(&c)
                .is_some_and(|cap| cap.origin == handle);
            if is_origin {
                // Destroying the origin abandons its capture.
                self.finish_capture(c, &s.sim);
            } else if let Some(cap) = self.captures.get_mut(&c) {
                cap.members.remove(&handle);
            }
        }
        self.streams.remove(&handle);
        self.retired_streams
            .insert((s.device as u32, s.sim.index()), handle);
        Ok(())
    }

    /// `aclrtDestroyStreamForce`: as `aclrtDestroyStream` (the simulator's queued work is
    /// already placed in virtual time, so nothing is waited for either way).
    pub fn destroy_stream_force(&mut self, handle: usize) -> Result<(), Fail> {
        self.destroy_stream(handle)
    }

    /// `aclrtSetStreamFailureMode`: `ACL_CONTINUE_ON_FAILURE` (0) or `ACL_STOP_ON_FAILURE`
    /// (1) on a stream of the current device. The simulator reports a failed task at the
    /// next synchronize either way (its failures are injected faults).
    pub fn set_stream_failure_mode(&self, handle: usize, mode: u64) -> Result<(), Fail> {
        const CALL: &str = "aclrtSetStreamFailureMode";
        self.stream(CALL, handle)?;
        if mode > braid_acl_sys::acl::ACL_STOP_ON_FAILURE {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: mode {mode} is not ACL_CONTINUE_ON_FAILURE (0) or ACL_STOP_ON_FAILURE (1)"),
            ));
        }
        Ok(())
    }

    /// Submits one task on `handle` and notes it in the stream's capture.
    pub(super) fn submit(
        &mut self,
        call: &str,
        handle: usize,
        f: impl FnOnce(&SimStream) -> Result<(), HalError>,
    ) -> Result<(), Fail> {
        let s = self.stream(call, handle)?;
        self.check_default_stream(call, s.device, handle)?;
        f(&s.sim).map_err(|e| sim_fail(call, e))?;
        if let Some(cap) = s.capture.and_then(|c| self.captures.get_mut(&c)) {
            cap.task(handle);
        }
        Ok(())
    }

    /// Synchronizes a stream; a non-negative `timeout_ms` fails with 507046 when the wait took
    /// longer (in simulated time).
    /// The wait of a stream synchronize; a non-negative `timeout_ms` fails it with 507046
    /// (`ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`) when it took longer in simulated time.
    pub fn synchronize_stream(&mut self, handle: usize, timeout_ms: i32) -> Result<Wait, Fail> {
        let call = if timeout_ms < 0 {
            "aclrtSynchronizeStream"
        } else {
            "aclrtSynchronizeStreamWithTimeout"
        };
        let s = self.stream(call, handle)?;
        self.check_stream_blocking(call, s.device, s.capture)?;
        self.check_failed(call, s.device)?;
        let clock = self.dev(s.device)?.sim.clone();
        let scope = Scope::Stream(StreamKey {
            device: s.device,
            index: s.sim.index(),
        });
        Ok(Wait::new(
            call,
            WaitOn::Stream(s.sim.clone()),
            scope,
            self.collective_timeout,
        )
        .limited(clock, timeout_ms))
    }

    pub fn stream_query(&mut self, handle: usize) -> Result<u32, Fail> {
        let s = self.stream("aclrtStreamQuery", handle)?;
        self.check_stream_blocking("aclrtStreamQuery", s.device, s.capture)?;
        let done = s.sim.query().map_err(|e| sim_fail("aclrtStreamQuery", e))?;
        // A blocking host callback not yet run is work of the stream.
        let held = reports::holds(Scope::Stream(StreamKey {
            device: s.device,
            index: s.sim.index(),
        }));
        Ok(if done && !held {
            ACL_STREAM_STATUS_COMPLETE
        } else {
            ACL_STREAM_STATUS_NOT_READY
        })
    }

    /// `braidSimBusy`: occupies the stream for `duration_ns`.
    pub fn busy(&mut self, stream: usize, duration_ns: u64) -> Result<(), Fail> {
        let busy =
            braid_stream_core::Kernel::Busy { duration_ns }.typed(braid_stream_core::DType::F32);
        self.submit("braidSimBusy", stream, |sim| sim.launch(&busy, "busy"))
    }

    /// Enqueues an aclnn operator's work on `stream` (`call` names it): its simulator
    /// kernel or host operator, after checking that the workspace (`ws` of `ws_len` bytes,
    /// if any) is device memory of the stream's device.
    pub fn launch_aclnn(
        &mut self,
        call: &str,
        stream: usize,
        workspace: Option<(u64, u64)>,
        enqueue: impl FnOnce(&SimStream) -> Result<(), HalError>,
    ) -> Result<(), Fail> {
        let s = self.stream(call, stream)?;
        if let Some((ws, len)) = workspace {
            if !self.is_device(s.device, ws, len) {
                return Err(fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!(
                        "{call}: workspace [{ws:#x}, +{len}) is not device memory of device {}",
                        s.device
                    ),
                ));
            }
        }
        self.submit(call, stream, enqueue)
    }
}
