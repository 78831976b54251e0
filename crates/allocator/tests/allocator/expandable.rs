//! Expandable segments: PyTorch's `test_max_split_expandable` (C28) and
//! `test_garbage_collect_expandable` (C29), growth that merges with free space at the end,
//! unmapping free pages anywhere (holes) on empty_cache and in the out-of-memory ladder,
//! growth that maps holes again, the toggle, and a model-based proptest.

use crate::common;

use braid_allocator::{
    AllocError, AllocatorConfig, CachingAllocator, DeviceBuffer, HistoryAction, MemorySnapshot,
};
use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{Device, DevicePtr, DeviceSlice, Kernel};
use common::*;
use proptest::prelude::*;

const CAPACITY: u64 = 1 << 30;

fn expandable_setup(config: &str) -> (Dev, Alloc) {
    let config = AllocatorConfig::parse(config)
        .unwrap()
        .expandable_segments(true);
    setup(CAPACITY, config)
}

fn expandable_count(snap: &MemorySnapshot) -> usize {
    snap.segments.iter().filter(|s| s.is_expandable).count()
}

fn history_count(alloc: &Alloc, action: HistoryAction) -> usize {
    alloc
        .history()
        .iter()
        .filter(|e| e.action == action)
        .count()
}

/// Bytes the simulated device has charged against its capacity.
fn device_used(dev: &Dev) -> u64 {
    let info = dev.mem_info().unwrap();
    info.total - info.free
}

fn fill(dev: &Dev, buf: &DeviceBuffer<SimBackend>, value: f32) {
    dev.default_stream()
        .launch(&Kernel::Fill {
            dst: buf.slice(),
            value,
        })
        .unwrap();
}

fn assert_clean(dev: &Dev, alloc: &Alloc) {
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_reserved(), device_used(dev));
    assert!(dev.hal().sanitizer_reports().is_empty());
    assert_eq!(dev.hal().stats().invalid_accesses, 0);
}

#[test]
fn config_key_and_builder_agree() {
    let parsed = AllocatorConfig::parse("expandable_segments:True").unwrap();
    assert!(parsed.expandable_segments);
    assert_eq!(parsed, AllocatorConfig::new().expandable_segments(true));
    assert!(!AllocatorConfig::new().expandable_segments);
}

#[test]
fn a_backend_without_virtual_memory_is_a_typed_error() {
    let dev: Dev = Device::new(SimDevice::new(
        SimConfig::new().capacity(CAPACITY).virtual_memory(false),
    ))
    .unwrap();
    let err = CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::new().expandable_segments(true),
    )
    .unwrap_err();
    assert_eq!(
        err,
        AllocError::ExpandableSegmentsUnsupported { backend: "sim" }
    );
    assert!(err.to_string().contains("virtual memory"), "{err}");
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    assert!(matches!(
        alloc.set_expandable_segments(true),
        Err(AllocError::ExpandableSegmentsUnsupported { .. })
    ));
    assert!(!alloc.config().expandable_segments);
    alloc.set_expandable_segments(false).unwrap();
    let buf = alloc.alloc(MIB, &dev.default_stream()).unwrap();
    assert!(!alloc.snapshot().segments[0].is_expandable);
    drop(buf);
}

/// C28: PyTorch's `test_max_split_expandable`.
#[test]
fn c28_max_split_with_normal_and_expandable_segments() {
    let (dev, alloc) = setup(
        CAPACITY,
        AllocatorConfig::parse("max_split_size_mb:40,limit_mb:120").unwrap(),
    );
    let s = dev.default_stream();
    let a = alloc.alloc(40 * MIB, &s).unwrap();
    alloc.set_expandable_segments(true).unwrap();
    let b = alloc.alloc(40 * MIB, &s).unwrap();
    alloc.set_expandable_segments(false).unwrap();
    let c = alloc.alloc(40 * MIB, &s).unwrap();
    let snap = alloc.snapshot();
    assert_eq!(snap.segments.len(), 3);
    assert_eq!(expandable_count(&snap), 1);
    assert_eq!(alloc.memory_reserved(), 120 * MIB);
    assert_clean(&dev, &alloc);
    let err = alloc.alloc(40 * MIB, &s).unwrap_err();
    assert!(matches!(err, AllocError::OutOfMemory(_)), "{err:?}");
    drop((a, b, c));
    // The cached blocks (normal segments and the expandable segment's pages) are released
    // before the allocator gives up.
    let big = alloc.alloc(120 * MIB, &s).unwrap();
    let snap = alloc.snapshot();
    assert_eq!(snap.segments.len(), 1);
    assert_eq!(expandable_count(&snap), 0);
    assert_eq!(alloc.memory_reserved(), 120 * MIB);
    assert_clean(&dev, &alloc);
    drop(big);
}

/// C29: PyTorch's `test_garbage_collect_expandable`.
#[test]
fn c29_garbage_collection_with_expandable_segments() {
    let (dev, alloc) = setup(
        CAPACITY,
        AllocatorConfig::parse("garbage_collection_threshold:0.5,limit_mb:120").unwrap(),
    );
    let s = dev.default_stream();
    let a = alloc.alloc(40 * MIB, &s).unwrap();
    alloc.set_expandable_segments(true).unwrap();
    let b = alloc.alloc(40 * MIB, &s).unwrap();
    assert_eq!(expandable_count(&alloc.snapshot()), 1);
    drop((a, b));
    let c = alloc.alloc(80 * MIB, &s).unwrap();
    assert!(alloc.memory_reserved() <= 120 * MIB);
    assert_clean(&dev, &alloc);
    drop(c);
}

#[test]
fn growth_merges_with_free_space_at_the_end() {
    let (dev, alloc) = expandable_setup("record_history:true");
    let s = dev.default_stream();
    let a = alloc.alloc(8 * MIB, &s).unwrap();
    let b = alloc.alloc(8 * MIB, &s).unwrap();
    let c = alloc.alloc(8 * MIB, &s).unwrap();
    assert_eq!(
        (b.ptr().0, c.ptr().0),
        (a.ptr().0 + 8 * MIB, a.ptr().0 + 16 * MIB)
    );
    // 20 MiB pages: 24 MiB of blocks in 40 MiB mapped
    assert_eq!(alloc.memory_reserved(), 40 * MIB);
    drop((b, c));
    let d = alloc.alloc(16 * MIB, &s).unwrap();
    assert_eq!(d.ptr().0, a.ptr().0 + 8 * MIB);
    assert_eq!(
        alloc.memory_reserved(),
        40 * MIB,
        "no growth while the free end fits"
    );
    // 30 MiB where 16 MiB are free at the end: one more page, and the block continues the
    // free space (across mappings) instead of a new segment beside it
    let e = alloc.alloc(30 * MIB, &s).unwrap();
    assert_eq!(e.ptr().0, a.ptr().0 + 24 * MIB);
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    let snap = alloc.snapshot();
    assert_eq!(snap.segments.len(), 1);
    assert!(snap.segments[0].is_expandable);
    assert_eq!(snap.segments[0].total_size, 60 * MIB);
    assert_eq!(alloc.memory_stats().segment.all.current, 1);
    assert_eq!(history_count(&alloc, HistoryAction::SegmentMap), 3);
    assert_eq!(history_count(&alloc, HistoryAction::SegmentAlloc), 0);
    fill(&dev, &e, 7.0);
    let back = read(&s, e.slice());
    assert!(back.iter().all(|&v| v == 7.0));
    assert_clean(&dev, &alloc);
    drop((a, d, e));
}

#[test]
fn smaller_large_pages_map_less_at_the_end() {
    let (dev, alloc) = expandable_setup("expandable_large_page_mb:2");
    let s = dev.default_stream();
    let a = alloc.alloc(8 * MIB, &s).unwrap();
    let b = alloc.alloc(3 * MIB, &s).unwrap();
    assert_eq!(b.ptr().0, a.ptr().0 + 8 * MIB);
    // 2 MiB pages: 11 MiB of blocks in 12 MiB mapped (20 MiB pages would map 20 MiB).
    assert_eq!(alloc.memory_reserved(), 12 * MIB);
    assert_eq!(
        dev.mem_info().unwrap().total - dev.mem_info().unwrap().free,
        12 * MIB
    );
    assert_eq!(
        alloc.memory_stats().num_device_alloc,
        6,
        "one mapping per 2 MiB page"
    );
    drop(b);
    alloc.empty_cache();
    assert_eq!(
        alloc.memory_reserved(),
        8 * MIB,
        "the free tail pages are unmapped"
    );
    assert_clean(&dev, &alloc);
    drop(a);
}

#[test]
fn the_large_page_key_is_validated() {
    let parsed = AllocatorConfig::parse("expandable_large_page_mb:4").unwrap();
    assert_eq!(parsed.expandable_large_page, Some(4 * MIB));
    assert_eq!(
        parsed,
        AllocatorConfig::new().expandable_large_page(4 * MIB)
    );
    assert_eq!(AllocatorConfig::new().expandable_large_page, None);
    for bad in ["expandable_large_page_mb:0", "expandable_large_page_mb:x"] {
        let err = AllocatorConfig::parse(bad).unwrap_err();
        assert!(err.to_string().contains("expandable_large_page"), "{err}");
    }
}

#[test]
fn large_requests_share_the_segment_and_small_ones_get_their_own() {
    let (dev, alloc) = expandable_setup("");
    let s = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let big = alloc.alloc(64 * MIB, &s).unwrap();
    let mid = alloc.alloc(3 * MIB, &s).unwrap();
    let small = alloc.alloc(4 * KIB, &s).unwrap();
    let other = alloc.alloc(4 * KIB, &side).unwrap();
    assert_eq!(mid.ptr().0, big.ptr().0 + 64 * MIB);
    let snap = alloc.snapshot();
    assert_eq!(
        snap.segments.len(),
        3,
        "large + small on one stream, small on the other"
    );
    assert_eq!(expandable_count(&snap), 3);
    assert_eq!(alloc.memory_reserved(), 80 * MIB + 2 * 2 * MIB);
    assert_clean(&dev, &alloc);
    drop((big, mid, small, other));
}

#[test]
fn empty_cache_unmaps_free_pages_at_the_end_and_keeps_live_data() {
    let (dev, alloc) = expandable_setup("record_history:true");
    let s = dev.default_stream();
    let a = alloc.alloc(8 * MIB, &s).unwrap();
    let b = alloc.alloc(30 * MIB, &s).unwrap();
    assert_eq!(alloc.memory_reserved(), 40 * MIB);
    fill(&dev, &a, 1.5);
    fill(&dev, &b, 2.5);
    drop(b);
    alloc.empty_cache();
    // [8, 20) MiB stays mapped beside `a`, the page [20, 40) is gone
    assert_eq!(alloc.memory_reserved(), 20 * MIB);
    assert_eq!(device_used(&dev), 20 * MIB);
    assert_eq!(history_count(&alloc, HistoryAction::SegmentUnmap), 1);
    assert!(read(&s, a.slice()).iter().all(|&v| v == 1.5));
    assert_clean(&dev, &alloc);
    // growing again maps a page where the old one was
    let c = alloc.alloc(30 * MIB, &s).unwrap();
    assert_eq!(c.ptr().0, a.ptr().0 + 8 * MIB);
    assert!(read(&s, a.slice()).iter().all(|&v| v == 1.5));
    drop((a, c));
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    assert!(alloc.snapshot().segments.is_empty());
    assert_eq!(alloc.memory_stats().segment.all.current, 0);
    assert_clean(&dev, &alloc);
}

#[test]
fn the_oom_ladder_unmaps_free_pages_before_failing() {
    let (dev, alloc) = expandable_setup("limit_mb:80");
    let s = dev.default_stream();
    let a = alloc.alloc(8 * MIB, &s).unwrap();
    let b = alloc.alloc(40 * MIB, &s).unwrap();
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    drop(b);
    // 52 MiB free at the end of the expandable segment; a normal 56 MiB segment only fits
    // under the limit once its free pages [20, 60) MiB are unmapped
    alloc.set_expandable_segments(false).unwrap();
    let c = alloc.alloc(56 * MIB, &s).unwrap();
    assert_eq!(alloc.memory_reserved(), 76 * MIB);
    assert_eq!(alloc.memory_stats().num_alloc_retries, 1);
    let snap = alloc.snapshot();
    assert_eq!(snap.segments.len(), 2);
    assert_eq!(expandable_count(&snap), 1);
    // growth past the limit is out of memory, and maps nothing
    alloc.set_expandable_segments(true).unwrap();
    let err = alloc.alloc(30 * MIB, &s).unwrap_err();
    assert!(matches!(err, AllocError::OutOfMemory(_)), "{err:?}");
    assert_eq!(alloc.memory_reserved(), 76 * MIB);
    assert_clean(&dev, &alloc);
    drop((a, c));
}

/// The snapshot segment holding `buf`: (address, total_size, is_expandable).
fn range_of(alloc: &Alloc, buf: &DeviceBuffer<SimBackend>) -> (u64, u64, bool) {
    let snap = alloc.snapshot();
    let seg = snap
        .segments
        .iter()
        .find(|s| s.address <= buf.ptr().0 && buf.ptr().0 < s.address + s.total_size)
        .expect("the buffer lies in a segment");
    (seg.address, seg.total_size, seg.is_expandable)
}

fn unmaps(alloc: &Alloc) -> Vec<(u64, u64)> {
    alloc
        .history()
        .iter()
        .filter(|e| e.action == HistoryAction::SegmentUnmap)
        .map(|e| (e.addr, e.size))
        .collect()
}

/// `a` [0, 8), `b` [8, 52), `c` [52, 60) MiB in three 20 MiB pages, filled with 1, 2, 3.
fn three_blocks(dev: &Dev, alloc: &Alloc) -> [DeviceBuffer<SimBackend>; 3] {
    let s = dev.default_stream();
    let a = alloc.alloc(8 * MIB, &s).unwrap();
    let b = alloc.alloc(44 * MIB, &s).unwrap();
    let c = alloc.alloc(8 * MIB, &s).unwrap();
    assert_eq!(
        (b.ptr().0, c.ptr().0),
        (a.ptr().0 + 8 * MIB, a.ptr().0 + 52 * MIB)
    );
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    for (buf, v) in [(&a, 1.0), (&b, 2.0), (&c, 3.0)] {
        fill(dev, buf, v);
    }
    [a, b, c]
}

fn assert_filled(dev: &Dev, buf: &DeviceBuffer<SimBackend>, value: f32) {
    let back = read(&dev.default_stream(), buf.slice());
    assert!(
        back.iter().all(|&v| v == value),
        "data of a live block lost"
    );
}

#[test]
fn empty_cache_unmaps_a_hole_in_the_middle_and_growth_maps_it_again() {
    let (dev, alloc) = expandable_setup("record_history:true");
    let s = dev.default_stream();
    let [a, b, c] = three_blocks(&dev, &alloc);
    let base = a.ptr().0;
    drop(b);
    alloc.empty_cache();
    // The free block [8, 52) covers one whole page, [20, 40): it goes, the partial pages at
    // its edges stay mapped beside `a` and `c`.
    assert_eq!(alloc.memory_reserved(), 40 * MIB);
    assert_eq!(unmaps(&alloc), vec![(base + 20 * MIB, 20 * MIB)]);
    assert_eq!(alloc.memory_stats().num_device_free, 1);
    assert_eq!(
        alloc.memory_stats().segment.all.current,
        1,
        "one reservation"
    );
    // One snapshot segment per mapped range, as PyTorch reports them.
    let snap = alloc.snapshot();
    let ranges: Vec<_> = snap
        .segments
        .iter()
        .map(|s| {
            (
                s.address - base,
                s.total_size,
                s.is_expandable,
                s.blocks.len(),
            )
        })
        .collect();
    assert_eq!(
        ranges,
        vec![(0, 20 * MIB, true, 2), (40 * MIB, 20 * MIB, true, 2)]
    );
    assert_eq!(
        range_of(&alloc, &c),
        (base + 40 * MIB, 20 * MIB, true),
        "c's range starts after the hole"
    );
    assert_filled(&dev, &a, 1.0);
    assert_filled(&dev, &c, 3.0);
    assert_clean(&dev, &alloc);
    // The hole is invalid memory for the device: the front layer refuses work on it, and the
    // simulator counts an access that reaches it anyway.
    let hole = DeviceSlice::new(DevicePtr(base + 24 * MIB), 4 * KIB);
    let fill = Kernel::Fill {
        dst: hole,
        value: 9.0,
    };
    let err = s.launch(&fill).unwrap_err();
    assert!(
        matches!(err, braid_stream_core::StreamError::RangeNotLive { range, .. } if range == hole),
        "{err}"
    );
    braid_stream_core::hal::Stream::launch(s.hal(), &fill.into(), "fill").unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.hal().stats().invalid_accesses, 1);
}

#[test]
fn a_request_that_fits_the_hole_maps_it_again_and_gets_its_address() {
    let (dev, alloc) = expandable_setup("record_history:true");
    let s = dev.default_stream();
    let [a, b, c] = three_blocks(&dev, &alloc);
    let (base, b_addr) = (a.ptr().0, b.ptr().0);
    drop(b);
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 40 * MIB);
    let maps_before = history_count(&alloc, HistoryAction::SegmentMap);
    // 44 MiB fits neither free block (12 MiB each) but the run [8, 52) they make with the
    // hole: the hole is mapped, the ranges join, and the request gets b's address.
    let d = alloc.alloc(44 * MIB, &s).unwrap();
    assert_eq!(d.ptr().0, b_addr);
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    assert_eq!(
        history_count(&alloc, HistoryAction::SegmentMap),
        maps_before + 1
    );
    let snap = alloc.snapshot();
    assert_eq!(
        snap.segments.len(),
        1,
        "the hole is closed: one range again"
    );
    assert_eq!(
        (snap.segments[0].address, snap.segments[0].total_size),
        (base, 60 * MIB)
    );
    fill(&dev, &d, 4.0);
    assert_filled(&dev, &a, 1.0);
    assert_filled(&dev, &c, 3.0);
    assert_filled(&dev, &d, 4.0);
    assert_clean(&dev, &alloc);
    drop((a, c, d));
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    assert!(alloc.snapshot().segments.is_empty());
    assert_eq!(alloc.memory_stats().segment.all.current, 0);
    assert_clean(&dev, &alloc);
}

#[test]
fn growth_fills_a_hole_before_extending_the_end() {
    let (dev, alloc) = expandable_setup("");
    let s = dev.default_stream();
    let [a, b, c] = three_blocks(&dev, &alloc);
    let base = a.ptr().0;
    drop(b);
    alloc.empty_cache();
    // 16 MiB fits no free block; the lowest place is the run [8, 40) through the hole (one
    // page mapped), not the end of the segment.
    let d = alloc.alloc(16 * MIB, &s).unwrap();
    assert_eq!(d.ptr().0, base + 8 * MIB);
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    assert_eq!(alloc.snapshot().segments.len(), 1);
    assert_filled(&dev, &a, 1.0);
    assert_filled(&dev, &c, 3.0);
    assert_clean(&dev, &alloc);
    drop((a, c, d));
}

#[test]
fn a_hole_at_the_start_is_filled_first() {
    let (dev, alloc) = expandable_setup("");
    let s = dev.default_stream();
    let a = alloc.alloc(20 * MIB, &s).unwrap();
    let b = alloc.alloc(20 * MIB, &s).unwrap();
    let base = a.ptr().0;
    drop(a);
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 20 * MIB);
    assert_eq!(range_of(&alloc, &b).0, base + 20 * MIB);
    let c = alloc.alloc(12 * MIB, &s).unwrap();
    assert_eq!(c.ptr().0, base, "the first page is mapped again");
    assert_eq!(alloc.memory_reserved(), 40 * MIB);
    assert_clean(&dev, &alloc);
    drop((b, c));
}

#[test]
fn the_oom_ladder_unmaps_holes_in_the_middle_before_failing() {
    let (dev, alloc) = expandable_setup("limit_mb:100,record_history:true");
    let s = dev.default_stream();
    let [a, b, c] = three_blocks(&dev, &alloc);
    let base = a.ptr().0;
    drop(b);
    // 50 MiB fits no free run: three pages at the end would make 120 MiB > 100 MiB, until
    // the ladder unmaps the page [20, 40) in the middle.
    let x = alloc.alloc(50 * MIB, &s).unwrap();
    assert_eq!(x.ptr().0, base + 60 * MIB);
    assert_eq!(alloc.memory_reserved(), 100 * MIB);
    assert_eq!(alloc.memory_stats().num_alloc_retries, 1);
    assert_eq!(unmaps(&alloc), vec![(base + 20 * MIB, 20 * MIB)]);
    assert_eq!(alloc.snapshot().segments.len(), 2);
    assert_filled(&dev, &a, 1.0);
    assert_filled(&dev, &c, 3.0);
    assert_clean(&dev, &alloc);
    drop((a, c, x));
}

#[test]
fn turned_off_cached_expandable_blocks_serve_no_request() {
    let (dev, alloc) = expandable_setup("");
    let s = dev.default_stream();
    let a = alloc.alloc(8 * MIB, &s).unwrap();
    let small = alloc.alloc(4 * KIB, &s).unwrap();
    // Free expandable memory: [8, 20) MiB of the large page, most of the small page.
    alloc.set_expandable_segments(false).unwrap();
    let b = alloc.alloc(4 * MIB, &s).unwrap();
    let tiny = alloc.alloc(4 * KIB, &s).unwrap();
    assert!(!range_of(&alloc, &b).2, "a normal segment serves b");
    assert!(
        !range_of(&alloc, &tiny).2,
        "a normal small segment serves tiny"
    );
    assert_eq!(
        alloc.memory_reserved(),
        20 * MIB + 2 * MIB + 20 * MIB + 2 * MIB
    );
    drop((b, tiny));
    // Back on, the best fit is the expandable segment's free end again.
    alloc.set_expandable_segments(true).unwrap();
    let c = alloc.alloc(4 * MIB, &s).unwrap();
    assert_eq!(c.ptr().0, a.ptr().0 + 8 * MIB);
    assert_clean(&dev, &alloc);
    drop((a, small, c));
}

#[test]
fn turned_off_pending_expandable_blocks_are_not_reused_with_a_wait() {
    let run = |toggle_off: bool| {
        let (dev, alloc) = expandable_setup("limit_mb:30,reuse_pending_with_wait:true");
        let main = dev.default_stream();
        let side = dev.create_stream(0).unwrap();
        let x = alloc.alloc(20 * MIB, &main).unwrap();
        side.wait_stream(&main).unwrap();
        side.launch(&Kernel::Busy {
            duration_ns: LONG_NS,
        })
        .unwrap();
        side.launch(&Kernel::Fill {
            dst: x.slice(),
            value: 1.0,
        })
        .unwrap();
        x.record_stream(&side).unwrap();
        let x_addr = x.ptr().0;
        drop(x);
        alloc.set_expandable_segments(!toggle_off).unwrap();
        // Growing (a page, or a normal 20 MiB segment) beside x's page passes the limit.
        let y = alloc.alloc(20 * MIB, &main).unwrap();
        let reused = alloc.memory_stats().num_reuse_with_wait;
        let out = (y.ptr().0 == x_addr, range_of(&alloc, &y).2, reused);
        assert_clean(&dev, &alloc);
        out
    };
    // On, the pending block is reused behind a wait on its event.
    assert_eq!(run(false), (true, true, 1));
    // Off, it is not: once the ladder has waited for it, its page is unmapped and a normal
    // segment serves the request.
    assert_eq!(run(true), (false, false, 0));
}

#[test]
fn device_out_of_memory_while_mapping_leaves_nothing_mapped() {
    let (dev, alloc) = setup(50 * MIB, AllocatorConfig::new().expandable_segments(true));
    let s = dev.default_stream();
    let a = alloc.alloc(10 * MIB, &s).unwrap();
    // a second 20 MiB page fits, a third does not: the two mapped for it are undone
    let err = alloc.alloc(50 * MIB, &s).unwrap_err();
    assert!(matches!(err, AllocError::OutOfMemory(_)), "{err:?}");
    assert_eq!(alloc.memory_reserved(), 20 * MIB);
    assert_clean(&dev, &alloc);
    let b = alloc.alloc(25 * MIB, &s).unwrap();
    assert_eq!(b.ptr().0, a.ptr().0 + 10 * MIB);
    assert_clean(&dev, &alloc);
    drop((a, b));
}

#[test]
fn dropping_the_allocator_returns_every_page_and_reservation() {
    let (dev, alloc) = expandable_setup("");
    let s = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let bufs: Vec<_> = [5 * MIB, 12 * KIB, 33 * MIB]
        .iter()
        .map(|&n| alloc.alloc(n, &s).unwrap())
        .chain(std::iter::once(alloc.alloc(MIB, &side).unwrap()))
        .collect();
    assert!(device_used(&dev) > 0);
    drop(bufs);
    drop(alloc);
    assert_eq!(device_used(&dev), 0);
    assert!(dev.hal().sanitizer_reports().is_empty());
}

#[derive(Clone, Debug)]
enum Op {
    Alloc { size: u64, stream: usize },
    Free(usize),
    EmptyCache,
    Toggle(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            prop_oneof![
                4 => 1u64..MIB,
                4 => MIB..12 * MIB,
                4 => 12 * MIB..48 * MIB,
                1 => 48 * MIB..160 * MIB,
            ],
            0usize..2
        )
            .prop_map(|(size, stream)| Op::Alloc { size, stream }),
        5 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::EmptyCache),
        1 => any::<bool>().prop_map(Op::Toggle),
    ]
}

/// The first and last (up to) 4 KiB of a buffer, whole `f32`s.
fn edges(buf: &DeviceBuffer<SimBackend>) -> [DeviceSlice; 2] {
    let words = buf.requested_size() / 4 * 4;
    let n = words.min(4 * KIB);
    let slice = buf.slice();
    [slice.sub(0, n).unwrap(), slice.sub(words - n, n).unwrap()]
}

/// A live buffer and the value its edges were filled with.
type Live = Vec<(DeviceBuffer<SimBackend>, f32)>;

fn data_intact(dev: &Dev, live: &Live) -> bool {
    let s = dev.default_stream();
    live.iter().all(|(buf, value)| {
        edges(buf)
            .iter()
            .all(|&e| read(&s, e).iter().all(|v| v == value))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random allocations (some large enough to run the out-of-memory ladder), frees in any
    /// order (so free pages lie between live blocks), empty_cache and toggles on two streams:
    /// live buffers never overlap and keep their data, the invariants hold, reserved memory
    /// is what the device has mapped, and the sanitizer sees no access to unmapped memory.
    #[test]
    fn random_ops_keep_reserved_equal_to_mapped(ops in proptest::collection::vec(op(), 1..60)) {
        let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new().expandable_segments(true));
        let streams = [dev.default_stream(), dev.create_stream(0).unwrap()];
        let mut live: Live = Vec::new();
        let mut next_value = 1.0f32;
        for op in ops {
            match op {
                Op::Alloc { size, stream } => match alloc.alloc(size, &streams[stream]) {
                    Ok(buf) => {
                        let (start, end) = (buf.ptr().0, buf.ptr().0 + buf.size());
                        for (other, _) in &live {
                            let (s2, e2) = (other.ptr().0, other.ptr().0 + other.size());
                            prop_assert!(end <= s2 || e2 <= start, "overlap");
                        }
                        for e in edges(&buf) {
                            streams[stream].launch(&Kernel::Fill { dst: e, value: next_value }).unwrap();
                        }
                        streams[stream].synchronize().unwrap();
                        live.push((buf, next_value));
                        next_value += 1.0;
                    }
                    Err(AllocError::OutOfMemory(_)) => prop_assert!(data_intact(&dev, &live)),
                    Err(e) => prop_assert!(false, "{e}"),
                },
                Op::Free(i) => {
                    if !live.is_empty() {
                        let n = live.len();
                        live.swap_remove(i % n);
                    }
                }
                Op::EmptyCache => {
                    alloc.empty_cache();
                    prop_assert!(data_intact(&dev, &live));
                }
                Op::Toggle(on) => alloc.set_expandable_segments(on).unwrap(),
            }
            prop_assert_eq!(alloc.check_invariants(), Ok(()));
            prop_assert_eq!(alloc.memory_reserved(), device_used(&dev));
        }
        prop_assert!(data_intact(&dev, &live));
        prop_assert_eq!(dev.hal().stats().invalid_accesses, 0);
        live.clear();
        alloc.empty_cache();
        prop_assert_eq!(alloc.memory_reserved(), 0);
        prop_assert_eq!(device_used(&dev), 0);
        prop_assert!(dev.hal().sanitizer_reports().is_empty());
    }
}
