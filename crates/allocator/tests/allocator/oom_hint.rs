//! The out-of-memory message: the fragmentation figure, and `expandable_segments:true`
//! suggested first when much of the reserved memory is unallocated.

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, OutOfMemoryReport};
use braid_stream_core::StreamId;
use common::*;

/// A report with `allocated` of `reserved` bytes in use and `pending` bytes awaiting other
/// streams.
fn report(allocated: u64, reserved: u64, pending: u64) -> OutOfMemoryReport {
    OutOfMemoryReport {
        device: 0,
        backend: "sim",
        stream: StreamId::DEFAULT,
        requested: 30 * MIB,
        rounded: 30 * MIB,
        segment_size: 30 * MIB,
        device_total: 64 * MIB,
        device_free: 4 * MIB,
        allowed: None,
        allocated,
        reserved,
        private_pools: 0,
        pending_other_streams: pending,
    }
}

#[test]
fn a_fragmented_device_is_told_to_use_expandable_segments_first() {
    // Three 20 MiB segments, each split into 5 MiB blocks of which one stays allocated: 45 of
    // the 60 reserved MiB are cached but no free block takes 30 MiB, and no segment can be
    // released.
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let blocks: Vec<_> = (0..12)
        .map(|_| alloc.alloc(5 * MIB, &main).unwrap())
        .collect();
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    let kept: Vec<_> = blocks.into_iter().step_by(4).collect();
    assert_eq!(alloc.memory_allocated(), 15 * MIB);
    let err = alloc.alloc(30 * MIB, &main).unwrap_err();
    let AllocError::OutOfMemory(report) = &err else {
        panic!("expected OOM, got {err:?}")
    };
    assert_eq!((report.allocated, report.reserved), (15 * MIB, 60 * MIB));
    assert!((report.fragmentation() - 0.75).abs() < 1e-9);
    assert!(report.is_fragmented());
    let msg = err.to_string();
    assert!(msg.contains("fragmentation 75.0%"), "{msg}");
    let hint = &msg[msg.find("Hint:").expect("a hint")..];
    assert!(
        hint.starts_with("Hint: reserved but unallocated memory is high: set expandable_segments:true in BRAID_ALLOC_CONF"),
        "{hint}"
    );
    // max_split_size_mb is only the fallback, after expandable segments.
    assert!(
        hint.find("expandable_segments") < hint.find("max_split_size_mb"),
        "{hint}"
    );
    assert!(hint.contains("empty_cache()"), "{hint}");
    drop(kept);
    alloc.check_invariants().unwrap();
}

#[test]
fn the_hint_follows_where_the_memory_is() {
    // Little fragmentation, nothing pending: only the batch size is left to reduce.
    let tight = report(58 * MIB, 60 * MIB, 0);
    assert!(!tight.is_fragmented());
    let msg = tight.to_string();
    assert!(msg.contains("fragmentation 3.3%"), "{msg}");
    assert!(msg.ends_with("Hint: reduce the batch size."), "{msg}");

    // Memory pending on other streams: say so, after fragmentation when both apply.
    let pending = report(20 * MIB, 60 * MIB, 8 * MIB);
    let msg = pending.to_string();
    let hint = &msg[msg.find("Hint:").unwrap()..];
    let expandable = hint.find("expandable_segments:true").expect("fragmented");
    let streams = hint.find("synchronize them").expect("pending");
    assert!(expandable < streams, "{hint}");
    assert!(
        hint.ends_with("wait on them; otherwise reduce the batch size."),
        "{hint}"
    );
    assert!(msg.contains("fragmentation 66.7%"), "{msg}");

    // Nothing reserved: no division by zero, no fragmentation.
    let empty = report(0, 0, 0);
    assert_eq!(empty.fragmentation(), 0.0);
    assert!(empty.to_string().contains("fragmentation 0.0%"));

    // The threshold itself counts as high.
    let at = report(80 * MIB, 100 * MIB, 0);
    assert!(at.is_fragmented());
}
