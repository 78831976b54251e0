//! Timeline export as Chrome Trace Event JSON, which Perfetto (ui.perfetto.dev) and
//! `chrome://tracing` open.
//!
//! Layout: one process per device (pid = the device's ordinal, named "braid sim device N
//! (profile)"), and in it:
//! - a thread track `host` (tid 0) with a slice per host call of the device, its modelled cost
//!   (each device has its own host clock);
//! - a thread track `stream N` (tid N + 1) per stream of the device with a complete
//!   (`"ph": "X"`) slice per eager op, named by its label, plus zero-length `record eK` slices
//!   and `wait eK` slices (from where the stream would have been ready to where the event let
//!   it go);
//! - graph-replay nodes as async slices (`"ph": "b"` / `"e"`, category `graph`) on the track of
//!   the stream they were captured on, since nodes of one replay may overlap;
//! - a thread track per link or engine a transfer of the device occupied (`link 0→1`,
//!   `port out 0`, ...; tids from 1,000,000 on), with a slice per transfer (category `link`);
//! - a flow from each event record to every wait that consumed it, across devices too: legacy
//!   flow events `"ph": "s"` (bound to the record slice) and `"ph": "f"` with `"bp": "e"`
//!   (bound to the wait slice), which Perfetto draws as arrows;
//! - a counter track `memory` (`"ph": "C"`) with the series `reserved` (bytes of the device's
//!   segments) and `allocated` (bytes in live blocks declared through
//!   [`crate::SimDevice::sanitizer_note_alloc`], whole segments where none were declared; for
//!   the whole node).
//!
//! Timestamps are microseconds of virtual time (fractional, so nanoseconds are kept).

use crate::timeline::{OpRecord, Ring};
use serde_json::{json, Value};

/// Thread id of the host track.
const HOST_TID: u32 = 0;
/// Thread id of the first link track.
const LINK_TID: u64 = 1_000_000;

/// A host call and its modelled cost.
#[derive(Clone, Debug)]
pub(crate) struct HostSlice {
    /// Ordinal of the device whose host made the call.
    pub device: u32,
    pub name: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A record or wait marker on a stream (node-wide index).
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    pub stream: u32,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// An event record consumed by a wait (streams by node-wide index).
#[derive(Clone, Debug)]
pub(crate) struct Flow {
    pub event: usize,
    pub from_stream: u32,
    pub from_ns: u64,
    pub to_stream: u32,
    pub to_ns: u64,
}

/// Memory counters at a point in time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemorySample {
    /// Ordinal of the device.
    pub device: u32,
    pub at_ns: u64,
    pub reserved: u64,
    pub allocated: u64,
}

/// A transfer occupying a link or an engine.
#[derive(Clone, Debug)]
pub(crate) struct LinkSlice {
    /// Ordinal of the device whose process shows it.
    pub device: u32,
    /// The track: the link or engine (`link 0→1`, `port out 0`, `comm engine`).
    pub track: String,
    /// The transfer's label.
    pub label: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Everything besides the op timeline that the trace shows, each kind a [`Ring`] of the same
/// capacity as the op timeline.
#[derive(Debug)]
pub(crate) struct TraceLog {
    pub host: Ring<HostSlice>,
    pub markers: Ring<Marker>,
    pub flows: Ring<Flow>,
    pub memory: Ring<MemorySample>,
    pub links: Ring<LinkSlice>,
}

impl TraceLog {
    /// An empty log keeping at most `capacity` records of each kind.
    pub fn new(capacity: usize) -> Self {
        TraceLog {
            host: Ring::new(capacity),
            markers: Ring::new(capacity),
            flows: Ring::new(capacity),
            memory: Ring::new(capacity),
            links: Ring::new(capacity),
        }
    }

    /// Records of every kind dropped so far.
    pub fn dropped(&self) -> u64 {
        self.host.dropped()
            + self.markers.dropped()
            + self.flows.dropped()
            + self.memory.dropped()
            + self.links.dropped()
    }
}

/// A device shown in the trace.
#[derive(Clone, Debug)]
pub(crate) struct DeviceTracks {
    /// Its ordinal: the process id.
    pub ordinal: u32,
    /// Its profile's name.
    pub name: String,
    /// Its number of streams.
    pub streams: u32,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn tid(stream: u32) -> u64 {
    stream as u64 + 1
}

/// Renders the trace of `devices`; `streams` gives each node-wide stream index its device
/// ordinal and index in the device. What the rings dropped is said in `otherData`
/// (`timeline_capacity`, `timeline_dropped_ops`, `timeline_dropped_records`).
pub(crate) fn chrome_trace(
    devices: &[DeviceTracks],
    streams: &[(u32, u32)],
    ops: &Ring<OpRecord>,
    log: &TraceLog,
    capacity: usize,
) -> String {
    let shown = |device: u32| devices.iter().any(|d| d.ordinal == device);
    let at = |s: u32| streams.get(s as usize).copied().unwrap_or((u32::MAX, s));
    let mut events: Vec<Value> = Vec::new();
    for d in devices {
        let pid = d.ordinal;
        events.push(json!({
            "ph": "M", "pid": pid, "tid": HOST_TID, "name": "process_name",
            "args": { "name": format!("braid sim device {} ({})", d.ordinal, d.name) }
        }));
        events.push(json!({
            "ph": "M", "pid": pid, "tid": HOST_TID, "name": "process_sort_index",
            "args": { "sort_index": pid }
        }));
        events.push(json!({
            "ph": "M", "pid": pid, "tid": HOST_TID, "name": "thread_name",
            "args": { "name": "host" }
        }));
        events.push(json!({
            "ph": "M", "pid": pid, "tid": HOST_TID, "name": "thread_sort_index",
            "args": { "sort_index": 0 }
        }));
        for s in 0..d.streams {
            events.push(json!({
                "ph": "M", "pid": pid, "tid": tid(s), "name": "thread_name",
                "args": { "name": format!("stream {s}") }
            }));
            events.push(json!({
                "ph": "M", "pid": pid, "tid": tid(s), "name": "thread_sort_index",
                "args": { "sort_index": tid(s) }
            }));
        }
    }
    for h in log.host.iter().filter(|h| shown(h.device)) {
        events.push(json!({
            "ph": "X", "pid": h.device, "tid": HOST_TID, "name": h.name, "cat": "host",
            "ts": us(h.start_ns), "dur": us(h.end_ns - h.start_ns)
        }));
    }
    for (i, op) in ops.iter().enumerate().filter(|(_, op)| shown(op.device)) {
        let pid = op.device;
        let args = json!({
            "kind": op.kind,
            "unit": format!("{:?}", op.unit),
            "reads": op.reads.iter().map(|r| format!("{}+{}", r.ptr, r.len)).collect::<Vec<_>>(),
            "writes": op.writes.iter().map(|w| format!("{}+{}", w.ptr, w.len)).collect::<Vec<_>>(),
        });
        if op.from_graph {
            for (ph, ts) in [("b", op.start_ns), ("e", op.end_ns)] {
                events.push(json!({
                    "ph": ph, "pid": pid, "tid": tid(op.stream), "name": op.label,
                    "cat": "graph", "id": i, "ts": us(ts), "args": args
                }));
            }
        } else {
            events.push(json!({
                "ph": "X", "pid": pid, "tid": tid(op.stream), "name": op.label, "cat": "op",
                "ts": us(op.start_ns), "dur": us(op.end_ns - op.start_ns), "args": args
            }));
        }
    }
    for m in log.markers.iter() {
        let (pid, s) = at(m.stream);
        if !shown(pid) {
            continue;
        }
        events.push(json!({
            "ph": "X", "pid": pid, "tid": tid(s), "name": m.name, "cat": "event",
            "ts": us(m.start_ns), "dur": us(m.end_ns.saturating_sub(m.start_ns))
        }));
    }
    for (id, f) in log.flows.iter().enumerate() {
        let ((from_pid, from), (to_pid, to)) = (at(f.from_stream), at(f.to_stream));
        if !shown(from_pid) || !shown(to_pid) {
            continue;
        }
        let name = format!("e{}", f.event);
        events.push(json!({
            "ph": "s", "pid": from_pid, "tid": tid(from), "name": name, "cat": "event",
            "id": id, "ts": us(f.from_ns)
        }));
        events.push(json!({
            "ph": "f", "bp": "e", "pid": to_pid, "tid": tid(to), "name": name,
            "cat": "event", "id": id, "ts": us(f.to_ns)
        }));
    }
    let mut link_tracks: Vec<(u32, &str)> = Vec::new();
    for l in log.links.iter().filter(|l| shown(l.device)) {
        let key = (l.device, l.track.as_str());
        let k = match link_tracks.iter().position(|t| *t == key) {
            Some(k) => k,
            None => {
                link_tracks.push(key);
                let k = link_tracks.len() - 1;
                events.push(json!({
                    "ph": "M", "pid": l.device, "tid": LINK_TID + k as u64,
                    "name": "thread_name", "args": { "name": l.track }
                }));
                k
            }
        };
        events.push(json!({
            "ph": "X", "pid": l.device, "tid": LINK_TID + k as u64, "name": l.label,
            "cat": "link", "ts": us(l.start_ns), "dur": us(l.end_ns.saturating_sub(l.start_ns))
        }));
    }
    for m in log.memory.iter().filter(|m| shown(m.device)) {
        events.push(json!({
            "ph": "C", "pid": m.device, "name": "memory", "ts": us(m.at_ns),
            "args": { "reserved": m.reserved, "allocated": m.allocated }
        }));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "timeline_capacity": capacity,
            "timeline_dropped_ops": ops.dropped(),
            "timeline_dropped_records": log.dropped(),
        }
    })
    .to_string()
}
