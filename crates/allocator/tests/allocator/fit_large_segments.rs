//! `fit_large_segments`: a large request below 10 MiB that misses gets a segment sized to the
//! most whole requests of its size that fit in 20 MiB (off by default: PyTorch's 20 MiB).

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig};
use common::*;

/// Three 9 MiB requests: returns (reserved, device mallocs) while they live.
fn three_9_mib(config: AllocatorConfig) -> (u64, u64) {
    let (dev, alloc) = setup(256 * MIB, config);
    let s = dev.default_stream();
    let bufs: Vec<_> = (0..3).map(|_| alloc.alloc(9 * MIB, &s).unwrap()).collect();
    alloc.check_invariants().unwrap();
    let stats = alloc.memory_stats();
    drop(bufs);
    alloc.check_invariants().unwrap();
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    (stats.reserved_bytes.all.current, stats.num_device_alloc)
}

#[test]
fn off_by_default_uses_20_mib_segments() {
    assert!(!AllocatorConfig::new().fit_large_segments);
    assert_eq!(AllocatorConfig::new().segment_size(9 * MIB), Some(20 * MIB));
    assert_eq!(three_9_mib(AllocatorConfig::new()), (40 * MIB, 2));
}

#[test]
fn segments_hold_whole_requests() {
    let config = AllocatorConfig::new().fit_large_segments(true);
    assert_eq!(config.segment_size(9 * MIB), Some(18 * MIB));
    // Two requests per 18 MiB segment: no 2 MiB tails.
    assert_eq!(three_9_mib(config), (36 * MIB, 2));
}

#[test]
fn small_and_own_segments_are_unchanged() {
    let config = AllocatorConfig::new().fit_large_segments(true);
    assert_eq!(config.segment_size(512), Some(2 * MIB));
    assert_eq!(config.segment_size(MIB), Some(2 * MIB));
    assert_eq!(config.segment_size(10 * MIB), Some(10 * MIB));
    assert_eq!(config.segment_size(33 * MIB), Some(34 * MIB));
    // A custom large segment size is the bound.
    let config = config.large_segment_size(32 * MIB);
    assert_eq!(config.segment_size(9 * MIB), Some(28 * MIB));
}

#[test]
fn config_key_parses_and_rejects_bad_values() {
    let c = AllocatorConfig::parse("fit_large_segments:true,split_large_remainders:1").unwrap();
    assert!(c.fit_large_segments);
    assert_eq!(
        c,
        AllocatorConfig::new()
            .fit_large_segments(true)
            .split_large_remainders(true)
    );
    assert!(
        !AllocatorConfig::parse("fit_large_segments:0")
            .unwrap()
            .fit_large_segments
    );
    let err = AllocatorConfig::parse("fit_large_segments:yes").unwrap_err();
    assert!(
        matches!(err, AllocError::InvalidConfigValue { ref key, ref value, .. }
            if key == "fit_large_segments" && value == "yes"),
        "{err}"
    );
}
