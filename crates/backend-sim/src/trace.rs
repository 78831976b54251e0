//! Timeline export as Chrome Trace Event JSON, which Perfetto (ui.perfetto.dev) and
//! `chrome://tracing` open.
//!
//! Layout (one process, "braid sim"):
//! - a thread track `host` (tid 0) with a slice per host call, its modelled cost;
//! - a thread track `stream N` (tid N + 1) per stream with a complete (`"ph": "X"`) slice per
//!   eager op, named by its label, plus zero-length `record eK` slices and `wait eK` slices
//!   (from where the stream would have been ready to where the event let it go);
//! - graph-replay nodes as async slices (`"ph": "b"` / `"e"`, category `graph`) on the track of
//!   the stream they were captured on, since nodes of one replay may overlap;
//! - a flow from each event record to every wait that consumed it: legacy flow events
//!   `"ph": "s"` (bound to the record slice) and `"ph": "f"` with `"bp": "e"` (bound to the
//!   wait slice), which Perfetto draws as arrows;
//! - a counter track `memory` (`"ph": "C"`) with the series `reserved` (bytes of device
//!   segments) and `allocated` (bytes in live blocks declared through
//!   [`crate::SimDevice::sanitizer_note_alloc`], whole segments where none were declared).
//!
//! Timestamps are microseconds of virtual time (fractional, so nanoseconds are kept).

use crate::timeline::OpRecord;
use serde_json::{json, Value};

/// Process id of the simulated device in the trace.
const PID: u32 = 1;
/// Thread id of the host track.
const HOST_TID: u32 = 0;

/// A host call and its modelled cost.
#[derive(Clone, Debug)]
pub(crate) struct HostSlice {
    pub name: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A record or wait marker on a stream.
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    pub stream: u32,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// An event record consumed by a wait.
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
    pub at_ns: u64,
    pub reserved: u64,
    pub allocated: u64,
}

/// Everything besides the op timeline that the trace shows.
#[derive(Debug, Default)]
pub(crate) struct TraceLog {
    pub host: Vec<HostSlice>,
    pub markers: Vec<Marker>,
    pub flows: Vec<Flow>,
    pub memory: Vec<MemorySample>,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn tid(stream: u32) -> u64 {
    stream as u64 + 1
}

/// Renders the trace.
pub(crate) fn chrome_trace(
    device_name: &str,
    streams: u32,
    ops: &[OpRecord],
    log: &TraceLog,
) -> String {
    let mut events: Vec<Value> = Vec::new();
    events.push(json!({
        "ph": "M", "pid": PID, "tid": HOST_TID, "name": "process_name",
        "args": { "name": format!("braid sim ({device_name})") }
    }));
    events.push(json!({
        "ph": "M", "pid": PID, "tid": HOST_TID, "name": "thread_name", "args": { "name": "host" }
    }));
    events.push(json!({
        "ph": "M", "pid": PID, "tid": HOST_TID, "name": "thread_sort_index",
        "args": { "sort_index": 0 }
    }));
    for s in 0..streams {
        events.push(json!({
            "ph": "M", "pid": PID, "tid": tid(s), "name": "thread_name",
            "args": { "name": format!("stream {s}") }
        }));
        events.push(json!({
            "ph": "M", "pid": PID, "tid": tid(s), "name": "thread_sort_index",
            "args": { "sort_index": tid(s) }
        }));
    }
    for h in &log.host {
        events.push(json!({
            "ph": "X", "pid": PID, "tid": HOST_TID, "name": h.name, "cat": "host",
            "ts": us(h.start_ns), "dur": us(h.end_ns - h.start_ns)
        }));
    }
    for (i, op) in ops.iter().enumerate() {
        let args = json!({
            "kind": op.kind,
            "unit": format!("{:?}", op.unit),
            "reads": op.reads.iter().map(|r| format!("{}+{}", r.ptr, r.len)).collect::<Vec<_>>(),
            "writes": op.writes.iter().map(|w| format!("{}+{}", w.ptr, w.len)).collect::<Vec<_>>(),
        });
        if op.from_graph {
            for (ph, ts) in [("b", op.start_ns), ("e", op.end_ns)] {
                events.push(json!({
                    "ph": ph, "pid": PID, "tid": tid(op.stream), "name": op.label,
                    "cat": "graph", "id": i, "ts": us(ts), "args": args
                }));
            }
        } else {
            events.push(json!({
                "ph": "X", "pid": PID, "tid": tid(op.stream), "name": op.label, "cat": "op",
                "ts": us(op.start_ns), "dur": us(op.end_ns - op.start_ns), "args": args
            }));
        }
    }
    for m in &log.markers {
        events.push(json!({
            "ph": "X", "pid": PID, "tid": tid(m.stream), "name": m.name, "cat": "event",
            "ts": us(m.start_ns), "dur": us(m.end_ns.saturating_sub(m.start_ns))
        }));
    }
    for (id, f) in log.flows.iter().enumerate() {
        let name = format!("e{}", f.event);
        events.push(json!({
            "ph": "s", "pid": PID, "tid": tid(f.from_stream), "name": name, "cat": "event",
            "id": id, "ts": us(f.from_ns)
        }));
        events.push(json!({
            "ph": "f", "bp": "e", "pid": PID, "tid": tid(f.to_stream), "name": name,
            "cat": "event", "id": id, "ts": us(f.to_ns)
        }));
    }
    for m in &log.memory {
        events.push(json!({
            "ph": "C", "pid": PID, "name": "memory", "ts": us(m.at_ns),
            "args": { "reserved": m.reserved, "allocated": m.allocated }
        }));
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" }).to_string()
}
