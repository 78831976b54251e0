//! `split_large_remainders`: large-pool remainders of at least 512 B are split off and cached
//! in the large pool, where small requests of the default pool find them (off by default:
//! PyTorch splits a large block only when more than 1 MiB would remain).

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig};
use common::*;

const KIB: u64 = 1 << 10;

/// A 19.5 MiB request (its own 20 MiB segment, 0.5 MiB over), then a 512 KiB request.
/// Returns (the big buffer's block size, device mallocs, reserved bytes) while both live,
/// and checks that everything coalesces back into whole segments afterwards.
fn big_then_small(config: AllocatorConfig) -> (u64, u64, u64) {
    let (dev, alloc) = setup(256 * MIB, config);
    let s = dev.default_stream();
    let big = alloc.alloc(19 * MIB + 512 * KIB, &s).unwrap();
    let small = alloc.alloc(512 * KIB, &s).unwrap();
    alloc.check_invariants().unwrap();
    let stats = alloc.memory_stats();
    let out = (
        big.size(),
        stats.num_device_alloc,
        stats.reserved_bytes.all.current,
    );
    drop(big);
    drop(small);
    alloc.check_invariants().unwrap();
    let stats = alloc.memory_stats();
    assert_eq!(stats.allocated_bytes.all.current, 0);
    assert_eq!(stats.inactive_split.all.current, 0, "blocks coalesce whole");
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    out
}

#[test]
fn off_by_default_keeps_pytorch_splitting() {
    assert!(!AllocatorConfig::new().split_large_remainders);
    let (size, mallocs, reserved) = big_then_small(AllocatorConfig::new());
    // The 0.5 MiB remainder stays with the block; the small request gets a small segment.
    assert_eq!(size, 20 * MIB);
    assert_eq!(mallocs, 2);
    assert_eq!(reserved, 22 * MIB);
}

#[test]
fn splits_sub_mib_remainders_and_small_requests_use_them() {
    let config = AllocatorConfig::new().split_large_remainders(true);
    let (size, mallocs, reserved) = big_then_small(config);
    assert_eq!(size, 19 * MIB + 512 * KIB);
    assert_eq!(mallocs, 1, "the small request takes the large remainder");
    assert_eq!(reserved, 20 * MIB);
}

#[test]
fn remainders_are_reused_by_large_requests_on_coalescing() {
    let config = AllocatorConfig::new().split_large_remainders(true);
    let (dev, alloc) = setup(256 * MIB, config);
    let s = dev.default_stream();
    // 1.125 MiB requests in a 20 MiB segment: each one exactly 1.125 MiB.
    let bufs: Vec<_> = (0..4)
        .map(|_| alloc.alloc(MIB + 128 * KIB, &s).unwrap())
        .collect();
    for b in &bufs {
        assert_eq!(b.size(), MIB + 128 * KIB);
    }
    let stats = alloc.memory_stats();
    assert_eq!(stats.allocated_bytes.all.current, 4 * (MIB + 128 * KIB));
    assert_eq!(stats.requested_bytes.all.current, 4 * (MIB + 128 * KIB));
    assert_eq!(stats.num_device_alloc, 1);
    drop(bufs);
    alloc.check_invariants().unwrap();
    // The segment is whole again and serves a request of almost its size.
    let big = alloc.alloc(19 * MIB, &s).unwrap();
    assert_eq!(alloc.memory_stats().num_device_alloc, 1);
    drop(big);
    alloc.check_invariants().unwrap();
}

#[test]
fn config_key_parses_and_rejects_bad_values() {
    let c = AllocatorConfig::parse("release_before_grow:true,split_large_remainders:true").unwrap();
    assert!(c.split_large_remainders);
    assert_eq!(
        c,
        AllocatorConfig::new()
            .release_before_grow(true)
            .split_large_remainders(true)
    );
    assert!(
        !AllocatorConfig::parse("split_large_remainders:false")
            .unwrap()
            .split_large_remainders
    );
    let err = AllocatorConfig::parse("split_large_remainders:sometimes").unwrap_err();
    assert!(
        matches!(err, AllocError::InvalidConfigValue { ref key, ref value, .. }
            if key == "split_large_remainders" && value == "sometimes"),
        "{err}"
    );
}
