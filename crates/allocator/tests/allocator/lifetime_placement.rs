//! `lifetime_placement`: with expandable segments, sizes mostly freed soon after allocation
//! go to the stream's small-pool segment, long-lived ones stay packed in the large-pool one.

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, DeviceBuffer, SegmentType};
use braid_backend_sim::SimBackend;
use common::*;

const CAPACITY: u64 = 1 << 30;
const EXPANDABLE: &str = "expandable_segments:true,expandable_large_page_mb:2";

fn alloc_setup(conf: &str) -> (Dev, Alloc) {
    setup(CAPACITY, AllocatorConfig::parse(conf).unwrap())
}

fn with_policy(conf: &str) -> String {
    format!("{conf},lifetime_placement:true")
}

/// The type of the segment holding `buf`.
fn segment_of(alloc: &Alloc, buf: &DeviceBuffer<SimBackend>) -> SegmentType {
    let addr = buf.ptr().0;
    alloc
        .snapshot()
        .segments
        .iter()
        .find(|s| s.address <= addr && addr < s.address + s.total_size)
        .map(|s| s.segment_type)
        .expect("the buffer lies in a segment")
}

#[test]
fn config_key_and_builder_agree() {
    assert!(!AllocatorConfig::new().lifetime_placement);
    let parsed = AllocatorConfig::parse("lifetime_placement:true").unwrap();
    assert!(parsed.lifetime_placement);
    assert_eq!(
        parsed.lifetime_placement,
        AllocatorConfig::new()
            .lifetime_placement(true)
            .lifetime_placement
    );
    match AllocatorConfig::parse("lifetime_placement:sometimes") {
        Err(AllocError::InvalidConfigValue { key, value, .. }) => {
            assert_eq!(key, "lifetime_placement");
            assert_eq!(value, "sometimes");
        }
        other => panic!("expected a typed error, got {other:?}"),
    }
}

/// A 4 MiB size freed right after its allocation is predicted short-lived: on a miss it grows
/// the small-pool segment, not the large one. Without the key it goes to the large one.
#[test]
fn a_size_freed_soon_grows_the_small_pool_segment() {
    for on in [true, false] {
        let conf = if on {
            with_policy(EXPANDABLE)
        } else {
            EXPANDABLE.to_string()
        };
        let (dev, alloc) = alloc_setup(&conf);
        let s = dev.default_stream();
        // Never freed yet: long-lived, in the large-pool segment.
        let first = alloc.alloc(4 * MIB, &s).unwrap();
        assert_eq!(segment_of(&alloc, &first), SegmentType::Large);
        drop(first);
        // A new size takes the free 4 MiB at the end of the large segment and grows it.
        let keep = alloc.alloc(6 * MIB, &s).unwrap();
        assert_eq!(segment_of(&alloc, &keep), SegmentType::Large);
        let again = alloc.alloc(4 * MIB, &s).unwrap();
        let want = if on {
            SegmentType::Small
        } else {
            SegmentType::Large
        };
        assert_eq!(segment_of(&alloc, &again), want, "lifetime_placement:{on}");
        // Statistics follow the segment: the block counts as small pool.
        let stats = alloc.memory_stats_map();
        let small = if on { 4 * MIB } else { 0 };
        assert_eq!(stats["allocated_bytes.small_pool.current"], small);
        drop((keep, again));
        alloc.check_invariants().unwrap();
    }
}

/// A size that mostly lives long stays in the large-pool segment, and a short-lived request
/// takes a free block of either segment (here a hole in the large one) before anything grows.
#[test]
fn long_lived_sizes_stay_large_and_short_lived_ones_reuse_any_hole() {
    let (dev, alloc) = alloc_setup(&with_policy(EXPANDABLE));
    let s = dev.default_stream();
    for _ in 0..4 {
        let block = alloc.alloc(3 * MIB, &s).unwrap();
        // Ten more allocations (small ones) before the free: the 3 MiB block lived long.
        let fillers: Vec<_> = (0..10).map(|_| alloc.alloc(512, &s).unwrap()).collect();
        drop(fillers);
        drop(block);
    }
    let long = alloc.alloc(3 * MIB, &s).unwrap();
    assert_eq!(segment_of(&alloc, &long), SegmentType::Large);
    let hole_addr = long.ptr().0;
    let first = alloc.alloc(2560 * KIB, &s).unwrap();
    drop(first); // 2.5 MiB is now short-lived
    let keep = alloc.alloc(5 * MIB, &s).unwrap();
    assert_eq!(segment_of(&alloc, &keep), SegmentType::Large);
    drop(long); // a 3 MiB hole in the large segment; the small one has 2 MiB free
    let reserved = alloc.memory_reserved();
    let short = alloc.alloc(2560 * KIB, &s).unwrap();
    assert_eq!(short.ptr().0, hole_addr);
    assert_eq!(
        alloc.memory_reserved(),
        reserved,
        "no growth for a cached fit"
    );
    drop((keep, short));
    alloc.check_invariants().unwrap();
}

/// The pattern of a transformer layer in a forward pass with a cache: long-lived 4.5 MiB
/// blocks allocated between transient 0.75, 1.5 and 3 MiB ones, then a 16 MiB block. Placed by
/// lifetime, the long-lived blocks stay packed and the peak is 10 MiB lower.
#[test]
fn transient_blocks_leave_no_holes_between_long_lived_ones() {
    let peak = |conf: &str| {
        let (dev, alloc) = alloc_setup(conf);
        let s = dev.default_stream();
        let a = |kib: u64| alloc.alloc(kib * KIB, &s).unwrap();
        let mut kept = Vec::new();
        for _ in 0..4 {
            kept.push(a(4608));
            let x = a(768);
            let t1 = a(3072);
            drop(x);
            kept.push(a(4608));
            let y = a(768);
            let t2 = a(3072);
            drop(y);
            let t3 = a(3072);
            let t4 = a(3072);
            drop(t3);
            let t5 = a(3072);
            drop(t4);
            kept.push(a(4608));
            let z = a(768);
            drop(t5);
            let w = a(1536);
            drop((t1, t2, z, w));
        }
        kept.push(a(16 * 1024));
        alloc.check_invariants().unwrap();
        alloc.memory_stats_map()["reserved_bytes.all.peak"]
    };
    let tuned = format!("{EXPANDABLE},release_before_grow:true,split_large_remainders:true");
    assert_eq!(peak(EXPANDABLE), 86 * MIB);
    assert_eq!(peak(&tuned), 86 * MIB);
    assert_eq!(peak(&with_policy(EXPANDABLE)), 76 * MIB);
    assert_eq!(peak(&with_policy(&tuned)), 76 * MIB);
}

/// Without expandable segments the key changes nothing.
#[test]
fn without_expandable_segments_nothing_changes() {
    let layout = |conf: &str| {
        let (dev, alloc) = alloc_setup(conf);
        let s = dev.default_stream();
        let mut held = Vec::new();
        for i in 0..20u64 {
            held.push(alloc.alloc((i % 5 + 1) * 700 * KIB, &s).unwrap());
            if i % 3 == 0 {
                held.remove(0);
            }
        }
        let ptrs: Vec<u64> = held.iter().map(|b| b.ptr().0).collect();
        (ptrs, alloc.memory_reserved())
    };
    assert_eq!(layout(""), layout("lifetime_placement:true"));
}

/// Growing one segment past the peak first unmaps the free pages at the end of the other.
#[test]
fn growth_past_the_peak_unmaps_the_other_segments_free_end() {
    let (dev, alloc) = alloc_setup(&with_policy(EXPANDABLE));
    let s = dev.default_stream();
    drop(alloc.alloc(4 * MIB, &s).unwrap()); // 4 MiB is short-lived from now on
    let keep = alloc.alloc(6 * MIB, &s).unwrap();
    let short = alloc.alloc(4 * MIB, &s).unwrap();
    assert_eq!(segment_of(&alloc, &short), SegmentType::Small);
    assert_eq!(alloc.memory_reserved(), 10 * MIB);
    drop(short); // the small-pool segment keeps 4 MiB mapped, free
    let long = alloc.alloc(8 * MIB, &s).unwrap();
    assert_eq!(segment_of(&alloc, &long), SegmentType::Large);
    // 6 + 8 MiB mapped in the large segment; the small one was unmapped and released.
    assert_eq!(alloc.memory_reserved(), 14 * MIB);
    assert_eq!(
        alloc.memory_stats_map()["reserved_bytes.all.peak"],
        14 * MIB
    );
    assert!(alloc
        .snapshot()
        .segments
        .iter()
        .all(|seg| seg.segment_type == SegmentType::Large));
    drop((keep, long));
    alloc.check_invariants().unwrap();
}

/// A random mix of sizes on two streams, each freed after a random number of later
/// allocations (so sizes flip between short- and long-lived), with now and then an
/// `empty_cache`: the invariants hold after every step (among them, that the other segment's
/// free list and its blocks agree on the pages to unmap before growing past the peak), and
/// what the allocator reserves is what the device has mapped.
mod random_lifetimes {
    use super::*;
    use proptest::prelude::*;

    /// (size, stream, allocations it lives for) or an `empty_cache`.
    fn op() -> impl Strategy<Value = Option<(u64, usize, usize)>> {
        prop_oneof![
            12 => (
                prop_oneof![1u64..MIB, MIB..6 * MIB, 6 * MIB..24 * MIB],
                0usize..2,
                0usize..24,
            )
                .prop_map(Some),
            1 => Just(None),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn invariants_hold_and_reserved_is_mapped(ops in proptest::collection::vec(op(), 1..120)) {
            let (dev, alloc) = alloc_setup(&with_policy(EXPANDABLE));
            let streams = [dev.default_stream(), dev.create_stream(0).unwrap()];
            // Live buffers with the step at which they are freed.
            let mut live: Vec<(usize, DeviceBuffer<SimBackend>)> = Vec::new();
            for (step, op) in ops.into_iter().enumerate() {
                live.retain(|(until, _)| *until > step);
                match op {
                    Some((size, stream, lives)) => {
                        let buf = alloc.alloc(size, &streams[stream]).unwrap();
                        live.push((step + lives, buf));
                    }
                    None => alloc.empty_cache(),
                }
                prop_assert_eq!(alloc.check_invariants(), Ok(()));
                prop_assert_eq!(alloc.memory_reserved(), CAPACITY - dev.mem_info().unwrap().free);
            }
            live.clear();
            alloc.empty_cache();
            prop_assert_eq!(dev.mem_info().unwrap().free, CAPACITY);
        }
    }
}
