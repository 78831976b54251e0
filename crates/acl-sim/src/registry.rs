//! The simulated runtime's state: devices, handles, captures, and ACL's rules over them.
//!
//! Everything lives in one process-wide registry behind a mutex. Handles given to the caller
//! are opaque numbers (never dereferenced), looked up here, so a stale or foreign handle is an
//! error code, not a crash. Simulated work is virtual-time, so holding the lock across a
//! "synchronize" never blocks for real.

use crate::capture::{CaptureState, Clock};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use crate::settings::Settings;
use braid_backend_sim::{SimDevice, SimEvent, SimGraph, SimStream};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, HalError, Stream as _};
use braid_stream_core::types::{CaptureMode, DevicePtr, EventFlags, HostPtr};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock};

mod collective;
mod devices;
mod vmm;

/// First handle value; handles step by 0x40 so they look like (and are as distinct as) pointers.
const HANDLE_BASE: usize = 0x0ac1_0000;
const HANDLE_STEP: usize = 0x40;

thread_local! {
    /// The device `aclrtSetDevice` bound on this thread.
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

struct Dev {
    sim: SimDevice,
    default_stream: SimStream,
    refcount: u64,
    /// Live segments: address → size.
    allocations: BTreeMap<u64, u64>,
    /// Live address reservations: address → size.
    reservations: BTreeMap<u64, u64>,
}

struct StreamEntry {
    device: usize,
    sim: SimStream,
    capture: Option<u64>,
}

#[derive(Clone)]
enum Recorded {
    Never,
    Eager,
    Captured { capture: u64, clock: Clock },
}

struct EventEntry {
    device: usize,
    sim: SimEvent,
    flags: u32,
    recorded: Recorded,
}

enum ModelState {
    Capturing,
    Ready(SimGraph),
}

struct ModelEntry {
    device: usize,
    state: ModelState,
}

/// The whole simulated runtime.
pub(crate) struct Registry {
    initialized: bool,
    device_count: usize,
    capacity: u64,
    /// Per device: whether it runs timing-only.
    timing_only: Vec<bool>,
    devices: Vec<Option<Dev>>,
    streams: HashMap<usize, StreamEntry>,
    events: HashMap<usize, EventEntry>,
    models: HashMap<usize, ModelEntry>,
    /// Live `aclrtMallocHost` allocations: address → the device whose simulator holds them.
    host_allocations: HashMap<usize, usize>,
    captures: BTreeMap<u64, CaptureState>,
    /// Physical memory handles of the virtual-memory API.
    physical: HashMap<usize, vmm::Physical>,
    /// Enabled peer access: (device, peer) means `device` may access `peer`'s memory.
    peers: HashSet<(usize, usize)>,
    /// The simulated nodes, made at first use: the devices computing data, and the
    /// timing-only ones (`devices::Nodes`).
    nodes: devices::Nodes,
    next_handle: usize,
    next_capture: u64,
}

/// Runs `f` on the process-wide registry, made from the environment's [`Settings`] at first
/// use. Invalid settings fail every call with `ACL_ERROR_INVALID_PARAM` and the text naming
/// the variable and its value.
pub(crate) fn with<R>(f: impl FnOnce(&mut Registry) -> Result<R, Fail>) -> Result<R, Fail> {
    static REGISTRY: OnceLock<Result<Mutex<Registry>, Fail>> = OnceLock::new();
    let registry = REGISTRY.get_or_init(|| {
        Settings::from_env(|k| std::env::var_os(k))
            .map(|settings| Mutex::new(Registry::new(settings)))
            .map_err(|e| fail(ACL_ERROR_INVALID_PARAM, e.to_string()))
    });
    let m = registry.as_ref().map_err(Clone::clone)?;
    // Every registry operation leaves it consistent, so a poisoned lock is still usable.
    let mut guard: MutexGuard<'_, Registry> = m.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut guard)
}

/// A simulator error as an ACL failure of `call`.
fn sim_fail(call: &str, e: HalError) -> Fail {
    let code = match &e {
        HalError::OutOfMemory { .. } => ACL_ERROR_RT_DEVICE_OOM,
        HalError::InvalidArgument(_) | HalError::CollectiveMismatch(_) => {
            ACL_ERROR_RT_PARAM_INVALID
        }
        HalError::Unsupported(_) => ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        HalError::Native { code, .. } | HalError::NativeInvalidArgument { code, .. } => *code,
        HalError::CaptureRefused(_) => ACL_ERROR_RT_CAPTURE_DEPENDENCY,
    };
    fail(code, format!("{call}: {e}"))
}

fn restricts_this_thread(cap: &CaptureState) -> bool {
    cap.mode == CAPTURE_MODE_GLOBAL
        || (cap.mode == CAPTURE_MODE_THREAD_LOCAL && cap.thread == std::thread::current().id())
}

/// A resolved stream.
struct StreamRef {
    device: usize,
    sim: SimStream,
    capture: Option<u64>,
}

impl Registry {
    fn new(settings: Settings) -> Self {
        let Settings {
            device_count,
            capacity,
            timing_only,
        } = settings;
        Registry {
            initialized: false,
            device_count,
            capacity,
            timing_only,
            devices: (0..device_count).map(|_| None).collect(),
            streams: HashMap::new(),
            events: HashMap::new(),
            models: HashMap::new(),
            host_allocations: HashMap::new(),
            captures: BTreeMap::new(),
            physical: HashMap::new(),
            peers: HashSet::new(),
            nodes: devices::Nodes::default(),
            next_handle: HANDLE_BASE,
            next_capture: 1,
        }
    }

    fn handle(&mut self) -> usize {
        let h = self.next_handle;
        self.next_handle += HANDLE_STEP;
        h
    }

    // ----- init and devices -----

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

    fn device_index(&self, id: i32) -> Result<usize, Fail> {
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
            CURRENT.with(|c| {
                if c.get() == Some(index) {
                    c.set(None);
                }
            });
        }
        Ok(())
    }

    /// The device bound on this thread.
    fn current(&self, call: &str) -> Result<usize, Fail> {
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

    fn dev(&self, index: usize) -> Result<&Dev, Fail> {
        self.devices
            .get(index)
            .and_then(|d| d.as_ref())
            .ok_or_else(|| fail(ACL_ERROR_RT_CONTEXT_NULL, "the device is not set"))
    }

    fn dev_mut(&mut self, index: usize) -> Result<&mut Dev, Fail> {
        self.devices
            .get_mut(index)
            .and_then(|d| d.as_mut())
            .ok_or_else(|| fail(ACL_ERROR_RT_CONTEXT_NULL, "the device is not set"))
    }

    /// Checks an object of `device` is used with the device bound on this thread.
    fn in_context(&self, call: &str, device: usize) -> Result<(), Fail> {
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
    fn set_dev(&self, call: &str, id: i32) -> Result<&Dev, Fail> {
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

    pub fn mem_info(&self, attr: u32) -> Result<(u64, u64), Fail> {
        let dev = self.dev(self.current("aclrtGetMemInfo")?)?;
        if matches!(attr, ACL_DDR_MEM | ACL_DDR_MEM_HUGE | ACL_DDR_MEM_NORMAL) {
            return Ok((0, 0));
        }
        let info = dev
            .sim
            .mem_info()
            .map_err(|e| sim_fail("aclrtGetMemInfo", e))?;
        Ok((info.free, info.total))
    }

    pub fn synchronize_device(&mut self) -> Result<(), Fail> {
        let index = self.current("aclrtSynchronizeDevice")?;
        self.check_blocking("aclrtSynchronizeDevice", index, None)?;
        self.dev(index)?
            .sim
            .synchronize()
            .map_err(|e| sim_fail("aclrtSynchronizeDevice", e))
    }

    // ----- capture rules -----

    /// Refuses a host-blocking call during a capture that forbids it (107041): always for the
    /// capture's own streams and events, for everything in global mode, and on the capturing
    /// thread in thread-local mode.
    fn check_blocking(&self, call: &str, device: usize, own: Option<u64>) -> Result<(), Fail> {
        for (id, cap) in &self.captures {
            if cap.device != device {
                continue;
            }
            if Some(*id) == own {
                return Err(fail(
                    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC,
                    format!("{call}: synchronizing or querying a stream or event of an active capture is not permitted, ret=107041"),
                ));
            }
            if restricts_this_thread(cap) {
                return Err(fail(
                    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC,
                    format!("{call}: operation not permitted when a stream is capturing and the specified capture mode is not relaxed, ret=107041"),
                ));
            }
        }
        Ok(())
    }

    /// Refuses work on the default stream during a capture that restricts this thread (107031).
    fn check_default_stream(&self, call: &str, device: usize, handle: usize) -> Result<(), Fail> {
        if handle != 0 {
            return Ok(());
        }
        if self
            .captures
            .values()
            .any(|cap| cap.device == device && restricts_this_thread(cap))
        {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                format!(
                    "{call}: disallowed implicit dependency from default stream during capture"
                ),
            ));
        }
        Ok(())
    }

    // ----- streams -----

    fn stream(&self, call: &str, handle: usize) -> Result<StreamRef, Fail> {
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
        Ok(())
    }

    /// Submits one task on `handle` and notes it in the stream's capture.
    fn submit(
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
    pub fn synchronize_stream(&mut self, handle: usize, timeout_ms: i32) -> Result<(), Fail> {
        let call = if timeout_ms < 0 {
            "aclrtSynchronizeStream"
        } else {
            "aclrtSynchronizeStreamWithTimeout"
        };
        let s = self.stream(call, handle)?;
        self.check_blocking(call, s.device, s.capture)?;
        let sim = &self.dev(s.device)?.sim;
        let before = sim.host_time_ns();
        s.sim.synchronize().map_err(|e| sim_fail(call, e))?;
        let waited = sim.host_time_ns().saturating_sub(before);
        if let Ok(limit) = u64::try_from(timeout_ms) {
            if waited > limit.saturating_mul(1_000_000) {
                return Err(fail(
                    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                    format!("{call}: stream synchronize timed out after {timeout_ms} ms"),
                ));
            }
        }
        Ok(())
    }

    pub fn stream_query(&mut self, handle: usize) -> Result<u32, Fail> {
        let s = self.stream("aclrtStreamQuery", handle)?;
        self.check_blocking("aclrtStreamQuery", s.device, s.capture)?;
        let done = s.sim.query().map_err(|e| sim_fail("aclrtStreamQuery", e))?;
        Ok(if done {
            ACL_STREAM_STATUS_COMPLETE
        } else {
            ACL_STREAM_STATUS_NOT_READY
        })
    }

    // ----- events -----

    fn event(&self, call: &str, handle: usize) -> Result<&EventEntry, Fail> {
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
        if e.flags & ACL_EVENT_SYNC == 0 {
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
    fn event_capture(&self, e: &EventEntry) -> Option<u64> {
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

    pub fn synchronize_event(&mut self, event: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtSynchronizeEvent";
        let e = self.event(CALL, event)?;
        self.check_blocking(CALL, e.device, self.event_capture(e))?;
        e.sim.synchronize().map_err(|err| sim_fail(CALL, err))
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

    // ----- memory -----

    pub fn malloc(&mut self, size: usize) -> Result<u64, Fail> {
        const CALL: &str = "aclrtMalloc";
        let device = self.current(CALL)?;
        if size == 0 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                "aclrtMalloc: size must not be 0",
            ));
        }
        let dev = self.dev_mut(device)?;
        let ptr = dev.sim.alloc(size as u64).map_err(|e| sim_fail(CALL, e))?;
        dev.allocations.insert(ptr.0, size as u64);
        Ok(ptr.0)
    }

    pub fn free(&mut self, ptr: u64) -> Result<(), Fail> {
        const CALL: &str = "aclrtFree";
        let device = self.current(CALL)?;
        let dev = self.dev_mut(device)?;
        if dev.allocations.remove(&ptr).is_none() {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("aclrtFree: {ptr:#x} is not a live allocation of device {device}"),
            ));
        }
        // SAFETY: the segment was a live allocation of this device and is forgotten above, so it
        // is freed once.
        unsafe { dev.sim.free(DevicePtr(ptr)) }.map_err(|e| sim_fail(CALL, e))
    }

    /// `aclrtMallocHost`: pinned memory from the current device's simulator.
    pub fn malloc_host(&mut self, size: usize) -> Result<usize, Fail> {
        const CALL: &str = "aclrtMallocHost";
        let device = self.current(CALL)?;
        if size == 0 {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                "aclrtMallocHost: size must not be 0",
            ));
        }
        let ptr = self
            .dev(device)?
            .sim
            .alloc_host(size as u64)
            .map_err(|e| match e {
                HalError::OutOfMemory { .. } => fail(
                    ACL_ERROR_RT_MEMORY_ALLOCATION,
                    format!("{CALL}: host memory exhausted: {e}"),
                ),
                other => sim_fail(CALL, other),
            })?;
        self.host_allocations.insert(ptr.addr(), device);
        Ok(ptr.addr())
    }

    /// `aclrtFreeHost`: waits for the device's work first (the simulator's `free_host`).
    pub fn free_host(&mut self, addr: usize) -> Result<(), Fail> {
        const CALL: &str = "aclrtFreeHost";
        self.current(CALL)?;
        let (Some(ptr), Some(&device)) = (
            HostPtr::new(addr as *mut u8),
            self.host_allocations.get(&addr),
        ) else {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{CALL}: {addr:#x} is not a live aclrtMallocHost allocation"),
            ));
        };
        // SAFETY: `ptr` is a live pinned allocation of that device's simulator (listed above,
        // forgotten below), so it is freed once; the caller promises no queued work still needs
        // it, and the simulator waits for its work anyway.
        unsafe { self.dev(device)?.sim.free_host(ptr) }.map_err(|e| sim_fail(CALL, e))?;
        self.host_allocations.remove(&addr);
        Ok(())
    }

    /// Whether `[addr, addr + len)` lies in a live segment or reservation of the current
    /// device (the simulator counts accesses to unmapped reserved memory as invalid).
    fn is_device(&self, device: usize, addr: u64, len: u64) -> bool {
        let inside = |ranges: &BTreeMap<u64, u64>| {
            ranges
                .range(..=addr)
                .next_back()
                .is_some_and(|(base, size)| addr.saturating_add(len) <= base + size)
        };
        self.dev(device)
            .is_ok_and(|d| inside(&d.allocations) || inside(&d.reservations))
    }

    /// `aclrtMemcpyAsync`.
    ///
    /// # Safety
    /// Host memory among `dst`/`src` (per `kind`) is valid for `count` bytes until the copy has
    /// run (host-to-host copies run at once).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn memcpy_async(
        &mut self,
        dst: u64,
        dst_max: usize,
        src: u64,
        count: usize,
        kind: u32,
        stream: usize,
    ) -> Result<(), Fail> {
        const CALL: &str = "aclrtMemcpyAsync";
        if count > dst_max {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("aclrtMemcpyAsync: count {count} exceeds destMax {dst_max}"),
            ));
        }
        if count > 0 && (dst == 0 || src == 0) {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                "aclrtMemcpyAsync: null pointer",
            ));
        }
        let s = self.stream(CALL, stream)?;
        let len = count as u64;
        let kind = if kind == ACL_MEMCPY_DEFAULT {
            match (
                self.owner(dst, len).is_some(),
                self.owner(src, len).is_some(),
            ) {
                (true, true) => ACL_MEMCPY_DEVICE_TO_DEVICE,
                (true, false) => ACL_MEMCPY_HOST_TO_DEVICE,
                (false, true) => ACL_MEMCPY_DEVICE_TO_HOST,
                (false, false) => ACL_MEMCPY_HOST_TO_HOST,
            }
        } else {
            kind
        };
        match kind {
            ACL_MEMCPY_HOST_TO_HOST => {
                // SAFETY: the caller guarantees both host ranges are valid for `count` bytes;
                // `ptr::copy` allows overlap.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) };
                Ok(())
            }
            ACL_MEMCPY_HOST_TO_DEVICE => self.submit(CALL, stream, |sim| {
                // SAFETY: the caller keeps `src` valid for `count` bytes until the copy runs.
                unsafe { sim.memcpy_h2d(DevicePtr(dst), src as *const u8, len) }
            }),
            ACL_MEMCPY_DEVICE_TO_HOST => self.submit(CALL, stream, |sim| {
                // SAFETY: the caller keeps `dst` valid for writes of `count` bytes until the
                // copy runs.
                unsafe { sim.memcpy_d2h(dst as *mut u8, DevicePtr(src), len) }
            }),
            ACL_MEMCPY_DEVICE_TO_DEVICE => {
                self.check_peer_copy(CALL, s.device, dst, src, len)?;
                self.submit(CALL, stream, |sim| {
                    sim.memcpy_d2d(DevicePtr(dst), DevicePtr(src), len)
                })
            }
            other => Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("aclrtMemcpyAsync: unsupported copy kind {other}"),
            )),
        }
    }

    pub fn memset_async(
        &mut self,
        dst: u64,
        max_count: usize,
        value: i32,
        count: usize,
        stream: usize,
    ) -> Result<(), Fail> {
        if count > max_count {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("aclrtMemsetAsync: count {count} exceeds maxCount {max_count}"),
            ));
        }
        self.submit("aclrtMemsetAsync", stream, |sim| {
            sim.memset(DevicePtr(dst), value as u8, count as u64)
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

    // ----- capture -----

    pub fn capture_begin(&mut self, stream: usize, mode: u32) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRICaptureBegin";
        let braid_mode = match mode {
            CAPTURE_MODE_GLOBAL => CaptureMode::Global,
            CAPTURE_MODE_THREAD_LOCAL => CaptureMode::ThreadLocal,
            CAPTURE_MODE_RELAXED => CaptureMode::Relaxed,
            other => {
                return Err(fail(
                    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                    format!("{CALL}: unknown capture mode {other}"),
                ))
            }
        };
        if stream == 0 {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                "aclmdlRICaptureBegin: capture on the default stream is not supported",
            ));
        }
        let s = self.stream(CALL, stream)?;
        if s.capture.is_some() {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURED,
                "aclmdlRICaptureBegin: the stream is already capturing",
            ));
        }
        s.sim
            .begin_capture(braid_mode)
            .map_err(|e| sim_fail(CALL, e))?;
        let model = self.handle();
        let id = self.next_capture;
        self.next_capture += 1;
        self.models.insert(
            model,
            ModelEntry {
                device: s.device,
                state: ModelState::Capturing,
            },
        );
        self.captures
            .insert(id, CaptureState::new(s.device, stream, mode, model));
        if let Some(e) = self.streams.get_mut(&stream) {
            e.capture = Some(id);
        }
        Ok(())
    }

    pub fn capture_get_info(&self, stream: usize) -> Result<(u32, usize), Fail> {
        let s = self.stream("aclmdlRICaptureGetInfo", stream)?;
        Ok(match s.capture.and_then(|c| self.captures.get(&c)) {
            Some(cap) => (CAPTURE_STATUS_ACTIVE, cap.model),
            None => (CAPTURE_STATUS_NONE, 0),
        })
    }

    /// Ends capture `c` in the simulator and takes every member out of it; returns the state
    /// and the simulator's graph.
    fn finish_capture(
        &mut self,
        c: u64,
        origin: &SimStream,
    ) -> Option<(CaptureState, Result<SimGraph, HalError>)> {
        let cap = self.captures.remove(&c)?;
        let graph = origin.end_capture();
        for m in cap.members.keys() {
            if let Some(e) = self.streams.get_mut(m) {
                e.capture = None;
            }
        }
        if graph.is_err() {
            self.models.remove(&cap.model);
        }
        Some((cap, graph))
    }

    pub fn capture_end(&mut self, stream: usize) -> Result<usize, Fail> {
        const CALL: &str = "aclmdlRICaptureEnd";
        let s = self.stream(CALL, stream)?;
        let Some((c, cap)) = s.capture.and_then(|c| Some((c, self.captures.get(&c)?))) else {
            return Err(fail(
                ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                "aclmdlRICaptureEnd: the stream is not capturing",
            ));
        };
        if cap.origin != stream {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
                "aclmdlRICaptureEnd: the capture must end on the stream that began it",
            ));
        }
        if cap.mode != CAPTURE_MODE_RELAXED && cap.thread != std::thread::current().id() {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                "aclmdlRICaptureEnd: a non-relaxed capture must end on the thread that began it",
            ));
        }
        let unjoined = cap.unjoined();
        let Some((cap, graph)) = self.finish_capture(c, &s.sim) else {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                "aclmdlRICaptureEnd: capture vanished",
            ));
        };
        let graph = graph.map_err(|e| sim_fail(CALL, e))?;
        if !unjoined.is_empty() {
            self.models.remove(&cap.model);
            return Err(fail(
                ACL_ERROR_RT_STREAM_UNJOINED,
                format!(
                    "rtStreamEndCapture execution failed, reason=capture model contains a stream that was not joined to the original stream ({} stream(s))",
                    unjoined.len()
                ),
            ));
        }
        if let Some(m) = self.models.get_mut(&cap.model) {
            m.state = ModelState::Ready(graph);
        }
        Ok(cap.model)
    }

    pub fn model_execute(&mut self, model: usize, stream: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRIExecuteAsync";
        let m = self.models.get(&model).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{CALL}: invalid model handle {model:#x}"),
            )
        })?;
        let ModelState::Ready(graph) = &m.state else {
            return Err(fail(
                ACL_ERROR_RT_MODEL_CAPTURED,
                "aclmdlRIExecuteAsync: the model is still being captured",
            ));
        };
        let (graph, device) = (graph.clone(), m.device);
        self.in_context(CALL, device)?;
        self.submit(CALL, stream, |sim| graph.launch(sim))
    }

    pub fn model_destroy(&mut self, model: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRIDestroy";
        let m = self.models.get(&model).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{CALL}: invalid model handle {model:#x}"),
            )
        })?;
        if matches!(m.state, ModelState::Capturing) {
            return Err(fail(
                ACL_ERROR_RT_MODEL_CAPTURED,
                "aclmdlRIDestroy: the model is still being captured",
            ));
        }
        self.models.remove(&model);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::sim_fail;
    use braid_backend_sim::{CallKind, FaultPlan, SimConfig, SimDevice};
    use braid_stream_core::hal::{Device as _, Stream as _};
    use braid_stream_core::kernel::Kernel;
    use braid_stream_core::types::{DeviceSlice, EventFlags};

    #[test]
    fn injected_simulator_faults_and_limits_become_acl_codes() {
        let plan = FaultPlan::new()
            .fail_nth(CallKind::SegmentAlloc, 1)
            .fail_nth(CallKind::StreamCreate, 1)
            .fail_async_nth(1);
        let sim = SimDevice::new(SimConfig::new().faults(plan).max_events(0));
        let code = |e| sim_fail("call", e).code;
        // ACL_ERROR_RT_DEVICE_OOM, NO_STREAM_RESOURCE, NO_EVENT_RESOURCE, AICORE_EXCEPTION.
        assert_eq!(code(sim.alloc(64).unwrap_err()), 207_018);
        assert_eq!(code(sim.create_stream(0).unwrap_err()), 207_008);
        assert_eq!(
            code(sim.create_event(EventFlags::ORDERING).unwrap_err()),
            207_007
        );
        let s = sim.create_stream(0).unwrap();
        let x = sim.alloc(16).unwrap();
        let fill = Kernel::Fill {
            dst: DeviceSlice::new(x, 16),
            value: 1.0,
        };
        s.launch(&fill.into(), "fails on the device").unwrap();
        assert_eq!(code(s.synchronize().unwrap_err()), 507_015);
    }
}
