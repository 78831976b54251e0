//! braid's allocator memory exported as a `_dump_snapshot` pickle round-trips through the
//! PyTorch snapshot parser with its segments, block states and history intact.

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::{Device, Kernel};
use braid_trace::{Action, BlockState, MemoryExport, PyValue, Snapshot};

#[test]
fn allocator_snapshot_round_trips_through_the_parser() {
    let device = Device::<SimBackend>::new(SimDevice::new(
        SimConfig::new().capacity(1 << 30).mode(SimMode::TimingOnly),
    ))
    .unwrap();
    let alloc =
        CachingAllocator::new(device.clone(), AllocatorConfig::new().record_history(true)).unwrap();
    let main = device.default_stream();
    let side = device.create_stream(0).unwrap();

    let kept = alloc.alloc(3000, &main).unwrap(); // small pool, stays allocated
    let big = alloc.alloc(12 << 20, &main).unwrap(); // own large segment
    let freed = alloc.alloc(5000, &main).unwrap();
    drop(freed); // inactive, cached
    let pending = alloc.alloc(700_000, &main).unwrap();
    side.launch(&Kernel::Busy {
        duration_ns: 5_000_000,
    })
    .unwrap();
    pending.record_stream(&side).unwrap();
    drop(pending); // awaiting the side stream

    let export = MemoryExport::from_allocator(&alloc);
    let bytes = export.to_pickle().unwrap();
    let parsed = Snapshot::from_slice(&bytes).unwrap();

    let snap = alloc.snapshot();
    assert_eq!(parsed.segments.len(), snap.segments.len());
    let total: u64 = parsed.segments.iter().map(|s| s.total_size).sum();
    assert_eq!(total, alloc.memory_reserved());
    let blocks: Vec<_> = parsed
        .segments
        .iter()
        .flat_map(|s| s.blocks.iter())
        .collect();
    let count = |state: BlockState| blocks.iter().filter(|b| b.state == state).count();
    assert_eq!(count(BlockState::ActiveAllocated), 2, "kept and big");
    assert_eq!(
        count(BlockState::ActivePendingFree),
        1,
        "the block awaiting the side stream"
    );
    assert!(count(BlockState::Inactive) >= 1);
    let allocated: u64 = blocks
        .iter()
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .map(|b| b.size)
        .sum();
    assert_eq!(allocated, kept.size() + big.size());
    assert!(parsed
        .segments
        .iter()
        .any(|s| s.address == big.ptr().addr()));

    let trace = &parsed.device_traces[0];
    let actions = |a: Action| trace.iter().filter(|e| e.action == a).count();
    assert_eq!(actions(Action::Alloc), 4);
    assert_eq!(actions(Action::FreeRequested), 2);
    assert_eq!(
        actions(Action::FreeCompleted),
        1,
        "the pending block has not completed"
    );
    assert_eq!(
        actions(Action::SegmentAlloc) as u64,
        alloc.memory_stats().num_device_alloc
    );
    assert!(parsed.allocator_settings.is_some());

    let dir = std::env::temp_dir().join(format!("braid-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("braid_memory.pickle");
    export.write(&path).unwrap();
    let from_file = Snapshot::from_path(&path).unwrap();
    assert_eq!(from_file.segments.len(), parsed.segments.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn expandable_segments_export_as_expandable_with_map_events() {
    let device = Device::<SimBackend>::new(SimDevice::new(
        SimConfig::new().capacity(1 << 30).mode(SimMode::TimingOnly),
    ))
    .unwrap();
    let config = AllocatorConfig::new()
        .record_history(true)
        .expandable_segments(true);
    let alloc = CachingAllocator::new(device.clone(), config).unwrap();
    let main = device.default_stream();
    let a = alloc.alloc(8 << 20, &main).unwrap();
    let b = alloc.alloc(30 << 20, &main).unwrap();
    drop(b);
    alloc.empty_cache();

    let parsed =
        Snapshot::from_slice(&MemoryExport::from_allocator(&alloc).to_pickle().unwrap()).unwrap();
    assert_eq!(parsed.segments.len(), 1);
    assert!(parsed.segments[0].is_expandable);
    assert_eq!(parsed.segments[0].total_size, 20 << 20);
    let trace = &parsed.device_traces[0];
    let actions = |x: Action| trace.iter().filter(|e| e.action == x).count();
    assert_eq!(actions(Action::SegmentMap), 2);
    assert_eq!(actions(Action::SegmentUnmap), 1);
    assert_eq!(actions(Action::SegmentAlloc), 0);
    let settings = parsed.allocator_settings.unwrap();
    assert_eq!(settings["expandable_segments"], PyValue::Bool(true));
    drop(a);
}
