//! What braid-acl-sim writes for the program it runs, where the environment asks: the
//! sanitizer's reports (`BRAID_ACL_SIM_RACE_REPORT`) and the timeline
//! (`BRAID_ACL_SIM_TIMELINE`). Both are written once, at `aclFinalize`, or, for a program
//! that never finalizes, when the process exits (a destructor of the library,
//! [`at_exit`]).
//!
//! The race report is JSON:
//!
//! ```json
//! { "tool": "braid-acl-sim sanitizer", "count": 1, "reports": [
//!   { "kind": "read-write race", "bytes": 4096, "address": "0x100000200",
//!     "message": "read-write race on 4096 bytes at ...: device 0 stream 2 `aclnnMul` ... and device 0 stream 3 `aclnnAdd` ...",
//!     "first":  { "device": 0, "stream": 2, "acl_stream": "0xac10400", "operator": "aclnnMul", "kind": "host op", "start_us": 12.5, "end_us": 13.1, "graph_node": false },
//!     "second": { ... } } ] }
//! ```
//!
//! `count` is every report the sanitizer made (it keeps the first 10,000); `acl_stream` is
//! the `aclrtStream` handle the program used for that stream (`torch.npu.Stream.npu_stream`
//! in torch_npu), `"0x0"` for the device's default stream; `operator` is the label of the
//! task: the aclnn operator's name (`aclnnAdd`), or the simulator's name of a copy or fill
//! (`memcpy_h2d`, `memset`, ...). A program with no race gets a file with `"count": 0`.
//!
//! The timeline is the simulator's Chrome Trace Event JSON (open it in ui.perfetto.dev): one
//! process per device with a track per stream (named with its `aclrtStream` handle) and the
//! device's memory as a counter (what the program's caching allocator reserved with
//! `aclrtMalloc`), events and waits as flows.

use braid_backend_sim::{OpRef, SimNode};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The `aclrtStream` handle of each (device, stream index) the program used.
pub(crate) type StreamNames = HashMap<(u32, u32), usize>;

/// Where the outputs go, and whether they were written.
pub(crate) struct Outputs {
    race_report: Option<PathBuf>,
    timeline: Option<PathBuf>,
    written: bool,
}

impl Outputs {
    pub fn new(race_report: Option<PathBuf>, timeline: Option<PathBuf>) -> Self {
        Outputs {
            race_report,
            timeline,
            written: false,
        }
    }

    /// Whether a timeline is asked for (the devices then record one).
    pub fn wants_timeline(&self) -> bool {
        self.timeline.is_some()
    }

    /// Writes what is asked for from `nodes` (the simulated nodes made so far), once; later
    /// calls do nothing. An unwritable path is an error naming it.
    pub fn write(&mut self, nodes: &[SimNode], streams: &StreamNames) -> Result<(), String> {
        if std::mem::replace(&mut self.written, true) {
            return Ok(());
        }
        if let Some(path) = &self.race_report {
            write_json(path, &race_report(nodes, streams))?;
        }
        if let Some(path) = &self.timeline {
            write_json(path, &timeline(nodes, streams))?;
        }
        Ok(())
    }
}

fn write_json(path: &Path, value: &Value) -> Result<(), String> {
    tracing::info!(path = %path.display(), "braid-acl-sim writes an output");
    std::fs::write(path, value.to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn handle_text(streams: &StreamNames, device: u32, stream: Option<u32>) -> Value {
    match stream.and_then(|s| streams.get(&(device, s))) {
        Some(h) => json!(format!("{h:#x}")),
        None => Value::Null,
    }
}

fn op_json(op: &OpRef, streams: &StreamNames) -> Value {
    json!({
        "device": op.device,
        "stream": op.stream,
        "acl_stream": handle_text(streams, op.device, op.stream),
        "operator": op.label,
        "kind": op.kind,
        "start_us": op.start_ns as f64 / 1000.0,
        "end_us": op.end_ns as f64 / 1000.0,
        "graph_node": op.from_graph,
    })
}

/// The sanitizer's reports of every node, as JSON.
pub(crate) fn race_report(nodes: &[SimNode], streams: &StreamNames) -> Value {
    let mut reports = Vec::new();
    let mut count = 0;
    for device in nodes.iter().filter_map(|n| n.device(0)) {
        count += device.sanitizer_report_count();
        for r in device.sanitizer_reports() {
            reports.push(json!({
                "kind": r.kind.to_string(),
                "bytes": r.range.len,
                "address": format!("{:#x}", r.range.ptr.0),
                "message": r.to_string(),
                "first": r.first.as_ref().map(|op| op_json(op, streams)),
                "second": op_json(&r.second, streams),
            }));
        }
    }
    json!({ "tool": "braid-acl-sim sanitizer", "count": count, "reports": reports })
}

/// The timeline of every node as one Chrome Trace Event document, each stream's track named
/// with its `aclrtStream` handle.
pub(crate) fn timeline(nodes: &[SimNode], streams: &StreamNames) -> Value {
    let mut events = Vec::new();
    for node in nodes {
        let Ok(Value::Object(mut doc)) = serde_json::from_str::<Value>(&node.chrome_trace_json())
        else {
            continue;
        };
        if let Some(Value::Array(list)) = doc.remove("traceEvents") {
            events.extend(list);
        }
    }
    for e in &mut events {
        rename_stream_track(e, streams);
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" })
}

/// Names a stream's track `stream N (aclrtStream 0x...)` (the simulator names it `stream N`).
fn rename_stream_track(event: &mut Value, streams: &StreamNames) {
    let is_thread_name =
        event.get("ph") == Some(&json!("M")) && event.get("name") == Some(&json!("thread_name"));
    if !is_thread_name {
        return;
    }
    let device = event.get("pid").and_then(Value::as_u64);
    let Some(name) = event.pointer_mut("/args/name") else {
        return;
    };
    let index = name
        .as_str()
        .and_then(|n| n.strip_prefix("stream "))
        .and_then(|n| n.parse::<u32>().ok());
    if let (Some(device), Some(index)) = (device, index) {
        if let Some(h) = streams.get(&(device as u32, index)) {
            *name = json!(format!("stream {index} (aclrtStream {h:#x})"));
        }
    }
}

/// Writes the outputs at process exit if the program never called `aclFinalize`: run by the
/// C runtime when the library is unloaded (from `.fini_array`).
/// A registry another thread holds at exit is left alone (that thread may never release it).
pub(crate) extern "C" fn at_exit() {
    // Failures here have no caller to go to: they are logged.
    match crate::registry::try_with(|r| r.write_outputs()) {
        Some(Err(e)) => {
            tracing::warn!(message = %e.message, "braid-acl-sim could not write its outputs at exit");
        }
        None => tracing::warn!("braid-acl-sim: the runtime was busy at exit; outputs not written"),
        Some(Ok(())) => {}
    }
}

// The destructor that calls `at_exit`: the C runtime runs the functions listed in
// `.fini_array` when the library is unloaded or the process exits normally.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".fini_array"]
static AT_EXIT: extern "C" fn() = at_exit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_track_is_named_with_its_handle_and_other_events_are_kept() {
        let streams = StreamNames::from([((0, 2), 0xac1_0400)]);
        let mut named = json!({"ph": "M", "pid": 0, "tid": 3, "name": "thread_name", "args": {"name": "stream 2"}});
        rename_stream_track(&mut named, &streams);
        assert_eq!(named["args"]["name"], "stream 2 (aclrtStream 0xac10400)");
        let mut other = json!({"ph": "M", "pid": 0, "tid": 4, "name": "thread_name", "args": {"name": "stream 3"}});
        rename_stream_track(&mut other, &streams);
        assert_eq!(other["args"]["name"], "stream 3");
        let mut op = json!({"ph": "X", "pid": 0, "tid": 3, "name": "stream 2"});
        let before = op.clone();
        rename_stream_track(&mut op, &streams);
        assert_eq!(op, before);
    }
}
