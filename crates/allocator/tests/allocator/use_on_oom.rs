//! Pools that lend at out-of-memory (`PoolOptions::use_on_oom`, PyTorch's
//! `MemPool(use_on_oom=True)`): the last step of the out-of-memory ladder lends a free cached
//! block of a marked private pool to a default-pool request; other pools never lend. The
//! loan itself and an unmarked pool's refusal are the conformance case
//! `allocator::pools_marked_use_on_oom_lend_at_out_of_memory`; here, the cases around it.

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, MemPool, PoolId, PoolOptions};
use braid_backend_sim::SimBackend;
use braid_stream_core::Stream;
use common::*;

/// A 64 MiB device whose pool `options` caches one free 20 MiB segment (an 8 MiB block
/// allocated in it and freed) while the default pool holds 40 MiB allocated: 4 MiB of the
/// device are left, too little for a 20 MiB segment.
fn pool_with_a_cached_segment(
    options: PoolOptions,
) -> (
    Dev,
    Alloc,
    Stream<SimBackend>,
    MemPool<SimBackend>,
    Vec<braid_allocator::DeviceBuffer<SimBackend>>,
) {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(options);
    {
        let _in_pool = pool.use_on(&s).unwrap();
        drop(alloc.alloc(8 * MIB, &s).unwrap());
    }
    assert_eq!(pool.reserved_bytes(), 20 * MIB);
    let held = vec![alloc.alloc(40 * MIB, &s).unwrap()];
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    (dev, alloc, s, pool, held)
}

fn is_oom<T>(r: Result<T, AllocError>) -> bool {
    matches!(r, Err(AllocError::OutOfMemory(_)))
}

#[test]
fn a_marked_pool_lends_only_when_the_device_is_out_of_memory() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new().use_on_oom(true));
    {
        let _in_pool = pool.use_on(&s).unwrap();
        drop(alloc.alloc(8 * MIB, &s).unwrap());
    }
    let own = alloc.alloc(8 * MIB, &s).unwrap();
    assert_eq!(own.pool(), PoolId::DEFAULT);
    assert_eq!(alloc.memory_reserved(), 40 * MIB);
    assert_eq!(pool.stats().allocated_bytes, 0);
    alloc.check_invariants().unwrap();
}

#[test]
fn requests_diverted_into_a_private_pool_never_borrow() {
    let (_dev, alloc, s, lender, _held) =
        pool_with_a_cached_segment(PoolOptions::new().use_on_oom(true));
    let other = alloc.create_pool(PoolOptions::new());
    let _in_other = other.use_on(&s).unwrap();
    assert!(is_oom(alloc.alloc(8 * MIB, &s)));
    assert_eq!(lender.stats().allocated_bytes, 0);
    alloc.check_invariants().unwrap();
}

#[test]
fn a_lending_pool_that_cannot_fit_the_request_leaves_it_out_of_memory() {
    let (_dev, alloc, s, pool, _held) =
        pool_with_a_cached_segment(PoolOptions::new().use_on_oom(true));
    // 22 MiB: more than the pool's free 20 MiB block.
    assert!(is_oom(alloc.alloc(22 * MIB, &s)));
    assert_eq!(pool.stats().allocated_bytes, 0);
    alloc.check_invariants().unwrap();
}
