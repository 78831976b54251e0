//! Host gates: a stream's later work waits behind a gate until the host opens it, starting no
//! earlier than the opening; records behind it leave their events pending; a synchronize
//! waits for another thread to open it, or fails naming the gate after the collective
//! timeout; a capturing stream takes no eager gate. A gate captured into a graph holds the
//! nodes after it at every launch, each launch passing with an opening of its own, and a
//! synchronize lets simulated time reach it, and the host body of the operator before it run,
//! before it waits.

use braid_backend_sim::{host_op, SimBackend, SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::types::{CaptureMode, DeviceSlice, EventFlags};
use braid_stream_core::{CustomOp, OpCost};
use std::time::Duration;

fn device(timeout: Duration) -> SimDevice {
    SimDevice::new(
        SimConfig::new()
            .capacity(1 << 20)
            .collective_timeout(timeout)
            .record_timeline(true),
    )
}

#[test]
fn work_behind_a_gate_starts_once_it_is_opened() {
    let d = device(Duration::from_secs(5));
    let s = d.create_stream(0).unwrap();
    let x = d.alloc(64).unwrap();
    s.memset(x, 1, 64).unwrap();
    let gate = s.hold_gate().unwrap();
    s.memset(x, 2, 64).unwrap();
    let e = d.create_event(EventFlags::default()).unwrap();
    s.record(&e).unwrap();
    // Held back: the stream is not done, the event not complete.
    assert!(!s.query().unwrap());
    assert!(!e.query().unwrap());
    let opened_at = d.host_time_ns();
    gate.open().unwrap();
    s.synchronize().unwrap();
    assert!(e.query().unwrap());
    let memsets: Vec<_> = d
        .timeline()
        .into_iter()
        .filter(|r| r.kind == "memset")
        .collect();
    assert_eq!(memsets.len(), 2);
    assert!(
        memsets[1].start_ns >= opened_at,
        "the held memset starts after the opening: {} < {opened_at}",
        memsets[1].start_ns
    );
    let mut back = [0u8; 64];
    // SAFETY: 64 writable bytes.
    unsafe { s.memcpy_d2h(back.as_mut_ptr(), x, 64) }.unwrap();
    s.synchronize().unwrap();
    assert_eq!(back, [2u8; 64]);
    let _ = DeviceSlice::new(x, 64);
}

#[test]
fn a_synchronize_waits_for_another_thread_to_open_the_gate() {
    let d = device(Duration::from_secs(30));
    let s = d.create_stream(0).unwrap();
    let gate = s.hold_gate().unwrap();
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        gate.open().unwrap();
    });
    s.synchronize().unwrap();
    opener.join().unwrap();
    assert!(s.query().unwrap());
}

#[test]
fn a_gate_nobody_opens_fails_the_wait_naming_it_and_no_capture_takes_one() {
    let d = device(Duration::from_millis(50));
    let s = d.create_stream(0).unwrap();
    let gate = s.hold_gate().unwrap();
    let err = s.synchronize().unwrap_err().to_string();
    assert!(
        err.contains(&format!("host gate {}", gate.id())) && err.contains("not opened"),
        "{err}"
    );
    gate.open().unwrap();
    s.synchronize().unwrap();
    let c = d.create_stream(0).unwrap();
    c.begin_capture(CaptureMode::Global).unwrap();
    let refused = c.hold_gate().unwrap_err().to_string();
    assert!(refused.contains("cannot be captured"), "{refused}");
    c.end_capture().unwrap();
}

/// Host bytes of `x` (64 bytes) after stream `s`'s work.
fn download(s: &braid_backend_sim::SimStream, x: braid_stream_core::types::DevicePtr) -> [u8; 64] {
    let mut back = [0u8; 64];
    // SAFETY: 64 writable bytes, alive until the synchronize below.
    unsafe { s.memcpy_d2h(back.as_mut_ptr(), x, 64) }.unwrap();
    s.synchronize().unwrap();
    back
}

#[test]
fn a_captured_gate_holds_the_nodes_after_it_at_every_launch_until_opened() {
    let d = device(Duration::from_secs(5));
    let s = d.create_stream(0).unwrap();
    let other = d.create_stream(0).unwrap();
    let x = d.alloc(64).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.memset(x, 1, 64).unwrap();
    let gate = s.capture_gate().unwrap();
    s.memset(x, 2, 64).unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.node_count(), 3);
    for launch in 0..2u8 {
        s.memset(x, 9, 64).unwrap();
        graph.launch(&s).unwrap();
        let e = d.create_event(EventFlags::default()).unwrap();
        s.record(&e).unwrap();
        // The host goes on elsewhere: the launch stays at the gate.
        other.memset(x, 0, 0).unwrap();
        other.synchronize().unwrap();
        assert!(!s.query().unwrap(), "launch {launch}");
        assert!(!e.query().unwrap(), "launch {launch}");
        let opened_at = d.host_time_ns();
        gate.open().unwrap();
        assert_eq!(download(&s, x), [2u8; 64], "launch {launch}");
        assert!(e.query().unwrap());
        let last = d
            .timeline()
            .into_iter()
            .rfind(|r| r.kind == "memset" && r.from_graph)
            .unwrap();
        assert!(
            last.start_ns >= opened_at,
            "launch {launch}: the node after the gate starts after the opening: {} < {opened_at}",
            last.start_ns
        );
    }
    // Two launches, one opening: the first passes, the second waits for its own.
    graph.launch(&s).unwrap();
    graph.launch(&s).unwrap();
    gate.open().unwrap();
    assert!(!s.query().unwrap());
    gate.open().unwrap();
    s.synchronize().unwrap();
    assert!(s.query().unwrap());
    // An eager stream takes no captured gate.
    let refused = other.capture_gate().unwrap_err().to_string();
    assert!(refused.contains("capturing stream"), "{refused}");
}

#[test]
fn a_synchronize_lets_time_reach_a_captured_gate_then_waits_for_its_opening() {
    let d = device(Duration::from_secs(30));
    let s = d.create_stream(0).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    let busy = TypedKernel::from(Kernel::Busy {
        duration_ns: 1_000_000,
    });
    s.launch(&busy, "busy").unwrap();
    let gate = s.capture_gate().unwrap();
    let graph = s.end_capture().unwrap();
    let before = d.host_time_ns();
    graph.launch(&s).unwrap();
    let opener = {
        let gate = gate.clone();
        let d = d.clone();
        std::thread::spawn(move || {
            // Opens once the waiting host has reached the gate (the work before it done).
            while d.host_time_ns() < before + 1_000_000 {
                std::thread::sleep(Duration::from_millis(5));
            }
            gate.open().unwrap();
        })
    };
    s.synchronize().unwrap();
    opener.join().unwrap();
    assert!(d.host_time_ns() >= before + 1_000_000);
}

#[test]
fn a_captured_gate_nobody_opens_fails_the_wait_naming_it() {
    let d = device(Duration::from_millis(50));
    let s = d.create_stream(0).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    let gate = s.capture_gate().unwrap();
    let graph = s.end_capture().unwrap();
    graph.launch(&s).unwrap();
    let err = s.synchronize().unwrap_err().to_string();
    assert!(
        err.contains(&format!("host gate {}", gate.id())) && err.contains("graph"),
        "{err}"
    );
    gate.open().unwrap();
    s.synchronize().unwrap();
}

#[test]
fn a_captured_gate_after_a_kernel_is_opened_by_what_the_host_body_before_it_reports() {
    // As a blocking host callback captured after a kernel: the body of the operator before
    // the gate (computed outside the engine lock, like every operator's body) tells another
    // thread, which opens the gate. The waiting synchronize must let that body run while it
    // waits, at every launch (issue 26: it waited until the collective timeout).
    let d = device(Duration::from_secs(5));
    let s = d.create_stream(0).unwrap();
    let (reached, reports) = std::sync::mpsc::channel::<()>();
    let reached = std::sync::Mutex::new(reached);
    let callback = CustomOp::<SimBackend>::new("callback")
        .cost(OpCost::Fixed { ns: 1_000 })
        .body(host_op(move |_, _| {
            reached.lock().unwrap().send(()).unwrap();
        }));
    s.begin_capture(CaptureMode::Global).unwrap();
    let busy = TypedKernel::from(Kernel::Busy {
        duration_ns: 1_000_000,
    });
    s.launch(&busy, "busy").unwrap();
    s.launch_operator(&callback.lower()).unwrap();
    let gate = s.capture_gate().unwrap();
    let graph = s.end_capture().unwrap();
    let launches = 3;
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            for _ in 0..launches {
                reports
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the body before the gate runs while the host waits at it");
                gate.open().unwrap();
            }
        })
    };
    for launch in 0..launches {
        let before = d.host_time_ns();
        graph.launch(&s).unwrap();
        // A stream's synchronize and a device-wide one wait alike.
        let waited = if launch % 2 == 0 {
            s.synchronize()
        } else {
            d.synchronize()
        };
        waited.unwrap_or_else(|e| panic!("launch {launch}: {e}"));
        assert!(d.host_time_ns() >= before + 1_000_000, "launch {launch}");
    }
    opener.join().unwrap();
}
