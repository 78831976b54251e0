//! The front layer's locking under a model checker: `shuttle` runs small programs of host
//! threads driving one simulated device in *every* interleaving of the front layer's lock
//! acquisitions (depth-first, exhaustive), and checks that none deadlocks and that the model
//! stays exact in each.
//!
//! Built only with `--features model-check`, which builds the front layer's locks from
//! `shuttle`'s primitives (they work only inside `shuttle::check_*`); `.ci/run` runs it as
//! `cargo test -p braid-conformance --features model-check --test model_check`.
#![cfg(feature = "model-check")]

use braid_backend_sim::{SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::{CaptureMode, Device, Domain, EventFlags, Kernel};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn device() -> Device<SimBackend> {
    let config = SimConfig::new().mode(SimMode::TimingOnly);
    Device::new(SimDevice::new(config)).expect("simulated device")
}

/// Runs `program` in every interleaving; returns how many there were.
fn explore(program: fn()) -> usize {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    shuttle::check_dfs(
        move || {
            counter.fetch_add(1, Ordering::Relaxed);
            program();
        },
        None,
    );
    runs.load(Ordering::Relaxed)
}

/// An event is recorded on stream 1, then a buffer is filled there; then thread A records the
/// event again (after the fill) while thread B makes stream 2 wait on it; then stream 2 reads
/// the buffer. Whether B's wait sees A's record or the first one depends on the interleaving;
/// in every one, the model says the fill is ordered before the read exactly when the
/// simulator's sanitizer (which follows what the backend received) saw no race.
fn record_wait_race() {
    let device = device();
    let (s1, s2) = (
        device.create_stream(0).unwrap(),
        device.create_stream(0).unwrap(),
    );
    let buffer = device.alloc(256).unwrap();
    let slice = buffer.slice();
    let event = device.create_event(EventFlags::ORDERING).unwrap();
    event.record(&s1).unwrap();
    let fill = s1
        .launch(&Kernel::Fill {
            dst: slice,
            value: 1.0,
        })
        .unwrap();
    let recorder = {
        let event = event.clone();
        shuttle::thread::spawn(move || event.record(&s1).unwrap())
    };
    let waiter = {
        let s2 = s2.clone();
        shuttle::thread::spawn(move || s2.wait(&event).unwrap())
    };
    recorder.join().unwrap();
    waiter.join().unwrap();
    let ordered = device.is_ordered_before(fill, &s2);
    let read = Kernel::Scale {
        src: slice.sub(128, 128).unwrap(),
        dst: slice.sub(0, 128).unwrap(),
        factor: 2.0,
    };
    // Reads bytes the fill wrote and writes bytes it wrote: unordered, both race.
    s2.launch_labeled(&read, "read").unwrap();
    let races = device.hal().sanitizer_report_count();
    assert_eq!(
        ordered,
        races == 0,
        "the model says ordered = {ordered}, the sanitizer reported {races} race(s)"
    );
    drop(buffer);
}

#[test]
fn record_and_wait_of_one_event_from_two_threads_is_exact_in_every_interleaving() {
    let runs = explore(record_wait_race);
    // Both outcomes exist (the wait sees the record or it does not), so more than one run.
    assert!(runs > 1, "{runs} interleavings explored");
    eprintln!("record/wait: {runs} interleavings explored");
}

/// Thread A captures stream 1 (begin, end); thread B launches on stream 1 meanwhile. The
/// launch lands wholly before, inside or after the capture: the position the model gives it
/// is in the capture's domain exactly when the backend captured it into the graph.
fn launch_racing_a_capture() {
    let device = device();
    let s1 = device.create_stream(0).unwrap();
    let buffer = device.alloc(256).unwrap();
    let slice = buffer.slice();
    let capturer = {
        let s1 = s1.clone();
        shuttle::thread::spawn(move || {
            s1.begin_capture(CaptureMode::Relaxed).unwrap();
            s1.end_capture().unwrap()
        })
    };
    let launcher = shuttle::thread::spawn(move || {
        s1.launch(&Kernel::Fill {
            dst: slice,
            value: 1.0,
        })
        .unwrap()
    });
    let graph = capturer.join().unwrap();
    let position = launcher.join().unwrap();
    let captured = matches!(position.domain, Domain::Capture(_));
    assert_eq!(
        captured,
        graph.node_count() == 1,
        "model domain {:?}, graph with {} node(s)",
        position.domain,
        graph.node_count()
    );
    assert_eq!(device.hal().stats().ops_executed, u64::from(!captured));
    drop(graph);
    drop(buffer);
}

#[test]
fn a_launch_racing_a_capture_is_in_the_domain_the_backend_put_it_in() {
    let runs = explore(launch_racing_a_capture);
    assert!(runs > 1, "{runs} interleavings explored");
    eprintln!("launch/capture: {runs} interleavings explored");
}
