//! Fault injection at the hal: each kind fails as the runtime would, without effect, and
//! the runtime's stream and event limits reach the caller as ACL's codes.

use braid_backend_sim::{CallKind, FaultPlan, SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags};

fn device(plan: FaultPlan) -> SimDevice {
    SimDevice::new(SimConfig::new().faults(plan))
}

fn fill(x: DevicePtr, value: f32) -> Kernel {
    Kernel::Fill {
        dst: DeviceSlice::new(x, 16),
        value,
    }
}

fn code(err: &HalError) -> i32 {
    match err {
        HalError::Native { code, .. } => *code,
        other => panic!("not a native error: {other:?}"),
    }
}

fn read(dev: &SimDevice, x: DevicePtr) -> f32 {
    let s = dev.default_stream().unwrap();
    let mut out = [0u8; 4];
    // SAFETY: `out` outlives the copy, observed by the synchronize below.
    unsafe { s.memcpy_d2h(out.as_mut_ptr(), x, 4).unwrap() };
    s.synchronize().unwrap();
    f32::from_le_bytes(out)
}

#[test]
fn a_failed_alloc_is_out_of_memory_and_allocates_nothing() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::SegmentAlloc, 2));
    dev.alloc(1 << 20).unwrap();
    let before = dev.host_time_ns();
    match dev.alloc(4 << 20) {
        Err(HalError::OutOfMemory {
            requested, total, ..
        }) => {
            assert_eq!(requested, 4 << 20);
            // The default device has the default profile's memory (60.97 GiB of the 910B),
            // or what the host-memory budget can back.
            assert_eq!(total, SimConfig::new().device_capacity());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        dev.host_time_ns(),
        before,
        "a failed call costs no host time"
    );
    assert_eq!(dev.stats().allocations, 1);
    assert_eq!(dev.stats().bytes_allocated, 1 << 20);
    dev.alloc(1 << 20).unwrap();
    let counts = dev.fault_counts();
    assert_eq!(counts.calls(CallKind::SegmentAlloc), 3);
    assert_eq!(counts.injected(CallKind::SegmentAlloc), 1);
}

#[test]
fn a_failed_launch_or_copy_enqueues_nothing() {
    let dev = device(
        FaultPlan::new()
            .fail_nth(CallKind::Launch, 2)
            .fail_nth(CallKind::Copy, 1),
    );
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 1.0)), "one").unwrap();
    let err = s
        .launch(&TypedKernel::from(&fill(x, 2.0)), "two")
        .unwrap_err();
    assert_eq!(code(&err), 507_000);
    assert!(s.memset(x, 0, 16).is_err());
    s.synchronize().unwrap();
    assert_eq!(dev.timeline().len(), 1);
    assert_eq!(read(&dev, x), 1.0);
}

#[test]
fn failed_record_wait_sync_and_query_change_nothing() {
    let dev = device(
        FaultPlan::new()
            .fail_nth(CallKind::Record, 2)
            .fail_nth(CallKind::Wait, 1)
            .fail_nth(CallKind::Synchronize, 1)
            .fail_nth(CallKind::Query, 1),
    );
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    let x = dev.alloc(16).unwrap();
    a.record(&e).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 1.0)), "late").unwrap();
    // The second record fails: the event still marks the first one (before the launch).
    assert_eq!(code(&a.record(&e).unwrap_err()), 507_000);
    assert!(b.wait(&e).is_err());
    let before = dev.host_time_ns();
    assert_eq!(code(&a.synchronize().unwrap_err()), 507_046);
    assert_eq!(code(&a.query().unwrap_err()), 507_046);
    assert_eq!(dev.host_time_ns(), before, "failed calls did not block");
    assert!(
        e.query().unwrap(),
        "the record before the launch is complete"
    );
    a.synchronize().unwrap();
}

#[test]
fn a_failed_map_run_stops_at_the_failing_page() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::Map, 3));
    let page = 2 << 20;
    let base = dev.reserve_address(16 * page).unwrap();
    let err = dev.map_physical_pages(base, page, 4).unwrap_err();
    assert_eq!(err.done, 2);
    assert!(matches!(err.error, HalError::OutOfMemory { .. }));
    assert_eq!(dev.stats().bytes_allocated, 2 * page);
    // The pages before the failure are mapped, each alone; unmapping them works.
    // SAFETY: the two pages were mapped above and no work uses them.
    unsafe { dev.unmap_physical_pages(base, page, 2).unwrap() };
    assert_eq!(dev.stats().bytes_allocated, 0);
    dev.set_fault_plan(&FaultPlan::new().fail_nth(CallKind::Unmap, 2));
    dev.map_physical_pages(base, page, 3).unwrap();
    // SAFETY: as above; the failing page stays mapped.
    let err = unsafe { dev.unmap_physical_pages(base, page, 3) }.unwrap_err();
    assert_eq!(err.done, 1);
    assert_eq!(dev.stats().bytes_allocated, 2 * page);
}

#[test]
fn a_failed_begin_leaves_the_stream_eager_and_a_failed_end_discards_the_capture() {
    let dev = device(
        FaultPlan::new()
            .fail_nth(CallKind::BeginCapture, 1)
            .fail_nth(CallKind::EndCapture, 1),
    );
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    assert!(s.begin_capture(CaptureMode::Global).is_err());
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::None);
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 3.0)), "captured")
        .unwrap();
    assert_eq!(code(&s.end_capture().unwrap_err()), 507_903);
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::None);
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 4.0)), "captured")
        .unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 1);
}

#[test]
fn a_failed_graph_launch_replays_nothing() {
    let dev = device(FaultPlan::new().fail_nth(CallKind::GraphLaunch, 1));
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 5.0)), "captured")
        .unwrap();
    let g = s.end_capture().unwrap();
    assert_eq!(code(&g.launch(&s).unwrap_err()), 507_011);
    s.synchronize().unwrap();
    assert_eq!(dev.stats().graph_launches, 0);
    g.launch(&s).unwrap();
    assert_eq!(read(&dev, x), 5.0);
}

#[test]
fn failed_creations_and_host_allocations() {
    let dev = device(
        FaultPlan::new()
            .fail_nth(CallKind::StreamCreate, 1)
            .fail_nth(CallKind::EventCreate, 1)
            .fail_nth(CallKind::HostAlloc, 1),
    );
    assert_eq!(code(&dev.create_stream(0).unwrap_err()), 207_008);
    assert_eq!(
        code(&dev.create_event(EventFlags::ORDERING).unwrap_err()),
        207_007
    );
    assert!(matches!(
        dev.alloc_host(64),
        Err(HalError::OutOfMemory { requested: 64, .. })
    ));
    assert_eq!(dev.stats().host_allocations, 0);
    assert_eq!((dev.live_streams(), dev.live_events()), (1, 0));
    assert_eq!(dev.fault_counts().total_injected(), 3);
}

#[test]
fn an_asynchronous_kernel_failure_is_reported_once_by_the_next_synchronize() {
    let dev = device(FaultPlan::new().fail_async_nth(2));
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 1.0)), "fine").unwrap();
    s.launch(&TypedKernel::from(&fill(x, 2.0)), "fails on the device")
        .unwrap();
    let err = s.synchronize().unwrap_err();
    assert_eq!(code(&err), 507_015);
    assert!(s.query().unwrap(), "the synchronize waited for the work");
    s.synchronize().unwrap();
    let counts = dev.fault_counts();
    assert_eq!((counts.async_injected(), counts.async_reported()), (1, 1));
}

#[test]
fn an_asynchronous_failure_reaches_events_recorded_after_it_and_the_device() {
    let dev = device(FaultPlan::new().async_rate(1, 1.0));
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(16).unwrap();
    let before = dev.create_event(EventFlags::ORDERING).unwrap();
    let after = dev.create_event(EventFlags::ORDERING).unwrap();
    a.record(&before).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 1.0)), "fails")
        .unwrap();
    a.record(&after).unwrap();
    before.synchronize().unwrap();
    assert_eq!(code(&after.synchronize().unwrap_err()), 507_015);
    a.synchronize().unwrap();
    // A device synchronize reports what no stream or event has.
    a.launch(&TypedKernel::from(&fill(x, 1.0)), "fails")
        .unwrap();
    b.launch(&TypedKernel::from(&fill(x, 1.0)), "fails")
        .unwrap();
    assert_eq!(code(&dev.synchronize().unwrap_err()), 507_015);
    dev.synchronize().unwrap();
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    // Launches into a capture never fail asynchronously.
    a.begin_capture(CaptureMode::Global).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 1.0)), "captured")
        .unwrap();
    a.end_capture().unwrap();
    assert_eq!(dev.fault_counts().async_injected(), 3);
}

#[test]
fn live_streams_and_events_are_capped_until_handles_drop() {
    let dev = SimDevice::new(SimConfig::new().max_streams(3).max_events(2));
    let s1 = dev.create_stream(0).unwrap();
    let s2 = dev.create_stream(0).unwrap();
    let err = dev.create_stream(0).unwrap_err();
    assert_eq!(code(&err), 207_008);
    assert!(
        err.to_string().contains("ACL_ERROR_RT_NO_STREAM_RESOURCE"),
        "{err}"
    );
    let e1 = dev.create_event(EventFlags::ORDERING).unwrap();
    let e1_clone = e1.clone();
    let _e2 = dev.create_event(EventFlags::ORDERING).unwrap();
    assert_eq!(
        code(&dev.create_event(EventFlags::ORDERING).unwrap_err()),
        207_007
    );
    drop(e1);
    assert_eq!(dev.live_events(), 2, "a clone keeps the event alive");
    drop(e1_clone);
    dev.create_event(EventFlags::ORDERING).unwrap();
    drop(s1);
    let s3 = dev.create_stream(0).unwrap();
    assert_eq!(dev.live_streams(), 3);
    drop((s2, s3));
    assert_eq!(dev.live_streams(), 1, "the default stream stays");
    assert_eq!(SimConfig::new().max_streams, 1984);
    assert_eq!(SimConfig::new().max_events, 65_536);
}

#[test]
fn clearing_the_plan_stops_injection_and_keeps_the_counters() {
    let dev = device(FaultPlan::new().rate(9, 1.0, [CallKind::Launch]));
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    assert!(s.launch(&TypedKernel::from(&fill(x, 1.0)), "k").is_err());
    dev.set_fault_plan(&FaultPlan::new());
    s.launch(&TypedKernel::from(&fill(x, 1.0)), "k").unwrap();
    assert_eq!(dev.fault_counts().injected(CallKind::Launch), 1);
}
