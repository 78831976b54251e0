//! The discrete-event engine of one device: host clock, streams, events, resources, captures.
//!
//! Scheduling is computed eagerly at submission. An op is ready at the latest of the host time
//! (after its launch cost), the end of its stream's previous work and the times of events the
//! stream waited on; it then takes the earliest slot at or after that on its resource. Data
//! effects are queued and applied as the host clock passes them (see [`crate::queue`]).
//!
//! The sanitizer ([`crate::sanitizer`]) sees every op before it is placed, every
//! synchronization edge and every allocation change; the trace log ([`crate::trace`]) records
//! host calls, event flows and memory counters when the timeline is on.

use crate::capture::{self, Capture, ExternalEvents, Node, StreamCapture};
use crate::config::{SimConfig, SimMode};
use crate::device_state::DeviceState;
use crate::fault::{CallKind, FaultState};
use crate::limits::Limits;
use crate::link::{earliest_all, Links, Route};
use crate::memory::{Memory, PageRun};
use crate::op::{Accesses, Op, OpKind};
use crate::queue::DataQueue;
use crate::sanitizer::report::{OpInfo, OpRef, RaceReport};
use crate::sanitizer::{Sanitizer, SanitizerMode};
use crate::timeline::{OpRecord, SimStats};
use crate::topology::Topology;
use crate::trace::{self, Flow, HostSlice, LinkSlice, Marker, MemorySample, TraceLog};
use braid_stream_core::capture_rule::{
    capture_record, capture_wait, RecordOutcome, RecordSite, WaitOutcome,
};
use braid_stream_core::hal::{page_of_run, HalError};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::{
    CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo, Priority,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod collectives;
mod remote_parts;

use collectives::{Collectives, Work};

/// Per-stream state.
#[derive(Debug)]
struct StreamState {
    /// Priority given at creation (kept; the cost model does not use it yet).
    #[allow(dead_code)]
    priority: Priority,
    /// Index of the device in the node.
    device: u32,
    /// Index of the stream within its device (0: the default stream).
    local: u32,
    /// End of all work so far on the stream, waits included.
    tail: u64,
    /// The capture the stream records into, if any.
    capture: Option<StreamCapture>,
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
    device: u32,
    timing: bool,
    /// An external event: record and wait nodes inside captures.
    external: bool,
    record: EventRecord,
    /// Stream (node-wide index) and time of the last eager record (for timeline flows).
    recorded_on: Option<(u32, u64)>,
}

fn invalid(msg: impl Into<String>) -> HalError {
    HalError::InvalidArgument(msg.into())
}

/// The error an abort-mode sanitizer report becomes.
fn sanitizer_error(report: &RaceReport) -> HalError {
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
    devices: Vec<DeviceState>,
    /// Index of the device making the current call.
    cur: usize,
    /// Each device's address space, accounting and data, by device index: one data store.
    memories: Vec<Memory>,
    /// Data or timing-only, for the whole node.
    mode: SimMode,
    /// Whether the timeline and the trace log are kept, for the whole node.
    record_timeline: bool,
    streams: Vec<StreamState>,
    /// Tags the front layer gave streams, by device ordinal and stream index in the device
    /// (named in sanitizer reports).
    stream_tags: std::collections::HashMap<(u32, u32), String>,
    events: Vec<EventState>,
    /// The links between devices, as contended resources.
    links: Links,
    /// Pairs `(a, b)` of device indices where `a`'s streams may access `b`'s memory.
    peers: BTreeSet<(u32, u32)>,
    sanitizer: Sanitizer,
    trace: TraceLog,
    queue: DataQueue,
    captures: BTreeMap<u64, Capture>,
    next_capture: u64,
    timeline: Vec<OpRecord>,
    /// Whether the sanitizer tracks segment lifetimes. Their consumers are the checks (with
    /// the sanitizer on), the allocated-memory counter of the trace (with the timeline on) and
    /// sub-allocation notes; with none of them the segments are not tracked, until a note
    /// comes (see [`Engine::track_lifetimes`]).
    lifetimes: bool,
    /// The label of the free ops the sanitizer names, shared.
    free_label: Arc<str>,
    /// Communicators, collective parts in flight and the work held back behind them.
    coll: Collectives,
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
            memories.push(Memory::for_device(
                i,
                config.capacity,
                mode == SimMode::Data,
            ));
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
            trace: TraceLog::default(),
            queue: DataQueue::default(),
            captures: BTreeMap::new(),
            next_capture: 1,
            timeline: Vec::new(),
            lifetimes,
            free_label: Arc::from("free"),
            coll: Collectives::new(),
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
    fn dev(&self) -> &DeviceState {
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
    fn locate(&self, s: u32) -> (u32, u32) {
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
    fn tick(&mut self, ns: u64, what: &'static str) {
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
    fn block_until(&mut self, t: u64, what: &'static str) {
        let dev = self.dev_mut();
        let start = dev.host_ns;
        dev.host_ns = dev
            .host_ns
            .max(t)
            .saturating_add(dev.config.profile.host_call_ns);
        self.host_slice(what, start);
        self.settle();
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
    /// effects the current device's host clock passed.
    fn settle(&mut self) {
        let now = self.dev().host_ns;
        self.dev_mut().prune_units(now);
        // Transfers (links, communication engines) may be placed by any device's call, at
        // its own host time: only what ended before the oldest host clock is forgotten.
        let oldest = self.devices.iter().map(|d| d.host_ns).min().unwrap_or(now);
        self.links.prune(oldest);
        for d in &mut self.devices {
            d.comm.prune(oldest);
        }
        self.queue.drain(now, &mut self.memories);
    }

    /// Charges one cheap host call `what` (create, alloc, free, memory info, capture calls).
    pub fn host_call(&mut self, what: &'static str) {
        self.tick(self.devices[self.cur].config.profile.host_call_ns, what);
    }

    fn stream(&self, s: u32) -> Result<&StreamState, HalError> {
        self.streams
            .get(s as usize)
            .ok_or_else(|| invalid(format!("unknown stream index {s}")))
    }

    fn stream_mut(&mut self, s: u32) -> Result<&mut StreamState, HalError> {
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
        self.memory_sample();
        Ok(())
    }

    /// Maps the physical memory of `handle` at `at` inside a reservation.
    pub fn map_handle(&mut self, at: DevicePtr, handle: u64) -> Result<(), HalError> {
        self.host_call("map");
        self.memories[self.cur].map_handle(at, handle)
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
        self.local_stream(local)?;
        self.track_lifetimes();
        self.sanitizer
            .block_alloc(range)
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
            })
            .map_err(|e| invalid(format!("sanitizer_note_free: {e}")))?;
        self.memory_sample();
        Ok(())
    }

    // ----- submission -----

    /// Checks what the engine needs to stay panic-free and memory safe.
    fn check(op: &OpKind) -> Result<(), HalError> {
        let range = |what: &str, s: &DeviceSlice| {
            if s.ptr.0.checked_add(s.len).is_none() {
                Err(invalid(format!(
                    "{what} range at {} of {} bytes overflows the address space",
                    s.ptr, s.len
                )))
            } else {
                Ok(())
            }
        };
        let host = |what: &str, addr: usize, len: u64| {
            if len > 0 && addr == 0 {
                Err(invalid(format!("{what} host pointer is null")))
            } else if len > isize::MAX as u64 {
                Err(invalid(format!(
                    "copy of {len} bytes exceeds host address space"
                )))
            } else {
                Ok(())
            }
        };
        match op {
            OpKind::Custom(c) => {
                for r in c.0.reads.iter().chain(&c.0.writes) {
                    range("operator range", r)?;
                }
                Ok(())
            }
            OpKind::Kernel(k) => {
                if let Kernel::Matmul { m, k: kk, n, .. } = k.kernel {
                    let (m, kk, n) = (m as u128, kk as u128, n as u128);
                    let max = u64::MAX as u128;
                    if 2 * m * kk * n > max
                        || 4 * m * kk > max
                        || 4 * kk * n > max
                        || 4 * m * n > max
                    {
                        return Err(invalid(format!("matmul shape {m}x{kk}x{n} is too large")));
                    }
                }
                let total: u128 = k.reads().chain(k.writes()).map(|s| s.len as u128).sum();
                if total > u64::MAX as u128 {
                    return Err(invalid(format!("{} ranges are too large", k.name())));
                }
                k.validate().map_err(|e| invalid(e.to_string()))
            }
            OpKind::H2d { dst, src } => {
                range("memcpy_h2d destination", dst)?;
                host("memcpy_h2d source", *src, dst.len)
            }
            OpKind::D2h { dst, src } => {
                range("memcpy_d2h source", src)?;
                host("memcpy_d2h destination", *dst, src.len)
            }
            OpKind::D2d { dst, src } => {
                range("memcpy_d2d destination", dst)?;
                range("memcpy_d2d source", src)
            }
            OpKind::Memset { dst, .. } => range("memset destination", dst),
            // Collectives come through `Engine::collective`, which checks their ranges.
            OpKind::Collective(_) | OpKind::Exchange(_) => Ok(()),
        }
    }

    /// Enqueues (or captures) `kind` on stream `s`.
    pub fn submit(&mut self, s: u32, kind: OpKind, label: &str) -> Result<(), HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "launch");
        Self::check(&kind)?;
        if self.devices.len() > 1 {
            self.check_peers(s, &kind, label)?;
        }
        let capturing = self.stream(s)?.capture.is_some();
        let op = Op {
            kind,
            label: Arc::from(label),
            stream: s,
        };
        if capturing {
            return self.with_frontier(s, |cap, frontier| cap.add(op, frontier));
        }
        let host = self.dev().host_ns;
        if self.coll.is_deferred(s) {
            self.coll.hold(
                s,
                host,
                Work::Op {
                    op,
                    from_graph: false,
                },
            );
            return Ok(());
        }
        self.place_at(op, host, false)
    }

    /// Places `op` eagerly on its stream as if submitted at host time `host` (a graph's node
    /// when `from_graph`).
    fn place_at(&mut self, op: Op, host: u64, from_graph: bool) -> Result<(), HalError> {
        let s = op.stream;
        let ready = host.max(self.stream(s)?.tail);
        let slot = self.slot(&op, ready);
        let acc = op.kind.accesses();
        let at = self.locate(s);
        self.sanitizer
            .eager_op(s, &acc, || op_info(&op, &slot, at, from_graph))
            .map_err(|r| sanitizer_error(&r))?;
        let end = self.place(op, slot, from_graph);
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        Ok(())
    }

    /// Index of the device whose address space holds `addr`, if any.
    fn owner_of(&self, addr: u64) -> Option<u32> {
        self.memories
            .iter()
            .position(|m| m.owns(addr))
            .map(|i| i as u32)
    }

    /// Checks that every range of `kind`, submitted on stream `s`, is memory of `s`'s device
    /// or of a device `s`'s device has enabled peer access to.
    fn check_peers(&self, s: u32, kind: &OpKind, label: &str) -> Result<(), HalError> {
        let own = self.stream(s)?.device;
        let acc = kind.accesses();
        for range in acc.reads().chain(acc.writes()) {
            let Some(other) = self.owner_of(range.ptr.0) else {
                continue;
            };
            if other != own && !self.peers.contains(&(own, other)) {
                return Err(invalid(format!(
                    "`{label}` ({}) on a stream of device {} uses memory of device {} at {}, \
                     and peer access from device {} to device {} is not enabled \
                     (enable_peer_access)",
                    kind.name(),
                    self.ordinal_of(own),
                    self.ordinal_of(other),
                    range.ptr,
                    self.ordinal_of(own),
                    self.ordinal_of(other),
                )));
            }
        }
        Ok(())
    }

    /// The route of `op` when it is a copy between the memories of two devices (a peer copy).
    fn peer_route(&self, op: &OpKind) -> Option<Route> {
        if self.devices.len() < 2 {
            return None;
        }
        let OpKind::D2d { dst, src } = op else {
            return None;
        };
        let from = self.owner_of(src.ptr.0)?;
        let to = self.owner_of(dst.ptr.0)?;
        (from != to).then(|| self.links.route(from, to))
    }

    /// Lets device `from`'s streams access device `to`'s memory. Errors: the same device,
    /// or devices in different servers of the topology (their traffic goes over the network,
    /// through collectives).
    pub fn enable_peer(&mut self, from: u32, to: u32) -> Result<(), HalError> {
        self.host_call("enable_peer_access");
        let (a, b) = (self.ordinal_of(from), self.ordinal_of(to));
        if from == to {
            return Err(invalid(format!(
                "peer access from device {a} to itself: a device always accesses its own memory"
            )));
        }
        if !self.can_access_peer(from, to) {
            return Err(invalid(format!(
                "device {a} cannot access device {b}'s memory: they are in different servers of the node's topology"
            )));
        }
        self.peers.insert((from, to));
        Ok(())
    }

    /// Whether device `from` can be given access to device `to`'s memory (two devices of
    /// one server).
    pub fn can_access_peer(&self, from: u32, to: u32) -> bool {
        from != to
            && (to as usize) < self.devices.len()
            && self.links.topology().same_server(from, to)
    }

    /// Runs `f` on the capture stream `s` records into and on its frontier.
    fn with_frontier(
        &mut self,
        s: u32,
        f: impl FnOnce(&mut Capture, &mut Vec<usize>),
    ) -> Result<(), HalError> {
        let Some(sc) = self
            .streams
            .get_mut(s as usize)
            .and_then(|st| st.capture.as_mut())
        else {
            return Err(invalid(format!("stream {s} is not capturing")));
        };
        let cap = self
            .captures
            .get_mut(&sc.id)
            .ok_or_else(|| invalid("stream is in a capture that no longer exists"))?;
        f(cap, &mut sc.frontier);
        Ok(())
    }

    /// Where `op`, ready at `ready`, would run: the earliest time at or after `ready` at which
    /// its resource (of the device of its stream) has the units it demands free for its
    /// duration; for a peer copy, at which a copy engine and every link of its route are
    /// free for the transfer.
    fn slot(&self, op: &Op, ready: u64) -> Slot {
        let dev = &self.devices[self.device_of_stream(op.stream)];
        let p = &dev.config.profile;
        let unit = op.kind.unit();
        let demand = op.kind.demand(p);
        let route = self.peer_route(&op.kind);
        let (start, duration) = match (&route, dev.unit_pool(unit)) {
            (Some(route), Some(pool)) => {
                let bytes = op.kind.writes().iter().map(|w| w.len).sum();
                let duration = route.duration_ns(bytes);
                let mut pools = vec![(pool, demand)];
                pools.extend(
                    route
                        .hops
                        .iter()
                        .filter_map(|h| self.links.pool(*h))
                        .map(|p| (p, 1)),
                );
                (earliest_all(&pools, ready, duration), duration)
            }
            (None, Some(pool)) => {
                let duration = op.kind.duration_ns(p);
                (pool.earliest(ready, duration, demand), duration)
            }
            (_, None) => (ready, op.kind.duration_ns(p)),
        };
        Slot {
            start,
            end: start.saturating_add(duration),
            demand,
            route,
        }
    }

    /// Index of the device of stream `s` (node-wide index; the current device for an unknown
    /// one).
    fn device_of_stream(&self, s: u32) -> usize {
        self.streams
            .get(s as usize)
            .map_or(self.cur, |st| st.device as usize)
    }

    /// Places `op` in `slot` (from [`Engine::slot`], with nothing placed in between); returns
    /// its end time.
    fn place(&mut self, op: Op, slot: Slot, from_graph: bool) -> u64 {
        let unit = op.kind.unit();
        let (start, end) = (slot.start, slot.end);
        let d = self.device_of_stream(op.stream);
        let (device, local) = self.locate(op.stream);
        let dev = &mut self.devices[d];
        if let Some(pool) = dev.unit_pool_mut(unit) {
            pool.reserve(start, end - start, slot.demand);
        }
        dev.makespan = dev.makespan.max(end);
        dev.ops_executed += 1;
        if let Some(route) = &slot.route {
            self.links.reserve(route, start, end);
            if self.record_timeline {
                for hop in &route.hops {
                    let track = hop.name(|i| self.ordinal_of(i));
                    self.trace.links.push(LinkSlice {
                        device,
                        track,
                        label: op.label.to_string(),
                        start_ns: start,
                        end_ns: end,
                    });
                }
            }
        }
        if self.record_timeline {
            self.timeline.push(OpRecord {
                device,
                stream: local,
                label: op.label.to_string(),
                kind: op.kind.name(),
                start_ns: start,
                end_ns: end,
                unit,
                reads: op.kind.reads(),
                writes: op.kind.writes(),
                from_graph,
            });
        }
        if self.mode == SimMode::Data {
            self.queue.push(start, end, op.kind, d);
        }
        end
    }

    // ----- events -----

    /// Records event `e` at stream `s`'s current position.
    pub fn record(&mut self, s: u32, e: usize) -> Result<(), HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "record");
        let (external, owner) = {
            let ev = self.event(e)?;
            (ev.external, ev.device)
        };
        let st = self.stream(s)?;
        if owner != st.device {
            // As CUDA and ACL: an event is recorded on streams of its own device (streams of
            // other devices of the node may wait on it).
            return Err(invalid(format!(
                "event of device {} recorded on a stream of device {}: record it on a stream of its own device",
                self.ordinal_of(owner),
                self.ordinal_of(st.device)
            )));
        }
        let capture = st.capture.as_ref().map(|sc| (sc.id, sc.frontier.clone()));
        match (capture_record(capture.is_some(), external), capture) {
            (RecordOutcome::RecordNode, _) => {
                self.with_frontier(s, |cap, _| cap.external.records.push(e))
            }
            (RecordOutcome::Recorded, Some((capture, frontier))) => {
                self.sanitizer.record_captured(e);
                self.events[e].recorded_on = None;
                self.events[e].record = EventRecord::Captured { capture, frontier };
                Ok(())
            }
            (RecordOutcome::Recorded, None) => {
                let host = self.devices[self.cur].host_ns;
                if self.coll.is_deferred(s) {
                    self.coll.hold_record(s, host, e);
                    return Ok(());
                }
                let t = st.tail.max(host);
                let was_pending = self.coll.supersede_record(e);
                self.record_at(s, e, t);
                if was_pending {
                    // Waits held back on the superseded record may go on.
                    return self.pump();
                }
                Ok(())
            }
        }
    }

    /// Records event `e` eagerly on stream `s`, completing at `t`.
    fn record_at(&mut self, s: u32, e: usize, t: u64) {
        self.sanitizer.record(s, e);
        self.events[e].recorded_on = Some((s, t));
        if self.record_timeline {
            self.trace.markers.push(Marker {
                stream: s,
                name: format!("record e{e}"),
                start_ns: t,
                end_ns: t,
            });
        }
        self.events[e].record = EventRecord::At(t);
    }

    /// Makes later work on stream `s` wait for event `e`'s last record.
    pub fn wait(&mut self, s: u32, e: usize) -> Result<(), HalError> {
        self.tick(
            self.devices[self.cur].config.profile.eager_launch_ns,
            "wait",
        );
        let record = self.event(e)?.record.clone();
        let host = self.devices[self.cur].host_ns;
        if self.stream(s)?.capture.is_none() {
            if self.coll.is_deferred(s) || self.coll.is_pending(e) {
                // Behind a collective not yet run, or on a record held back behind one.
                self.coll.hold(s, host, Work::Wait(e));
                return Ok(());
            }
            if let EventRecord::At(_) = record {
                return self.wait_at(s, e, host);
            }
        }
        let captures = &self.captures;
        let st = self
            .streams
            .get_mut(s as usize)
            .ok_or_else(|| invalid(format!("unknown stream index {s}")))?;
        // The one capture rule decides what the wait may do (see
        // `braid_stream_core::capture_rule`); a refusal is typed for acl-sim to translate.
        let site = match &record {
            EventRecord::Never => RecordSite::Never,
            EventRecord::At(_) => RecordSite::Eager,
            EventRecord::Captured { capture, .. } => RecordSite::Capture {
                id: *capture,
                live: captures.contains_key(capture),
            },
        };
        let external = self.events[e].external;
        let outcome = capture_wait(st.capture.as_ref().map(|c| c.id), site, external)
            .map_err(HalError::CaptureRefused)?;
        if outcome == WaitOutcome::WaitNode {
            return self.with_frontier(s, |cap, _| cap.external.waits.push(e));
        }
        match (&mut st.capture, record) {
            (_, EventRecord::Never) => {}
            (None, EventRecord::Captured { capture, frontier }) => {
                st.capture = Some(StreamCapture {
                    id: capture,
                    frontier,
                });
                if let Some(cap) = self.captures.get_mut(&capture) {
                    cap.members.insert(s);
                }
            }
            (Some(sc), EventRecord::Captured { frontier, .. }) => {
                capture::union(&mut sc.frontier, &frontier);
            }
            // An eager stream's wait on an eager record was placed above (`wait_at`); the
            // rule refused one inside a capture.
            (_, EventRecord::At(_)) => {}
        }
        Ok(())
    }

    /// Makes later work on the eager stream `s` wait for event `e`'s last record, as if the
    /// wait was issued at host time `host`.
    fn wait_at(&mut self, s: u32, e: usize, host: u64) -> Result<(), HalError> {
        let EventRecord::At(t) = self.event(e)?.record else {
            return Ok(());
        };
        let recorded_on = self.event(e)?.recorded_on;
        let st = self.stream_mut(s)?;
        let from = st.tail.max(host);
        st.tail = st.tail.max(t);
        let to = st.tail.max(from);
        self.sanitizer.wait(s, e);
        if let (true, Some((rs, rt))) = (self.record_timeline, recorded_on) {
            self.trace.markers.push(Marker {
                stream: s,
                name: format!("wait e{e}"),
                start_ns: from,
                end_ns: to,
            });
            self.trace.flows.push(Flow {
                event: e,
                from_stream: rs,
                from_ns: rt,
                to_stream: s,
                to_ns: to,
            });
        }
        Ok(())
    }

    /// The completion time of event `e`: `None` if never recorded or recorded in a capture.
    fn event_time(&self, e: usize) -> Result<Option<u64>, HalError> {
        Ok(match self.event(e)?.record {
            EventRecord::At(t) => Some(t),
            _ => None,
        })
    }

    /// Whether event `e` is complete.
    pub fn query_event(&mut self, e: usize) -> Result<bool, HalError> {
        self.host_call("query_event");
        if self.coll.is_pending(e) {
            return Ok(false);
        }
        let done = self
            .event_time(e)?
            .is_none_or(|t| t <= self.devices[self.cur].host_ns);
        if done {
            self.sanitizer.host_observed_event(e);
        }
        Ok(done)
    }

    /// Blocks the host until event `e` is complete.
    pub fn sync_event(&mut self, e: usize) -> Result<(), HalError> {
        if self.coll.is_pending(e) {
            self.host_call("synchronize_event");
            return Err(self.blocked_event(e));
        }
        let t = self.event_time(e)?.unwrap_or(0);
        self.block_until(t, "synchronize_event");
        self.sanitizer.host_observed_event(e);
        Ok(())
    }

    /// Milliseconds from event `a` to event `b`.
    pub fn elapsed_ms(&mut self, a: usize, b: usize) -> Result<f32, HalError> {
        self.host_call("elapsed_time");
        let host = self.devices[self.cur].host_ns;
        let time = |name: &str, e: usize| -> Result<u64, HalError> {
            if self.coll.is_pending(e) {
                return Err(invalid(format!(
                    "the {name} event's record is held back behind a collective not yet run"
                )));
            }
            let ev = self.event(e)?;
            if !ev.timing {
                return Err(invalid(format!(
                    "elapsed time needs timing events; the {name} event was created without timing"
                )));
            }
            match ev.record {
                EventRecord::At(t) if t <= host => Ok(t),
                EventRecord::At(_) => {
                    Err(invalid(format!("the {name} event has not completed yet")))
                }
                EventRecord::Never => Err(invalid(format!("the {name} event was never recorded"))),
                EventRecord::Captured { .. } => Err(invalid(format!(
                    "the {name} event was last recorded in a graph capture and has no time"
                ))),
            }
        };
        let (ta, tb) = (time("start", a)?, time("end", b)?);
        Ok(((tb as f64 - ta as f64) / 1e6) as f32)
    }

    // ----- synchronization -----

    /// Whether all work on stream `s` is complete.
    pub fn query_stream(&mut self, s: u32) -> Result<bool, HalError> {
        self.host_call("query_stream");
        let done =
            !self.coll.is_deferred(s) && self.stream(s)?.tail <= self.devices[self.cur].host_ns;
        if done {
            self.sanitizer.host_observed_stream(s);
        }
        Ok(done)
    }

    /// Blocks the host until stream `s` is idle.
    pub fn sync_stream(&mut self, s: u32) -> Result<(), HalError> {
        if self.coll.is_deferred(s) {
            self.host_call("synchronize_stream");
            return Err(self.blocked_stream(s));
        }
        let t = self.stream(s)?.tail;
        self.block_until(t, "synchronize_stream");
        self.sanitizer.host_observed_stream(s);
        Ok(())
    }

    /// Blocks the current device's host until all work of the device is done (its streams;
    /// other devices' work is not waited for). Refused, naming what it waits for, when a
    /// stream of the device holds back work behind a collective not yet run.
    pub fn sync_device(&mut self) -> Result<(), HalError> {
        let held = self.devices[self.cur]
            .streams
            .iter()
            .copied()
            .find(|&s| self.coll.is_deferred(s));
        if let Some(s) = held {
            self.host_call("synchronize_device");
            return Err(self.blocked_stream(s));
        }
        let dev = self.dev();
        let t = dev
            .streams
            .iter()
            .filter_map(|&s| self.streams.get(s as usize))
            .map(|s| s.tail)
            .fold(dev.makespan, u64::max);
        self.block_until(t, "synchronize_device");
        let streams = &self.devices[self.cur].streams;
        self.sanitizer.host_observed_streams(streams);
        Ok(())
    }

    // ----- capture -----

    /// Starts a capture with stream `s` as origin.
    pub fn begin_capture(&mut self, s: u32, mode: CaptureMode) -> Result<(), HalError> {
        self.host_call("begin_capture");
        let id = self.next_capture;
        let st = self.stream_mut(s)?;
        if st.capture.is_some() {
            return Err(invalid(format!("stream {s} is already capturing")));
        }
        st.capture = Some(StreamCapture {
            id,
            frontier: Vec::new(),
        });
        self.next_capture += 1;
        self.captures.insert(
            id,
            Capture {
                origin: s,
                mode,
                members: BTreeSet::from([s]),
                nodes: Vec::new(),
                external: ExternalEvents::default(),
            },
        );
        tracing::debug!(stream = s, capture = id, ?mode, "sim capture begin");
        Ok(())
    }

    /// Ends the capture whose origin is `s` and returns its nodes and external events.
    pub fn end_capture(&mut self, s: u32) -> Result<(Vec<Node>, ExternalEvents), HalError> {
        self.host_call("end_capture");
        let Some(sc) = &self.stream(s)?.capture else {
            return Err(invalid(format!("stream {s} is not capturing")));
        };
        let id = sc.id;
        let origin = self.captures.get(&id).map(|c| c.origin);
        if origin != Some(s) {
            return Err(invalid(format!(
                "stream {s} joined a capture begun on stream {}; end it there",
                origin.map_or_else(|| "?".to_string(), |o| o.to_string())
            )));
        }
        let cap = self
            .captures
            .remove(&id)
            .ok_or_else(|| invalid("capture vanished"))?;
        for m in &cap.members {
            if let Some(st) = self.streams.get_mut(*m as usize) {
                st.capture = None;
            }
        }
        tracing::debug!(
            stream = s,
            capture = id,
            nodes = cap.nodes.len(),
            members = cap.members.len(),
            "sim capture end"
        );
        Ok((cap.nodes, cap.external))
    }

    /// Capture status of stream `s`.
    pub fn capture_status(&mut self, s: u32) -> Result<CaptureStatus, HalError> {
        self.host_call("capture_status");
        Ok(if self.stream(s)?.capture.is_some() {
            CaptureStatus::Active
        } else {
            CaptureStatus::None
        })
    }

    /// Replays `nodes` on stream `s` (or records them into `s`'s capture), after the last
    /// record of each of `external`'s waited events; records its recorded events at the end.
    pub fn launch_graph(
        &mut self,
        s: u32,
        nodes: &[Node],
        external: &ExternalEvents,
    ) -> Result<(), HalError> {
        let p = &self.devices[self.cur].config.profile;
        let cost = p
            .graph_launch_ns
            .saturating_add((nodes.len() as u64).saturating_mul(p.graph_node_ns));
        self.tick(cost, "graph_launch");
        if self.stream(s)?.capture.is_some() {
            return self.with_frontier(s, |cap, frontier| {
                cap.add_graph(nodes, frontier);
                cap.external.extend(external);
            });
        }
        let held = self.coll.is_deferred(s)
            || nodes.iter().any(collectives::is_collective)
            || external.waits.iter().any(|&e| self.coll.is_pending(e));
        if held {
            return self.hold_graph(s, nodes, external);
        }
        for &e in &external.waits {
            // Recorded eagerly or by a launch, never in a capture: the rule lets an eager
            // stream wait on it.
            self.wait(s, e)?;
        }
        self.devices[self.cur].graph_launches += 1;
        let host = self.devices[self.cur].host_ns;
        self.replay_at(s, nodes, external, host)
    }

    /// Replays `nodes` on the eager stream `s` as if launched at host time `host`, then
    /// records `external`'s recorded events at its end.
    fn replay_at(
        &mut self,
        s: u32,
        nodes: &[Node],
        external: &ExternalEvents,
        host: u64,
    ) -> Result<(), HalError> {
        let base = host.max(self.stream(s)?.tail);
        let mut replay = self.sanitizer.begin_replay(s);
        let mut first_report: Option<RaceReport> = None;
        let mut ends: Vec<u64> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let ready = node
                .deps
                .iter()
                .filter_map(|&d| ends.get(d))
                .fold(base, |a, &b| a.max(b));
            let slot = self.slot(&node.op, ready);
            if let Some(r) = replay.as_mut() {
                let acc: Accesses = node.op.kind.accesses();
                let info = op_info(&node.op, &slot, self.locate(node.op.stream), true);
                let reports = self.sanitizer.replay_node(r, &node.deps, &acc, info);
                if first_report.is_none() {
                    first_report = reports.into_iter().next();
                }
            }
            let end = self.place(node.op.clone(), slot, true);
            ends.push(end);
        }
        if let Some(r) = replay {
            self.sanitizer.end_replay(r);
        }
        let end = ends.iter().fold(base, |a, &b| a.max(b));
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        let tail = st.tail;
        for &e in &external.records {
            let was_pending = self.coll.supersede_record(e);
            self.record_at(s, e, tail);
            if was_pending {
                self.pump()?;
            }
        }
        match first_report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }

    // ----- observability -----

    /// Current host time of the current device.
    pub fn host_ns(&self) -> u64 {
        self.dev().host_ns
    }

    /// Executed ops of all devices in submission order.
    pub fn timeline(&self) -> &[OpRecord] {
        &self.timeline
    }

    /// Latest end of any op of the current device.
    pub fn makespan(&self) -> u64 {
        self.dev().makespan
    }

    /// The node's topology.
    pub fn topology(&self) -> &Topology {
        self.links.topology()
    }

    /// Latest end of any op of any device.
    pub fn node_makespan(&self) -> u64 {
        self.devices.iter().map(|d| d.makespan).max().unwrap_or(0)
    }

    /// The configuration of the current device.
    pub fn config(&self) -> &SimConfig {
        &self.dev().config
    }

    /// Names stream `s` as the tagged stream `tag` in reports.
    pub fn set_stream_tag(&mut self, s: u32, tag: &str) {
        let at = self.locate(s);
        self.stream_tags.insert(at, tag.to_string());
    }

    /// The sanitizer's stored reports, with tagged streams named and a hint where a tagged
    /// stream is involved.
    pub fn sanitizer_reports(&self) -> Vec<RaceReport> {
        self.sanitizer
            .reports()
            .iter()
            .map(|r| self.annotate(r.clone()))
            .collect()
    }

    /// Names the tagged streams of `r` and says how to order a tagged stream.
    fn annotate(&self, mut r: RaceReport) -> RaceReport {
        let tag_of = |op: &OpRef| {
            op.stream
                .and_then(|s| self.stream_tags.get(&(op.device, s)))
                .cloned()
        };
        if let Some(first) = r.first.as_mut() {
            first.stream_tag = tag_of(first);
        }
        r.second.stream_tag = tag_of(&r.second);
        let tagged = r
            .first
            .iter()
            .chain([&r.second])
            .find_map(|op| op.stream_tag.clone().map(|t| (t, op.from_graph)));
        r.hint = tagged.map(|(tag, in_graph)| {
            if in_graph {
                format!(
                    "inside a capture the tagged stream {tag:?} starts from the beginning of the capture, not from where stream_switch was called: record a tagged event after the work it needs and wait on it in the tagged stream (create_tagged_event, record_on_current_stream, wait_on_current_stream)"
                )
            } else {
                format!(
                    "order the tagged stream {tag:?} with the other stream: a tagged event recorded after the work it needs and waited on in the tagged stream, or wait_stream"
                )
            }
        });
        r
    }

    /// Number of sanitizer reports found, stored or not.
    pub fn sanitizer_report_count(&self) -> u64 {
        self.sanitizer.total_reports()
    }

    /// Forgets the sanitizer's reports.
    pub fn clear_sanitizer_reports(&mut self) {
        self.sanitizer.clear_reports();
    }

    /// The timeline as Chrome Trace Event JSON: of the device of ordinal `only`, or of every
    /// device (a process each).
    pub fn chrome_trace_json(&self, only: Option<u32>) -> String {
        let devices: Vec<trace::DeviceTracks> = self
            .devices
            .iter()
            .map(|d| trace::DeviceTracks {
                ordinal: d.config.ordinal,
                name: d.config.profile.name.clone(),
                streams: d.streams.len() as u32,
            })
            .filter(|d| only.is_none_or(|o| o == d.ordinal))
            .collect();
        let streams: Vec<(u32, u32)> = (0..self.streams.len() as u32)
            .map(|s| self.locate(s))
            .collect();
        trace::chrome_trace(&devices, &streams, &self.timeline, &self.trace)
    }

    /// Whether `range` lies in live memory (a segment, or consecutive mappings).
    pub fn is_live(&self, range: DeviceSlice) -> bool {
        self.memories[self.cur].is_valid(range)
    }

    /// Counters of the current device.
    pub fn stats(&self) -> SimStats {
        let (dev, mem) = (self.dev(), &self.memories[self.cur]);
        SimStats {
            ops_executed: dev.ops_executed,
            graph_launches: dev.graph_launches,
            allocations: mem.allocations(),
            frees: mem.frees(),
            bytes_allocated: mem.used(),
            peak_bytes_allocated: mem.peak(),
            invalid_accesses: mem.invalid_accesses(),
            failed_ops: mem.failed_ops(),
            host_allocations: dev.host.allocations(),
            host_frees: dev.host.frees(),
            host_bytes_allocated: dev.host.used(),
            peak_host_bytes_allocated: dev.host.peak(),
        }
    }
}

/// Where an op runs: start, end and units demanded, and for a peer copy its route.
#[derive(Clone, Debug)]
struct Slot {
    start: u64,
    end: u64,
    demand: u32,
    route: Option<Route>,
}

/// What the sanitizer keeps about `op` placed in `slot`, made by stream `local` of the
/// device of ordinal `device`.
fn op_info(op: &Op, slot: &Slot, (device, local): (u32, u32), from_graph: bool) -> OpInfo {
    OpInfo {
        device,
        stream: Some(local),
        label: op.label.clone(),
        kind: op.kind.name(),
        start_ns: slot.start,
        end_ns: slot.end,
        from_graph,
    }
}
