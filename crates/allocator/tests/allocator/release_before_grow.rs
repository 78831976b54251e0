//! `release_before_grow`: whole cached segments go back to the device before a new segment
//! raises reserved memory past its peak (off by default: PyTorch keeps them).

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, PoolFilter, PoolOptions};
use common::*;

/// Two 20 MiB segments cached whole, then a 40 MiB request that none can serve (the pattern
/// of the CS336 training trace's optimizer step).
fn two_cached_segments_then_40_mib(config: AllocatorConfig) -> (u64, u64, u64) {
    let (dev, alloc) = setup(256 * MIB, config);
    let s = dev.default_stream();
    let a = alloc.alloc(6 * MIB, &s).unwrap();
    let b = alloc.alloc(15 * MIB, &s).unwrap(); // does not fit a's segment: a second one
    assert_eq!(alloc.memory_reserved(), 20 * MIB + 16 * MIB);
    drop((a, b));
    let peak = alloc.max_memory_reserved();
    let big = alloc.alloc(40 * MIB, &s).unwrap();
    alloc.check_invariants().unwrap();
    let stats = alloc.memory_stats();
    drop(big);
    alloc.check_invariants().unwrap();
    (peak, stats.reserved_bytes.all.peak, stats.num_device_free)
}

#[test]
fn off_by_default_keeps_cached_segments() {
    assert!(!AllocatorConfig::new().release_before_grow);
    let (before, peak, frees) = two_cached_segments_then_40_mib(AllocatorConfig::new());
    assert_eq!(before, 36 * MIB);
    assert_eq!(
        peak,
        36 * MIB + 40 * MIB,
        "PyTorch keeps both cached segments"
    );
    assert_eq!(frees, 0);
}

#[test]
fn releases_whole_segments_instead_of_growing_past_the_peak() {
    let config = AllocatorConfig::new().release_before_grow(true);
    let (before, peak, frees) = two_cached_segments_then_40_mib(config);
    assert_eq!(before, 36 * MIB);
    // Both whole segments (36 MiB) go back: the 40 MiB segment raises the peak by 4 MiB only.
    assert_eq!(peak, 40 * MIB);
    assert_eq!(frees, 2);
}

#[test]
fn releases_the_fewest_segments_largest_first() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new().release_before_grow(true));
    let s = dev.default_stream();
    let live = alloc.alloc(20 * MIB, &s).unwrap();
    let bufs: Vec<_> = [12, 14, 16]
        .iter()
        .map(|&mb| alloc.alloc(mb * MIB, &s).unwrap())
        .collect();
    assert_eq!(alloc.memory_reserved(), 62 * MIB);
    drop(bufs);
    // 24 MiB over the 62 MiB peak: the 16 and 14 MiB segments cover it, the 12 MiB one stays.
    let big = alloc.alloc(24 * MIB, &s).unwrap();
    let stats = alloc.memory_stats();
    assert_eq!(stats.num_device_free, 2);
    assert_eq!(
        stats.reserved_bytes.all.current,
        20 * MIB + 12 * MIB + 24 * MIB
    );
    assert_eq!(stats.reserved_bytes.all.peak, 62 * MIB);
    drop((big, live));
    alloc.check_invariants().unwrap();
}

#[test]
fn nothing_is_released_while_the_new_segment_fits_under_the_peak() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new().release_before_grow(true));
    let (a, b) = (dev.default_stream(), dev.create_stream(0).unwrap());
    drop(alloc.alloc(30 * MIB, &a).unwrap());
    alloc.empty_cache();
    assert_eq!(alloc.memory_stats().num_device_free, 1);
    drop(alloc.alloc(12 * MIB, &a).unwrap());
    // Stream b cannot use a's cached 12 MiB segment; 12 + 14 MiB stays under the 30 MiB peak.
    let other = alloc.alloc(14 * MIB, &b).unwrap();
    let stats = alloc.memory_stats();
    assert_eq!(stats.num_device_free, 1);
    assert_eq!(stats.reserved_bytes.all.current, 26 * MIB);
    // Past the peak, a's cached segment goes back for b's request.
    let more = alloc.alloc(18 * MIB, &b).unwrap();
    let stats = alloc.memory_stats();
    assert_eq!(stats.num_device_free, 2);
    assert_eq!(stats.reserved_bytes.all.current, 14 * MIB + 18 * MIB);
    drop((other, more));
    alloc.check_invariants().unwrap();
}

#[test]
fn keeps_split_segments_and_pools_in_use() {
    let (dev, alloc) = setup(512 * MIB, AllocatorConfig::new().release_before_grow(true));
    let s = dev.default_stream();
    // A split segment (a live block in it) cannot go back.
    let keep = alloc.alloc(4 * MIB, &s).unwrap();
    // A private pool in use keeps its cached segment.
    let pool = alloc.create_pool(PoolOptions::new());
    let diversion = alloc
        .begin_allocate_to_pool(&pool, PoolFilter::AllStreams)
        .unwrap();
    drop(alloc.alloc(30 * MIB, &s).unwrap());
    drop(diversion);
    assert_eq!(alloc.memory_reserved(), 20 * MIB + 30 * MIB);
    let big = alloc.alloc(64 * MIB, &s).unwrap();
    assert_eq!(alloc.memory_stats().num_device_free, 0);
    assert_eq!(alloc.memory_reserved(), 20 * MIB + 30 * MIB + 64 * MIB);
    drop((big, keep, pool));
    alloc.check_invariants().unwrap();
}

#[test]
fn config_key_parses_and_rejects_bad_values() {
    let c = AllocatorConfig::parse("release_before_grow:true").unwrap();
    assert!(c.release_before_grow);
    assert_eq!(c, AllocatorConfig::new().release_before_grow(true));
    assert!(
        !AllocatorConfig::parse("release_before_grow:0")
            .unwrap()
            .release_before_grow
    );
    let err = AllocatorConfig::parse("release_before_grow:maybe").unwrap_err();
    assert!(
        matches!(err, AllocError::InvalidConfigValue { ref key, .. } if key == "release_before_grow"),
        "{err}"
    );
}
