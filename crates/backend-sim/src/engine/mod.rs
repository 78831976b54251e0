//! The discrete-event engine of one node of devices (one device for `SimDevice::new`): host
//! clocks, streams, events, resources, links, captures.
//!
//! Scheduling is computed eagerly at submission. An op is ready at the latest of the host time
//! (after its launch cost), the end of its stream's previous work and the times of events the
//! stream waited on; it then takes the earliest slot at or after that on its resource. Data
//! effects are queued and applied as the host clock passes them (see [`crate::queue`]).
//!
//! The sanitizer ([`crate::sanitizer`]) sees every op before it is placed, every
//! synchronization edge and every allocation change; the trace log ([`crate::trace`]) records
//! host calls, event flows and memory counters when the timeline is on.
//!
//! The parts: this module holds the state, the clocks and memory calls; `submit` checks and
//! places ops (peer copies on links), `events` has events, synchronization, captures and
//! graph launches, `gates` the host gates a stream waits behind, `graph_run` the replay of graphs holding collectives (their captured
//! streams kept concurrent), `failures` the user operators whose body failed, `observe` the
//! timeline, statistics, reports and trace export.

mod events;
mod failures;
mod gates;
mod graph_run;
mod ipc;
mod observe;
mod submit;
mod task_group;

pub(crate) use graph_run::GraphRuns;
pub(crate) use submit::op_info_at;

use crate::collective::{Collectives, HostWait, Work};

use crate::capture::{self, Capture, ExternalEvents, Node, StreamCapture};
use crate::config::{SimConfig, SimMode};
use crate::device_state::DeviceState;
use crate::fault::{CallKind, FaultState};
use crate::ipc::IpcState;
use crate::job::JobCell;
use crate::limits::Limits;
use crate::link::{Links, Route};
use crate::memory::{Memory, PageRun};
use crate::op::{Accesses, Op, OpKind};
use crate::queue::{DataQueue, Drained};
use crate::sanitizer::report::{OpInfo, OpRef, RaceReport};
use crate::sanitizer::{Sanitizer, SanitizerMode};
use crate::timeline::{OpRecord, Ring, SimStats};
use crate::topology::Topology;
use crate::trace::{self, Flow, HostSlice, LinkSlice, Marker, MemorySample, TraceLog};
use braid_stream_core::capture_rule::{
    capture_record, capture_wait, RecordOutcome, RecordSite, WaitOutcome,
};
use braid_stream_core::hal::{page_of_run, HalError};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::sync::Condvar;
use braid_stream_core::types::{
    CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo, Priority,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// Per-stream state.
#[derive(Debug)]
pub(crate) struct StreamState {
    /// Priority given at creation (kept; the cost model does not use it yet).
    #[allow(dead_code)]
    priority: Priority,
    /// Index of the device in the node.
    pub(crate) device: u32,
    /// Index of the stream within its device (0: the default stream).
    local: u32,
    /// End of all work so far on the stream, waits included.
    pub(crate) tail: u64,
    /// The capture the stream records into, if any.
    pub(crate) capture: Option<StreamCapture>,
}

/// What an event's last record was.
#[derive(Clone, Debug)]
enum EventRecord {
    /// Never recorded.
    Never,
    /// Recorded eagerly; completes at this time.
    At(u64),
    /// Recorded on a capturing stream.
    Captured { capture: u64, frontier: Vec<usize> },
}

#[derive(Debug)]
struct EventState {
    /// Index of the device that created it.
    pub(crate) device: u32,
    timing: bool,
    /// An external event: record and wait nodes inside captures.
    external: bool,
    record: EventRecord,
    /// Stream (node-wide index) and time of the last eager record (for timeline flows).
    recorded_on: Option<(u32, u64)>,
    /// [`DataQueue::seq`] at the last eager record: the record comes after the ops queued up
    /// to it (a failed operator is reported by the events recorded on its stream after it).
    record_seq: u64,
}

pub(crate) fn invalid(msg: impl Into<String>) -> HalError {
    HalError::InvalidArgument(msg.into())
}

/// The error an abort-mode sanitizer report becomes.
pub(crate) fn sanitizer_error(report: &RaceReport) -> HalError {
    HalError::InvalidArgument(format!("sanitizer: {report}"))
}

/// The whole state of one simulated node: its devices (a device made with
/// `SimDevice::new` is a node of one) on one virtual time axis.
///
/// Streams and events have node-wide indices; per-device state is in [`DeviceState`]. Every
/// call is made on behalf of one device, the current one ([`Engine::set_current`], done by
/// the handle that locks the engine): its host clock advances, its resources and memory are
/// used.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) devices: Vec<DeviceState>,
    /// Index of the device making the current call.
    pub(crate) cur: usize,
    /// Each device's address space, accounting and data, by device index: one data store.
    pub(crate) memories: Vec<Memory>,
    /// Data or timing-only, for the whole node.
    pub(crate) mode: SimMode,
    /// Whether the timeline and the trace log are kept, for the whole node.
    pub(crate) record_timeline: bool,
    streams: Vec<StreamState>,
    /// Tags the front layer gave streams, by device ordinal and stream index in the device
    /// (named in sanitizer reports).
    stream_tags: std::collections::HashMap<(u32, u32), String>,
    events: Vec<EventState>,
    /// The links between devices, as contended resources.
    pub(crate) links: Links,
    /// Pairs `(a, b)` of device indices where `a`'s streams may access `b`'s memory.
    peers: BTreeSet<(u32, u32)>,
    pub(crate) sanitizer: Sanitizer,
    pub(crate) trace: TraceLog,
    pub(crate) queue: DataQueue,
    captures: BTreeMap<u64, Capture>,
    next_capture: u64,
    /// Task groups by handle ([`task_group`]).
    task_groups: BTreeMap<u64, task_group::GroupRecord>,
    /// Updates in progress, by stream: the group and the operators re-issued so far.
    updates: BTreeMap<u32, (u64, Vec<Op>)>,
    next_task_group: u64,
    pub(crate) timeline: Ring<OpRecord>,
    /// The most records of each kind the timeline and the trace log keep.
    pub(crate) timeline_capacity: usize,
    /// Whether the sanitizer tracks segment lifetimes. Their consumers are the checks (with
    /// the sanitizer on), the allocated-memory counter of the trace (with the timeline on) and
    /// sub-allocation notes; with none of them the segments are not tracked, until a note
    /// comes (see [`Engine::track_lifetimes`]).
    lifetimes: bool,
    /// The label of the free ops the sanitizer names, shared.
    free_label: Arc<str>,
    /// The label of the last op submitted, shared with the next op of the same label (a
    /// launch loop submits one label again and again: it is not allocated per op).
    last_label: Arc<str>,
    /// Communicators, collective parts in flight and the work held back behind them.
    pub(crate) coll: Collectives,
    /// Paired with the mutex the engine lives in: notified whenever held-back work may have
    /// been released (a collective part arrived, a collective ran, a held record was
    /// superseded), so that host synchronizations waiting on other threads' ranks wake up.
    pub(crate) progress: Arc<Condvar>,
    /// Whether the current call's drains apply every effect due, computing kernels in place
    /// (set by `crate::device` for calls that change memory outside the data queue: frees,
    /// unmaps, sharing), instead of stopping at a kernel not computed yet.
    pub(crate) drain_all: bool,
    /// The compute threads of the node's kernels, or why the configuration gives none
    /// (`SimConfig::compute_threads`: kernel launches in data mode are refused with it).
    pub(crate) compute_threads: Result<usize, String>,
    /// How long such a synchronization waits (the first device's configuration).
    pub(crate) collective_timeout: Duration,
    /// Memory and events shared with other processes ([`crate::ipc`]).
    ipc: IpcState,
    /// How long a wait on another process's event blocks (the first device's configuration).
    ipc_timeout: Duration,
}

impl Engine {
    /// A fresh device with its default stream (index 0): a node of one.
    pub fn new(config: SimConfig) -> Self {
        Engine::node(vec![config], Topology::atlas_800_a2(1))
    }

    /// A fresh node of one device per configuration (at least one), each with its default
    /// stream, connected by `topology`. The node-wide settings (data or timing-only mode,
    /// timeline, sanitizer) are the first device's.
    pub fn node(mut configs: Vec<SimConfig>, topology: Topology) -> Self {
        if configs.is_empty() {
            configs.push(SimConfig::new());
        }
        let first = &configs[0];
        let mode = first.mode;
        let record_timeline = first.record_timeline;
        let timeline_capacity = first.timeline_capacity;
        let collective_timeout = first.collective_timeout;
        let ipc_timeout = first.ipc_timeout;
        let compute_threads = first.resolve_compute_threads(|k| std::env::var_os(k));
        let mut queue = DataQueue::default();
        queue.set_threads(*compute_threads.as_ref().unwrap_or(&1));
        let mut sanitizer = Sanitizer::new(first.sanitizer);
        let lifetimes = first.sanitizer != SanitizerMode::Off || record_timeline;
        let mut streams = Vec::with_capacity(configs.len());
        let mut memories = Vec::with_capacity(configs.len());
        let mut devices = Vec::with_capacity(configs.len());
        for (i, config) in configs.into_iter().enumerate() {
            let i = i as u32;
            if i > 0 {
                sanitizer.stream_created();
            }
            streams.push(StreamState {
                priority: 0,
                device: i,
                local: 0,
                tail: 0,
                capture: None,
            });
            let mut memory = Memory::for_device(i, config.device_capacity(), mode == SimMode::Data);
            memory.set_host_budget(config.host_memory_budget);
            memories.push(memory);
            devices.push(DeviceState::new(config, i));
        }
        Engine {
            devices,
            cur: 0,
            memories,
            mode,
            record_timeline,
            streams,
            stream_tags: std::collections::HashMap::new(),
            events: Vec::new(),
            links: Links::new(topology),
            peers: BTreeSet::new(),
            sanitizer,
            trace: TraceLog::new(timeline_capacity),
            queue,
            compute_threads,
            captures: BTreeMap::new(),
            next_capture: 1,
            task_groups: BTreeMap::new(),
            updates: BTreeMap::new(),
            next_task_group: 1,
            timeline: Ring::new(timeline_capacity),
            timeline_capacity,
            lifetimes,
            free_label: Arc::from("free"),
            last_label: Arc::from(""),
            coll: Collectives::new(),
            progress: Arc::new(Condvar::new()),
            drain_all: false,
            collective_timeout,
            ipc: IpcState::default(),
            ipc_timeout,
        }
    }

    /// Makes device `index` the one the following calls are made on behalf of (an index
    /// past the node's devices is ignored; handles only hold valid ones).
    #[inline]
    pub(crate) fn set_current(&mut self, index: u32) {
        if (index as usize) < self.devices.len() {
            self.cur = index as usize;
        }
    }

    /// The state of the current device.
    pub(crate) fn dev(&self) -> &DeviceState {
        &self.devices[self.cur]
    }

    /// The state of the current device, mutably.
    fn dev_mut(&mut self) -> &mut DeviceState {
        &mut self.devices[self.cur]
    }

    /// The fault state of the current device.
    pub(crate) fn faults(&mut self) -> &mut FaultState {
        &mut self.dev_mut().faults
    }

    /// The stream and event limits of the current device.
    pub(crate) fn limits(&self) -> &Limits {
        &self.dev().limits
    }

    /// The ordinal of device `index`.
    pub(crate) fn ordinal_of(&self, index: u32) -> u32 {
        self.devices
            .get(index as usize)
            .map_or(index, |d| d.config.ordinal)
    }

    /// Device ordinal and index within the device of stream `s` (node-wide index).
    pub(crate) fn locate(&self, s: u32) -> (u32, u32) {
        self.streams
            .get(s as usize)
            .map_or((0, s), |st| (self.ordinal_of(st.device), st.local))
    }

    /// The error of an injected failure of `kind` asking for `requested` bytes.
    #[cold]
    pub(crate) fn fault_error(&self, kind: CallKind, requested: u64) -> HalError {
        let (free, total) = if kind == CallKind::HostAlloc {
            let total = self.devices[self.cur].config.host_capacity;
            (
                total.saturating_sub(self.devices[self.cur].host.used()),
                total,
            )
        } else {
            let info = self.memories[self.cur].info();
            (info.free, info.total)
        };
        FaultState::error(kind, requested, free, total)
    }

    /// Whether stream `s` records into a capture.
    pub(crate) fn is_capturing(&self, s: u32) -> bool {
        self.stream(s).is_ok_and(|st| st.capture.is_some())
    }

    // ----- clock -----

    /// Advances the current device's host clock by `ns` for the host call `what` and
    /// applies the data effects it passed.
    pub(crate) fn tick(&mut self, ns: u64, what: &'static str) {
        let dev = self.dev_mut();
        let start = dev.host_ns;
        dev.host_ns = dev.host_ns.saturating_add(ns);
        self.host_slice(what, start);
        self.settle();
    }

    fn host_slice(&mut self, name: &'static str, start_ns: u64) {
        if self.record_timeline {
            self.trace.host.push(HostSlice {
                device: self.dev().config.ordinal,
                name,
                start_ns,
                end_ns: self.dev().host_ns,
            });
        }
    }

    /// Blocks the current device's host until `t` (the call `what`), then charges one cheap
    /// call.
    /// Every effect up to the new host time is applied when it returns (kernels not computed
    /// yet are computed in place: `crate::device::host_wait` computes them before, with the
    /// lock released).
    fn block_until(&mut self, t: u64, what: &'static str) {
        let dev = self.dev_mut();
        let start = dev.host_ns;
        dev.host_ns = dev
            .host_ns
            .max(t)
            .saturating_add(dev.config.profile.host_call_ns);
        self.host_slice(what, start);
        self.settle_with(self.drain_all);
    }

    /// The host time a host synchronization on `what` brings the current device to (the
    /// effects it applies are those due by then), as [`Engine::block_until`] computes it;
    /// `None` when it does not block (what it waits on is held back behind a collective).
    pub(crate) fn wait_horizon(&self, what: HostWait) -> Option<u64> {
        let dev = self.dev();
        let t = match what {
            HostWait::Stream(s) if !self.coll.is_deferred(s) => self.streams.get(s as usize)?.tail,
            HostWait::Event(e) if !self.coll.is_pending(e) => self.event_time(e).ok()?.unwrap_or(0),
            HostWait::Device => dev
                .streams
                .iter()
                .filter_map(|&s| self.streams.get(s as usize))
                .map(|s| s.tail)
                .fold(dev.makespan, u64::max),
            _ => return None,
        };
        Some(
            dev.host_ns
                .max(t)
                .saturating_add(dev.config.profile.host_call_ns),
        )
    }

    /// Samples the memory counters of the current device for the trace.
    fn memory_sample(&mut self) {
        if self.record_timeline {
            self.trace.memory.push(MemorySample {
                device: self.dev().config.ordinal,
                at_ns: self.dev().host_ns,
                reserved: self.memories[self.cur].used(),
                allocated: self.sanitizer.allocated(),
            });
        }
    }

    /// Forgets resource usage no call can place work before any more, and applies the data
    /// effects the current device's host clock passed, up to a kernel not computed yet
    /// ([`crate::job`]; all of them in a call marked [`Engine::drain_all`]).
    fn settle(&mut self) {
        self.settle_with(self.drain_all);
    }

    /// [`Engine::settle`]; `all`: every effect, kernels computed in place.
    fn settle_with(&mut self, all: bool) {
        let now = self.dev().host_ns;
        self.dev_mut().prune_units(now);
        if self.devices.len() == 1 {
            // No links; the one communication engine follows the one host clock.
            self.devices[0].comm.prune(now);
        } else {
            // Transfers (links, communication engines) may be placed by any device's call,
            // at its own host time: only what ended before the oldest host clock is
            // forgotten.
            let oldest = self.devices.iter().map(|d| d.host_ns).min().unwrap_or(now);
            self.links.prune(oldest);
            for d in &mut self.devices {
                d.comm.prune(oldest);
            }
        }
        self.apply_effects(now, all);
    }

    /// Applies the data effects due by `to`, up to a kernel not computed yet (`all`: all of
    /// them, computing kernels in place), and reports what they made known: operators that
    /// failed, event records other processes wait for.
    fn apply_effects(&mut self, to: u64, all: bool) -> Drained {
        let drained = if all {
            self.queue.drain_all(to, &mut self.memories);
            Drained::All
        } else {
            self.queue.drain(to, &mut self.memories)
        };
        if self.queue.has_failures() {
            self.report_failed_ops();
        }
        if !self.ipc.events_out.is_empty() {
            self.ipc_publish();
        }
        drained
    }

    /// Applies the data effects due by `to` (the current device's host time, or the time a
    /// synchronization is about to bring it to), up to a kernel not computed yet: the caller
    /// computes that one with the lock released, and drains again.
    pub(crate) fn drain_to(&mut self, to: u64) -> Drained {
        self.apply_effects(to, false)
    }

    /// The current device's host time.
    pub(crate) fn host_now(&self) -> u64 {
        self.dev().host_ns
    }

    /// A kernel of the current device no thread computes yet (see [`crate::job`]); with
    /// `deferred` false, only among those that cannot write in place at their end.
    pub(crate) fn ready_job(&self, deferred: bool) -> Option<Arc<JobCell>> {
        self.queue.ready_job(self.cur, deferred)
    }

    /// Charges one cheap host call `what` (create, alloc, free, memory info, capture calls).
    pub fn host_call(&mut self, what: &'static str) {
        self.tick(self.devices[self.cur].config.profile.host_call_ns, what);
    }

    pub(crate) fn stream(&self, s: u32) -> Result<&StreamState, HalError> {
        self.streams
            .get(s as usize)
            .ok_or_else(|| invalid(format!("unknown stream index {s}")))
    }

    pub(crate) fn stream_mut(&mut self, s: u32) -> Result<&mut StreamState, HalError> {
        self.streams
            .get_mut(s as usize)
            .ok_or_else(|| invalid(format!("unknown stream index {s}")))
    }

    fn event(&self, e: usize) -> Result<&EventState, HalError> {
        self.events
            .get(e)
            .ok_or_else(|| invalid(format!("unknown event index {e}")))
    }

    // ----- objects and memory -----

    /// Creates a stream of the current device; returns its node-wide index and its index
    /// in the device.
    pub fn create_stream(&mut self, priority: Priority) -> Result<(u32, u32), HalError> {
        self.host_call("create_stream");
        let index = u32::try_from(self.streams.len()).map_err(|_| invalid("too many streams"))?;
        let local = self.dev().streams.len() as u32;
        self.streams.push(StreamState {
            priority,
            device: self.cur as u32,
            local,
            tail: 0,
            capture: None,
        });
        self.dev_mut().streams.push(index);
        self.sanitizer.stream_created();
        Ok((index, local))
    }

    /// The node-wide index of the default stream of the current device.
    pub fn default_stream(&self) -> u32 {
        self.dev().streams[0]
    }

    /// Creates an event of the current device and returns its node-wide index.
    pub fn create_event(&mut self, flags: EventFlags) -> usize {
        self.host_call("create_event");
        self.events.push(EventState {
            device: self.cur as u32,
            timing: flags.timing,
            external: flags.external,
            record: EventRecord::Never,
            recorded_on: None,
            record_seq: 0,
        });
        self.events.len() - 1
    }

    /// Allocates `size` bytes of device memory.
    pub fn alloc(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        self.host_call("alloc");
        let ptr = self.memories[self.cur].alloc(size)?;
        if self.lifetimes {
            self.sanitizer.segment_alloc(ptr.0, size);
            self.memory_sample();
        }
        Ok(ptr)
    }

    /// Frees the segment at `ptr`. The sanitizer checks that the host has observed every
    /// access to it complete.
    pub fn free(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        self.host_call("free");
        if self.memories[self.cur].is_segment(ptr) {
            self.end_lifetime(ptr)?;
        }
        self.memories[self.cur].free(ptr)?;
        self.ipc_segment_freed(ptr.0);
        self.memory_sample();
        Ok(())
    }

    /// Reserves `size` bytes of address space. To the sanitizer a reservation is a segment
    /// managed by a sub-allocator from the start: only blocks declared in it are live.
    pub fn reserve_address(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        self.host_call("reserve_address");
        let ptr = self.memories[self.cur].reserve(size)?;
        if self.lifetimes {
            self.sanitizer.segment_reserve(ptr.0, size);
        }
        Ok(ptr)
    }

    /// Releases the reservation at `ptr` (nothing mapped in it any more). The sanitizer
    /// checks that the host has observed every access to it complete.
    pub fn release_address(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        self.host_call("release_address");
        if !self.memories[self.cur].is_empty_reservation(ptr) {
            // Not releasable: the memory model names the reason.
            return self.memories[self.cur].release(ptr);
        }
        self.end_lifetime(ptr)?;
        self.memories[self.cur].release(ptr)
    }

    /// Maps `size` bytes of fresh memory at `at` inside a reservation.
    pub fn map_physical(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        self.host_call("map_physical");
        self.memories[self.cur].map(at, size)?;
        self.memory_sample();
        Ok(())
    }

    /// Unmaps the mapping of `size` bytes at `at`.
    pub fn unmap_physical(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        self.host_call("unmap_physical");
        self.memories[self.cur].unmap(at, size)?;
        self.memory_sample();
        Ok(())
    }

    /// Maps `count` pages of `page` bytes from `at` on, as `count` calls of
    /// [`Engine::map_physical`] would, stopping at the first failure; returns the pages mapped
    /// and the failure.
    pub fn map_physical_pages(&mut self, at: DevicePtr, page: u64, count: u64) -> PageRun {
        self.page_run(
            count,
            |m| m.map_pages(at, page, count),
            |e, i| e.map_physical(page_of_run(at, page, i)?, page),
        )
    }

    /// Unmaps `count` pages of `page` bytes from `at` on, as `count` calls of
    /// [`Engine::unmap_physical`] from the last page down would, stopping at the first
    /// failure; returns the pages unmapped and the failure.
    pub fn unmap_physical_pages(&mut self, at: DevicePtr, page: u64, count: u64) -> PageRun {
        self.page_run(
            count,
            |m| m.unmap_pages(at, page, count),
            |e, i| e.unmap_physical(page_of_run(at, page, count - 1 - i)?, page),
        )
    }

    /// A run of `count` page calls: done at once by `run` on the memory model when no data
    /// effect falls due while the calls would run (none could see memory between two of them)
    /// and no timeline records each call; else call by call with `one` (given the call's
    /// index), stopping at the first failure.
    fn page_run(
        &mut self,
        count: u64,
        run: impl FnOnce(&mut Memory) -> PageRun,
        mut one: impl FnMut(&mut Self, u64) -> Result<(), HalError>,
    ) -> PageRun {
        let call_ns = self.devices[self.cur].config.profile.host_call_ns;
        let end = self.devices[self.cur]
            .host_ns
            .saturating_add(call_ns.saturating_mul(count));
        if self.record_timeline || self.queue.due_by(end) {
            for i in 0..count {
                if let Err(e) = one(self, i) {
                    return (i, Err(e));
                }
            }
            return (count, Ok(()));
        }
        let (done, result) = run(&mut self.memories[self.cur]);
        // The calls made, the failing one included, as many cheap host calls.
        let calls = done + u64::from(result.is_err());
        let dev = self.dev_mut();
        dev.host_ns = dev.host_ns.saturating_add(call_ns.saturating_mul(calls));
        self.settle();
        (done, result)
    }

    /// Allocates `size` bytes of physical memory; returns its handle.
    pub fn alloc_physical(&mut self, size: u64) -> Result<u64, HalError> {
        self.host_call("alloc_physical");
        let handle = self.memories[self.cur].alloc_physical(size)?;
        self.memory_sample();
        Ok(handle)
    }

    /// Frees the (unmapped) physical memory of `handle`.
    pub fn free_physical(&mut self, handle: u64) -> Result<(), HalError> {
        self.host_call("free_physical");
        self.memories[self.cur].free_physical(handle)?;
        self.ipc_physical_freed(handle);
        self.memory_sample();
        Ok(())
    }

    /// Maps the physical memory of `handle` at `at` inside a reservation.
    pub fn map_handle(&mut self, at: DevicePtr, handle: u64) -> Result<(), HalError> {
        self.host_call("map");
        self.memories[self.cur].map_handle(at, handle)?;
        self.ipc_physical_mapped(at, handle)
    }

    /// Unmaps the mapping starting at `at`; returns its handle.
    pub fn unmap_at(&mut self, at: DevicePtr) -> Result<u64, HalError> {
        self.host_call("unmap");
        self.memories[self.cur].unmap_at(at)
    }

    /// Ends the sanitizer lifetime of the segment or reservation at `ptr` (a host free): in
    /// abort mode a report of an access not observed complete refuses it.
    fn end_lifetime(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        if self.lifetimes {
            let at = self.dev().host_ns;
            let device = self.dev().config.ordinal;
            let label = &self.free_label;
            self.sanitizer
                .segment_free(ptr.0, || OpInfo {
                    device,
                    stream: None,
                    label: label.clone(),
                    kind: "free",
                    start_ns: at,
                    end_ns: at,
                    from_graph: false,
                    rank: None,
                })
                .map_err(|r| sanitizer_error(&r))?;
        }
        Ok(())
    }

    /// Starts tracking segment lifetimes if they were not (sanitizer and timeline off): a
    /// sub-allocation note needs them. Only the live segments matter then: lifetime ids and
    /// freed ranges are for the checks, which are off.
    fn track_lifetimes(&mut self) {
        if !self.lifetimes {
            self.sanitizer
                .adopt_segments(self.memories.iter().flat_map(Memory::segments));
            self.lifetimes = true;
        }
    }

    /// Allocates `size` bytes of pinned host memory.
    pub fn alloc_host(&mut self, size: u64) -> Result<HostPtr, HalError> {
        self.host_call("alloc_host");
        self.devices[self.cur].host.alloc(size)
    }

    /// Frees pinned host memory. Like `cudaFreeHost`, it first waits for all work on the
    /// device, so no queued copy can touch the memory afterwards.
    pub fn free_host(&mut self, ptr: HostPtr) -> Result<(), HalError> {
        self.host_call("free_host");
        self.sync_device()?;
        self.devices[self.cur].host.free(ptr)
    }

    /// Free and total device memory.
    pub fn mem_info(&mut self) -> MemInfo {
        self.host_call("mem_info");
        self.memories[self.cur].info()
    }

    /// The node-wide index of stream `local` of the current device.
    fn local_stream(&self, local: u32) -> Result<u32, HalError> {
        self.dev()
            .streams
            .get(local as usize)
            .copied()
            .ok_or_else(|| {
                invalid(format!(
                    "unknown stream index {local} on device {}",
                    self.dev().config.ordinal
                ))
            })
    }

    /// A sub-allocator handed out `range` on stream `local` of the current device (see
    /// [`crate::SimDevice::sanitizer_note_alloc`]).
    pub fn note_alloc(&mut self, range: DeviceSlice, local: u32) -> Result<(), HalError> {
        let s = self.local_stream(local)?;
        self.track_lifetimes();
        self.sanitizer
            .block_alloc(range, s)
            .map_err(|e| invalid(format!("sanitizer_note_alloc: {e}")))?;
        self.memory_sample();
        Ok(())
    }

    /// A sub-allocator took back `range` on stream `local` of the current device (see
    /// [`crate::SimDevice::sanitizer_note_free`]).
    pub fn note_free(&mut self, range: DeviceSlice, local: u32) -> Result<(), HalError> {
        let s = self.local_stream(local)?;
        let at = self.stream(s)?.tail.max(self.dev().host_ns);
        let device = self.dev().config.ordinal;
        self.track_lifetimes();
        let label = &self.free_label;
        self.sanitizer
            .block_free(range, || OpInfo {
                device,
                stream: Some(local),
                label: label.clone(),
                kind: "free",
                start_ns: at,
                end_ns: at,
                from_graph: false,
                rank: None,
            })
            .map_err(|e| invalid(format!("sanitizer_note_free: {e}")))?;
        self.memory_sample();
        Ok(())
    }
}
