//! The simulated runtime's state: devices, handles, captures, and ACL's rules over them.
//!
//! Everything lives in one process-wide registry behind a mutex. Handles given to the caller
//! are opaque numbers (never dereferenced), looked up here, so a stale or foreign handle is an
//! error code, not a crash. Simulated work is virtual-time, so holding the lock across a
//! "synchronize" never blocks for real.
//!
//! This module holds the state; its rooms hold the calls on it:
//!
//! | module | calls |
//! |---|---|
//! | `context` | `aclInit`, set and reset devices, the thread's current device, device-wide calls |
//! | `devices` | the simulated nodes the devices live in, peer access |
//! | `streams` | streams and the one path of every task onto a stream |
//! | `events` | events: record, wait (also across devices), query, timing |
//! | `failures` | a refused launch fails its device's later host waits (never silent zeros) |
//! | `memory` | device and pinned host memory, copies and fills |
//! | `vmm` | the virtual-memory API |
//! | `ipc` | memory, physical memory and events shared with other processes |
//! | `models` | captures into models, the rules an active capture sets, model execution |
//! | `collective` | what HCCL's exports need: communicators' devices, collectives on ACL streams |
//! | `reports` | host callbacks: the stream a subscription names, a callback's task |
//! | `waits` | host waits (synchronizes, blocking copies), run outside the registry's lock; they wait for the blocking host callbacks they cover |
//! | `system` | what clients ask of the runtime and the SoC: its name and capabilities, system parameters, overflow mode, timeouts, finalization |

use crate::capture::{CaptureState, Clock};
use crate::codes::*;
use crate::errmsg::{fail, guarded, Fail};
use crate::settings::Settings;
use braid_backend_sim::{SimDevice, SimEvent, SimGraph, SimStream};
use braid_stream_core::hal::HalError;
use braid_stream_core::sync::GlobalMutex;
use braid_stream_core::IpcError;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;
use vmm::Physical;

mod collective;
mod context;
mod devices;
mod events;
mod failures;
mod ipc;
mod memory;
mod models;
mod reports;

pub(crate) use models::exchange_thread_mode;
mod streams;
mod system;
mod task_groups;
mod vmm;
mod waits;

pub(crate) use vmm::RESERVE_GRANULARITY;
pub(crate) use waits::with_then_wait;

/// First handle value; handles step by 0x40 so they look like (and are as distinct as) pointers.
const HANDLE_BASE: usize = 0x0ac1_0000;
const HANDLE_STEP: usize = 0x40;

thread_local! {
    /// The device `aclrtSetDevice` bound on this thread.
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The calling thread's current device, and a scope that makes another one current: HCCL's
/// group (`hccl::group`) issues each held call under the device current when it was made.
pub(crate) fn current_device() -> Option<usize> {
    CURRENT.with(|c| c.get())
}

/// Runs `f` with `device` as the calling thread's current device, then restores the one
/// before.
pub(crate) fn with_current_device<T>(device: Option<usize>, f: impl FnOnce() -> T) -> T {
    let before = CURRENT.with(|c| c.replace(device));
    let out = f();
    CURRENT.with(|c| c.set(before));
    out
}

struct Dev {
    sim: SimDevice,
    default_stream: SimStream,
    /// The handle of the device's (default) context.
    context: usize,
    /// `aclrtCtxSetSysParamOpt` values of the context, by option.
    context_params: BTreeMap<i32, i64>,
    refcount: u64,
    /// Live segments: address → size.
    allocations: BTreeMap<u64, u64>,
    /// Live address reservations: address → size.
    reservations: BTreeMap<u64, u64>,
    /// The first launch refused on the device (`failures`): every later host wait fails.
    refused: Option<Fail>,
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
    /// `aclmdlRIGetId`'s answer: unique among the process's models.
    id: u32,
    state: ModelState,
}

/// The whole simulated runtime.
pub(crate) struct Registry {
    initialized: bool,
    device_count: usize,
    /// Memory of each device when set explicitly; else the simulator's default (the
    /// profile's memory, for a computing device at most the host-memory budget:
    /// `SimConfig::device_capacity`).
    capacity: Option<u64>,
    /// What the runtime says of itself and the SoC, and the process-wide parameters.
    system: system::System,
    /// Per device: whether it runs timing-only.
    timing_only: Vec<bool>,
    /// The simulated nodes' collective timeout.
    collective_timeout: std::time::Duration,
    /// The host-memory budget of the devices' data.
    host_memory: u64,
    /// The profile the simulated devices and their node take.
    profile: braid_backend_sim::Profile,
    devices: Vec<Option<Dev>>,
    streams: HashMap<usize, StreamEntry>,
    /// The handles of destroyed streams by (device, simulator stream index): their work
    /// stays in the race report and the timeline, named with the handle it ran on.
    retired_streams: crate::outputs::StreamNames,
    events: HashMap<usize, EventEntry>,
    models: HashMap<usize, ModelEntry>,
    /// Live `aclrtMallocHost` allocations: address → the device whose simulator holds them.
    host_allocations: HashMap<usize, usize>,
    /// Host ranges registered with `aclrtHostRegisterV2`: address → size.
    registered_host: BTreeMap<u64, u64>,
    captures: BTreeMap<u64, CaptureState>,
    /// Physical memory handles of the virtual-memory API.
    physical: HashMap<usize, vmm::Physical>,
    /// Enabled peer access: (device, peer) means `device` may access `peer`'s memory.
    peers: HashSet<(usize, usize)>,
    /// The simulated nodes, made at first use: the devices computing data, and the
    /// timing-only ones (`devices::Nodes`).
    nodes: devices::Nodes,
    /// Keys this process exported or imported (`ipc`).
    ipc: ipc::IpcRoom,
    next_handle: usize,
    next_capture: u64,
    /// Task groups (`aclrtTaskGrp` handles): their device and the simulator's group.
    task_groups: HashMap<usize, (usize, braid_stream_core::hal::TaskGroupHandle)>,
}

/// The process-wide registry, made from the environment's [`Settings`] at first use; invalid
/// settings are the failure every call returns (`ACL_ERROR_INVALID_PARAM`, the text naming
/// the variable and its value). The failure is also printed once on stderr: a client that
/// swallows the error of its first call (torch_npu counts no devices then) leaves the user
/// nothing else to go by.
fn registry() -> &'static Result<GlobalMutex<Registry>, Fail> {
    static REGISTRY: OnceLock<Result<GlobalMutex<Registry>, Fail>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Settings::from_env(|k| std::env::var_os(k))
            .map(|settings| GlobalMutex::new(Registry::new(settings)))
            .map_err(|e| {
                eprintln!("{e}");
                fail(ACL_ERROR_INVALID_PARAM, e.to_string())
            })
    })
}

/// Runs `f` on the process-wide registry.
/// A panic inside `f` fails the call with ACL's internal error ([`guarded`]) and leaves the
/// registry usable by the next call.
pub(crate) fn with<R>(f: impl FnOnce(&mut Registry) -> Result<R, Fail>) -> Result<R, Fail> {
    let m = registry().as_ref().map_err(Clone::clone)?;
    let mut registry = m.lock();
    guarded(|| f(&mut registry))
}

/// Runs `f` on the registry if it is free now; `None` when another thread holds it (at
/// process exit, a thread may be stopped inside a call: waiting would never end).
pub(crate) fn try_with<R>(f: impl FnOnce(&mut Registry) -> R) -> Option<R> {
    let m = registry().as_ref().ok()?;
    let mut guard = m.try_lock()?;
    Some(f(&mut guard))
}

/// A simulator error as an ACL failure of `call`: its code and its text.
fn sim_fail(call: &str, e: HalError) -> Fail {
    let code = match &e {
        HalError::OutOfMemory { .. } | HalError::HostMemoryExhausted { .. } => {
            ACL_ERROR_RT_DEVICE_OOM
        }
        // A kernel the simulator could not compute in the host's memory.
        HalError::HostOutOfMemory { .. } => ACL_ERROR_RT_MEMORY_ALLOCATION,
        HalError::InvalidArgument(_) | HalError::CollectiveMismatch(_) => {
            ACL_ERROR_RT_PARAM_INVALID
        }
        HalError::Unsupported(_) | HalError::UnsupportedOperator(_) => {
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        }
        HalError::Native { code, .. } | HalError::NativeInvalidArgument { code, .. } => *code,
        HalError::CaptureRefused(_) => ACL_ERROR_RT_CAPTURE_DEPENDENCY,
        // The shared-memory directory is full: host memory the runtime could not get.
        HalError::Ipc(ipc) if matches!(**ipc, IpcError::NoSpace { .. }) => {
            ACL_ERROR_RT_MEMORY_ALLOCATION
        }
        // A file of another process that is unusable, or whose exporter has ended.
        HalError::Ipc(_) => ACL_ERROR_RT_PARAM_INVALID,
        // What the runtime gives a wait on a collective some ranks never issued: a timeout.
        HalError::CollectiveIncomplete(_) if call.contains("Event") => {
            ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
        }
        HalError::CollectiveIncomplete(_) => ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
    };
    fail(code, format!("{call}: {e}"))
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
            profile,
            device_count,
            capacity,
            capacity_is_explicit,
            timing_only,
            soc,
            race_report,
            timeline,
            collective_timeout,
            host_memory,
        } = settings;
        Registry {
            initialized: false,
            device_count,
            capacity: capacity_is_explicit.then_some(capacity),
            system: system::System::new(soc, race_report, timeline),
            timing_only,
            collective_timeout,
            host_memory,
            profile,
            devices: (0..device_count).map(|_| None).collect(),
            streams: HashMap::new(),
            retired_streams: HashMap::new(),
            events: HashMap::new(),
            models: HashMap::new(),
            host_allocations: HashMap::new(),
            registered_host: BTreeMap::new(),
            captures: BTreeMap::new(),
            physical: HashMap::new(),
            peers: HashSet::new(),
            nodes: devices::Nodes::default(),
            ipc: ipc::IpcRoom::default(),
            next_handle: HANDLE_BASE,
            next_capture: 1,
            task_groups: HashMap::new(),
        }
    }

    fn handle(&mut self) -> usize {
        let h = self.next_handle;
        self.next_handle += HANDLE_STEP;
        h
    }
}

#[cfg(test)]
mod tests {
    use super::{sim_fail, with};
    use braid_backend_sim::{CallKind, FaultPlan, SimConfig, SimDevice};
    use braid_stream_core::hal::{Device as _, Stream as _};
    use braid_stream_core::kernel::Kernel;
    use braid_stream_core::types::{DeviceSlice, EventFlags};

    #[test]
    fn a_panic_inside_a_call_fails_that_call_and_the_registry_still_serves() {
        let failed = with(|_| -> Result<(), _> { panic!("a bug in a registry call") });
        let f = failed.unwrap_err();
        assert_eq!(f.code, crate::codes::ACL_ERROR_INTERNAL_ERROR);
        assert!(
            f.message.contains("a bug in a registry call"),
            "{}",
            f.message
        );
        assert_eq!(with(|r| Ok(r.handle() > 0)), Ok(true));
    }

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

    #[test]
    fn typed_ipc_refusals_become_acl_codes_keeping_their_text() {
        use braid_stream_core::hal::HalError;
        use braid_stream_core::IpcError;
        let no_space = HalError::Ipc(Box::new(IpcError::NoSpace {
            dir: "/dev/shm".into(),
            variable: "BRAID_SIM_IPC_DIR",
            needed: 1 << 30,
            free: 1 << 20,
        }));
        let f = sim_fail("aclrtIpcMemGetExportKey", no_space);
        assert_eq!(f.code, 207_001, "ACL_ERROR_RT_MEMORY_ALLOCATION");
        assert!(
            f.message.contains("/dev/shm") && f.message.contains("BRAID_SIM_IPC_DIR"),
            "{}",
            f.message
        );
        let ended = HalError::Ipc(Box::new(IpcError::ExporterEnded {
            key: "braid-sim-ipc-7-1".into(),
            pid: 7,
        }));
        let f = sim_fail("aclrtStreamWaitEvent", ended);
        assert_eq!(f.code, 107_000, "ACL_ERROR_RT_PARAM_INVALID");
        assert!(f.message.contains("process 7"), "{}", f.message);
    }

    #[test]
    fn an_operator_whose_body_fails_is_an_aicore_exception_naming_it() {
        use braid_backend_sim::{host_op, SimBackend};
        use braid_stream_core::CustomOp;
        use std::ffi::CStr;
        let sim = SimDevice::new(SimConfig::new());
        let s = sim.create_stream(0).unwrap();
        let x = sim.alloc(16).unwrap();
        // An aclnn operator's body computing over a shape it was not given indexes past its
        // slice; the launch succeeds, as the real kernel's would.
        let op = CustomOp::<SimBackend>::new("aclnnOverrun")
            .write(DeviceSlice::new(x, 16))
            .body(host_op(|_, outputs| outputs[0][16] = 1));
        s.launch_operator(&op.lower()).unwrap();
        let err = s.synchronize().unwrap_err();
        let code = crate::errmsg::ret(Err(sim_fail("aclrtSynchronizeStream", err)));
        assert_eq!(code, 507_015, "ACL_ERROR_RT_AICORE_EXCEPTION");
        let recent = crate::errmsg::take_recent();
        assert!(!recent.is_null());
        // SAFETY: a NUL-terminated string owned by this thread until the next fetch.
        let text = unsafe { CStr::from_ptr(recent) }
            .to_string_lossy()
            .into_owned();
        assert!(
            text.contains("aclrtSynchronizeStream")
                && text.contains("`aclnnOverrun`")
                && text.contains("index out of bounds"),
            "{text}"
        );
        assert!(s.synchronize().is_ok(), "reported once");
    }
}
