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
use crate::fault::{CallKind, FaultState};
use crate::host::HostHeap;
use crate::limits::Limits;
use crate::memory::{Memory, PageRun};
use crate::op::{Accesses, Op, OpKind};
use crate::queue::DataQueue;
use crate::resource::Pool;
use crate::sanitizer::report::{OpInfo, OpRef, RaceReport};
use crate::sanitizer::{Sanitizer, SanitizerMode};
use crate::timeline::{OpRecord, SimStats};
use crate::trace::{self, Flow, HostSlice, Marker, MemorySample, TraceLog};
use braid_stream_core::capture_rule::{
    capture_record, capture_wait, RecordOutcome, RecordSite, WaitOutcome,
};
use braid_stream_core::hal::{page_of_run, HalError};
use braid_stream_core::kernel::{ComputeUnit, Kernel};
use braid_stream_core::types::{
    CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo, Priority,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Per-stream state.
#[derive(Debug)]
struct StreamState {
    /// Priority given at creation (kept; the cost model does not use it yet).
    #[allow(dead_code)]
    priority: Priority,
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
    timing: bool,
    /// An external event: record and wait nodes inside captures.
    external: bool,
    record: EventRecord,
    /// Stream and time of the last eager record (for timeline flows).
    recorded_on: Option<(u32, u64)>,
}

fn invalid(msg: impl Into<String>) -> HalError {
    HalError::InvalidArgument(msg.into())
}

/// The error an abort-mode sanitizer report becomes.
fn sanitizer_error(report: &RaceReport) -> HalError {
    HalError::InvalidArgument(format!("sanitizer: {report}"))
}

/// The whole state of one simulated device.
#[derive(Debug)]
pub(crate) struct Engine {
    config: SimConfig,
    host_ns: u64,
    memory: Memory,
    /// Pinned host memory (`alloc_host`).
    host: HostHeap,
    streams: Vec<StreamState>,
    /// Tags the front layer gave streams (named in sanitizer reports).
    stream_tags: std::collections::HashMap<u32, String>,
    events: Vec<EventState>,
    /// Cube, vector and copy resources.
    resources: [Pool; 3],
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
    makespan: u64,
    ops_executed: u64,
    graph_launches: u64,
    /// The fault plan, its counters and pending asynchronous failures ([`crate::fault`]).
    pub(crate) faults: FaultState,
    /// Live streams and events against the runtime's limits ([`crate::limits`]).
    pub(crate) limits: Limits,
}

impl Engine {
    /// A fresh device with its default stream (index 0).
    pub fn new(config: SimConfig) -> Self {
        let memory = Memory::new(config.capacity, config.mode == SimMode::Data);
        let host = HostHeap::new(config.host_capacity);
        let p = &config.profile;
        let resources = [
            Pool::new(p.cube_units),
            Pool::new(p.vector_units),
            Pool::new(p.copy_engines),
        ];
        let sanitizer = Sanitizer::new(config.sanitizer);
        let lifetimes = config.sanitizer != SanitizerMode::Off || config.record_timeline;
        let faults = FaultState::new(&config.faults);
        let limits = Limits::new(config.max_streams, config.max_events);
        Engine {
            config,
            host_ns: 0,
            host,
            memory,
            streams: vec![StreamState {
                priority: 0,
                tail: 0,
                capture: None,
            }],
            stream_tags: std::collections::HashMap::new(),
            events: Vec::new(),
            resources,
            sanitizer,
            trace: TraceLog::default(),
            queue: DataQueue::default(),
            captures: BTreeMap::new(),
            next_capture: 1,
            timeline: Vec::new(),
            lifetimes,
            free_label: Arc::from("free"),
            makespan: 0,
            ops_executed: 0,
            graph_launches: 0,
            faults,
            limits,
        }
    }

    /// The error of an injected failure of `kind` asking for `requested` bytes.
    #[cold]
    pub(crate) fn fault_error(&self, kind: CallKind, requested: u64) -> HalError {
        let (free, total) = if kind == CallKind::HostAlloc {
            let total = self.config.host_capacity;
            (total.saturating_sub(self.host.used()), total)
        } else {
            let info = self.memory.info();
            (info.free, info.total)
        };
        FaultState::error(kind, requested, free, total)
    }

    /// Whether stream `s` records into a capture.
    pub(crate) fn is_capturing(&self, s: u32) -> bool {
        self.stream(s).is_ok_and(|st| st.capture.is_some())
    }

    // ----- clock -----

    /// Advances the host clock by `ns` for the host call `what` and applies the data effects
    /// it passed.
    fn tick(&mut self, ns: u64, what: &'static str) {
        let start = self.host_ns;
        self.host_ns = self.host_ns.saturating_add(ns);
        self.host_slice(what, start);
        self.settle();
    }

    fn host_slice(&mut self, name: &'static str, start_ns: u64) {
        if self.config.record_timeline {
            self.trace.host.push(HostSlice {
                name,
                start_ns,
                end_ns: self.host_ns,
            });
        }
    }

    /// Blocks the host until `t` (the call `what`), then charges one cheap call.
    fn block_until(&mut self, t: u64, what: &'static str) {
        let start = self.host_ns;
        self.host_ns = self
            .host_ns
            .max(t)
            .saturating_add(self.config.profile.host_call_ns);
        self.host_slice(what, start);
        self.settle();
    }

    /// Samples the memory counters for the trace.
    fn memory_sample(&mut self) {
        if self.config.record_timeline {
            self.trace.memory.push(MemorySample {
                at_ns: self.host_ns,
                reserved: self.memory.used(),
                allocated: self.sanitizer.allocated(),
            });
        }
    }

    fn settle(&mut self) {
        for r in &mut self.resources {
            r.prune(self.host_ns);
        }
        self.queue.drain(self.host_ns, &mut self.memory);
    }

    /// Charges one cheap host call `what` (create, alloc, free, memory info, capture calls).
    pub fn host_call(&mut self, what: &'static str) {
        self.tick(self.config.profile.host_call_ns, what);
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

    /// Creates a stream and returns its index.
    pub fn create_stream(&mut self, priority: Priority) -> Result<u32, HalError> {
        self.host_call("create_stream");
        let index = u32::try_from(self.streams.len()).map_err(|_| invalid("too many streams"))?;
        self.streams.push(StreamState {
            priority,
            tail: 0,
            capture: None,
        });
        self.sanitizer.stream_created();
        Ok(index)
    }

    /// Creates an event and returns its index.
    pub fn create_event(&mut self, flags: EventFlags) -> usize {
        self.host_call("create_event");
        self.events.push(EventState {
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
        let ptr = self.memory.alloc(size)?;
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
        if self.memory.is_segment(ptr) {
            self.end_lifetime(ptr)?;
        }
        self.memory.free(ptr)?;
        self.memory_sample();
        Ok(())
    }

    /// Reserves `size` bytes of address space. To the sanitizer a reservation is a segment
    /// managed by a sub-allocator from the start: only blocks declared in it are live.
    pub fn reserve_address(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        self.host_call("reserve_address");
        let ptr = self.memory.reserve(size)?;
        if self.lifetimes {
            self.sanitizer.segment_reserve(ptr.0, size);
        }
        Ok(ptr)
    }

    /// Releases the reservation at `ptr` (nothing mapped in it any more). The sanitizer
    /// checks that the host has observed every access to it complete.
    pub fn release_address(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        self.host_call("release_address");
        if !self.memory.is_empty_reservation(ptr) {
            // Not releasable: the memory model names the reason.
            return self.memory.release(ptr);
        }
        self.end_lifetime(ptr)?;
        self.memory.release(ptr)
    }

    /// Maps `size` bytes of fresh memory at `at` inside a reservation.
    pub fn map_physical(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        self.host_call("map_physical");
        self.memory.map(at, size)?;
        self.memory_sample();
        Ok(())
    }

    /// Unmaps the mapping of `size` bytes at `at`.
    pub fn unmap_physical(&mut self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        self.host_call("unmap_physical");
        self.memory.unmap(at, size)?;
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
        let call_ns = self.config.profile.host_call_ns;
        let end = self.host_ns.saturating_add(call_ns.saturating_mul(count));
        if self.config.record_timeline || self.queue.due_by(end) {
            for i in 0..count {
                if let Err(e) = one(self, i) {
                    return (i, Err(e));
                }
            }
            return (count, Ok(()));
        }
        let (done, result) = run(&mut self.memory);
        // The calls made, the failing one included, as many cheap host calls.
        let calls = done + u64::from(result.is_err());
        self.host_ns = self.host_ns.saturating_add(call_ns.saturating_mul(calls));
        self.settle();
        (done, result)
    }

    /// Allocates `size` bytes of physical memory; returns its handle.
    pub fn alloc_physical(&mut self, size: u64) -> Result<u64, HalError> {
        self.host_call("alloc_physical");
        let handle = self.memory.alloc_physical(size)?;
        self.memory_sample();
        Ok(handle)
    }

    /// Frees the (unmapped) physical memory of `handle`.
    pub fn free_physical(&mut self, handle: u64) -> Result<(), HalError> {
        self.host_call("free_physical");
        self.memory.free_physical(handle)?;
        self.memory_sample();
        Ok(())
    }

    /// Maps the physical memory of `handle` at `at` inside a reservation.
    pub fn map_handle(&mut self, at: DevicePtr, handle: u64) -> Result<(), HalError> {
        self.host_call("map");
        self.memory.map_handle(at, handle)
    }

    /// Unmaps the mapping starting at `at`; returns its handle.
    pub fn unmap_at(&mut self, at: DevicePtr) -> Result<u64, HalError> {
        self.host_call("unmap");
        self.memory.unmap_at(at)
    }

    /// Ends the sanitizer lifetime of the segment or reservation at `ptr` (a host free): in
    /// abort mode a report of an access not observed complete refuses it.
    fn end_lifetime(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        if self.lifetimes {
            let at = self.host_ns;
            let label = &self.free_label;
            self.sanitizer
                .segment_free(ptr.0, || OpInfo {
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
            self.sanitizer.adopt_segments(self.memory.segments());
            self.lifetimes = true;
        }
    }

    /// Allocates `size` bytes of pinned host memory.
    pub fn alloc_host(&mut self, size: u64) -> Result<HostPtr, HalError> {
        self.host_call("alloc_host");
        self.host.alloc(size)
    }

    /// Frees pinned host memory. Like `cudaFreeHost`, it first waits for all work on the
    /// device, so no queued copy can touch the memory afterwards.
    pub fn free_host(&mut self, ptr: HostPtr) -> Result<(), HalError> {
        self.host_call("free_host");
        self.sync_device();
        self.host.free(ptr)
    }

    /// Free and total device memory.
    pub fn mem_info(&mut self) -> MemInfo {
        self.host_call("mem_info");
        self.memory.info()
    }

    /// A sub-allocator handed out `range` on stream `s` (see
    /// [`crate::SimDevice::sanitizer_note_alloc`]).
    pub fn note_alloc(&mut self, range: DeviceSlice, s: u32) -> Result<(), HalError> {
        self.stream(s)?;
        self.track_lifetimes();
        self.sanitizer
            .block_alloc(range)
            .map_err(|e| invalid(format!("sanitizer_note_alloc: {e}")))?;
        self.memory_sample();
        Ok(())
    }

    /// A sub-allocator took back `range` on stream `s` (see
    /// [`crate::SimDevice::sanitizer_note_free`]).
    pub fn note_free(&mut self, range: DeviceSlice, s: u32) -> Result<(), HalError> {
        let at = self.stream(s)?.tail.max(self.host_ns);
        self.track_lifetimes();
        let label = &self.free_label;
        self.sanitizer
            .block_free(range, || OpInfo {
                stream: Some(s),
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
        }
    }

    /// Enqueues (or captures) `kind` on stream `s`.
    pub fn submit(&mut self, s: u32, kind: OpKind, label: &str) -> Result<(), HalError> {
        self.tick(self.config.profile.eager_launch_ns, "launch");
        Self::check(&kind)?;
        let capturing = self.stream(s)?.capture.is_some();
        let op = Op {
            kind,
            label: Arc::from(label),
            stream: s,
        };
        if capturing {
            return self.with_frontier(s, |cap, frontier| cap.add(op, frontier));
        }
        let ready = self.host_ns.max(self.stream(s)?.tail);
        let slot = self.slot(&op, ready);
        let acc = op.kind.accesses();
        self.sanitizer
            .eager_op(s, &acc, || op_info(&op, slot, false))
            .map_err(|r| sanitizer_error(&r))?;
        let end = self.place(op, slot, false);
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        Ok(())
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
    /// its resource has the units it demands free for its duration.
    fn slot(&self, op: &Op, ready: u64) -> Slot {
        let p = &self.config.profile;
        let duration = op.kind.duration_ns(p);
        let unit = op.kind.unit();
        let demand = op.kind.demand(p);
        let start = match resource_index(unit) {
            Some(i) => self.resources[i].earliest(ready, duration, demand),
            None => ready,
        };
        Slot {
            start,
            end: start.saturating_add(duration),
            demand,
        }
    }

    /// Places `op` in `slot` (from [`Engine::slot`], with nothing placed in between); returns
    /// its end time.
    fn place(&mut self, op: Op, slot: Slot, from_graph: bool) -> u64 {
        let unit = op.kind.unit();
        let (start, end) = (slot.start, slot.end);
        if let Some(i) = resource_index(unit) {
            self.resources[i].reserve(start, end - start, slot.demand);
        }
        self.makespan = self.makespan.max(end);
        self.ops_executed += 1;
        if self.config.record_timeline {
            self.timeline.push(OpRecord {
                stream: op.stream,
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
        if self.config.mode == SimMode::Data {
            self.queue.push(start, end, op.kind);
        }
        end
    }

    // ----- events -----

    /// Records event `e` at stream `s`'s current position.
    pub fn record(&mut self, s: u32, e: usize) -> Result<(), HalError> {
        self.tick(self.config.profile.eager_launch_ns, "record");
        let external = self.event(e)?.external;
        let st = self.stream(s)?;
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
                let t = st.tail.max(self.host_ns);
                self.record_at(s, e, t);
                Ok(())
            }
        }
    }

    /// Records event `e` eagerly on stream `s`, completing at `t`.
    fn record_at(&mut self, s: u32, e: usize, t: u64) {
        self.sanitizer.record(s, e);
        self.events[e].recorded_on = Some((s, t));
        if self.config.record_timeline {
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
        self.tick(self.config.profile.eager_launch_ns, "wait");
        let record = self.event(e)?.record.clone();
        let recorded_on = self.event(e)?.recorded_on;
        let host = self.host_ns;
        let record_timeline = self.config.record_timeline;
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
            (None, EventRecord::At(t)) => {
                let from = st.tail.max(host);
                st.tail = st.tail.max(t);
                let to = st.tail.max(from);
                self.sanitizer.wait(s, e);
                if let (true, Some((rs, rt))) = (record_timeline, recorded_on) {
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
            }
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
            // The rule refused an eager record waited on inside a capture above.
            (Some(_), EventRecord::At(_)) => {}
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
        let done = self.event_time(e)?.is_none_or(|t| t <= self.host_ns);
        if done {
            self.sanitizer.host_observed_event(e);
        }
        Ok(done)
    }

    /// Blocks the host until event `e` is complete.
    pub fn sync_event(&mut self, e: usize) -> Result<(), HalError> {
        let t = self.event_time(e)?.unwrap_or(0);
        self.block_until(t, "synchronize_event");
        self.sanitizer.host_observed_event(e);
        Ok(())
    }

    /// Milliseconds from event `a` to event `b`.
    pub fn elapsed_ms(&mut self, a: usize, b: usize) -> Result<f32, HalError> {
        self.host_call("elapsed_time");
        let host = self.host_ns;
        let time = |name: &str, e: usize| -> Result<u64, HalError> {
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
        let done = self.stream(s)?.tail <= self.host_ns;
        if done {
            self.sanitizer.host_observed_stream(s);
        }
        Ok(done)
    }

    /// Blocks the host until stream `s` is idle.
    pub fn sync_stream(&mut self, s: u32) -> Result<(), HalError> {
        let t = self.stream(s)?.tail;
        self.block_until(t, "synchronize_stream");
        self.sanitizer.host_observed_stream(s);
        Ok(())
    }

    /// Blocks the host until all work is done.
    pub fn sync_device(&mut self) {
        let t = self
            .streams
            .iter()
            .map(|s| s.tail)
            .fold(self.makespan, u64::max);
        self.block_until(t, "synchronize_device");
        self.sanitizer.host_observed_all();
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
        let p = &self.config.profile;
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
        for &e in &external.waits {
            // Recorded eagerly or by a launch, never in a capture: the rule lets an eager
            // stream wait on it.
            self.wait(s, e)?;
        }
        let base = self.host_ns.max(self.stream(s)?.tail);
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
                let reports =
                    self.sanitizer
                        .replay_node(r, &node.deps, &acc, op_info(&node.op, slot, true));
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
            self.record_at(s, e, tail);
        }
        self.graph_launches += 1;
        match first_report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }

    // ----- observability -----

    /// Current host time.
    pub fn host_ns(&self) -> u64 {
        self.host_ns
    }

    /// Executed ops in submission order.
    pub fn timeline(&self) -> &[OpRecord] {
        &self.timeline
    }

    /// Latest end of any op.
    pub fn makespan(&self) -> u64 {
        self.makespan
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Names stream `s` as the tagged stream `tag` in reports.
    pub fn set_stream_tag(&mut self, s: u32, tag: &str) {
        self.stream_tags.insert(s, tag.to_string());
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
        let tag_of = |op: &OpRef| op.stream.and_then(|s| self.stream_tags.get(&s)).cloned();
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

    /// The timeline as Chrome Trace Event JSON.
    pub fn chrome_trace_json(&self) -> String {
        trace::chrome_trace(
            &self.config.profile.name,
            self.streams.len() as u32,
            &self.timeline,
            &self.trace,
        )
    }

    /// Whether `range` lies in live memory (a segment, or consecutive mappings).
    pub fn is_live(&self, range: DeviceSlice) -> bool {
        self.memory.is_valid(range)
    }

    /// Counters.
    pub fn stats(&self) -> SimStats {
        SimStats {
            ops_executed: self.ops_executed,
            graph_launches: self.graph_launches,
            allocations: self.memory.allocations(),
            frees: self.memory.frees(),
            bytes_allocated: self.memory.used(),
            peak_bytes_allocated: self.memory.peak(),
            invalid_accesses: self.memory.invalid_accesses(),
            failed_ops: self.memory.failed_ops(),
            host_allocations: self.host.allocations(),
            host_frees: self.host.frees(),
            host_bytes_allocated: self.host.used(),
            peak_host_bytes_allocated: self.host.peak(),
        }
    }
}

/// Where an op runs: start, end and units demanded.
#[derive(Clone, Copy, Debug)]
struct Slot {
    start: u64,
    end: u64,
    demand: u32,
}

/// Index of `unit`'s pool in `Engine::resources`.
fn resource_index(unit: ComputeUnit) -> Option<usize> {
    match unit {
        ComputeUnit::Cube => Some(0),
        ComputeUnit::Vector => Some(1),
        ComputeUnit::Copy => Some(2),
        ComputeUnit::None => None,
    }
}

/// What the sanitizer keeps about `op` placed in `slot`.
fn op_info(op: &Op, slot: Slot, from_graph: bool) -> OpInfo {
    OpInfo {
        stream: Some(op.stream),
        label: op.label.clone(),
        kind: op.kind.name(),
        start_ns: slot.start,
        end_ns: slot.end,
        from_graph,
    }
}
