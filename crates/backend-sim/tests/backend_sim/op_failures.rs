//! A user operator whose host body fails (panics, indexes past its slice) is a kernel that
//! failed on the device: the launch succeeds, and the next synchronize or query of its stream,
//! of an event recorded after it, or of the device reports it once, as ACL's asynchronous
//! 507015 naming the operator; its outputs are left unwritten and the sanitizer reports the
//! work that reads them.

use braid_backend_sim::{host_op, RaceKind, SanitizerMode, SimBackend, SimConfig, SimDevice};
use braid_stream_core::hal::HalError;
use braid_stream_core::{CaptureMode, CustomOp, Device, DeviceMemory, Kernel, StreamError};

fn device() -> Device<SimBackend> {
    Device::new(SimDevice::new(SimConfig::new().capacity(1 << 30))).unwrap()
}

/// Asserts `err` is the asynchronous kernel failure of operator `op`, with `why` in its text.
#[track_caller]
fn assert_failed(err: StreamError, op: &str, why: &str) {
    match &err {
        StreamError::Backend(HalError::Native {
            code: 507_015,
            name: "ACL_ERROR_RT_AICORE_EXCEPTION",
            message,
        }) => {
            assert!(message.contains(&format!("`{op}`")), "{err}");
            assert!(message.contains(why), "{err}");
        }
        other => panic!("expected the asynchronous failure of `{op}`, got {other:?}"),
    }
}

fn panicking(name: &str, out: &DeviceMemory<SimBackend>) -> CustomOp<SimBackend> {
    CustomOp::<SimBackend>::new(name)
        .write(out.slice())
        .body(host_op(|_, _| panic!("the body failed")))
}

#[test]
fn a_panicking_body_fails_the_next_synchronize_once_naming_the_operator() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let out = dev.alloc(16).unwrap();
    s.launch_op(&panicking("broken", &out)).unwrap();
    assert_failed(s.synchronize().unwrap_err(), "broken", "the body failed");
    s.synchronize().expect("reported once");
    assert_eq!(dev.hal().stats().failed_ops, 1);
    // The device goes on.
    s.launch(&Kernel::Fill {
        dst: out.slice(),
        value: 1.0,
    })
    .unwrap();
    s.synchronize().unwrap();
}

#[test]
fn a_body_indexing_past_its_slice_fails_like_a_panic() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let (x, y) = (dev.alloc(16).unwrap(), dev.alloc(16).unwrap());
    let op = CustomOp::<SimBackend>::new("overrun")
        .read(x.slice())
        .write(y.slice())
        .body(host_op(|inputs, outputs| {
            let n = inputs[0].len() + 4;
            outputs[0][n] = 1;
        }));
    s.launch_op(&op).unwrap();
    assert_failed(
        s.synchronize().unwrap_err(),
        "overrun",
        "index out of bounds",
    );
}

#[test]
fn an_event_recorded_after_the_operator_reports_it_and_a_query_does_too() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let out = dev.alloc(16).unwrap();
    s.launch_op(&panicking("before_event", &out)).unwrap();
    let event = s.record_event().unwrap();
    assert_failed(
        event.synchronize().unwrap_err(),
        "before_event",
        "the body failed",
    );
    s.synchronize().expect("reported once, by the event");

    s.launch_op(&panicking("queried", &out)).unwrap();
    // A device synchronize would report it too; wait through another stream instead, so the
    // failure is still pending when the stream is queried.
    let other = dev.create_stream(0).unwrap();
    other.wait(&s.record_event().unwrap()).unwrap();
    let done = other.record_event().unwrap();
    done.synchronize().unwrap();
    assert_failed(s.query().unwrap_err(), "queried", "the body failed");
    assert!(s.query().unwrap(), "reported once, then complete");
}

#[test]
fn a_device_synchronize_reports_every_failed_operator() {
    let dev = device();
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let out = dev.alloc(64).unwrap();
    a.launch_op(&panicking("on_a", &out)).unwrap();
    b.launch_op(&panicking("on_b", &out)).unwrap();
    let err = dev.synchronize().unwrap_err();
    assert_failed(err.clone(), "on_a", "the body failed");
    assert_failed(err, "on_b", "the body failed");
    dev.synchronize().unwrap();
    a.synchronize().unwrap();
}

#[test]
fn a_replayed_operator_fails_the_launching_stream() {
    let dev = device();
    let (capture, replay) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let out = dev.alloc(16).unwrap();
    capture.begin_capture(CaptureMode::Global).unwrap();
    capture.launch_op(&panicking("captured", &out)).unwrap();
    let graph = capture.end_capture().unwrap();
    capture.synchronize().expect("nothing ran at capture");
    graph.launch(&replay).unwrap();
    assert_failed(
        replay.synchronize().unwrap_err(),
        "captured",
        "the body failed",
    );
    graph.launch(&replay).unwrap();
    assert_failed(
        replay.synchronize().unwrap_err(),
        "captured",
        "the body failed",
    );
}

#[test]
fn readers_of_a_failed_operators_outputs_are_reported() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let (x, y) = (dev.alloc(64).unwrap(), dev.alloc(64).unwrap());
    s.launch(&Kernel::Fill {
        dst: x.slice(),
        value: 2.0,
    })
    .unwrap();
    s.launch_op(&panicking("producer", &x)).unwrap();
    // Read after the failure is known, and read before it is (queued behind the producer).
    let consumer = Kernel::Scale {
        src: x.slice(),
        dst: y.slice(),
        factor: 3.0,
    };
    s.launch_labeled(&consumer, "queued_consumer").unwrap();
    assert!(s.synchronize().is_err());
    s.launch_labeled(&consumer, "later_consumer").unwrap();
    s.synchronize().unwrap();
    let reports = dev.hal().sanitizer_reports();
    for label in ["queued_consumer", "later_consumer"] {
        let r = reports
            .iter()
            .find(|r| r.second.label == label)
            .unwrap_or_else(|| panic!("{label} not reported: {reports:#?}"));
        assert_eq!(r.kind, RaceKind::UnwrittenRead, "{r}");
        assert_eq!(r.first.as_ref().unwrap().label, "producer", "{r}");
        assert_eq!(r.range, x.slice(), "{r}");
        assert!(r.to_string().contains("`producer`"), "{r}");
    }
    // A write makes the bytes good again.
    dev.hal().clear_sanitizer_reports();
    s.launch(&Kernel::Fill {
        dst: x.slice(),
        value: 1.0,
    })
    .unwrap();
    s.launch(&consumer).unwrap();
    s.synchronize().unwrap();
    assert!(dev.hal().sanitizer_reports().is_empty());
}

#[test]
fn the_sanitizer_off_still_reports_the_failure() {
    let dev = Device::new(SimDevice::new(
        SimConfig::new().sanitizer(SanitizerMode::Off),
    ))
    .unwrap();
    let s = dev.create_stream(0).unwrap();
    let out = dev.alloc(16).unwrap();
    s.launch_op(&panicking("unchecked", &out)).unwrap();
    assert_failed(s.synchronize().unwrap_err(), "unchecked", "the body failed");
}
