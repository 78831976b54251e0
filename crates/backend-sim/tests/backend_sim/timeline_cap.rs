//! The timeline is a ring of at most `SimConfig::timeline_capacity` records of each kind (ops,
//! host calls, event markers and flows, memory samples, link transfers): the oldest are
//! dropped first and counted, so a long run's host memory stays bounded (it grew by about
//! 540 bytes per op without bound) while the newest records stay exportable.

use crate::common;

use braid_backend_sim::{SanitizerMode, SimConfig, SimDevice, SimMode, DEFAULT_TIMELINE_CAPACITY};
use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::types::EventFlags;
use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the host bytes live on the current thread (allocated minus freed there).
struct Counting;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.with(|c| c.set(c.get() + layout.size() as i64));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.with(|c| c.set(c.get() - layout.size() as i64));
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.with(|c| c.set(c.get() + new_size as i64 - layout.size() as i64));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> i64 {
    LIVE.with(Cell::get)
}

fn device(capacity: usize) -> SimDevice {
    SimDevice::new(
        SimConfig::new()
            .capacity(1 << 30)
            .mode(SimMode::TimingOnly)
            .sanitizer(SanitizerMode::Off)
            .profile(unit_profile())
            .timeline_capacity(capacity),
    )
}

/// Runs `n` iterations of a small multi-stream program (per iteration: an allocation, a
/// kernel on each of two streams ordered by an event, a free): 2 ops, each labelled `op {i}`.
fn run(dev: &SimDevice, from: u64, n: u64) {
    let (a, b) = (dev.default_stream().unwrap(), dev.create_stream(0).unwrap());
    let event = dev.create_event(EventFlags::default()).unwrap();
    for i in from..from + n {
        let x = dev.alloc(4096).unwrap();
        let add = Kernel::Add {
            a: slice(x, 1024),
            b: slice(x, 1024),
            out: slice(x, 1024),
        };
        a.launch(&TypedKernel::from(&add), &format!("op {i}"))
            .unwrap();
        a.record(&event).unwrap();
        b.wait(&event).unwrap();
        b.launch(&TypedKernel::from(&add), &format!("op {i}"))
            .unwrap();
        b.synchronize().unwrap();
        // SAFETY: synchronized: nothing uses `x` any more.
        unsafe { dev.free(x).unwrap() };
    }
}

#[test]
fn the_timeline_keeps_the_newest_records_up_to_its_capacity() {
    let dev = device(1_000);
    run(&dev, 0, 2_000);
    let ops = dev.timeline();
    assert_eq!(ops.len(), 1_000);
    assert_eq!(ops[0].label, "op 1500");
    assert_eq!(ops[999].label, "op 1999");
    assert_eq!(dev.timeline_dropped(), 3_000);
    let trace = dev.chrome_trace_json();
    assert!(trace.contains("\"op 1999\"") && !trace.contains("\"op 1499\""));
    // The trace says what it left out.
    assert!(
        trace.contains("timeline_dropped_ops") && trace.contains("3000"),
        "{}",
        &trace[..400]
    );
    // Capacity 0 keeps nothing and counts every op.
    let none = device(0);
    run(&none, 0, 10);
    assert!(none.timeline().is_empty());
    assert_eq!(none.timeline_dropped(), 20);
}

#[test]
fn host_memory_stays_bounded_once_the_ring_is_full() {
    const N: u64 = 4_000;
    // Unbounded, for the figure: what each op costs when everything is kept.
    let unbounded = device(usize::MAX);
    run(&unbounded, 0, 100); // streams, events, first growth
    let before = live();
    run(&unbounded, 100, N);
    let per_op_unbounded = (live() - before) as f64 / (2 * N) as f64;
    // Bounded: after the ring filled, more work keeps the same memory.
    let bounded = device(2_000);
    run(&bounded, 0, 2_000); // 4 000 ops: the ring is full and has wrapped
    let before = live();
    run(&bounded, 2_000, N);
    let growth = live() - before;
    let per_op_bounded = growth as f64 / (2 * N) as f64;
    eprintln!(
        "timeline host bytes per op: {per_op_unbounded:.0} kept without a cap, \
         {per_op_bounded:.1} once a 2 000-record ring is full"
    );
    assert!(per_op_unbounded > 100.0, "{per_op_unbounded}");
    assert!(
        per_op_bounded < 2.0,
        "{per_op_bounded} bytes per op once full"
    );
    const { assert!(DEFAULT_TIMELINE_CAPACITY >= 100_000) };
    assert_eq!(
        SimConfig::new().timeline_capacity,
        DEFAULT_TIMELINE_CAPACITY
    );
}
