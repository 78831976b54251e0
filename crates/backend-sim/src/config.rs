//! Configuration of a simulated device.

use crate::fault::FaultPlan;
use crate::limits::{ASCEND_910B_MAX_EVENTS, ASCEND_910B_MAX_STREAMS};
use crate::profile::DeviceProfile;
use crate::sanitizer::SanitizerMode;
use crate::workspace::WorkspaceSizes;
use std::time::{Duration, Instant};

/// Whether the simulator stores and computes data.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum SimMode {
    /// Every allocation has host backing; kernels, copies and memsets compute real results.
    #[default]
    Data,
    /// No data is stored or computed; only time, memory accounting and ordering are modelled,
    /// so models far larger than host memory can be planned.
    TimingOnly,
}

/// Builder-style configuration of a [`crate::SimDevice`].
///
/// ```
/// use braid_backend_sim::{DeviceProfile, SimConfig, SimMode};
/// let config = SimConfig::new()
///     .ordinal(1)
///     .capacity(64 << 30)
///     .mode(SimMode::TimingOnly)
///     .profile(DeviceProfile::generic_gpu());
/// assert_eq!(config.capacity, 64 << 30);
/// ```
#[derive(Clone, PartialEq, Debug)]
pub struct SimConfig {
    /// Device ordinal reported by `Device::ordinal`.
    pub ordinal: u32,
    /// Device memory capacity in bytes: what the device reports as its total memory and what
    /// can be allocated. By default the profile's [`DeviceProfile::memory_bytes`], and in
    /// data mode at most [`SimConfig::host_memory_budget`] (the device's bytes are host
    /// memory, so what it reports can then be allocated); a capacity set with
    /// [`SimConfig::capacity`] is taken as it is.
    pub capacity: u64,
    /// Whether [`SimConfig::capacity`] set the capacity.
    capacity_is_explicit: bool,
    /// Pinned host memory the device may allocate (`alloc_host`), in bytes.
    pub host_capacity: u64,
    /// In data mode, the most host memory the process's simulated device memory may take,
    /// every device together, in bytes: an allocation past it is
    /// `HalError::HostMemoryExhausted`, before the host runs out
    /// ([`crate::host_budget`]). By default three quarters of what the machine can still give
    /// the process ([`crate::host_budget::default_budget`]). A node's devices take their
    /// first device's.
    pub host_memory_budget: u64,
    /// Data or timing-only simulation.
    pub mode: SimMode,
    /// Cost model numbers.
    pub profile: DeviceProfile,
    /// Whether executed ops are kept in the timeline ([`crate::SimDevice::timeline`]), with
    /// host calls, event flows and memory samples for [`crate::SimDevice::chrome_trace_json`].
    pub record_timeline: bool,
    /// The most records of each kind the timeline keeps (ops; host calls; event markers;
    /// event flows; memory samples; link transfers): a ring, the oldest dropped first and
    /// counted ([`crate::SimDevice::timeline_dropped`]), so a long run's host memory stays
    /// bounded. [`DEFAULT_TIMELINE_CAPACITY`] by default. A node's is its first device's.
    pub timeline_capacity: usize,
    /// What the sanitizer does ([`SanitizerMode::Report`] by default).
    pub sanitizer: SanitizerMode,
    /// Whether the device offers the virtual-memory API (`hal::Device::reserve_address` and
    /// friends, 2 MiB granularity); on by default. Off, it behaves like a backend without one.
    pub virtual_memory: bool,
    /// Backend calls made to fail ([`crate::fault`]); empty (nothing fails) by default.
    pub faults: FaultPlan,
    /// Streams alive at once, the default stream included; ACL's 1984 of an Atlas A2/A3
    /// device by default (see [`crate::limits`]).
    pub max_streams: u32,
    /// Events alive at once; ACL's 65536 of an Atlas A2/A3 device by default (see
    /// [`crate::limits`]).
    pub max_events: u32,
    /// Wall-clock time each enqueued operation (kernel, operator, copy, memset) burns on the
    /// calling host thread, outside the simulator's engine lock: what a real runtime's launch
    /// costs the host (microseconds). Zero by default (the simulator is as fast as it can be);
    /// thread-scaling benches set it so that host threads have real work to overlap.
    pub wall_launch_cost: Duration,
    /// How long a host synchronization (stream, event or device synchronize, elapsed time,
    /// `free_host`) waits for work held back behind a collective whose other ranks have not
    /// issued their part yet, before failing with an error naming them: the simulator's
    /// `HCCL_EXEC_TIMEOUT` (1836 s by default on HCCL, far too long for tests). 5 s by
    /// default; zero fails at once. A node's timeout is its first device's. See
    /// `SimBackend::launch_collective` (the hal's collective extension).
    pub collective_timeout: Duration,
    /// How long a wait on an event opened from another process ([`crate::ipc`]) blocks the
    /// host thread for the exporter to pass the record, before failing with ACL's 507047
    /// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`. 60 s by default. An exporter that has ended fails
    /// the wait at once (`IpcError::ExporterEnded`, naming it). A node's timeout is its first
    /// device's.
    pub ipc_timeout: Duration,
    /// The most threads one kernel computes on in data mode ([`braid_kernels`]'s matrix
    /// products, which split their output between threads); `None` (the default): the
    /// [`THREADS_ENV`] environment variable when it is set, else every core. The numbers
    /// do not depend on it. An invalid value (0, or a variable that is not a positive count)
    /// is refused by name: every kernel launch in data mode fails with
    /// `HalError::InvalidArgument` saying so. A node's is its first device's.
    pub compute_threads: Option<usize>,
    /// Workspace each built-in kernel launch asks for; `None` (the default): none, as the
    /// simulator's kernels need none. A dry run sets the sizes another backend's kernels ask
    /// for, so the caching allocator sees the same requests ([`WorkspaceSizes`]).
    pub workspace_sizes: Option<WorkspaceSizes>,
}

impl SimConfig {
    /// The default configuration: ordinal 0, the Ascend 910B profile
    /// ([`crate::Profile::atlas_800t_a2`]) and its memory (60.97 GiB, what the runtime reports
    /// of the 64 GiB of HBM), 64 GiB of pinned host memory, data mode, timeline on (the newest
    /// [`DEFAULT_TIMELINE_CAPACITY`] records of each kind), sanitizer reporting, no faults,
    /// ACL's stream and event limits, a 5 s collective timeout.
    pub fn new() -> Self {
        SimConfig::for_profile(DeviceProfile::ascend_910b())
    }

    /// The default configuration for a device of `profile`: as [`SimConfig::new`], with the
    /// profile and its memory ([`DeviceProfile::memory_bytes`]) as capacity.
    ///
    /// ```
    /// use braid_backend_sim::{DeviceProfile, SimConfig};
    /// let gpu = SimConfig::for_profile(DeviceProfile::generic_gpu());
    /// assert_eq!(gpu.capacity, gpu.profile.memory_bytes);
    /// ```
    pub fn for_profile(profile: DeviceProfile) -> Self {
        SimConfig {
            ordinal: 0,
            capacity: profile.memory_bytes,
            capacity_is_explicit: false,
            host_capacity: 64 << 30,
            host_memory_budget: crate::host_budget::default_budget(),
            mode: SimMode::Data,
            profile,
            record_timeline: true,
            timeline_capacity: DEFAULT_TIMELINE_CAPACITY,
            sanitizer: SanitizerMode::Report,
            virtual_memory: true,
            faults: FaultPlan::new(),
            max_streams: ASCEND_910B_MAX_STREAMS,
            max_events: ASCEND_910B_MAX_EVENTS,
            wall_launch_cost: Duration::ZERO,
            collective_timeout: DEFAULT_COLLECTIVE_TIMEOUT,
            ipc_timeout: DEFAULT_IPC_TIMEOUT,
            compute_threads: None,
            workspace_sizes: None,
        }
    }

    /// Sets the most threads one kernel computes on (see
    /// [`SimConfig::compute_threads`](SimConfig#structfield.compute_threads)).
    pub fn compute_threads(mut self, threads: usize) -> Self {
        self.compute_threads = Some(threads);
        self
    }

    /// The compute threads this configuration gives, or why it gives none: the field, else
    /// [`THREADS_ENV`] read from `env` (the process's environment in the simulator), else
    /// every core.
    pub(crate) fn resolve_compute_threads(
        &self,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<usize, String> {
        match self.compute_threads {
            Some(0) => Err(
                "SimConfig::compute_threads is 0; it must be at least 1 (or None: every core)"
                    .to_string(),
            ),
            Some(n) => Ok(n),
            None => match env(THREADS_ENV) {
                None => Ok(braid_kernels::all_cores()),
                Some(value) => {
                    let text = value.to_string_lossy();
                    match text.trim().parse::<usize>() {
                        Ok(n) if n > 0 => Ok(n),
                        _ => Err(format!(
                            "{THREADS_ENV}={text:?} is not a thread count: set it to a positive \
                             integer, or unset it to compute on every core"
                        )),
                    }
                }
            },
        }
    }

    /// Sets the workspace each built-in kernel launch asks for.
    pub fn workspace_sizes(mut self, sizes: WorkspaceSizes) -> Self {
        self.workspace_sizes = Some(sizes);
        self
    }

    /// Sets the host-memory budget of data mode, in bytes (see
    /// [`SimConfig::host_memory_budget`]).
    pub fn host_memory_budget(mut self, bytes: u64) -> Self {
        self.host_memory_budget = bytes;
        self
    }

    /// Sets the device ordinal.
    pub fn ordinal(mut self, ordinal: u32) -> Self {
        self.ordinal = ordinal;
        self
    }

    /// Sets the memory capacity in bytes.
    pub fn capacity(mut self, bytes: u64) -> Self {
        self.capacity = bytes;
        self.capacity_is_explicit = true;
        self
    }

    /// The memory a device made from this configuration has (see [`SimConfig::capacity`]).
    ///
    /// ```
    /// use braid_backend_sim::{SimConfig, SimMode};
    /// // The default device (60.97 GiB) in data mode, on a host that can back 8 GiB of it.
    /// let data = SimConfig::new().host_memory_budget(8 << 30);
    /// assert_eq!(data.device_capacity(), 8 << 30);
    /// // A timing-only device keeps no bytes: the profile's memory.
    /// let timing = data.clone().mode(SimMode::TimingOnly);
    /// assert_eq!(timing.device_capacity(), timing.profile.memory_bytes);
    /// // A capacity set explicitly is taken as it is (allocations past the budget are refused).
    /// assert_eq!(data.capacity(32 << 30).device_capacity(), 32 << 30);
    /// ```
    pub fn device_capacity(&self) -> u64 {
        if self.mode == SimMode::Data && !self.capacity_is_explicit {
            self.capacity.min(self.host_memory_budget)
        } else {
            self.capacity
        }
    }

    /// Sets the pinned host memory capacity in bytes.
    pub fn host_capacity(mut self, bytes: u64) -> Self {
        self.host_capacity = bytes;
        self
    }

    /// Sets data or timing-only mode.
    pub fn mode(mut self, mode: SimMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the device profile. The capacity stays as it is (see [`SimConfig::for_profile`]
    /// to start from the profile's memory).
    pub fn profile(mut self, profile: DeviceProfile) -> Self {
        self.profile = profile;
        self
    }

    /// Sets what the sanitizer does.
    pub fn sanitizer(mut self, mode: SanitizerMode) -> Self {
        self.sanitizer = mode;
        self
    }

    /// Turns the virtual-memory API on or off.
    pub fn virtual_memory(mut self, on: bool) -> Self {
        self.virtual_memory = on;
        self
    }

    /// Sets the calls made to fail ([`crate::fault`]).
    pub fn faults(mut self, plan: FaultPlan) -> Self {
        self.faults = plan;
        self
    }

    /// Sets how many streams may be alive at once, the default stream included.
    pub fn max_streams(mut self, n: u32) -> Self {
        self.max_streams = n;
        self
    }

    /// Sets how many events may be alive at once.
    pub fn max_events(mut self, n: u32) -> Self {
        self.max_events = n;
        self
    }

    /// Turns keeping the timeline of executed ops on or off.
    pub fn record_timeline(mut self, on: bool) -> Self {
        self.record_timeline = on;
        self
    }

    /// Sets [`SimConfig::timeline_capacity`](SimConfig#structfield.timeline_capacity): the
    /// most records of each kind the timeline keeps (`usize::MAX`: everything).
    pub fn timeline_capacity(mut self, records: usize) -> Self {
        self.timeline_capacity = records;
        self
    }

    /// Sets the wall-clock time each enqueued operation burns on the host (see
    /// [`SimConfig::wall_launch_cost`](SimConfig#structfield.wall_launch_cost)).
    pub fn wall_launch_cost(mut self, cost: Duration) -> Self {
        self.wall_launch_cost = cost;
        self
    }

    /// Sets how long a host synchronization waits for the other ranks of a collective (see
    /// [`SimConfig::collective_timeout`](SimConfig#structfield.collective_timeout)).
    pub fn collective_timeout(mut self, timeout: Duration) -> Self {
        self.collective_timeout = timeout;
        self
    }

    /// Sets how long a wait on an event of another process blocks (see
    /// [`SimConfig::ipc_timeout`](SimConfig#structfield.ipc_timeout)).
    pub fn ipc_timeout(mut self, timeout: Duration) -> Self {
        self.ipc_timeout = timeout;
        self
    }
}

/// Environment variable: the most threads one kernel computes on, a positive integer, when
/// [`SimConfig::compute_threads`](SimConfig#structfield.compute_threads) is `None` (unset:
/// every core).
pub const THREADS_ENV: &str = "BRAID_SIM_THREADS";

/// The default [`SimConfig::collective_timeout`](SimConfig#structfield.collective_timeout).
pub const DEFAULT_COLLECTIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The default [`SimConfig::ipc_timeout`](SimConfig#structfield.ipc_timeout).
pub const DEFAULT_IPC_TIMEOUT: Duration = Duration::from_secs(60);

/// The default [`SimConfig::timeline_capacity`](SimConfig#structfield.timeline_capacity):
/// 100 000 records of each kind, about 50 MB for a program of kernels, events and
/// allocations (about 700 host bytes per op kept, measured by `tests/backend_sim/timeline_cap.rs`), enough for every op of the examples and
/// tests and the latest 100 000 of a longer run.
pub const DEFAULT_TIMELINE_CAPACITY: usize = 100_000;

/// Keeps the calling thread busy for `cost` of wall-clock time (a spin, as a driver's launch
/// path is CPU work, not sleep).
pub(crate) fn burn_wall_time(cost: Duration) {
    if cost.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < cost {
        std::hint::spin_loop();
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn threads(field: Option<usize>, env: Option<&str>) -> Result<usize, String> {
        let config = SimConfig {
            compute_threads: field,
            ..SimConfig::new()
        };
        config.resolve_compute_threads(|k| {
            assert_eq!(k, THREADS_ENV);
            env.map(OsString::from)
        })
    }

    #[test]
    fn compute_threads_come_from_the_field_then_the_variable_then_every_core() {
        assert_eq!(threads(None, None), Ok(braid_kernels::all_cores()));
        assert_eq!(threads(None, Some("3")), Ok(3));
        assert_eq!(threads(None, Some(" 2 ")), Ok(2));
        assert_eq!(threads(Some(5), Some("3")), Ok(5));
        for bad in ["0", "", " ", "two", "-1", "1.5"] {
            let err = threads(None, Some(bad)).unwrap_err();
            assert!(
                err.contains("BRAID_SIM_THREADS") && err.contains(bad),
                "{err}"
            );
        }
        let err = threads(Some(0), None).unwrap_err();
        assert!(err.contains("SimConfig::compute_threads"), "{err}");
    }
}
