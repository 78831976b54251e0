//! [`SimDevice`]: the hal device, and the simulator's observability API.

use crate::collective::HostWait;
use crate::config::SimConfig;
use crate::engine::Engine;
use crate::event::SimEvent;
use crate::fault::{CallKind, FaultCounts, FaultPlan, Verdict};
use crate::memory::PageRun;
use crate::profile::DeviceProfile;
use crate::queue::Drained;
use crate::sanitizer::report::RaceReport;
use crate::stream::SimStream;
use crate::timeline::{OpRecord, SimStats};
use crate::SimBackend;
use braid_stream_core::hal::{self, page_of_run, HalError, PageRunError};
use braid_stream_core::sync::{Mutex, MutexGuard};
use braid_stream_core::types::{DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo, Priority};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every handle of a device holds: its node's engine (shared by all devices of the
/// node) and the device's index in the node.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub engine: Arc<Mutex<Engine>>,
    pub device: u32,
}

impl Shared {
    /// Whether `self` and `other` are handles of one node.
    pub fn same_node(&self, other: &Shared) -> bool {
        Arc::ptr_eq(&self.engine, &other.engine)
    }
}

/// Locks the engine for a call of the handle's device (which becomes the engine's current
/// device).
pub(crate) fn lock_engine(shared: &Shared) -> EngineGuard<'_> {
    let mut engine = shared.engine.lock();
    engine.set_current(shared.device);
    EngineGuard {
        guard: Some(engine),
        shared,
    }
}

/// The engine, locked for one call of a device's handle.
///
/// Kernels are computed outside the lock ([`crate::job`]): a call's drains stop at a kernel
/// not computed yet, and when the guard goes (the call has returned its result, but not yet
/// to its caller) the thread computes its device's kernels that no thread has taken, with
/// the lock released, and applies what they give. So a long kernel never holds up other
/// threads' calls, and each device's host threads do its computing. A kernel that can write
/// its outputs in place is left until the drain reaches its end (then it writes them in
/// place), unless the drain waits for another device's kernel: then this thread computes
/// its own side by side with that one.
pub(crate) struct EngineGuard<'a> {
    /// `None` only while the lock is released (inside [`EngineGuard::unlocked`]).
    guard: Option<MutexGuard<'a, Engine>>,
    shared: &'a Shared,
}

impl std::ops::Deref for EngineGuard<'_> {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        self.guard.as_deref().expect("the engine is locked")
    }
}

impl std::ops::DerefMut for EngineGuard<'_> {
    fn deref_mut(&mut self) -> &mut Engine {
        self.guard.as_deref_mut().expect("the engine is locked")
    }
}

impl<'a> EngineGuard<'a> {
    /// The lock's guard (to wait on a condition variable with it).
    fn guard(&mut self) -> &mut MutexGuard<'a, Engine> {
        self.guard.as_mut().expect("the engine is locked")
    }

    /// Runs `f` with the lock released, then locks again (the handle's device current).
    fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        drop(self.guard.take());
        let result = f();
        let mut engine = self.shared.engine.lock();
        engine.set_current(self.shared.device);
        self.guard = Some(engine);
        result
    }

    /// Applies the data effects due by `to`, computing the kernels among them (or waiting
    /// for the threads computing them) with the lock released. Whether it released the lock.
    fn settle_to(&mut self, to: u64) -> bool {
        let mut released = false;
        while let Drained::Stalled(cell) = self.drain_to(to) {
            self.unlocked(|| cell.run_or_wait());
            released = true;
        }
        released
    }

    /// The engine for a call that changes memory outside the data queue (a free, an unmap,
    /// sharing with other processes): every effect due is applied before it, the kernels
    /// among them computed with the lock released (those falling due during the call itself
    /// are computed in place).
    pub(crate) fn settled(mut self) -> Self {
        let now = self.host_now();
        self.settle_to(now);
        self.drain_all = true;
        self
    }
}

impl Drop for EngineGuard<'_> {
    fn drop(&mut self) {
        let Some(engine) = self.guard.as_mut() else {
            return;
        };
        engine.drain_all = false;
        if std::thread::panicking() {
            return;
        }
        let device = self.shared.device as usize;
        loop {
            let now = self.host_now();
            let job = match self.drain_to(now) {
                Drained::Stalled(cell) if cell.device == device && cell.is_ready() => Some(cell),
                // Another device's kernel, or one a thread computes: its effects wait for it;
                // this thread takes a kernel of its device no one has, if there is one.
                Drained::Stalled(_) => self.ready_job(true),
                // Nothing waits: a kernel that can write in place waits for its end.
                Drained::All => self.ready_job(false),
            };
            match job {
                Some(cell) => self.unlocked(|| cell.run_if_ready()),
                None => return,
            };
        }
    }
}

/// Locks the engine for a call of `kind`, after asking the fault plan (one branch when none
/// is set): an injected failure comes back as its error, with nothing done.
#[inline]
pub(crate) fn checked(shared: &Shared, kind: CallKind) -> Result<EngineGuard<'_>, HalError> {
    checked_for(shared, kind, 0)
}

/// [`checked`] for a call asking for `requested` bytes (named by an out-of-memory failure).
#[inline]
pub(crate) fn checked_for(
    shared: &Shared,
    kind: CallKind,
    requested: u64,
) -> Result<EngineGuard<'_>, HalError> {
    let mut engine = lock_engine(shared);
    fault_check(&mut engine, kind, requested)?;
    Ok(engine)
}

/// Asks the fault plan about a call of `kind` on the locked engine.
#[inline]
fn fault_check(engine: &mut Engine, kind: CallKind, requested: u64) -> Result<(), HalError> {
    if engine.faults().armed() && engine.faults().decide(kind, false) == Verdict::Fail {
        return Err(engine.fault_error(kind, requested));
    }
    Ok(())
}

/// Runs the host synchronization `call` of `kind` (asking the fault plan first when `kind`
/// is given), which waits on `what`. While `what` waits on work held back behind a collective
/// that another host thread may still release by submitting its rank's part
/// ([`Engine::may_be_released`]), the engine lock is released and the calling thread waits
/// for it, up to the node's collective timeout ([`SimConfig::collective_timeout`]); then
/// `call` runs, and fails naming the missing ranks if the work is still held back (its
/// error then says how long it waited).
pub(crate) fn host_wait<T>(
    shared: &Shared,
    kind: Option<CallKind>,
    what: HostWait,
    call: impl FnOnce(&mut Engine) -> Result<T, HalError>,
) -> Result<T, HalError> {
    let mut engine = match kind {
        Some(kind) => checked(shared, kind)?,
        None => lock_engine(shared),
    };
    let timeout = engine.collective_timeout();
    let mut waited = None;
    if !timeout.is_zero() && engine.may_be_released(what) {
        let start = Instant::now();
        // `None`: a timeout too long to add to the clock waits without end.
        let deadline = start.checked_add(timeout);
        let progress = engine.progress();
        loop {
            engine.reach_gates(what);
            // What the work before a gate reports is a host body (a host callback's task),
            // computed outside the lock like every kernel: compute what is due by now, or no
            // thread may ever run it and open the gate.
            let now = engine.host_now();
            let released = engine.settle_to(now);
            let left = deadline.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                waited = Some(start.elapsed());
                break;
            }
            // With the lock released meanwhile, a release may have gone by: look again first.
            if !released {
                progress.wait_for(engine.guard(), left);
            }
            // Other threads' calls made their devices current meanwhile.
            engine.set_current(shared.device);
            if !engine.may_be_released(what) {
                break;
            }
        }
    }
    // The kernels the synchronization waits for are computed first, with the lock released
    // (other threads may add work meanwhile: until no kernel is left before the horizon).
    while let Some(to) = engine.wait_horizon(what) {
        if !engine.settle_to(to) {
            break;
        }
    }
    let result = call(&mut engine).map_err(|error| match (error, waited) {
        (HalError::CollectiveIncomplete(mut e), Some(w)) => {
            e.waited = Some(w);
            HalError::CollectiveIncomplete(e)
        }
        (error, _) => error,
    });
    if let Err(error @ HalError::CollectiveIncomplete(_)) = &result {
        engine.note_incomplete(what, error);
    }
    result
}

/// A run of `count` page calls made one by one while a fault plan is set, each asking the
/// plan as a `kind` call of `page` bytes; `one` does call `i`. Stops at the first failure.
#[cold]
fn page_by_page(
    engine: &mut Engine,
    kind: CallKind,
    page: u64,
    count: u64,
    mut one: impl FnMut(&mut Engine, u64) -> Result<(), HalError>,
) -> Result<(), PageRunError> {
    for done in 0..count {
        fault_check(engine, kind, page)
            .and_then(|()| one(engine, done))
            .map_err(|error| PageRunError { done, error })?;
    }
    Ok(())
}

/// A page-run result of the engine as the hal's.
fn page_run((done, result): PageRun) -> Result<(), PageRunError> {
    result.map_err(|error| PageRunError { done, error })
}

/// Whether two handles belong to one simulated node (devices of one node share their
/// virtual time axis, so their events interoperate).
pub(crate) fn same_node(a: &Shared, b: &Shared) -> Result<(), HalError> {
    if a.same_node(b) {
        Ok(())
    } else {
        Err(HalError::InvalidArgument(
            "the objects belong to different simulated nodes (devices made by separate SimDevice::new or SimNode::new calls share nothing)".to_string(),
        ))
    }
}

/// Whether two handles belong to the same simulated device.
pub(crate) fn same_device(a: &Shared, b: &Shared) -> Result<(), HalError> {
    same_node(a, b)?;
    if a.device == b.device {
        return Ok(());
    }
    let engine = lock_engine(a);
    Err(HalError::InvalidArgument(format!(
        "the objects belong to different devices of one node: device {} and device {}",
        engine.ordinal_of(a.device),
        engine.ordinal_of(b.device)
    )))
}

/// A simulated accelerator. Cloning gives another handle to the same device.
///
/// All handles (device, streams, events, graphs) share one engine behind a mutex, so any number
/// of host threads may drive the device at once. A device made with [`SimDevice::new`] is a
/// node of one; the devices of a [`crate::SimNode`] share one engine (one virtual time axis,
/// data store and sanitizer), each with its own host clock, resources, memory and addresses.
#[derive(Clone, Debug)]
pub struct SimDevice {
    pub(crate) shared: Shared,
    ordinal: u32,
    /// Whether sub-allocation notes have a consumer (fixed by the configuration).
    wants_notes: bool,
    /// Whether the virtual-memory API is offered (fixed by the configuration).
    virtual_memory: bool,
}

impl SimDevice {
    /// A fresh device: host time 0, nothing allocated, only the default stream. It is a node
    /// of one (see [`crate::SimNode`]); its ordinal is the configuration's.
    pub fn new(config: SimConfig) -> SimDevice {
        let engine = Arc::new(Mutex::new(Engine::new(config.clone())));
        SimDevice::in_node(engine, 0, &config)
    }

    /// The handle of device `index` of the node of `engine`, made with `config`.
    pub(crate) fn in_node(engine: Arc<Mutex<Engine>>, index: u32, config: &SimConfig) -> Self {
        SimDevice {
            shared: Shared {
                engine,
                device: index,
            },
            ordinal: config.ordinal,
            // The notes feed the sanitizer and the timeline's allocated-memory counter.
            wants_notes: config.sanitizer != crate::SanitizerMode::Off || config.record_timeline,
            virtual_memory: config.virtual_memory,
        }
    }

    /// Index of the device in its node (0 for a device made with [`SimDevice::new`]).
    pub fn index_in_node(&self) -> u32 {
        self.shared.device
    }

    /// Current virtual host time of this device's host, in nanoseconds (each device of a node
    /// has its own host clock: it is driven as if by its own host thread or process).
    pub fn host_time_ns(&self) -> u64 {
        lock_engine(&self.shared).host_ns()
    }

    /// Every executed op of this device in submission order (empty when the configuration
    /// turned the timeline off). [`crate::SimNode::timeline`] has those of all devices.
    pub fn timeline(&self) -> Vec<OpRecord> {
        let engine = lock_engine(&self.shared);
        let ordinal = engine.config().ordinal;
        engine
            .timeline()
            .iter()
            .filter(|op| op.device == ordinal)
            .cloned()
            .collect()
    }

    /// Ops dropped from the timeline so far to keep it within
    /// [`SimConfig::timeline_capacity`](crate::SimConfig#structfield.timeline_capacity) (the
    /// oldest go first; for a device of a [`crate::SimNode`], the node's whole timeline).
    pub fn timeline_dropped(&self) -> u64 {
        lock_engine(&self.shared).timeline().dropped()
    }

    /// Latest end time of any op of this device submitted so far, in nanoseconds.
    pub fn makespan_ns(&self) -> u64 {
        lock_engine(&self.shared).makespan()
    }

    /// Counters of this device: ops executed, graph launches, memory, invalid accesses.
    pub fn stats(&self) -> SimStats {
        lock_engine(&self.shared).stats()
    }

    /// The device profile the cost model uses.
    pub fn profile(&self) -> DeviceProfile {
        lock_engine(&self.shared).config().profile.clone()
    }

    /// The configuration the device was created with.
    pub fn config(&self) -> SimConfig {
        lock_engine(&self.shared).config().clone()
    }

    /// The sanitizer's reports so far (at most the first 10,000 are kept; see
    /// [`SimDevice::sanitizer_report_count`]). Empty when the sanitizer is off. The devices of
    /// a node share one sanitizer: these are the node's reports, each op named with its
    /// device.
    pub fn sanitizer_reports(&self) -> Vec<RaceReport> {
        lock_engine(&self.shared).sanitizer_reports()
    }

    /// How many reports the sanitizer has made, including any not kept.
    pub fn sanitizer_report_count(&self) -> u64 {
        lock_engine(&self.shared).sanitizer_report_count()
    }

    /// Forgets the sanitizer's reports (the happens-before state is kept).
    pub fn clear_sanitizer_reports(&self) {
        lock_engine(&self.shared).clear_sanitizer_reports();
    }

    /// Declares that a sub-allocator (a caching allocator working inside device segments)
    /// handed out `range`, for use first on stream `stream` (a [`crate::SimStream::index`]).
    ///
    /// A sub-allocator tells the sanitizer when it hands out and takes back a range, so reuse
    /// of a block becomes visible: once a segment has a declared block, only its live blocks
    /// count as allocated, an access to a taken-back block is a use after free, and an access
    /// that is not ordered after an access from an earlier lifetime of the same bytes is
    /// reported as [`crate::RaceKind::UseAfterFree`]. A block handed out over freed bytes
    /// belongs to work ordered after `stream`'s work so far: a conflicting access that is not
    /// is a stale pointer to the freed buffer, reported as a use after free naming the free
    /// (not as a race with the new owner). Costs no virtual time.
    ///
    /// Errors: `range` is empty, not inside one live segment, or overlaps a live block.
    pub fn sanitizer_note_alloc(&self, range: DeviceSlice, stream: u32) -> Result<(), HalError> {
        lock_engine(&self.shared).note_alloc(range, stream)
    }

    /// Declares that a sub-allocator took back `range` (exactly as declared by
    /// [`SimDevice::sanitizer_note_alloc`]), at `stream`'s current position. Until it is handed
    /// out again, accesses to it are reported as uses after free. Costs no virtual time.
    ///
    /// Errors: `range` is not a live declared block.
    pub fn sanitizer_note_free(&self, range: DeviceSlice, stream: u32) -> Result<(), HalError> {
        lock_engine(&self.shared).note_free(range, stream)
    }

    /// Replaces the fault plan ([`crate::fault`]); an empty plan stops injecting. Counting for
    /// [`FaultPlan::fail_nth`] restarts; the counters of [`SimDevice::fault_counts`] and
    /// asynchronous failures not reported yet are kept.
    pub fn set_fault_plan(&self, plan: &FaultPlan) {
        lock_engine(&self.shared).faults().set_plan(plan);
    }

    /// How many calls of each kind were seen while a plan was set, and how many were made to
    /// fail.
    pub fn fault_counts(&self) -> FaultCounts {
        lock_engine(&self.shared).faults().counts()
    }

    /// Streams alive now (with a handle), the default stream included; see
    /// [`crate::limits`].
    pub fn live_streams(&self) -> u32 {
        lock_engine(&self.shared).limits().live().0
    }

    /// Events alive now (with a handle); see [`crate::limits`].
    pub fn live_events(&self) -> u32 {
        lock_engine(&self.shared).limits().live().1
    }

    /// Allocates `size` bytes of physical memory (a multiple of the 2 MiB virtual-memory
    /// granularity) for [`SimDevice::map_handle`], as ACL's `aclrtMallocPhysical`; returns its
    /// handle (never 0). It counts against the capacity until [`SimDevice::free_physical`];
    /// device out of memory is [`HalError::OutOfMemory`].
    pub fn alloc_physical(&self, size: u64) -> Result<u64, HalError> {
        checked_for(&self.shared, CallKind::SegmentAlloc, size)?.alloc_physical(size)
    }

    /// Frees the physical memory of `handle` (`aclrtFreePhysical`); it must not be mapped.
    pub fn free_physical(&self, handle: u64) -> Result<(), HalError> {
        lock_engine(&self.shared).settled().free_physical(handle)
    }

    /// Maps all of `handle`'s memory at `at`, in a range reserved with
    /// `hal::Device::reserve_address` where nothing is mapped over it (`aclrtMapMem`).
    pub fn map_handle(&self, at: DevicePtr, handle: u64) -> Result<(), HalError> {
        checked(&self.shared, CallKind::Map)?.map_handle(at, handle)
    }

    /// Makes physical memory `handle` (from [`SimDevice::alloc_physical`]) shareable with
    /// other processes (ACL's `aclrtMemExportToShareableHandle`): its shareable handle, once
    /// per physical handle. With `allow_list`, only processes added by
    /// [`SimDevice::allow_physical`] may import it. See [`crate::ipc`].
    pub fn export_physical(&self, handle: u64, allow_list: bool) -> Result<u64, HalError> {
        lock_engine(&self.shared)
            .settled()
            .export_physical(handle, allow_list)
    }

    /// Lets processes `pids` import shareable handle `shareable` (this process's export;
    /// ACL's `aclrtMemSetPidToShareableHandle`).
    pub fn allow_physical(&self, shareable: u64, pids: &[i32]) -> Result<(), HalError> {
        lock_engine(&self.shared).allow_physical(shareable, pids)
    }

    /// Imports another process's shareable handle as physical memory of this device (ACL's
    /// `aclrtMemImportFromShareableHandle`): a handle to map with [`SimDevice::map_handle`]
    /// (the bytes are the exporter's) and free with [`SimDevice::free_physical`], and its
    /// size.
    pub fn import_physical(&self, shareable: u64) -> Result<(u64, u64), HalError> {
        lock_engine(&self.shared).import_physical(shareable)
    }

    /// Unmaps the mapping that starts at `at` and returns its handle, still allocated
    /// (`aclrtUnmapMem`). Its contents are lost (a later mapping reads zeros), unless the
    /// handle is shared with other processes ([`crate::ipc`]: they live on there); work that
    /// still accesses the range makes invalid accesses, which the simulator counts.
    pub fn unmap(&self, at: DevicePtr) -> Result<u64, HalError> {
        checked(&self.shared, CallKind::Unmap)?
            .settled()
            .unmap_at(at)
    }

    /// This device's timeline as Chrome Trace Event JSON, to open in Perfetto
    /// (ui.perfetto.dev) or `chrome://tracing`: a track per stream and one for the host, a
    /// slice per op, flows from event records to their waits, and memory counters. See the
    /// [`crate::trace`] module docs for the layout; [`crate::SimNode::chrome_trace_json`] has
    /// every device of a node. Nearly empty when the configuration turned the timeline off.
    pub fn chrome_trace_json(&self) -> String {
        let engine = lock_engine(&self.shared);
        engine.chrome_trace_json(Some(engine.config().ordinal))
    }

    /// Writes [`SimDevice::chrome_trace_json`] to `path`.
    pub fn write_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        std::fs::write(path, self.chrome_trace_json())
    }
}

impl Default for SimDevice {
    /// A device with [`SimConfig::default`].
    fn default() -> Self {
        SimDevice::new(SimConfig::default())
    }
}

impl hal::Device for SimDevice {
    type B = SimBackend;

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn default_stream(&self) -> Result<SimStream, HalError> {
        let mut engine = lock_engine(&self.shared);
        engine.host_call("default_stream");
        let index = engine.default_stream();
        let workspace = engine.config().workspace_sizes.clone();
        Ok(SimStream::new(
            self.shared.clone(),
            index,
            0,
            None,
            workspace,
        ))
    }

    fn create_stream(&self, priority: Priority) -> Result<SimStream, HalError> {
        let mut engine = checked(&self.shared, CallKind::StreamCreate)?;
        let slot = engine.limits().take_stream()?;
        let (index, local) = engine.create_stream(priority)?;
        let workspace = engine.config().workspace_sizes.clone();
        Ok(SimStream::new(
            self.shared.clone(),
            index,
            local,
            Some(slot),
            workspace,
        ))
    }

    fn ipc_export(&self, range: DeviceSlice, allow_list: bool) -> Result<String, HalError> {
        lock_engine(&self.shared)
            .settled()
            .ipc_export(range, allow_list)
    }

    fn ipc_allow_pids(&self, key: &str, pids: &[i32]) -> Result<(), HalError> {
        lock_engine(&self.shared).ipc_allow(key, pids)
    }

    fn ipc_import(&self, key: &str) -> Result<(DevicePtr, Option<u64>), HalError> {
        let (ptr, size) = lock_engine(&self.shared).ipc_import(key)?;
        Ok((ptr, Some(size)))
    }

    unsafe fn ipc_close(&self, key: &str) -> Result<(), HalError> {
        lock_engine(&self.shared).settled().ipc_close(key)
    }

    fn create_ipc_event(&self) -> Result<SimEvent, HalError> {
        let mut engine = checked(&self.shared, CallKind::EventCreate)?;
        let slot = engine.limits().take_event()?;
        let index = engine.create_ipc_event()?;
        Ok(SimEvent::new(self.shared.clone(), index, slot))
    }

    fn ipc_event_handle(
        &self,
        event: &SimEvent,
    ) -> Result<[u8; crate::ipc::IPC_EVENT_HANDLE_BYTES], HalError> {
        same_node(&self.shared, &event.shared)?;
        lock_engine(&self.shared).ipc_event_handle(event.index())
    }

    fn open_ipc_event(
        &self,
        handle: &[u8; crate::ipc::IPC_EVENT_HANDLE_BYTES],
    ) -> Result<SimEvent, HalError> {
        let mut engine = checked(&self.shared, CallKind::EventCreate)?;
        let slot = engine.limits().take_event()?;
        let index = engine.open_ipc_event(handle)?;
        Ok(SimEvent::new(self.shared.clone(), index, slot))
    }

    fn stream_budget(&self) -> Option<hal::StreamBudget> {
        let engine = lock_engine(&self.shared);
        let limits = engine.limits();
        Some(hal::StreamBudget {
            live: limits.live().0,
            limit: limits.max_streams(),
        })
    }

    fn create_event(&self, flags: EventFlags) -> Result<SimEvent, HalError> {
        let mut engine = checked(&self.shared, CallKind::EventCreate)?;
        let slot = engine.limits().take_event()?;
        let index = engine.create_event(flags);
        Ok(SimEvent::new(self.shared.clone(), index, slot))
    }

    fn alloc(&self, size: u64) -> Result<DevicePtr, HalError> {
        checked_for(&self.shared, CallKind::SegmentAlloc, size)?.alloc(size)
    }

    unsafe fn free(&self, ptr: DevicePtr) -> Result<(), HalError> {
        lock_engine(&self.shared).settled().free(ptr)
    }

    fn alloc_host(&self, size: u64) -> Result<HostPtr, HalError> {
        checked_for(&self.shared, CallKind::HostAlloc, size)?.alloc_host(size)
    }

    unsafe fn free_host(&self, ptr: HostPtr) -> Result<(), HalError> {
        host_wait(&self.shared, None, HostWait::Device, |e| e.free_host(ptr))
    }

    fn mem_info(&self) -> Result<MemInfo, HalError> {
        Ok(lock_engine(&self.shared).mem_info())
    }

    fn is_live(&self, range: DeviceSlice) -> Option<bool> {
        Some(lock_engine(&self.shared).is_live(range))
    }

    fn vmm_granularity(&self) -> Option<u64> {
        self.virtual_memory
            .then_some(crate::memory::VMM_GRANULARITY)
    }

    fn reserve_address(&self, size: u64) -> Result<DevicePtr, HalError> {
        if !self.virtual_memory {
            return Err(HalError::Unsupported(
                "virtual memory (turned off in the SimConfig)",
            ));
        }
        lock_engine(&self.shared).reserve_address(size)
    }

    unsafe fn release_address(&self, ptr: DevicePtr) -> Result<(), HalError> {
        lock_engine(&self.shared).settled().release_address(ptr)
    }

    fn map_physical(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        checked_for(&self.shared, CallKind::Map, size)?.map_physical(at, size)
    }

    unsafe fn unmap_physical(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        checked(&self.shared, CallKind::Unmap)?
            .settled()
            .unmap_physical(at, size)
    }

    fn map_physical_pages(&self, at: DevicePtr, page: u64, count: u64) -> Result<(), PageRunError> {
        let mut engine = lock_engine(&self.shared);
        if engine.faults().armed() {
            return page_by_page(&mut engine, CallKind::Map, page, count, |e, i| {
                e.map_physical(page_of_run(at, page, i)?, page)
            });
        }
        page_run(engine.map_physical_pages(at, page, count))
    }

    unsafe fn unmap_physical_pages(
        &self,
        at: DevicePtr,
        page: u64,
        count: u64,
    ) -> Result<(), PageRunError> {
        let mut engine = lock_engine(&self.shared).settled();
        if engine.faults().armed() {
            return page_by_page(&mut engine, CallKind::Unmap, page, count, |e, i| {
                e.unmap_physical(page_of_run(at, page, count - 1 - i)?, page)
            });
        }
        page_run(engine.unmap_physical_pages(at, page, count))
    }

    fn synchronize(&self) -> Result<(), HalError> {
        let what = HostWait::Device;
        host_wait(&self.shared, Some(CallKind::Synchronize), what, |e| {
            e.sync_device()?;
            e.faults().take_all()
        })
    }

    fn wants_sub_allocation_notes(&self) -> bool {
        self.wants_notes
    }

    fn note_sub_alloc(&self, range: DeviceSlice, stream: &SimStream) -> Result<(), HalError> {
        same_device(&self.shared, &stream.shared)?;
        self.sanitizer_note_alloc(range, stream.index())
    }

    fn note_sub_free(&self, range: DeviceSlice, stream: &SimStream) -> Result<(), HalError> {
        same_device(&self.shared, &stream.shared)?;
        self.sanitizer_note_free(range, stream.index())
    }

    fn can_access_peer(&self, peer: &SimDevice) -> Result<bool, HalError> {
        if !self.shared.same_node(&peer.shared) {
            return Ok(false);
        }
        Ok(lock_engine(&self.shared).can_access_peer(self.shared.device, peer.shared.device))
    }

    fn enable_peer_access(&self, peer: &SimDevice) -> Result<(), HalError> {
        same_node(&self.shared, &peer.shared)?;
        lock_engine(&self.shared).enable_peer(self.shared.device, peer.shared.device)
    }
}
