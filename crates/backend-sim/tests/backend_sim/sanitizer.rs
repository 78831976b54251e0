//! The sanitizer: races between streams, use after free, access outside allocations, modes,
//! host synchronization edges, graph replays.

use crate::common;

use braid_backend_sim::{RaceKind, SanitizerMode, SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, DevicePtr, DeviceSlice, EventFlags};
use common::*;

fn device(mode: SanitizerMode) -> SimDevice {
    SimDevice::new(
        SimConfig::new()
            .capacity(1 << 30)
            .profile(unit_profile())
            .sanitizer(mode),
    )
}

fn fill(x: DevicePtr, n: u64) -> Kernel {
    Kernel::Fill {
        dst: slice(x, n),
        value: 1.0,
    }
}

fn sum(x: DevicePtr, n: u64, out: DevicePtr) -> Kernel {
    Kernel::ReduceSum {
        src: slice(x, n),
        dst: slice(out, 1),
    }
}

fn kinds(dev: &SimDevice) -> Vec<RaceKind> {
    dev.sanitizer_reports().iter().map(|r| r.kind).collect()
}

#[test]
fn a_missing_wait_is_a_read_write_race_naming_both_ops() {
    for wait in [false, true] {
        let dev = device(SanitizerMode::Report);
        let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
        let x = dev.alloc(1024).unwrap();
        let out = dev.alloc(4).unwrap();
        a.launch(&TypedKernel::from(&busy(10_000)), "long").unwrap();
        a.launch(&TypedKernel::from(&fill(x, 256)), "fill x")
            .unwrap();
        if wait {
            let e = dev.create_event(EventFlags::ORDERING).unwrap();
            a.record(&e).unwrap();
            b.wait(&e).unwrap();
        }
        b.launch(&TypedKernel::from(&sum(x, 256, out)), "sum x")
            .unwrap();
        let reports = dev.sanitizer_reports();
        if wait {
            assert!(reports.is_empty(), "{reports:?}");
            continue;
        }
        assert_eq!(reports.len(), 1, "{reports:?}");
        let r = &reports[0];
        assert_eq!(r.kind, RaceKind::ReadWrite);
        assert_eq!(r.range, DeviceSlice::new(x, 1024));
        let first = r.first.as_ref().unwrap();
        assert_eq!(
            (first.stream, first.label.as_str()),
            (Some(a.index()), "fill x")
        );
        assert_eq!(
            (r.second.stream, r.second.label.as_str()),
            (Some(b.index()), "sum x")
        );
        assert!(
            first.start_ns > r.second.start_ns,
            "the reader ran first: {r}"
        );
        let text = r.to_string();
        assert!(
            text.contains("read-write race") && text.contains("`sum x`"),
            "{text}"
        );
        assert_eq!(dev.sanitizer_report_count(), 1);
        dev.clear_sanitizer_reports();
        assert!(dev.sanitizer_reports().is_empty());
    }
}

#[test]
fn write_write_races_and_same_stream_order() {
    let dev = device(SanitizerMode::Report);
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1024).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 256)), "a1").unwrap();
    a.launch(&TypedKernel::from(&fill(x, 256)), "a2").unwrap();
    assert!(dev.sanitizer_reports().is_empty(), "stream order");
    b.launch(&TypedKernel::from(&fill(x, 128)), "b").unwrap();
    let r = dev.sanitizer_reports();
    assert_eq!(kinds(&dev), vec![RaceKind::WriteWrite]);
    assert_eq!(r[0].range, DeviceSlice::new(x, 512));
    assert_eq!(r[0].first.as_ref().unwrap().label, "a2");
    // reads on two streams do not race
    let y = dev.alloc(1024).unwrap();
    let (o1, o2) = (dev.alloc(4).unwrap(), dev.alloc(4).unwrap());
    dev.synchronize().unwrap();
    dev.clear_sanitizer_reports();
    a.launch(&TypedKernel::from(&sum(y, 256, o1)), "r1")
        .unwrap();
    b.launch(&TypedKernel::from(&sum(y, 256, o2)), "r2")
        .unwrap();
    assert!(dev.sanitizer_reports().is_empty());
}

#[test]
fn host_synchronization_orders_later_work() {
    let dev = device(SanitizerMode::Report);
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1024).unwrap();
    let o = dev.alloc(4).unwrap();
    // stream synchronize
    a.launch(&TypedKernel::from(&fill(x, 256)), "w").unwrap();
    a.synchronize().unwrap();
    b.launch(&TypedKernel::from(&sum(x, 256, o)), "r").unwrap();
    // event synchronize
    b.launch(&TypedKernel::from(&fill(x, 256)), "w2").unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    b.record(&e).unwrap();
    e.synchronize().unwrap();
    a.launch(&TypedKernel::from(&fill(x, 256)), "w3").unwrap();
    // a successful query
    while !a.query().unwrap() {}
    b.launch(&TypedKernel::from(&fill(x, 256)), "w4").unwrap();
    // an unsuccessful query orders nothing
    assert!(!b.query().unwrap());
    a.launch(&TypedKernel::from(&fill(x, 256)), "w5").unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::WriteWrite]);
    assert_eq!(dev.sanitizer_reports()[0].second.label, "w5");
    // device synchronize
    dev.synchronize().unwrap();
    b.launch(&TypedKernel::from(&fill(x, 256)), "w6").unwrap();
    assert_eq!(dev.sanitizer_report_count(), 1);
}

#[test]
fn freeing_a_segment_in_use_and_using_freed_memory() {
    let dev = device(SanitizerMode::Report);
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1024).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 256)), "pending")
        .unwrap();
    // SAFETY: the simulator never dereferences device addresses; the misuse is the point.
    unsafe { dev.free(x).unwrap() };
    let r = dev.sanitizer_reports();
    assert_eq!(kinds(&dev), vec![RaceKind::UseAfterFree]);
    assert_eq!(r[0].second.stream, None, "the host freed it");
    assert_eq!(r[0].first.as_ref().unwrap().label, "pending");
    dev.clear_sanitizer_reports();
    b.launch(&TypedKernel::from(&fill(x, 16)), "late").unwrap();
    let r = dev.sanitizer_reports();
    assert_eq!(kinds(&dev), vec![RaceKind::UseAfterFree]);
    assert_eq!(r[0].first.as_ref().unwrap().label, "free");
    dev.clear_sanitizer_reports();
    b.launch(&TypedKernel::from(&fill(DevicePtr(0x10), 4)), "wild")
        .unwrap();
    let r = dev.sanitizer_reports();
    assert_eq!(kinds(&dev), vec![RaceKind::OutOfBounds]);
    assert!(r[0].first.is_none());
    dev.clear_sanitizer_reports();
    // past the end of a live segment
    let y = dev.alloc(64).unwrap();
    b.launch(&TypedKernel::from(&fill(y, 17)), "overrun")
        .unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::OutOfBounds]);
    dev.clear_sanitizer_reports();
    // a synchronized free is fine
    dev.synchronize().unwrap();
    // SAFETY: as above.
    unsafe { dev.free(y).unwrap() };
    assert!(dev.sanitizer_reports().is_empty());
}

/// A block reused by a sub-allocator: user stream `u` reads it, owner `o` frees and
/// re-allocates it and writes; with the owner waiting on the user first, or not.
fn block_reuse(wait: bool) -> Vec<RaceKind> {
    let dev = device(SanitizerMode::Report);
    let (o, u) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let seg = dev.alloc(4096).unwrap();
    let out = dev.alloc(4).unwrap();
    let block = DeviceSlice::new(seg, 1024);
    dev.sanitizer_note_alloc(block, o.index()).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "init")
        .unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    o.record(&e).unwrap();
    u.wait(&e).unwrap();
    u.launch(&TypedKernel::from(&busy(100_000)), "slow")
        .unwrap();
    u.launch(&TypedKernel::from(&sum(seg, 256, out)), "user reads")
        .unwrap();
    if wait {
        let done = dev.create_event(EventFlags::ORDERING).unwrap();
        u.record(&done).unwrap();
        o.wait(&done).unwrap();
    }
    dev.sanitizer_note_free(block, o.index()).unwrap();
    dev.sanitizer_note_alloc(block, o.index()).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "new owner writes")
        .unwrap();
    kinds(&dev)
}

#[test]
fn block_reuse_without_ordering_is_a_use_after_free() {
    assert_eq!(block_reuse(true), vec![]);
    assert_eq!(block_reuse(false), vec![RaceKind::UseAfterFree]);
}

#[test]
fn a_stale_pointer_to_a_reused_block_is_a_use_after_free_naming_the_free() {
    let dev = device(SanitizerMode::Report);
    let (o, u) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let seg = dev.alloc(4096).unwrap();
    let block = DeviceSlice::new(seg, 1024);
    dev.sanitizer_note_alloc(block, o.index()).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "old owner")
        .unwrap();
    dev.sanitizer_note_free(block, o.index()).unwrap();
    dev.sanitizer_note_alloc(block, o.index()).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "new owner")
        .unwrap();
    // Not ordered after the hand-out: the old buffer's pointer, not the new owner's work.
    u.launch(&TypedKernel::from(&fill(seg, 256)), "stale")
        .unwrap();
    let reports = dev.sanitizer_reports();
    assert_eq!(kinds(&dev), vec![RaceKind::UseAfterFree], "{reports:#?}");
    let free = reports[0].first.as_ref().unwrap();
    assert_eq!((free.kind, free.stream), ("free", Some(o.index())));
    assert_eq!(reports[0].second.label, "stale");

    // Ordered after the hand-out, the same conflict is a race with the new owner.
    dev.clear_sanitizer_reports();
    dev.synchronize().unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    dev.sanitizer_note_free(block, o.index()).unwrap();
    dev.sanitizer_note_alloc(block, o.index()).unwrap();
    o.record(&e).unwrap();
    u.wait(&e).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "owner")
        .unwrap();
    u.launch(&TypedKernel::from(&fill(seg, 256)), "user")
        .unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::WriteWrite]);
}

#[test]
fn block_notes_define_what_is_live() {
    let dev = device(SanitizerMode::Report);
    let s = dev.create_stream(0).unwrap();
    let seg = dev.alloc(4096).unwrap();
    // before any note the whole segment is live
    s.launch(&TypedKernel::from(&fill(seg, 1024)), "whole")
        .unwrap();
    assert!(dev.sanitizer_reports().is_empty());
    let block = DeviceSlice::new(seg, 1024);
    dev.sanitizer_note_alloc(block, s.index()).unwrap();
    assert!(
        dev.sanitizer_note_alloc(block, s.index()).is_err(),
        "overlap"
    );
    assert!(dev
        .sanitizer_note_alloc(DeviceSlice::new(DevicePtr(8), 8), 0)
        .is_err());
    s.launch(&TypedKernel::from(&fill(seg, 256)), "in block")
        .unwrap();
    assert!(dev.sanitizer_reports().is_empty());
    s.launch(
        &TypedKernel::from(&fill(DevicePtr(seg.0 + 1024), 4)),
        "outside blocks",
    )
    .unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::OutOfBounds]);
    dev.clear_sanitizer_reports();
    dev.sanitizer_note_free(block, s.index()).unwrap();
    assert!(dev.sanitizer_note_free(block, s.index()).is_err());
    s.launch(&TypedKernel::from(&fill(seg, 4)), "after free")
        .unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::UseAfterFree]);
}

#[test]
fn abort_mode_refuses_the_offending_call() {
    let dev = device(SanitizerMode::Abort);
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1024).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 256)), "w").unwrap();
    let ops = dev.stats().ops_executed;
    let err = b
        .launch(&TypedKernel::from(&fill(x, 256)), "racy")
        .unwrap_err();
    assert!(
        err.to_string().contains("sanitizer: write-write race"),
        "{err}"
    );
    assert_eq!(dev.stats().ops_executed, ops, "not enqueued");
    assert_eq!(dev.sanitizer_report_count(), 1);
    // the refused op left no trace: an ordered write afterwards is clean
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    a.record(&e).unwrap();
    b.wait(&e).unwrap();
    b.launch(&TypedKernel::from(&fill(x, 256)), "ordered")
        .unwrap();
    // freeing while in use is refused too
    // SAFETY: the simulator never dereferences device addresses; the misuse is the point.
    let err = unsafe { dev.free(x) }.unwrap_err();
    assert!(err.to_string().contains("use after free"), "{err}");
    dev.synchronize().unwrap();
    // SAFETY: the device is idle now.
    unsafe { dev.free(x).unwrap() };
}

#[test]
fn off_mode_reports_nothing() {
    let dev = device(SanitizerMode::Off);
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1024).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 256)), "w").unwrap();
    b.launch(&TypedKernel::from(&fill(x, 256)), "racy").unwrap();
    assert!(dev.sanitizer_reports().is_empty());
}

#[test]
fn timing_only_mode_is_checked_too() {
    let dev = SimDevice::new(SimConfig::new().mode(SimMode::TimingOnly));
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(1 << 30).unwrap();
    a.launch(&TypedKernel::from(&fill(x, 1 << 28)), "w")
        .unwrap();
    b.launch(&TypedKernel::from(&fill(x, 1 << 28)), "racy")
        .unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::WriteWrite]);
}

#[test]
fn graph_replays_are_checked_like_eager_work() {
    let dev = device(SanitizerMode::Report);
    let (s, t, u) = (
        dev.create_stream(0).unwrap(),
        dev.create_stream(0).unwrap(),
        dev.create_stream(0).unwrap(),
    );
    let x = dev.alloc(1024).unwrap();
    let y = dev.alloc(1024).unwrap();
    let o = dev.alloc(4).unwrap();
    // a graph: s writes x, forks to t which reads x and writes y, joined back
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 256)), "g: fill x")
        .unwrap();
    let fork = dev.create_event(EventFlags::ORDERING).unwrap();
    s.record(&fork).unwrap();
    t.wait(&fork).unwrap();
    t.launch(
        &TypedKernel::from(&Kernel::Scale {
            src: slice(x, 256),
            dst: slice(y, 256),
            factor: 2.0,
        }),
        "g: scale",
    )
    .unwrap();
    let join = dev.create_event(EventFlags::ORDERING).unwrap();
    t.record(&join).unwrap();
    s.wait(&join).unwrap();
    let g = s.end_capture().unwrap();
    assert!(dev.sanitizer_reports().is_empty(), "capture runs nothing");
    g.launch(&u).unwrap();
    g.launch(&u).unwrap();
    assert!(
        dev.sanitizer_reports().is_empty(),
        "{:?}",
        dev.sanitizer_reports()
    );
    // reading y on another stream after the replay, without waiting: a race with the node
    s.launch(&TypedKernel::from(&sum(y, 256, o)), "eager read")
        .unwrap();
    let r = dev.sanitizer_reports();
    assert_eq!(kinds(&dev), vec![RaceKind::ReadWrite]);
    let first = r[0].first.as_ref().unwrap();
    assert!(first.from_graph && first.label == "g: scale", "{first}");
    dev.clear_sanitizer_reports();
    // a graph whose two branches race internally
    s.begin_capture(CaptureMode::Global).unwrap();
    let fork = dev.create_event(EventFlags::ORDERING).unwrap();
    s.record(&fork).unwrap();
    t.wait(&fork).unwrap();
    s.launch(&TypedKernel::from(&fill(x, 256)), "branch 1")
        .unwrap();
    t.launch(&TypedKernel::from(&fill(x, 256)), "branch 2")
        .unwrap();
    let join = dev.create_event(EventFlags::ORDERING).unwrap();
    t.record(&join).unwrap();
    s.wait(&join).unwrap();
    let g = s.end_capture().unwrap();
    dev.synchronize().unwrap();
    g.launch(&u).unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::WriteWrite]);
}

#[test]
fn hal_sub_allocation_notes_reach_the_sanitizer() {
    use braid_stream_core::hal::Device as HalDevice;
    let dev = device(SanitizerMode::Report);
    let (o, u) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let seg = dev.alloc(4096).unwrap();
    let out = dev.alloc(4).unwrap();
    let block = DeviceSlice::new(seg, 1024);
    HalDevice::note_sub_alloc(&dev, block, &o).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "init")
        .unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    o.record(&e).unwrap();
    u.wait(&e).unwrap();
    u.launch(&TypedKernel::from(&busy(100_000)), "slow")
        .unwrap();
    u.launch(&TypedKernel::from(&sum(seg, 256, out)), "user reads")
        .unwrap();
    // Taken back and handed out again on `o` without ordering after the user's read.
    HalDevice::note_sub_free(&dev, block, &o).unwrap();
    HalDevice::note_sub_alloc(&dev, block, &o).unwrap();
    o.launch(&TypedKernel::from(&fill(seg, 256)), "new owner writes")
        .unwrap();
    assert_eq!(kinds(&dev), vec![RaceKind::UseAfterFree]);
    assert!(
        HalDevice::note_sub_free(&dev, DeviceSlice::new(seg, 512), &o).is_err(),
        "a free must name a declared block exactly"
    );
}
