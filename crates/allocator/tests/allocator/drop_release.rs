//! Dropping the allocator (its last handle) returns every segment it still holds to the
//! device: cached blocks of the default pool, blocks pending on other streams, and the cached
//! segments of private pools nobody uses any more.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator, CrossStreamMode, PoolOptions};
use braid_stream_core::Kernel;
use common::*;

fn free_bytes(dev: &Dev) -> u64 {
    dev.mem_info().unwrap().free
}

#[test]
fn dropping_the_allocator_returns_cached_segments() {
    let dev = device(128 * MIB);
    let total = free_bytes(&dev);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let main = dev.default_stream();
    drop(alloc.alloc(MIB, &main).unwrap());
    drop(alloc.alloc(12 * MIB, &main).unwrap());
    drop(alloc.alloc(30 * MIB, &main).unwrap());
    drop(alloc.alloc(3 * MIB, &main).unwrap()); // split from the cached 12 MiB segment
    assert_eq!(alloc.memory_reserved(), 2 * MIB + 12 * MIB + 30 * MIB);
    assert!(free_bytes(&dev) < total);
    drop(alloc);
    assert_eq!(free_bytes(&dev), total, "cached segments leaked");
}

#[test]
fn a_clone_keeps_the_cache_until_the_last_handle_drops() {
    let dev = device(64 * MIB);
    let total = free_bytes(&dev);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let main = dev.default_stream();
    let buf = alloc.alloc(MIB, &main).unwrap();
    drop(alloc); // the buffer still holds a handle
    assert_eq!(free_bytes(&dev), total - 2 * MIB);
    let again = buf.allocator();
    drop(buf);
    assert_eq!(again.memory_reserved(), 2 * MIB);
    assert_eq!(free_bytes(&dev), total - 2 * MIB);
    drop(again);
    assert_eq!(free_bytes(&dev), total);
}

#[test]
fn dropping_the_allocator_releases_pending_cross_stream_blocks() {
    for mode in [CrossStreamMode::Manual, CrossStreamMode::Automatic] {
        let dev = device(64 * MIB);
        let total = free_bytes(&dev);
        let alloc =
            CachingAllocator::new(dev.clone(), AllocatorConfig::new().cross_stream(mode)).unwrap();
        let main = dev.default_stream();
        let side = dev.create_stream(0).unwrap();
        let buf = alloc.alloc(4 * MIB, &main).unwrap();
        side.wait_stream(&main).unwrap();
        side.launch(&Kernel::Fill {
            dst: buf.slice(),
            value: 1.0,
        })
        .unwrap();
        side.launch(&Kernel::Busy {
            duration_ns: LONG_NS,
        })
        .unwrap();
        buf.record_stream(&side).unwrap();
        drop(buf);
        assert_eq!(alloc.pending_free_bytes(), 4 * MIB, "{mode:?}");
        drop(alloc);
        assert_eq!(free_bytes(&dev), total, "{mode:?}: pending segment leaked");
        // The device is healthy afterwards.
        side.synchronize().unwrap();
        let again = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
        drop(again.alloc(MIB, &main).unwrap());
    }
}

#[test]
fn dropping_the_allocator_releases_freeable_private_pools() {
    let dev = device(64 * MIB);
    let total = free_bytes(&dev);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let output = {
        let _diversion = pool.use_on(&s).unwrap();
        alloc.alloc(3 * MIB, &s).unwrap()
    };
    // The pool's last user goes while one of its blocks (a graph output) is alive: the
    // segment stays until the block is freed, then sits cached in the freeable pool.
    drop(pool);
    drop(output);
    assert_eq!(alloc.private_pools().len(), 1);
    assert_eq!(alloc.memory_reserved(), 20 * MIB);
    drop(alloc);
    assert_eq!(
        free_bytes(&dev),
        total,
        "the freeable pool's segment leaked"
    );
}

#[test]
fn dropping_the_allocator_is_quiet_on_an_empty_allocator() {
    let dev = device(64 * MIB);
    let total = free_bytes(&dev);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    drop(alloc);
    assert_eq!(free_bytes(&dev), total);
    assert_eq!(dev.hal().sanitizer_report_count(), 0);
}

#[test]
fn the_last_buffer_releases_an_allocator_without_handles() {
    let dev = device(64 * MIB);
    let total = free_bytes(&dev);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let weak = alloc.downgrade();
    let main = dev.default_stream();
    let a = alloc.alloc(MIB, &main).unwrap();
    let b = alloc.alloc(12 * MIB, &main).unwrap();
    drop(alloc);
    assert!(weak.upgrade().is_some(), "live buffers keep the allocator");
    drop(a);
    assert_eq!(free_bytes(&dev), total - 2 * MIB - 12 * MIB);
    drop(b);
    assert_eq!(
        free_bytes(&dev),
        total,
        "the last buffer must release every segment"
    );
    assert!(weak.upgrade().is_none());
}

#[test]
fn an_empty_buffer_keeps_the_allocator_alive() {
    let dev = device(64 * MIB);
    let total = free_bytes(&dev);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let main = dev.default_stream();
    drop(alloc.alloc(MIB, &main).unwrap());
    let empty = alloc.alloc(0, &main).unwrap();
    drop(alloc);
    assert_eq!(
        free_bytes(&dev),
        total - 2 * MIB,
        "the cache lives while a buffer does"
    );
    assert_eq!(empty.allocator().memory_reserved(), 2 * MIB);
    drop(empty);
    assert_eq!(free_bytes(&dev), total);
}

#[test]
fn handles_and_buffers_dropped_on_many_threads_release_everything() {
    let dev = device(256 * MIB);
    let total = free_bytes(&dev);
    let main = dev.default_stream();
    for round in 0..50 {
        let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
        let weak = alloc.downgrade();
        let barrier = std::sync::Barrier::new(9);
        std::thread::scope(|scope| {
            for t in 0..8u64 {
                let bufs: Vec<_> = (0..4)
                    .map(|i| alloc.alloc((t * 4 + i + 1) * 4096, &main).unwrap())
                    .collect();
                let handle = (t % 2 == 0).then(|| alloc.clone());
                let barrier = &barrier;
                let weak = weak.clone();
                scope.spawn(move || {
                    barrier.wait();
                    for buf in bufs {
                        // Some threads also take and drop handles while others let go.
                        if let Some(again) = weak.upgrade() {
                            drop(again);
                        }
                        drop(buf);
                    }
                    drop(handle);
                });
            }
            barrier.wait();
            drop(alloc);
        });
        assert!(
            weak.upgrade().is_none(),
            "round {round}: the allocator outlived every user"
        );
        assert_eq!(free_bytes(&dev), total, "round {round}: segments leaked");
    }
}

/// MiB-sized buffers written on a data-mode device, freed, and the cache emptied: the
/// simulator's data store holds no host memory any more (its resident bytes return to zero),
/// with normal and with expandable segments.
#[test]
fn emptying_the_cache_returns_the_data_stores_host_memory() {
    for conf in ["", "expandable_segments:true"] {
        let dev = device(2048 * MIB);
        let alloc =
            CachingAllocator::new(dev.clone(), AllocatorConfig::parse(conf).unwrap()).unwrap();
        let main = dev.default_stream();
        let buffers: Vec<_> = (0..64u64)
            .map(|i| {
                let buf = alloc.alloc((1 + i % 7) * MIB, &main).unwrap();
                main.memset(buf.slice(), 1).unwrap();
                buf
            })
            .collect();
        main.synchronize().unwrap();
        let written: u64 = buffers.iter().map(|b| b.requested_size()).sum();
        assert!(dev.hal().stats().resident_data_bytes >= written, "{conf}");
        drop(buffers);
        main.synchronize().unwrap();
        assert!(
            dev.hal().stats().resident_data_bytes >= written,
            "{conf}: cached"
        );
        alloc.empty_cache();
        assert_eq!(alloc.memory_reserved(), 0, "{conf}");
        assert_eq!(dev.hal().stats().resident_data_bytes, 0, "{conf}");
    }
}
