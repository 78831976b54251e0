//! The cache-hit path does not allocate on the host (ARCHITECTURE.md: a cache hit "makes no
//! host allocation"): a counting global allocator sees no host allocation
//! across many alloc+free pairs once the block is cached, for small, large and oversize
//! requests, with history recording off and on (the history ring is preallocated).

use crate::common::host_allocs;
use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{SanitizerMode, SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::Device;

#[test]
fn cache_hits_do_not_allocate_on_the_host() {
    let device = Device::<SimBackend>::new(SimDevice::new(
        SimConfig::new()
            .capacity(1 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(SanitizerMode::Off),
    ))
    .unwrap();
    let stream = device.default_stream();
    for history in [false, true] {
        let alloc = CachingAllocator::new(
            device.clone(),
            AllocatorConfig::default().record_history(history),
        )
        .unwrap();
        for size in [512u64, 1 << 20, 64 << 20] {
            drop(alloc.alloc(size, &stream).unwrap()); // the miss: segment and block made
            drop(alloc.alloc(size, &stream).unwrap()); // one hit, so every table is grown
            let before = host_allocs();
            for _ in 0..1000 {
                drop(std::hint::black_box(alloc.alloc(size, &stream).unwrap()));
            }
            assert_eq!(
                host_allocs() - before,
                0,
                "{size}-byte cache hits allocated on the host (history {history})"
            );
        }
        // One small segment (512 B and 1 MiB share it) and the 64 MiB one: the loops hit.
        assert_eq!(alloc.memory_stats().num_device_alloc, 2);
    }
}
