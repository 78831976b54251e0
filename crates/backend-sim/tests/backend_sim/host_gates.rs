//! Host gates: a stream's later work waits behind a gate until the host opens it, starting no
//! earlier than the opening; records behind it leave their events pending; a synchronize
//! waits for another thread to open it, or fails naming the gate after the collective
//! timeout; a capturing stream takes no gate.

use braid_backend_sim::{SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, Event as _, Stream as _};
use braid_stream_core::types::{CaptureMode, DeviceSlice, EventFlags};
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
