//! The allocator under injected backend faults (`braid_backend_sim::fault`): no segment
//! leaked or freed twice, statistics equal to the blocks (`check_invariants`) and to what the
//! device has charged, and a failed growth of an expandable segment leaves nothing mapped
//! that the allocator does not know of.

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, CachingAllocator};
use braid_backend_sim::{CallKind, FaultPlan, SimConfig, SimDevice};
use braid_stream_core::{Device, Kernel};
use common::*;

fn faulty(plan: FaultPlan, config: AllocatorConfig) -> (Dev, Alloc) {
    let dev = Device::new(SimDevice::new(
        SimConfig::new()
            .capacity(1 << 30)
            .record_timeline(false)
            .faults(plan),
    ))
    .unwrap();
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    (dev, alloc)
}

/// Bytes the simulated device has charged against its capacity.
fn device_used(dev: &Dev) -> u64 {
    dev.hal().stats().bytes_allocated
}

/// The allocator's view equals the device's, and its invariants hold.
fn consistent(dev: &Dev, alloc: &Alloc) {
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_reserved(), device_used(dev));
}

/// Drops nothing the caller still holds; empties the cache and checks the device is empty.
fn ends_empty(dev: &Dev, alloc: &Alloc) {
    dev.hal().set_fault_plan(&FaultPlan::new());
    dev.synchronize().unwrap();
    alloc.empty_cache();
    consistent(dev, alloc);
    assert_eq!(device_used(dev), 0);
}

#[test]
fn a_failed_segment_allocation_leaves_the_allocator_consistent() {
    let plan = FaultPlan::new().rate(1, 1.0, [CallKind::SegmentAlloc]);
    let (dev, alloc) = faulty(plan, AllocatorConfig::new());
    let s = dev.default_stream();
    match alloc.alloc(MIB, &s) {
        Err(AllocError::OutOfMemory(_)) => {}
        other => panic!("{other:?}"),
    }
    consistent(&dev, &alloc);
    assert_eq!(alloc.memory_stats().num_ooms, 1);
    // One failure only: the ladder's retry (or the next call) succeeds.
    dev.hal()
        .set_fault_plan(&FaultPlan::new().fail_nth(CallKind::SegmentAlloc, 1));
    let buf = alloc.alloc(MIB, &s).unwrap();
    consistent(&dev, &alloc);
    drop(buf);
    ends_empty(&dev, &alloc);
}

#[test]
fn a_growth_whose_rollback_fails_keeps_its_pages_known() {
    // The third page of a 5-page growth fails to map; unmapping the two mapped before it
    // fails too for the first one tried: that page must stay known to the allocator.
    let plan = FaultPlan::new()
        .fail_nth(CallKind::Map, 3)
        .fail_nth(CallKind::Unmap, 1);
    let config = AllocatorConfig::new()
        .expandable_segments(true)
        .expandable_large_page(2 * MIB);
    let (dev, alloc) = faulty(plan, config);
    let s = dev.default_stream();
    assert!(alloc.alloc(10 * MIB, &s).is_ok() || device_used(&dev) > 0);
    consistent(&dev, &alloc);
    ends_empty(&dev, &alloc);
}

#[test]
fn failed_growths_never_leave_pages_behind() {
    let config = AllocatorConfig::new()
        .expandable_segments(true)
        .expandable_large_page(2 * MIB);
    for seed in 0..40 {
        let plan = FaultPlan::new().rate(seed, 0.3, [CallKind::Map, CallKind::Unmap]);
        let (dev, alloc) = faulty(plan, config.clone());
        let s = dev.default_stream();
        let mut held = Vec::new();
        for i in 0..12u64 {
            if let Ok(b) = alloc.alloc((1 + i % 5) * 3 * MIB, &s) {
                held.push(b);
            }
            if i % 3 == 2 && !held.is_empty() {
                held.remove(0);
                alloc.empty_cache();
            }
            consistent(&dev, &alloc);
        }
        drop(held);
        ends_empty(&dev, &alloc);
    }
}

#[test]
fn failed_unmaps_in_empty_cache_keep_the_pages_cached() {
    let config = AllocatorConfig::new()
        .expandable_segments(true)
        .expandable_large_page(2 * MIB);
    let (dev, alloc) = faulty(FaultPlan::new(), config);
    let s = dev.default_stream();
    drop(alloc.alloc(8 * MIB, &s).unwrap());
    dev.hal()
        .set_fault_plan(&FaultPlan::new().rate(1, 1.0, [CallKind::Unmap]));
    alloc.empty_cache();
    consistent(&dev, &alloc);
    assert_eq!(
        alloc.memory_reserved(),
        8 * MIB,
        "nothing could be unmapped"
    );
    // Served again from what stayed mapped, without a new mapping.
    let maps = dev.hal().fault_counts().calls(CallKind::Map);
    drop(alloc.alloc(4 * MIB, &s).unwrap());
    assert_eq!(dev.hal().fault_counts().calls(CallKind::Map), maps);
    // Unmapping stops at the second page of a run: the rest stays cached.
    dev.hal()
        .set_fault_plan(&FaultPlan::new().fail_nth(CallKind::Unmap, 2));
    alloc.empty_cache();
    consistent(&dev, &alloc);
    ends_empty(&dev, &alloc);
}

#[test]
fn failed_event_records_and_queries_delay_pending_frees_but_never_lose_them() {
    for kind in [CallKind::EventCreate, CallKind::Record, CallKind::Query] {
        let plan = FaultPlan::new().rate(3, 1.0, [kind]);
        let (dev, alloc) = faulty(plan, AllocatorConfig::new());
        let (main, side) = (dev.default_stream(), dev.create_stream(0).unwrap());
        let buf = alloc.alloc(MIB, &main).unwrap();
        let ptr = buf.ptr();
        side.wait_stream(&main).ok();
        side.launch_labeled(
            &Kernel::Fill {
                dst: buf.slice(),
                value: 1.0,
            },
            "side use",
        )
        .ok();
        buf.record_stream(&side).unwrap();
        drop(buf);
        alloc.process_pending();
        consistent(&dev, &alloc);
        // Not reused while the side stream's use is not known complete.
        let next = alloc.alloc(MIB, &main).unwrap();
        assert_ne!(next.ptr(), ptr, "{kind:?}");
        drop(next);
        dev.hal().set_fault_plan(&FaultPlan::new());
        dev.synchronize().unwrap();
        alloc.process_pending();
        assert_eq!(alloc.pending_free_bytes(), 0, "{kind:?}");
        ends_empty(&dev, &alloc);
        assert_eq!(dev.hal().sanitizer_report_count(), 0, "{kind:?}");
    }
}

#[test]
fn a_failed_synchronize_keeps_segments_cached() {
    let (dev, alloc) = faulty(FaultPlan::new(), AllocatorConfig::new());
    let s = dev.default_stream();
    drop(alloc.alloc(MIB, &s).unwrap());
    let reserved = alloc.memory_reserved();
    dev.hal()
        .set_fault_plan(&FaultPlan::new().fail_nth(CallKind::Synchronize, 1));
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), reserved);
    consistent(&dev, &alloc);
    ends_empty(&dev, &alloc);
}

#[test]
fn dropping_the_allocator_under_faults_returns_what_it_can_and_reports_no_race() {
    let plan = FaultPlan::new().rate(11, 0.05, CallKind::ALL);
    let (dev, alloc) = faulty(plan, AllocatorConfig::new());
    let s = dev.default_stream();
    let bufs: Vec<_> = (0..50)
        .filter_map(|i| alloc.alloc((i % 7 + 1) * MIB, &s).ok())
        .collect();
    drop(bufs);
    dev.hal().set_fault_plan(&FaultPlan::new());
    drop(alloc);
    assert_eq!(device_used(&dev), 0);
    assert_eq!(dev.hal().sanitizer_report_count(), 0);
}
