//! The front layer under injected backend faults (`braid_backend_sim::fault`): a launch,
//! record, wait, synchronize, query or graph launch the backend refused leaves positions,
//! clocks, events and captures as they were; a failed begin or end of capture leaves no
//! stream capturing; an asynchronous kernel failure reaches the caller once.

use braid_backend_sim::{CallKind, FaultPlan, SimBackend, SimConfig, SimDevice};
use braid_stream_core::hal::{HalError, Stream as _};
use braid_stream_core::{CaptureMode, CaptureStatus, Device, DeviceMemory, Kernel, StreamError};

type Dev = Device<SimBackend>;

fn device(plan: FaultPlan) -> Dev {
    Device::new(SimDevice::new(SimConfig::new().faults(plan))).unwrap()
}

fn fill(mem: &DeviceMemory<SimBackend>) -> Kernel {
    Kernel::Fill {
        dst: mem.slice(),
        value: 1.0,
    }
}

fn native_code(err: &StreamError) -> i32 {
    match err {
        StreamError::Backend(HalError::Native { code, .. }) => *code,
        other => panic!("not a backend error: {other:?}"),
    }
}

#[test]
fn a_failed_launch_leaves_the_position_unchanged() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::Launch, 2));
    let (s, t) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(16).unwrap();
    let first = s.launch(fill(&mem)).unwrap();
    let err = s.launch(fill(&mem)).unwrap_err();
    assert_eq!(native_code(&err), 507_000);
    assert_eq!(s.position(), first);
    // The stream's clock did not move either: an event recorded now covers only `first`.
    let e = s.record_event().unwrap();
    t.wait(&e).unwrap();
    assert!(dev.is_ordered_before(first, &t));
    let next = s.launch(fill(&mem)).unwrap();
    assert_eq!(next.seq, first.seq + 1);
    assert!(!dev.is_ordered_before(next, &t));
}

#[test]
fn a_failed_record_keeps_the_previous_record() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::Record, 2));
    let (s, t) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(16).unwrap();
    let e = dev
        .create_event(braid_stream_core::EventFlags::ORDERING)
        .unwrap();
    e.record(&s).unwrap();
    let recorded = e.recorded_at();
    let later = s.launch(fill(&mem)).unwrap();
    assert!(e.record(&s).is_err());
    assert_eq!(e.recorded_at(), recorded);
    t.wait(&e).unwrap();
    assert!(
        !dev.is_ordered_before(later, &t),
        "the wait orders only the first record"
    );
}

#[test]
fn a_failed_wait_orders_nothing() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::Wait, 1));
    let (s, t) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(16).unwrap();
    let u = s.launch(fill(&mem)).unwrap();
    let e = s.record_event().unwrap();
    let before = t.position();
    assert!(t.wait(&e).is_err());
    assert!(!dev.is_ordered_before(u, &t));
    assert_eq!(t.position(), before);
    t.wait(&e).unwrap();
    assert!(dev.is_ordered_before(u, &t));
}

#[test]
fn failed_synchronizations_and_queries_observe_nothing() {
    let plan = FaultPlan::new()
        .fail_nth(CallKind::Synchronize, 1)
        .fail_nth(CallKind::Synchronize, 2)
        .fail_nth(CallKind::Synchronize, 3)
        .fail_nth(CallKind::Query, 1);
    let dev = device(plan);
    let s = dev.create_stream(0).unwrap();
    let mem = dev.alloc(16).unwrap();
    let u = s.launch(fill(&mem)).unwrap();
    let e = s.record_event().unwrap();
    assert!(s.synchronize().is_err());
    assert!(e.synchronize().is_err());
    assert!(dev.synchronize().is_err());
    assert!(s.query().is_err());
    assert!(!dev.is_complete(u));
    s.synchronize().unwrap();
    assert!(dev.is_complete(u));
}

#[test]
fn a_failed_begin_capture_leaves_the_stream_eager() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::BeginCapture, 1));
    let s = dev.create_stream(0).unwrap();
    assert!(s.begin_capture(CaptureMode::Global).is_err());
    assert!(!s.is_capturing() && !dev.is_capturing());
    assert_eq!(s.hal().capture_status().unwrap(), CaptureStatus::None);
    // Blocking calls are allowed: no capture is active.
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.end_capture().unwrap();
}

#[test]
fn a_failed_end_capture_leaves_no_stream_capturing() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::EndCapture, 1));
    let (s, side) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(16).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    let fork = s.record_event().unwrap();
    side.wait(&fork).unwrap();
    side.launch(fill(&mem)).unwrap();
    let join = side.record_event().unwrap();
    s.wait(&join).unwrap();
    // A raw segment dropped during the capture is freed once the capture is over.
    let scratch = dev.alloc(16).unwrap();
    drop(scratch);
    let used = dev.hal().stats().bytes_allocated;
    let err = s.end_capture().unwrap_err();
    assert_eq!(native_code(&err), 507_903);
    for stream in [&s, &side] {
        assert!(!stream.is_capturing());
        assert_eq!(stream.hal().capture_status().unwrap(), CaptureStatus::None);
    }
    assert!(!dev.is_capturing());
    assert!(
        dev.hal().stats().bytes_allocated < used,
        "deferred free done"
    );
    // Both streams work eagerly again.
    side.launch(fill(&mem)).unwrap();
    s.wait_stream(&side).unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.hal().sanitizer_report_count(), 0);
}

#[test]
fn a_failed_graph_launch_leaves_the_position_unchanged() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::GraphLaunch, 1));
    let s = dev.create_stream(0).unwrap();
    let mem = dev.alloc(16).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(fill(&mem)).unwrap();
    let graph = s.end_capture().unwrap();
    let before = s.position();
    assert_eq!(native_code(&graph.launch(&s).unwrap_err()), 507_011);
    assert_eq!(s.position(), before);
    assert_eq!(graph.launch(&s).unwrap().seq, before.seq + 1);
}

#[test]
fn an_asynchronous_kernel_failure_reaches_the_caller_once() {
    let dev = device(FaultPlan::new().fail_async_nth(1));
    let s = dev.create_stream(0).unwrap();
    let mem = dev.alloc(16).unwrap();
    let u = s.launch(fill(&mem)).unwrap();
    assert_eq!(native_code(&s.synchronize().unwrap_err()), 507_015);
    // Not counted as an observation; the next synchronize is clean and observes.
    assert!(!dev.is_complete(u));
    s.synchronize().unwrap();
    assert!(dev.is_complete(u));
}

#[test]
fn failed_creations_are_typed_errors() {
    let dev = device(
        FaultPlan::new()
            .fail_nth(CallKind::StreamCreate, 1)
            .fail_nth(CallKind::EventCreate, 1),
    );
    assert_eq!(native_code(&dev.create_stream(0).unwrap_err()), 207_008);
    let s = dev.create_stream(0).unwrap();
    assert_eq!(s.id().0, 1, "the failed creation took no stream id");
    assert_eq!(native_code(&s.record_event().unwrap_err()), 207_007);
    s.record_event().unwrap();
}
