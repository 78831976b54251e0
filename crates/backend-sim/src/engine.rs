//! The discrete-event engine of one device: host clock, streams, events, resources, captures.
//!
//! Scheduling is computed eagerly at submission. An op is ready at the latest of the host time
//! (after its launch cost), the end of its stream's previous work and the times of events the
//! stream waited on; it then takes the earliest slot at or after that on its resource. Data
//! effects are queued and applied as the host clock passes them (see [`crate::queue`]).

use crate::capture::{self, Capture, Node, StreamCapture};
use crate::config::{SimConfig, SimMode};
use crate::memory::Memory;
use crate::op::{Op, OpKind};
use crate::queue::DataQueue;
use crate::resource::Reservations;
use crate::timeline::{OpRecord, SimStats};
use braid_stream_core::hal::HalError;
use braid_stream_core::kernel::{ComputeUnit, Kernel};
use braid_stream_core::types::{
    CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags, MemInfo, Priority,
};
use std::collections::{BTreeMap, BTreeSet};

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
    record: EventRecord,
}

fn invalid(msg: impl Into<String>) -> HalError {
    HalError::InvalidArgument(msg.into())
}

/// The whole state of one simulated device.
#[derive(Debug)]
pub(crate) struct Engine {
    config: SimConfig,
    host_ns: u64,
    memory: Memory,
    streams: Vec<StreamState>,
    events: Vec<EventState>,
    /// Cube, vector and copy resources.
    resources: [Reservations; 3],
    queue: DataQueue,
    captures: BTreeMap<u64, Capture>,
    next_capture: u64,
    timeline: Vec<OpRecord>,
    makespan: u64,
    ops_executed: u64,
    graph_launches: u64,
}

impl Engine {
    /// A fresh device with its default stream (index 0).
    pub fn new(config: SimConfig) -> Self {
        let memory = Memory::new(config.capacity, config.mode == SimMode::Data);
        Engine {
            config,
            host_ns: 0,
            memory,
            streams: vec![StreamState {
                priority: 0,
                tail: 0,
                capture: None,
            }],
            events: Vec::new(),
            resources: Default::default(),
            queue: DataQueue::default(),
            captures: BTreeMap::new(),
            next_capture: 1,
            timeline: Vec::new(),
            makespan: 0,
            ops_executed: 0,
            graph_launches: 0,
        }
    }

    // ----- clock -----

    /// Advances the host clock by `ns` and applies the data effects it passed.
    fn tick(&mut self, ns: u64) {
        self.host_ns = self.host_ns.saturating_add(ns);
        self.settle();
    }

    /// Blocks the host until `t`, then charges one cheap call.
    fn block_until(&mut self, t: u64) {
        self.host_ns = self
            .host_ns
            .max(t)
            .saturating_add(self.config.profile.host_call_ns);
        self.settle();
    }

    fn settle(&mut self) {
        for r in &mut self.resources {
            r.prune(self.host_ns);
        }
        self.queue.drain(self.host_ns, &mut self.memory);
    }

    /// Charges one cheap host call (create, alloc, free, memory info, capture calls).
    pub fn host_call(&mut self) {
        self.tick(self.config.profile.host_call_ns);
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
        self.host_call();
        let index = u32::try_from(self.streams.len()).map_err(|_| invalid("too many streams"))?;
        self.streams.push(StreamState {
            priority,
            tail: 0,
            capture: None,
        });
        Ok(index)
    }

    /// Creates an event and returns its index.
    pub fn create_event(&mut self, flags: EventFlags) -> usize {
        self.host_call();
        self.events.push(EventState {
            timing: flags.timing,
            record: EventRecord::Never,
        });
        self.events.len() - 1
    }

    /// Allocates `size` bytes of device memory.
    pub fn alloc(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        self.host_call();
        self.memory.alloc(size)
    }

    /// Frees the segment at `ptr`.
    pub fn free(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        self.host_call();
        self.memory.free(ptr)
    }

    /// Free and total device memory.
    pub fn mem_info(&mut self) -> MemInfo {
        self.host_call();
        self.memory.info()
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
            OpKind::Kernel(k) => {
                if let Kernel::Matmul { m, k: kk, n, .. } = *k {
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
        self.tick(self.config.profile.eager_launch_ns);
        Self::check(&kind)?;
        let op = Op {
            kind,
            label: label.to_string(),
            stream: s,
        };
        if self.stream(s)?.capture.is_some() {
            return self.with_frontier(s, |cap, frontier| cap.add(op, frontier));
        }
        let ready = self.host_ns.max(self.stream(s)?.tail);
        let end = self.place(op, ready, false);
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

    /// Places `op` at the earliest free slot of its resource at or after `ready`; returns its
    /// end time.
    fn place(&mut self, op: Op, ready: u64, from_graph: bool) -> u64 {
        let duration = op.kind.duration_ns(&self.config.profile);
        let unit = op.kind.unit();
        let start = match unit {
            ComputeUnit::Cube => self.resources[0].place(ready, duration),
            ComputeUnit::Vector => self.resources[1].place(ready, duration),
            ComputeUnit::Copy => self.resources[2].place(ready, duration),
            ComputeUnit::None => ready,
        };
        let end = start.saturating_add(duration);
        self.makespan = self.makespan.max(end);
        self.ops_executed += 1;
        if self.config.record_timeline {
            self.timeline.push(OpRecord {
                stream: op.stream,
                label: op.label,
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
        self.tick(self.config.profile.eager_launch_ns);
        self.event(e)?;
        let host = self.host_ns;
        let st = self.stream(s)?;
        let record = match &st.capture {
            Some(sc) => EventRecord::Captured {
                capture: sc.id,
                frontier: sc.frontier.clone(),
            },
            None => EventRecord::At(st.tail.max(host)),
        };
        self.events[e].record = record;
        Ok(())
    }

    /// Makes later work on stream `s` wait for event `e`'s last record.
    pub fn wait(&mut self, s: u32, e: usize) -> Result<(), HalError> {
        self.tick(self.config.profile.eager_launch_ns);
        let record = self.event(e)?.record.clone();
        let captures = &self.captures;
        let st = self
            .streams
            .get_mut(s as usize)
            .ok_or_else(|| invalid(format!("unknown stream index {s}")))?;
        match (&mut st.capture, record) {
            (_, EventRecord::Never) => {}
            (None, EventRecord::At(t)) => st.tail = st.tail.max(t),
            // An eager record orders nothing inside a capture: the graph has no node for it.
            (Some(_), EventRecord::At(_)) => {}
            (None, EventRecord::Captured { capture, frontier }) => {
                if !captures.contains_key(&capture) {
                    return Err(invalid(
                        "event was recorded in a capture that has already ended",
                    ));
                }
                st.capture = Some(StreamCapture {
                    id: capture,
                    frontier,
                });
                if let Some(cap) = self.captures.get_mut(&capture) {
                    cap.members.insert(s);
                }
            }
            (Some(sc), EventRecord::Captured { capture, frontier }) => {
                if sc.id != capture {
                    return Err(invalid(
                        "event was recorded in a different capture than the waiting stream's",
                    ));
                }
                capture::union(&mut sc.frontier, &frontier);
            }
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
        self.host_call();
        Ok(self.event_time(e)?.is_none_or(|t| t <= self.host_ns))
    }

    /// Blocks the host until event `e` is complete.
    pub fn sync_event(&mut self, e: usize) -> Result<(), HalError> {
        let t = self.event_time(e)?.unwrap_or(0);
        self.block_until(t);
        Ok(())
    }

    /// Milliseconds from event `a` to event `b`.
    pub fn elapsed_ms(&mut self, a: usize, b: usize) -> Result<f32, HalError> {
        self.host_call();
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
        self.host_call();
        Ok(self.stream(s)?.tail <= self.host_ns)
    }

    /// Blocks the host until stream `s` is idle.
    pub fn sync_stream(&mut self, s: u32) -> Result<(), HalError> {
        let t = self.stream(s)?.tail;
        self.block_until(t);
        Ok(())
    }

    /// Blocks the host until all work is done.
    pub fn sync_device(&mut self) {
        let t = self
            .streams
            .iter()
            .map(|s| s.tail)
            .fold(self.makespan, u64::max);
        self.block_until(t);
    }

    // ----- capture -----

    /// Starts a capture with stream `s` as origin.
    pub fn begin_capture(&mut self, s: u32, mode: CaptureMode) -> Result<(), HalError> {
        self.host_call();
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
            },
        );
        tracing::debug!(stream = s, capture = id, ?mode, "sim capture begin");
        Ok(())
    }

    /// Ends the capture whose origin is `s` and returns its nodes.
    pub fn end_capture(&mut self, s: u32) -> Result<Vec<Node>, HalError> {
        self.host_call();
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
        Ok(cap.nodes)
    }

    /// Capture status of stream `s`.
    pub fn capture_status(&mut self, s: u32) -> Result<CaptureStatus, HalError> {
        self.host_call();
        Ok(if self.stream(s)?.capture.is_some() {
            CaptureStatus::Active
        } else {
            CaptureStatus::None
        })
    }

    /// Replays `nodes` on stream `s` (or records them into `s`'s capture).
    pub fn launch_graph(&mut self, s: u32, nodes: &[Node]) -> Result<(), HalError> {
        let p = &self.config.profile;
        let cost = p
            .graph_launch_ns
            .saturating_add((nodes.len() as u64).saturating_mul(p.graph_node_ns));
        self.tick(cost);
        if self.stream(s)?.capture.is_some() {
            return self.with_frontier(s, |cap, frontier| cap.add_graph(nodes, frontier));
        }
        let base = self.host_ns.max(self.stream(s)?.tail);
        let mut ends: Vec<u64> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let ready = node
                .deps
                .iter()
                .filter_map(|&d| ends.get(d))
                .fold(base, |a, &b| a.max(b));
            let end = self.place(node.op.clone(), ready, true);
            ends.push(end);
        }
        let end = ends.iter().fold(base, |a, &b| a.max(b));
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        self.graph_launches += 1;
        Ok(())
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
        }
    }
}
