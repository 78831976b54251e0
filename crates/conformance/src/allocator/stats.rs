//! Accounting (C23, C24): allocated bytes of one block, and PyTorch's statistics keys
//! through allocation, free, `empty_cache` and a peak reset.

use crate::support::{allocator, allocator_works, MIB};
use crate::{CaseError, Harness};
use braid_allocator::AllocatorConfig;
use braid_stream_core::hal::Backend;
use braid_stream_core::CollectiveBuffer;

/// C23: allocating 1 byte raises `memory_allocated` by one 512-byte block; freeing restores it
/// exactly.
pub fn one_byte_alloc_and_free_restore_allocated<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let before = alloc.memory_allocated();
    let buf = alloc.alloc(1, &device.default_stream())?;
    ensure_eq!(buf.size(), 512, "block size of a 1-byte request");
    ensure_eq!(buf.requested_size(), 1, "requested size");
    // A collective uses the requested bytes, not the rounded block.
    ensure_eq!(buf.device_slice(), buf.slice(), "collective buffer slice");
    ensure_eq!(buf.device_slice().len, 1, "collective buffer length");
    ensure_eq!(alloc.memory_allocated(), before + 512, "allocated bytes");
    drop(buf);
    ensure_eq!(
        alloc.memory_allocated(),
        before,
        "allocated bytes after free"
    );
    allocator_works(&alloc)
}

/// C24: the statistics of one 256-float allocation (PyTorch's keys), after free and
/// `empty_cache`, and after a peak reset.
pub fn stats_of_256_floats<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    alloc.empty_cache();
    alloc.reset_peak_stats();
    alloc.reset_accumulated_stats();
    let prev_max_alloc = alloc.max_memory_allocated();
    let prev_max_reserved = alloc.max_memory_reserved();
    let prev_active = alloc.memory_stats().active_bytes.all.current;
    let tmp = alloc.alloc(256 * 4, &device.default_stream())?;
    let m = alloc.memory_stats_map();
    let expected_live: [(&str, u64); 9] = [
        ("active_bytes.all.current", prev_active + 1024),
        ("active_bytes.all.freed", 0),
        ("active_bytes.small_pool.current", 1024),
        ("active_bytes.large_pool.current", 0),
        ("requested_bytes.all.current", 1024),
        ("segment.all.current", 1),
        ("reserved_bytes.small_pool.current", 2 * MIB),
        ("inactive_split.all.current", 1),
        ("inactive_split_bytes.all.current", 2 * MIB - 1024),
    ];
    for (key, want) in expected_live {
        ensure_eq!(m.get(key).copied(), Some(want), "{key} while allocated");
    }
    drop(tmp);
    alloc.empty_cache();
    let m = alloc.memory_stats_map();
    let expected_freed: [(&str, u64); 6] = [
        ("active_bytes.all.current", prev_active),
        ("active_bytes.all.freed", 1024),
        ("reserved_bytes.all.current", 0),
        ("inactive_split.all.current", 0),
        ("num_device_alloc", 1),
        ("num_device_free", 1),
    ];
    for (key, want) in expected_freed {
        ensure_eq!(
            m.get(key).copied(),
            Some(want),
            "{key} after free and empty_cache"
        );
    }
    ensure!(
        alloc.max_memory_allocated() >= 1024,
        "peak allocated {}",
        alloc.max_memory_allocated()
    );
    alloc.reset_peak_stats();
    ensure_eq!(
        alloc.max_memory_allocated(),
        prev_max_alloc,
        "peak allocated after reset"
    );
    ensure_eq!(
        alloc.max_memory_reserved(),
        prev_max_reserved,
        "peak reserved after reset"
    );
    allocator_works(&alloc)
}
