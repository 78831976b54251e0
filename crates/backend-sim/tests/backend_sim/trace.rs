//! Chrome Trace Event JSON: tracks, slices, flows and memory counters.

use crate::common;

use braid_stream_core::hal::{Device as _, Graph as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, DeviceSlice, EventFlags};
use common::*;
use serde_json::Value;

#[test]
fn trace_has_tracks_slices_flows_and_counters() {
    let dev = unit_device();
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1024).unwrap();
    dev.sanitizer_note_alloc(DeviceSlice::new(x, 512), a.index())
        .unwrap();
    a.launch(&TypedKernel::from(&busy(1000)), "spin").unwrap();
    a.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(x, 128),
            value: 1.0,
        }),
        "fill x",
    )
    .unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    a.record(&e).unwrap();
    b.wait(&e).unwrap();
    b.launch(&TypedKernel::from(&busy(10)), "after").unwrap();
    b.begin_capture(CaptureMode::Global).unwrap();
    b.launch(&TypedKernel::from(&busy(5)), "node").unwrap();
    let g = b.end_capture().unwrap();
    g.launch(&b).unwrap();
    dev.synchronize().unwrap();

    let trace: Value = serde_json::from_str(&dev.chrome_trace_json()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let with = |ph: &'static str| events.iter().filter(move |e| e["ph"] == ph);
    let names: Vec<&str> = with("M")
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["host", "stream 0", "stream 1", "stream 2"]);
    let slice = |name: &str| {
        with("X")
            .find(|e| e["name"] == *name)
            .unwrap_or_else(|| panic!("no slice {name}"))
    };
    let fill = slice("fill x");
    assert_eq!(fill["tid"], a.index() + 1);
    assert!(fill["dur"].as_f64().unwrap() > 0.0);
    assert_eq!(slice("launch")["tid"], 0, "host calls on the host track");
    assert!(with("b").any(|e| e["name"] == "node" && e["cat"] == "graph"));
    let (start, end) = (with("s").next().unwrap(), with("f").next().unwrap());
    assert_eq!(start["id"], end["id"]);
    assert_eq!(
        (start["tid"].clone(), end["tid"].clone()),
        ((a.index() + 1).into(), (b.index() + 1).into())
    );
    assert_eq!(start["ts"], slice("record e0")["ts"]);
    let wait = slice("wait e0");
    let wait_end = wait["ts"].as_f64().unwrap() + wait["dur"].as_f64().unwrap();
    assert!((end["ts"].as_f64().unwrap() - wait_end).abs() < 1e-9);
    assert_eq!(end["bp"], "e");
    let counters: Vec<(u64, u64)> = with("C")
        .map(|e| {
            (
                e["args"]["reserved"].as_u64().unwrap(),
                e["args"]["allocated"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counters, vec![(1024, 1024), (1024, 512)]);
}
