//! Checkpointing a private pool's state (scenario F56: PyTorch's TestBlockStateAbsorption on
//! `_cuda_getCheckpointState`, `_cuda_setCheckpointPoolState` and
//! `_cuda_checkPoolLiveAllocations`), and the restore's refusals, which change nothing.

use crate::common;

use braid_allocator::{
    AllocError, AllocatorConfig, BlockState, CachingAllocator, DeviceBuffer, HistoryAction,
    MemPool, PoolCheckpoint, PoolFilter, PoolOptions, SegmentSnapshot,
};
use braid_backend_sim::SimBackend;
use braid_stream_core::{CaptureMode, DevicePtr, Domain, Kernel, Stream};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

type Buf = DeviceBuffer<SimBackend>;

fn segments(pool: &MemPool<SimBackend>) -> Vec<SegmentSnapshot> {
    pool.snapshot().segments
}

/// Every `*.current` statistic.
fn currents(alloc: &Alloc) -> BTreeMap<String, u64> {
    let mut map = alloc.memory_stats_map();
    map.retain(|k, _| k.ends_with(".current"));
    map
}

/// The pool's layout and the allocator's statistics at a checkpoint, to compare a restore
/// against.
struct Taken {
    checkpoint: PoolCheckpoint,
    segments: Vec<SegmentSnapshot>,
    stats: BTreeMap<String, u64>,
}

fn take(alloc: &Alloc, pool: &MemPool<SimBackend>) -> Taken {
    let checkpoint = alloc.checkpoint_pool(pool.id()).unwrap();
    let segments = segments(pool);
    assert_eq!(checkpoint.segments(), &segments[..]);
    Taken {
        checkpoint,
        segments,
        stats: currents(alloc),
    }
}

/// Restores `taken`, handing over `stale`, and checks that the pool's segments and blocks and
/// every current statistic are the checkpoint's, and that the outputs are its live blocks.
fn restore(alloc: &Alloc, pool: &MemPool<SimBackend>, taken: &Taken, stale: Vec<Buf>) -> Vec<Buf> {
    let outputs = alloc
        .restore_pool_checkpoint(&taken.checkpoint, stale)
        .unwrap();
    assert_eq!(segments(pool), taken.segments);
    assert_eq!(currents(alloc), taken.stats);
    let live: Vec<_> = taken
        .segments
        .iter()
        .flat_map(|s| s.blocks.iter().map(move |b| (s.stream, b)))
        .filter(|(_, b)| b.state == BlockState::ActiveAllocated)
        .map(|(stream, b)| (b.address, b.size, b.requested_size, stream, pool.id()))
        .collect();
    let got: Vec<_> = outputs
        .iter()
        .map(|o| {
            (
                o.ptr().0,
                o.size(),
                o.requested_size(),
                o.stream(),
                o.pool(),
            )
        })
        .collect();
    assert_eq!(got, live);
    assert_eq!(pool.stats().allocated_blocks, live.len() as u64);
    alloc.check_invariants().unwrap();
    outputs
}

fn ptrs(bufs: &[&Buf]) -> Vec<DevicePtr> {
    bufs.iter().map(|b| b.ptr()).collect()
}

fn setup_pool() -> (Dev, Alloc, Stream<SimBackend>, MemPool<SimBackend>) {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    (dev, alloc, s, pool)
}

// ----- F56: TestBlockStateAbsorption -----

#[test]
fn f56_simple() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(3000, &s).unwrap();
    let taken = take(&alloc, &pool);
    assert_eq!(taken.checkpoint.live_blocks(), 1);
    assert_eq!(taken.checkpoint.pool(), pool.id());
    // After the checkpoint the pool changes: `a` dies, others take its memory.
    let a_ptr = a.ptr();
    drop(a);
    let b = alloc.alloc(5000, &s).unwrap();
    let c = alloc.alloc(700, &s).unwrap();
    assert_eq!(b.ptr(), a_ptr);
    assert_ne!(segments(&pool), taken.segments);
    alloc.record_history(true);
    let outputs = restore(&alloc, &pool, &taken, vec![b, c]);
    assert_eq!(outputs[0].ptr(), a_ptr);
    // The history shows the restore as the frees and the allocation it amounts to.
    let actions: Vec<_> = alloc
        .history()
        .iter()
        .map(|h| (h.action, h.addr == a_ptr.0))
        .collect();
    assert_eq!(actions.last(), Some(&(HistoryAction::Alloc, true)));
    assert_eq!(
        actions
            .iter()
            .filter(|(a, _)| *a == HistoryAction::FreeRequested)
            .count(),
        2
    );
}

#[test]
fn f56_allocated_in_middle_of_segment() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(4 * MIB, &s).unwrap();
    let b = alloc.alloc(4 * MIB, &s).unwrap();
    let c = alloc.alloc(4 * MIB, &s).unwrap();
    drop((a, c));
    let taken = take(&alloc, &pool);
    let blocks = &taken.segments[0].blocks;
    assert_eq!(
        blocks.iter().map(|b| b.state).collect::<Vec<_>>(),
        [
            BlockState::Inactive,
            BlockState::ActiveAllocated,
            BlockState::Inactive
        ]
    );
    drop(b);
    let whole = alloc.alloc(20 * MIB, &s).unwrap();
    assert_eq!(segments(&pool)[0].blocks.len(), 1);
    let outputs = restore(&alloc, &pool, &taken, vec![whole]);
    assert_eq!(outputs.len(), 1);
    let stats = alloc.memory_stats();
    assert_eq!(stats.inactive_split.large_pool.current, 2);
    drop(outputs);
    assert_eq!(segments(&pool)[0].blocks.len(), 1);
    assert_eq!(alloc.memory_stats().inactive_split.all.current, 0);
    alloc.check_invariants().unwrap();
}

#[test]
fn f56_multiple_middle_allocations() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let bufs: Vec<Buf> = (1..=5).map(|i| alloc.alloc(i * 600, &s).unwrap()).collect();
    let mut bufs = bufs.into_iter();
    let (a, b, c, d, e) = (
        bufs.next().unwrap(),
        bufs.next().unwrap(),
        bufs.next().unwrap(),
        bufs.next().unwrap(),
        bufs.next().unwrap(),
    );
    drop((a, c, e));
    let taken = take(&alloc, &pool);
    assert_eq!(taken.checkpoint.live_blocks(), 2);
    let (b_ptr, d_ptr) = (b.ptr(), d.ptr());
    drop((b, d));
    let others: Vec<Buf> = (0..4).map(|_| alloc.alloc(1536, &s).unwrap()).collect();
    let outputs = restore(&alloc, &pool, &taken, others);
    assert_eq!(ptrs(&[&outputs[0], &outputs[1]]), [b_ptr, d_ptr]);
}

/// A graph captured into the pool writes its outputs; one output dies after the checkpoint;
/// the restore brings it back, and the surviving output still holds what the replay wrote.
#[test]
fn f56_tensor_dies_after_checkpoint() {
    let (_dev, alloc, s, pool) = setup_pool();
    s.begin_capture(CaptureMode::Global).unwrap();
    let Domain::Capture(capture) = s.domain() else {
        panic!("stream is not capturing");
    };
    let diversion = alloc
        .begin_allocate_to_pool(&pool, PoolFilter::Capture(capture))
        .unwrap();
    let a = alloc.alloc(4 * KIB, &s).unwrap();
    let b = alloc.alloc(4 * KIB, &s).unwrap();
    for (buf, value) in [(&a, 3.0), (&b, 7.0)] {
        s.launch(&Kernel::Fill {
            dst: buf.slice(),
            value,
        })
        .unwrap();
    }
    let graph = s.end_capture().unwrap();
    drop(diversion);
    let taken = take(&alloc, &pool);
    graph.launch(&s).unwrap();
    let (a_ptr, b_ptr) = (a.ptr(), b.ptr());
    drop(a);
    assert!(alloc
        .check_pool_live_allocations(pool.id(), &[b_ptr])
        .unwrap());
    let outputs = restore(&alloc, &pool, &taken, vec![b]);
    assert_eq!(ptrs(&[&outputs[0], &outputs[1]]), [a_ptr, b_ptr]);
    assert!(read(&s, outputs[1].slice()).iter().all(|&v| v == 7.0));
    assert!(alloc
        .check_pool_live_allocations(pool.id(), &[a_ptr, b_ptr])
        .unwrap());
}

#[test]
fn f56_assigning_back_deleter_fns_to_tensor() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(2 * MIB, &s).unwrap();
    let b = alloc.alloc(MIB, &s).unwrap();
    let taken = take(&alloc, &pool);
    let mut outputs = restore(&alloc, &pool, &taken, vec![a, b]);
    assert_eq!(pool.stats().allocated_blocks, 2);
    drop(outputs.pop());
    assert_eq!(pool.stats().allocated_blocks, 1);
    drop(outputs.pop());
    assert_eq!(pool.stats().allocated_blocks, 0);
    assert_eq!(alloc.memory_allocated(), 0);
    assert_eq!(alloc.memory_stats().requested_bytes.all.current, 0);
    alloc.check_invariants().unwrap();
}

#[test]
fn f56_check_pool_live_allocations() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let out = alloc.alloc(MIB, &s).unwrap();
    let id = pool.id();
    assert!(alloc.check_pool_live_allocations(id, &[out.ptr()]).unwrap());
    assert!(alloc
        .check_pool_live_allocations(id, &[out.ptr(), out.ptr()])
        .unwrap());
    assert!(!alloc
        .check_pool_live_allocations(id, &[out.ptr(), DevicePtr(0)])
        .unwrap());
    assert!(!alloc.check_pool_live_allocations(id, &[]).unwrap());
    // Live blocks of other pools do not count.
    let default = alloc.alloc(MIB, &dev_stream(&alloc)).unwrap();
    assert!(!alloc
        .check_pool_live_allocations(id, &[out.ptr(), default.ptr()])
        .unwrap());
    drop(out);
    assert!(alloc.check_pool_live_allocations(id, &[]).unwrap());
}

fn dev_stream(alloc: &Alloc) -> Stream<SimBackend> {
    alloc.device().default_stream()
}

// ----- segments after the checkpoint -----

#[test]
fn segments_allocated_after_the_checkpoint_are_left_free_and_cached() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    let taken = take(&alloc, &pool);
    let big = alloc.alloc(30 * MIB, &s).unwrap();
    let reserved = pool.reserved_bytes();
    let outputs = alloc
        .restore_pool_checkpoint(&taken.checkpoint, vec![a, big])
        .unwrap();
    assert_eq!(outputs.len(), 1);
    let now = segments(&pool);
    assert_eq!(now.len(), 2);
    assert_eq!(now[..1], taken.segments[..]);
    assert_eq!(now[1].blocks.len(), 1);
    assert_eq!(now[1].blocks[0].state, BlockState::Inactive);
    assert_eq!(pool.reserved_bytes(), reserved);
    alloc.check_invariants().unwrap();
    pool.empty_cache();
    assert_eq!(segments(&pool), taken.segments);
    assert_eq!(currents(&alloc), taken.stats);
}

// ----- refusals: nothing changes, nothing is lost -----

/// Fills `buf` with `value` on `s`.
fn fill(s: &Stream<SimBackend>, buf: &Buf, value: f32) {
    s.launch(&Kernel::Fill {
        dst: buf.slice(),
        value,
    })
    .unwrap();
}

fn assert_unchanged(
    alloc: &Alloc,
    pool: &MemPool<SimBackend>,
    before: &(Vec<SegmentSnapshot>, BTreeMap<String, u64>),
) {
    assert_eq!(segments(pool), before.0);
    assert_eq!(currents(alloc), before.1);
    alloc.check_invariants().unwrap();
}

#[test]
fn restore_without_every_live_buffer_is_refused_and_loses_nothing() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    let b = alloc.alloc(MIB, &s).unwrap();
    fill(&s, &a, 1.0);
    fill(&s, &b, 2.0);
    let taken = take(&alloc, &pool);
    let before = (segments(&pool), currents(&alloc));
    let (a_ptr, b_ptr) = (a.ptr(), b.ptr());
    let err = alloc
        .restore_pool_checkpoint(&taken.checkpoint, vec![a])
        .unwrap_err();
    assert_eq!(
        err.error,
        AllocError::CheckpointLiveBuffer {
            pool: pool.id().0,
            addr: b_ptr.0,
            size: MIB
        }
    );
    assert!(err.to_string().contains("not among the stale buffers"));
    let mut stale = err.stale;
    assert_eq!(ptrs(&[&stale[0]]), [a_ptr]);
    assert_unchanged(&alloc, &pool, &before);
    assert!(read(&s, stale[0].slice()).iter().all(|&v| v == 1.0));
    assert!(read(&s, b.slice()).iter().all(|&v| v == 2.0));
    // With every live buffer handed over it goes through.
    stale.push(b);
    let outputs = restore(&alloc, &pool, &taken, stale);
    assert!(read(&s, outputs[0].slice()).iter().all(|&v| v == 1.0));
    assert!(read(&s, outputs[1].slice()).iter().all(|&v| v == 2.0));
}

#[test]
fn restore_with_a_buffer_of_another_pool_or_allocator_is_refused() {
    let (dev, alloc, s, pool) = setup_pool();
    let in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    drop(in_pool);
    let taken = take(&alloc, &pool);
    let before = (segments(&pool), currents(&alloc));
    let outside = alloc.alloc(MIB, &s).unwrap();
    let outside_ptr = outside.ptr();
    let before_default = (alloc.snapshot().segments, currents(&alloc));
    let err = alloc
        .restore_pool_checkpoint(&taken.checkpoint, vec![a, outside])
        .unwrap_err();
    assert_eq!(
        err.error,
        AllocError::CheckpointForeignBuffer {
            expected: pool.id().0,
            addr: outside_ptr.0,
            pool: 0,
            foreign: false
        }
    );
    assert_eq!(err.stale.len(), 2);
    assert_eq!(alloc.snapshot().segments, before_default.0);
    assert_eq!(currents(&alloc), before_default.1);
    let mut stale = err.stale;
    drop(stale.pop());
    alloc.empty_cache(); // the default pool's segment goes; the pool in use keeps its own
    assert_unchanged(&alloc, &pool, &before);

    // A buffer of another allocator.
    let other = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    stale.push(other.alloc(MIB, &s).unwrap());
    let err = alloc
        .restore_pool_checkpoint(&taken.checkpoint, stale)
        .unwrap_err();
    assert!(matches!(
        err.error,
        AllocError::CheckpointForeignBuffer { foreign: true, .. }
    ));
    assert!(err.to_string().contains("another allocator"));
    let mut stale = err.stale;
    drop(stale.pop());
    assert_unchanged(&alloc, &pool, &before);

    // A checkpoint of another allocator.
    let other_pool = other.create_pool(PoolOptions::new());
    let foreign = other.checkpoint_pool(other_pool.id()).unwrap();
    let err = alloc.restore_pool_checkpoint(&foreign, stale).unwrap_err();
    assert!(matches!(err.error, AllocError::CheckpointPool { .. }));
    let outputs = restore(&alloc, &pool, &taken, err.stale);
    assert_eq!(outputs.len(), 1);
}

#[test]
fn restore_after_the_segment_was_released_is_refused() {
    let (_dev, alloc, s, pool) = setup_pool();
    let in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    let taken = take(&alloc, &pool);
    drop(a);
    pool.empty_cache();
    assert!(segments(&pool).is_empty());
    let b = alloc.alloc(3 * MIB, &s).unwrap();
    drop(in_pool);
    let before = (segments(&pool), currents(&alloc));
    let err = alloc
        .restore_pool_checkpoint(&taken.checkpoint, vec![b])
        .unwrap_err();
    let seg = &taken.segments[0];
    assert!(matches!(
        err.error,
        AllocError::CheckpointSegmentMissing { addr, size, .. }
            if addr == seg.address && size == seg.total_size
    ));
    assert!(err.to_string().contains("no longer held by the pool"));
    assert_eq!(err.stale.len(), 1);
    assert_unchanged(&alloc, &pool, &before);
    // `?` turns the refusal into the allocator's error.
    let as_alloc_error = || -> Result<(), AllocError> {
        alloc.restore_pool_checkpoint(&taken.checkpoint, err.stale)?;
        Ok(())
    };
    assert!(matches!(
        as_alloc_error(),
        Err(AllocError::CheckpointSegmentMissing { .. })
    ));
}

#[test]
fn pending_cross_stream_frees_block_checkpoint_and_restore() {
    let (dev, alloc, s, pool) = setup_pool();
    let side = dev.create_stream(0).unwrap();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    let b = alloc.alloc(MIB, &s).unwrap();
    let taken = take(&alloc, &pool);
    // `b` is used on a side stream behind long work.
    side.wait_stream(&s).unwrap();
    side.launch(&Kernel::Busy {
        duration_ns: LONG_NS,
    })
    .unwrap();
    b.record_stream(&side).unwrap();
    let before = (segments(&pool), currents(&alloc));
    let err = alloc
        .restore_pool_checkpoint(&taken.checkpoint, vec![a, b])
        .unwrap_err();
    assert!(matches!(
        err.error,
        AllocError::CheckpointPendingFrees { .. }
    ));
    assert_unchanged(&alloc, &pool, &before);
    // The refused restore kept the use: dropping `b` now leaves it pending.
    let mut stale = err.stale;
    drop(stale.pop());
    assert!(alloc.pending_free_bytes() > 0);
    assert!(matches!(
        alloc.checkpoint_pool(pool.id()),
        Err(AllocError::CheckpointPendingFrees { .. })
    ));
    side.synchronize().unwrap();
    let outputs = restore(&alloc, &pool, &taken, stale);
    assert_eq!(outputs.len(), 2);
}

#[test]
fn automatic_mode_uses_on_other_streams_must_be_ordered_before_a_restore() {
    let (dev, alloc) = setup(
        256 * MIB,
        AllocatorConfig::new().cross_stream(braid_allocator::CrossStreamMode::Automatic),
    );
    let (s, side) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let pool = alloc.create_pool(PoolOptions::new());
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    fill(&s, &a, 5.0);
    let out = alloc.alloc(4, &side).unwrap(); // the default pool: only `s` is diverted
    let taken = take(&alloc, &pool);
    side.wait_stream(&s).unwrap();
    side.launch(&Kernel::Busy {
        duration_ns: LONG_NS,
    })
    .unwrap();
    side.launch(&Kernel::ReduceSum {
        src: a.slice(),
        dst: out.slice(),
    })
    .unwrap();
    let err = alloc
        .restore_pool_checkpoint(&taken.checkpoint, vec![a])
        .unwrap_err();
    assert!(matches!(
        err.error,
        AllocError::CheckpointPendingFrees { .. }
    ));
    side.synchronize().unwrap();
    let outputs = restore(&alloc, &pool, &taken, err.stale);
    assert!(read(&s, outputs[0].slice()).iter().all(|&v| v == 5.0));
}

#[test]
fn restored_buffers_keep_the_allocator_alive() {
    let (dev, alloc, s, pool) = setup_pool();
    let in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(MIB, &s).unwrap();
    fill(&s, &a, 4.0);
    let taken = take(&alloc, &pool);
    let outputs = restore(&alloc, &pool, &taken, vec![a]);
    drop((in_pool, pool, alloc, taken));
    // Only the restored buffer holds the allocator now.
    assert!(read(&s, outputs[0].slice()).iter().all(|&v| v == 4.0));
    assert_eq!(outputs[0].allocator().memory_allocated(), MIB);
    drop(outputs);
    let info = dev.mem_info().unwrap();
    assert_eq!(
        info.free, info.total,
        "the allocator dropped and returned its segments"
    );
}

#[test]
fn checkpoints_and_refusals_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PoolCheckpoint>();
    send_sync::<braid_allocator::RestoreError<SimBackend>>();
}

#[test]
fn empty_stale_buffers_are_dropped() {
    let (_dev, alloc, s, pool) = setup_pool();
    let _in_pool = pool.use_on(&s).unwrap();
    let a = alloc.alloc(KIB, &s).unwrap();
    let taken = take(&alloc, &pool);
    let empty = alloc.alloc(0, &s).unwrap();
    let outputs = restore(&alloc, &pool, &taken, vec![empty, a]);
    assert_eq!(outputs.len(), 1);
}

#[test]
fn only_live_private_pools_can_be_checkpointed() {
    let (_dev, alloc, _s, pool) = setup_pool();
    assert!(matches!(
        alloc.checkpoint_pool(braid_allocator::DEFAULT_POOL),
        Err(AllocError::CheckpointPool { pool: 0, .. })
    ));
    let id = pool.id();
    let empty = alloc.checkpoint_pool(id).unwrap();
    assert!(empty.segments().is_empty());
    drop(pool);
    let err = alloc.checkpoint_pool(id).unwrap_err();
    assert!(err.to_string().contains("no such private pool"));
    assert!(alloc.check_pool_live_allocations(id, &[]).is_err());
}

// ----- model: random pool histories with checkpoints and restores -----

#[derive(Clone, Debug)]
enum Op {
    Alloc { stream: usize, size: u64 },
    Free { index: usize },
    Checkpoint,
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..2usize, prop_oneof![1u64..4096, 4096u64..(2 << 20), (2u64 << 20)..(24 << 20)])
            .prop_map(|(stream, size)| Op::Alloc { stream, size }),
        3 => (0..16usize).prop_map(|index| Op::Free { index }),
        1 => Just(Op::Checkpoint),
        2 => Just(Op::Restore),
    ]
}

/// The statistics a restore reproduces exactly (segments taken after the checkpoint stay
/// reserved, so `segment` and `reserved_bytes` may be higher).
fn block_currents(alloc: &Alloc) -> BTreeMap<String, u64> {
    let mut map = currents(alloc);
    map.retain(|k, _| !k.starts_with("segment.") && !k.starts_with("reserved_bytes."));
    map
}

fn run_model(ops: Vec<Op>, config: AllocatorConfig, options: PoolOptions) {
    let dev = timing_device(512 * MIB);
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let streams = [dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap()];
    let pool = alloc.create_pool(options);
    let _in_pool = pool.allocate_to(PoolFilter::AllStreams).unwrap();
    let mut live: Vec<Buf> = Vec::new();
    let mut taken: Option<(Taken, BTreeMap<String, u64>)> = None;
    for op in ops {
        match op {
            Op::Alloc { stream, size } => {
                if let Ok(buf) = alloc.alloc(size, &streams[stream]) {
                    live.push(buf);
                }
            }
            Op::Free { index } => {
                if !live.is_empty() {
                    drop(live.swap_remove(index % live.len()));
                }
            }
            Op::Checkpoint => {
                let t = take(&alloc, &pool);
                let blocks = block_currents(&alloc);
                assert_eq!(t.checkpoint.live_blocks(), live.len());
                taken = Some((t, blocks));
            }
            Op::Restore => {
                let Some((t, blocks)) = &taken else { continue };
                live = alloc
                    .restore_pool_checkpoint(&t.checkpoint, std::mem::take(&mut live))
                    .unwrap();
                let now = segments(&pool);
                for seg in &now {
                    match t.segments.iter().find(|s| s.address == seg.address) {
                        Some(s) => assert_eq!(s, seg),
                        None => assert!(
                            seg.blocks.len() == 1 && seg.blocks[0].state == BlockState::Inactive,
                            "a segment taken after the checkpoint is left whole and free"
                        ),
                    }
                }
                assert_eq!(&block_currents(&alloc), blocks);
                let ptrs: Vec<_> = live.iter().map(|b| b.ptr()).collect();
                assert!(alloc.check_pool_live_allocations(pool.id(), &ptrs).unwrap());
            }
        }
        alloc.check_invariants().unwrap();
    }
    drop(live);
    assert_eq!(alloc.memory_allocated(), 0);
    assert!(alloc.check_pool_live_allocations(pool.id(), &[]).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn model_restores_reproduce_checkpoints(ops in proptest::collection::vec(op(), 1..60)) {
        run_model(ops, AllocatorConfig::new(), PoolOptions::new());
    }

    #[test]
    fn model_with_split_remainders_and_no_split_pools(
        ops in proptest::collection::vec(op(), 1..60),
        no_split in any::<bool>(),
    ) {
        run_model(
            ops,
            AllocatorConfig::new().split_large_remainders(true),
            PoolOptions::new().no_split(no_split),
        );
    }
}
