//! Private pools: `MemPool` handles, diversions, use counts, release, and allocation inside a
//! capture (scenarios A4, A5, D42, D43, E50, E52, E54, E55 of the workloads reference).

mod common;

use braid_allocator::{
    AllocError, AllocatorConfig, BlockState, CachingAllocator, CrossStreamMode, DeviceBuffer,
    PoolFilter, PoolId, PoolOptions,
};
use braid_backend_sim::SimBackend;
use braid_stream_core::{CaptureMode, Domain, Graph, Kernel, Stream};
use common::*;

fn capture_id(s: &Stream<SimBackend>) -> braid_stream_core::CaptureId {
    match s.domain() {
        Domain::Capture(c) => c,
        Domain::Eager => panic!("stream is not capturing"),
    }
}

fn sanitizer_reports(dev: &Dev) -> u64 {
    dev.hal().sanitizer_report_count()
}

// ----- E50, E52, E54, E55: user pools -----

#[test]
fn e50_pool_use_counts_and_packing() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    assert_eq!(pool.use_count(), 1);
    let segments_of = |pool: PoolId| {
        alloc
            .snapshot()
            .segments
            .iter()
            .filter(|seg| seg.pool_id == pool)
            .count()
    };
    let (a, b, c) = {
        let _in_pool = pool.use_on(&s).unwrap();
        assert_eq!(pool.use_count(), 2);
        let a = alloc.alloc(MIB, &s).unwrap();
        assert_eq!(segments_of(pool.id()), 1);
        assert_eq!(pool.reserved_bytes(), 2 * MIB);
        let b = alloc.alloc(MIB, &s).unwrap();
        assert_eq!(segments_of(pool.id()), 1);
        let c = alloc.alloc(MIB, &s).unwrap();
        assert_eq!(segments_of(pool.id()), 2);
        (a, b, c)
    };
    assert_eq!(pool.use_count(), 1);
    for buf in [&a, &b, &c] {
        assert_eq!(buf.pool(), pool.id());
    }
    // Outside the diversion: the default pool.
    let outside = alloc.alloc(MIB, &s).unwrap();
    assert_eq!(outside.pool(), PoolId::DEFAULT);
    assert_eq!(segments_of(PoolId::DEFAULT), 1);
    // Another stream is not diverted either.
    let other = dev.create_stream(0).unwrap();
    let _in_pool = pool.use_on(&s).unwrap();
    assert_eq!(alloc.alloc(MIB, &other).unwrap().pool(), PoolId::DEFAULT);
    // One diversion per pool at a time.
    assert_eq!(
        pool.use_on(&other).unwrap_err(),
        AllocError::PoolBusy { pool: pool.id().0 }
    );
    alloc.check_invariants().unwrap();
}

#[test]
fn e52_no_split_pools_give_one_block_per_segment() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let blocks_and_segments = |pool: PoolId| {
        let snap = alloc.snapshot();
        let segs: Vec<_> = snap.segments.iter().filter(|g| g.pool_id == pool).collect();
        let blocks: usize = segs.iter().map(|g| g.blocks.len()).sum();
        (segs.len(), blocks, segs.iter().all(|g| g.blocks.len() == 1))
    };
    let split = alloc.create_pool(PoolOptions::new());
    let no_split = alloc.create_pool(PoolOptions::new().no_split(true));
    let mut held = Vec::new();
    for pool in [&split, &no_split] {
        let _d = pool.use_on(&s).unwrap();
        held.push(alloc.alloc(4 * MIB, &s).unwrap());
        held.push(alloc.alloc(4 * MIB, &s).unwrap());
    }
    let (split_segs, split_blocks, _) = blocks_and_segments(split.id());
    let (ns_segs, ns_blocks, one_each) = blocks_and_segments(no_split.id());
    assert!(ns_segs > split_segs, "{ns_segs} vs {split_segs}");
    assert!(one_each);
    assert!(ns_blocks < split_blocks, "{ns_blocks} vs {split_blocks}");
    assert_eq!(no_split.reserved_bytes(), 8 * MIB);
    assert!(no_split.stats().no_split);
    alloc.check_invariants().unwrap();
}

#[test]
fn e54_oom_retry_releases_the_default_cache_during_a_diversion() {
    let (dev, alloc) = setup(80 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    drop(alloc.alloc(60 * MIB, &s).unwrap());
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    let pool = alloc.create_pool(PoolOptions::new());
    let _d = pool.use_on(&s).unwrap();
    let big = alloc.alloc(60 * MIB, &s).unwrap();
    assert_eq!(big.pool(), pool.id());
    assert_eq!(alloc.memory_stats().num_alloc_retries, 1);
    assert_eq!(alloc.memory_reserved(), 60 * MIB);
    alloc.check_invariants().unwrap();
}

#[test]
fn e55_dropping_the_pool_releases_its_memory() {
    let dev = timing_device(4 << 30);
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    {
        let _d = pool.use_on(&s).unwrap();
        drop(alloc.alloc(1 << 30, &s).unwrap());
    }
    alloc.empty_cache();
    assert_eq!(
        alloc.memory_reserved(),
        1 << 30,
        "the live pool keeps its cache"
    );
    let id = pool.id();
    drop(pool);
    assert!(alloc.memory_reserved() < 1 << 29);
    assert_eq!(alloc.pool_stats(id), None, "the empty pool is gone");
    assert!(alloc.private_pools().is_empty());
    alloc.check_invariants().unwrap();
}

#[test]
fn a_freeable_pool_lives_while_an_output_does() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let (kept, scratch) = {
        let _d = pool.use_on(&s).unwrap();
        (
            alloc.alloc(4 * KIB, &s).unwrap(),
            alloc.alloc(4 * MIB, &s).unwrap(),
        )
    };
    drop(scratch);
    let id = pool.id();
    drop(pool);
    // The large segment went back; the small one holds the output.
    assert_eq!(alloc.memory_reserved(), 2 * MIB);
    assert_eq!(alloc.pool_stats(id).unwrap().use_count, 0);
    s.launch(&Kernel::Fill {
        dst: kept.slice(),
        value: 3.0,
    })
    .unwrap();
    assert_eq!(read(&s, kept.slice()), vec![3.0; 1024]);
    drop(kept);
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    assert_eq!(alloc.pool_stats(id), None);
}

#[test]
fn oom_report_counts_private_pool_bytes() {
    let (dev, alloc) = setup(32 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let _held = {
        let _d = pool.use_on(&s).unwrap();
        alloc.alloc(3 * MIB, &s).unwrap()
    };
    match alloc.alloc(30 * MIB, &s) {
        Err(AllocError::OutOfMemory(report)) => {
            assert_eq!(report.private_pools, 3 * MIB);
            assert!(report
                .to_string()
                .contains("3.00 MiB allocated in private pools"));
        }
        other => panic!("expected OOM, got {other:?}"),
    }
}

// ----- A4, A5: allocation inside a capture -----

/// Capture on `origin` with allocations of the capture diverted to `pool`.
fn begin(
    alloc: &Alloc,
    pool: &braid_allocator::MemPool<SimBackend>,
    origin: &Stream<SimBackend>,
) -> braid_allocator::PoolDiversion<SimBackend> {
    origin.begin_capture(CaptureMode::Global).unwrap();
    alloc
        .begin_allocate_to_pool(pool, PoolFilter::Capture(capture_id(origin)))
        .unwrap()
}

/// Garbage collection frees cached segments with device calls, which a capture must not see:
/// a miss inside a capture leaves the default pool's cache alone even when no cross-stream
/// free is pending (regression: the miss path took "not capturing" from the pending-free
/// check, which only asks the device when frees are pending).
#[test]
fn garbage_collection_waits_for_the_end_of_a_capture() {
    let (dev, alloc) = setup(
        128 * MIB,
        AllocatorConfig::parse("garbage_collection_threshold:0.5,max_split_size_mb:30").unwrap(),
    );
    let main = dev.default_stream();
    drop((
        alloc.alloc(40 * MIB, &main).unwrap(),
        alloc.alloc(40 * MIB, &main).unwrap(),
    ));
    assert_eq!(alloc.pending_free_bytes(), 0);
    let frees = alloc.memory_stats().num_device_free;
    let cap = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    // Relaxed: the device may even be synchronized during this capture.
    cap.begin_capture(CaptureMode::Relaxed).unwrap();
    let diversion = alloc
        .begin_allocate_to_pool(&pool, PoolFilter::Capture(capture_id(&cap)))
        .unwrap();
    let inside = alloc.alloc(12 * MIB, &cap).unwrap();
    assert_eq!(inside.pool(), pool.id());
    assert_eq!(
        alloc.memory_stats().num_device_free,
        frees,
        "a cached segment was freed during the capture"
    );
    let graph = cap.end_capture().unwrap();
    drop(diversion);
    // After the capture an eager miss collects as usual.
    let _eager = alloc.alloc(12 * MIB, &main).unwrap();
    assert!(alloc.memory_stats().num_device_free > frees);
    alloc.check_invariants().unwrap();
    drop((inside, graph));
}

#[test]
fn a4_no_event_polling_during_capture() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let busy = dev.create_stream(0).unwrap();
    // A block pending on an event from a busy stream.
    let x = alloc.alloc(4 * KIB, &main).unwrap();
    busy.wait_stream(&main).unwrap();
    busy.launch(&Kernel::Busy {
        duration_ns: LONG_NS,
    })
    .unwrap();
    x.record_stream(&busy).unwrap();
    let x_ptr = x.ptr();
    drop(x);
    assert_eq!(alloc.pending_free_bytes(), 4 * KIB);

    let cap = dev.create_stream(0).unwrap();
    let s2 = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let queries = alloc.memory_stats().num_event_queries;
    let recorded = alloc.memory_stats().num_events_recorded;
    let diversion = begin(&alloc, &pool, &cap);
    let y = alloc.alloc(4 * KIB, &cap).unwrap();
    assert_eq!(y.pool(), pool.id());
    cap.launch(&Kernel::Fill {
        dst: y.slice(),
        value: 1.0,
    })
    .unwrap();
    // Fork to s2, use y there, record_stream + free inside the capture, join back.
    s2.wait_stream(&cap).unwrap();
    let r = alloc.alloc(4, &s2).unwrap();
    s2.launch(&Kernel::ReduceSum {
        src: y.slice(),
        dst: r.slice(),
    })
    .unwrap();
    y.record_stream(&s2).unwrap();
    drop(y);
    let _z = alloc.alloc(4 * KIB, &cap).unwrap();
    drop(r);
    cap.wait_stream(&s2).unwrap();
    let graph = cap.end_capture().unwrap();
    drop(diversion);
    assert_eq!(
        alloc.memory_stats().num_event_queries,
        queries,
        "no query in capture"
    );
    assert_eq!(alloc.memory_stats().num_events_recorded, recorded);

    // After the capture the next allocation processes the pending event.
    let _a = alloc.alloc(4 * KIB, &main).unwrap();
    assert!(alloc.memory_stats().num_event_queries > queries);
    busy.synchronize().unwrap();
    let again = alloc.alloc(4 * KIB, &main).unwrap();
    assert_eq!(again.ptr(), x_ptr);
    graph.launch(&cap).unwrap();
    cap.synchronize().unwrap();
    assert_eq!(sanitizer_reports(&dev), 0);
    alloc.check_invariants().unwrap();
}

/// A5 with `readers` side streams: data1 is allocated on the origin, read on every reader,
/// recorded there and freed. `joins` lists, in order, (waiting stream, awaited stream) pairs
/// by index (0 = origin, i = reader i); after each join an allocation on the origin reports
/// whether it got data1's pointer. Returns those answers; checks the replay is race-free and
/// computes the right sums.
fn a5(readers: usize, joins: &[(usize, usize)], mode: CrossStreamMode) -> Vec<bool> {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new().cross_stream(mode));
    let n = 1024u64;
    let origin = dev.create_stream(0).unwrap();
    let sides: Vec<_> = (0..readers)
        .map(|_| dev.create_stream(0).unwrap())
        .collect();
    let all: Vec<&Stream<SimBackend>> = std::iter::once(&origin).chain(sides.iter()).collect();
    let pool = alloc.create_pool(PoolOptions::new());
    // Results live outside the pool so they can be read after replays.
    let sums: Vec<_> = (0..readers)
        .map(|_| alloc.alloc(4, &dev.default_stream()).unwrap())
        .collect();
    let outs: Vec<_> = (0..joins.len())
        .map(|_| alloc.alloc(4, &dev.default_stream()).unwrap())
        .collect();
    origin.wait_stream(&dev.default_stream()).unwrap();

    let diversion = begin(&alloc, &pool, &origin);
    let data1 = alloc.alloc(n * 4, &origin).unwrap();
    origin
        .launch(&Kernel::Fill {
            dst: data1.slice(),
            value: 1.0,
        })
        .unwrap();
    for (side, sum) in sides.iter().zip(&sums) {
        side.wait_stream(&origin).unwrap();
        side.launch(&Kernel::Busy {
            duration_ns: 100_000,
        })
        .unwrap();
        side.launch(&Kernel::ReduceSum {
            src: data1.slice(),
            dst: sum.slice(),
        })
        .unwrap();
        if mode == CrossStreamMode::Manual {
            data1.record_stream(side).unwrap();
        }
    }
    let data1_ptr = data1.ptr();
    drop(data1);
    let mut answers = Vec::new();
    let mut held = Vec::new();
    let first = alloc.alloc(n * 4, &origin).unwrap();
    assert_ne!(first.ptr(), data1_ptr, "reused before any join");
    held.push(first);
    for (&(waiter, awaited), out) in joins.iter().zip(&outs) {
        all[waiter].wait_stream(all[awaited]).unwrap();
        let buf = alloc.alloc(n * 4, &origin).unwrap();
        answers.push(buf.ptr() == data1_ptr);
        // Overwrite the memory: a reuse not ordered after the reads would race with them.
        origin
            .launch(&Kernel::Fill {
                dst: buf.slice(),
                value: 7.0,
            })
            .unwrap();
        origin
            .launch(&Kernel::ReduceSum {
                src: buf.slice(),
                dst: out.slice(),
            })
            .unwrap();
        held.push(buf);
    }
    drop(held);
    for side in &sides {
        origin.wait_stream(side).unwrap();
    }
    let graph: Graph<SimBackend> = origin.end_capture().unwrap();
    drop(diversion);
    let stats = alloc.memory_stats();
    assert_eq!(stats.num_event_queries, 0);
    assert_eq!(stats.num_events_recorded, 0);

    graph.launch(&origin).unwrap();
    origin.synchronize().unwrap();
    for sum in &sums {
        assert_eq!(read(&origin, sum.slice()), vec![n as f32]);
    }
    for out in &outs {
        assert_eq!(read(&origin, out.slice()), vec![7.0 * n as f32]);
    }
    assert_eq!(
        sanitizer_reports(&dev),
        0,
        "{:?}",
        dev.hal().sanitizer_reports()
    );
    alloc.check_invariants().unwrap();
    answers
}

#[test]
fn a5_in_capture_reuse_after_a_join_two_streams() {
    assert_eq!(a5(1, &[(0, 1)], CrossStreamMode::Manual), vec![true]);
}

#[test]
fn a5_in_capture_reuse_follows_automatic_uses() {
    assert_eq!(a5(1, &[(0, 1)], CrossStreamMode::Automatic), vec![true]);
    assert_eq!(
        a5(2, &[(0, 1), (0, 2)], CrossStreamMode::Automatic),
        vec![false, true]
    );
}

#[test]
fn a5_three_streams_partial_joins() {
    // Joining one reader is not enough; joining both is.
    assert_eq!(
        a5(2, &[(0, 1), (0, 2)], CrossStreamMode::Manual),
        vec![false, true]
    );
    assert_eq!(
        a5(2, &[(0, 2), (0, 1)], CrossStreamMode::Manual),
        vec![false, true]
    );
    // Transitively: reader 2 waits on reader 1, the origin waits on reader 2.
    assert_eq!(
        a5(2, &[(2, 1), (0, 2)], CrossStreamMode::Manual),
        vec![false, true]
    );
    // A join between readers alone orders nothing before the origin.
    assert_eq!(
        a5(2, &[(1, 2), (0, 1)], CrossStreamMode::Manual),
        vec![false, true]
    );
}

// ----- D42, D43: graph pools -----

/// Captures `b = a.clone()` then 5 × `b = b.clone() + 1` with `numel` f32s; returns the new
/// segments and bytes of the pool, and what is left after the pool's users are gone.
fn d42(bytes: u64) -> (usize, u64, usize, u64) {
    // Data mode where it is cheap (debug builds compute every element), timing-only above.
    let data = bytes <= MIB;
    let dev = if data {
        device(256 * MIB)
    } else {
        timing_device(256 * MIB)
    };
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let main = dev.default_stream();
    let s = dev.create_stream(0).unwrap();
    let a = alloc.alloc(bytes, &main).unwrap();
    let ones = alloc.alloc(bytes, &main).unwrap();
    main.launch(&Kernel::Fill {
        dst: a.slice(),
        value: 1.0,
    })
    .unwrap();
    main.launch(&Kernel::Fill {
        dst: ones.slice(),
        value: 1.0,
    })
    .unwrap();
    s.wait_stream(&main).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let diversion = begin(&alloc, &pool, &s);
    let mut b = alloc.alloc(bytes, &s).unwrap();
    s.launch(&Kernel::Copy {
        src: a.slice(),
        dst: b.slice(),
    })
    .unwrap();
    for _ in 0..5 {
        let tmp = alloc.alloc(bytes, &s).unwrap();
        s.launch(&Kernel::Copy {
            src: b.slice(),
            dst: tmp.slice(),
        })
        .unwrap();
        let next = alloc.alloc(bytes, &s).unwrap();
        s.launch(&Kernel::Add {
            a: tmp.slice(),
            b: ones.slice(),
            out: next.slice(),
        })
        .unwrap();
        drop(tmp);
        b = next;
    }
    let graph = s.end_capture().unwrap();
    drop(diversion);
    let stats = pool.stats();
    let (segments, reserved) = (stats.segments as usize, stats.reserved_bytes);
    graph.launch(&s).unwrap();
    alloc.empty_cache();
    assert_eq!(
        pool.stats().reserved_bytes,
        reserved,
        "empty_cache keeps a live pool"
    );
    // "del g": the graph and its pool handle go.
    drop(graph);
    drop(pool);
    alloc.empty_cache();
    let left: Vec<_> = alloc
        .snapshot()
        .segments
        .into_iter()
        .filter(|g| g.pool_id != PoolId::DEFAULT)
        .collect();
    let active: usize = left
        .iter()
        .flat_map(|g| &g.blocks)
        .filter(|blk| blk.state == BlockState::ActiveAllocated)
        .count();
    assert_eq!(active, 1);
    if data {
        let values = read(&s, b.slice());
        assert!(values.iter().all(|v| *v == 6.0));
    }
    alloc.check_invariants().unwrap();
    (
        segments,
        reserved,
        left.len(),
        left.iter().map(|g| g.total_size).sum(),
    )
}

#[test]
fn d42_graph_pool_segment_accounting() {
    let table = [
        (512, 1, 2 * MIB, 2 * MIB),
        (MIB, 2, 4 * MIB, 2 * MIB),
        (MIB + 512, 1, 20 * MIB, 20 * MIB),
        (10 * MIB - 512, 2, 40 * MIB, 20 * MIB),
        (10 * MIB + 512, 3, 36 * MIB, 12 * MIB),
    ];
    for (bytes, segments, new_bytes, left_bytes) in table {
        let (segs, reserved, left_segs, left) = d42(bytes);
        assert_eq!(
            (segs, reserved, left_segs, left),
            (segments, new_bytes, 1, left_bytes),
            "size {bytes}"
        );
    }
}

#[test]
fn d43_side_stream_allocations_go_to_the_capture_pool() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s0 = dev.create_stream(0).unwrap();
    let s1 = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let before = alloc.snapshot().segments.len();
    let diversion = begin(&alloc, &pool, &s0);
    let x = alloc.alloc(4 * KIB, &s0).unwrap();
    s1.wait_stream(&s0).unwrap();
    let y = alloc.alloc(4 * KIB, &s1).unwrap();
    s1.launch(&Kernel::Fill {
        dst: y.slice(),
        value: 1.0,
    })
    .unwrap();
    s0.wait_stream(&s1).unwrap();
    let _graph = s0.end_capture().unwrap();
    drop(diversion);
    let snap = alloc.snapshot();
    assert_eq!(snap.segments.len() - before, 2);
    assert!(snap.segments.iter().all(|g| g.pool_id == pool.id()));
    assert_eq!(x.pool(), pool.id());
    assert_eq!(y.pool(), pool.id());
    // Eager work after the capture allocates from the default pool again.
    assert_eq!(alloc.alloc(4 * KIB, &s1).unwrap().pool(), PoolId::DEFAULT);
}

#[test]
fn small_requests_use_cached_large_blocks_of_a_private_pool() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let _d = pool.use_on(&s).unwrap();
    drop(alloc.alloc(4 * MIB, &s).unwrap());
    assert_eq!(pool.reserved_bytes(), 20 * MIB);
    let small = alloc.alloc(64 * KIB, &s).unwrap();
    assert_eq!(pool.reserved_bytes(), 20 * MIB, "no new small segment");
    assert_eq!(small.pool(), pool.id());
    // The default pool keeps PyTorch's separation.
    drop(_d);
    drop(alloc.alloc(4 * MIB, &s).unwrap());
    let before = alloc.memory_reserved();
    let _small = alloc.alloc(64 * KIB, &s).unwrap();
    assert_eq!(alloc.memory_reserved(), before + 2 * MIB);
    alloc.check_invariants().unwrap();
}

// ----- C33: per-stream segments -----

/// Forward and backward of a small "model" of `batch` rows on `s`: activations (small and
/// large), an output, gradients; the activations die in the backward pass. Returns what the
/// caller keeps (output and gradients).
fn fwd_bwd(alloc: &Alloc, s: &Stream<SimBackend>, batch: u64) -> Vec<DeviceBuffer<SimBackend>> {
    let act_small = alloc.alloc(batch * 64 * KIB, s).unwrap();
    let act_large = alloc.alloc(batch * 3 * MIB, s).unwrap();
    let out = alloc.alloc(batch * 16 * KIB, s).unwrap();
    s.launch(&Kernel::Fill {
        dst: act_large.slice(),
        value: 1.0,
    })
    .unwrap();
    let grad = alloc.alloc(batch * 3 * MIB, s).unwrap();
    s.launch(&Kernel::Add {
        a: act_large.slice(),
        b: act_large.slice(),
        out: grad.slice(),
    })
    .unwrap();
    drop(act_large);
    let grad_small = alloc.alloc(batch * 64 * KIB, s).unwrap();
    drop(act_small);
    vec![out, grad, grad_small]
}

#[test]
fn c33_repeated_graphed_work_on_one_stream_keeps_pool_segments_on_it() {
    let (dev, alloc) = setup(1 << 30, AllocatorConfig::new());
    let main = dev.default_stream();
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let mut graphs = Vec::new();
    let mut outputs = Vec::new();
    for batch in [4u64, 2, 1, 4, 3] {
        // Eager work on another stream between graphs uses the default pool.
        let eager = alloc.alloc(batch * MIB, &main).unwrap();
        // Warm-up: eager, inside the pool (as cudagraph trees warm up in the pool).
        {
            let _warmup = pool.use_on(&s).unwrap();
            drop(fwd_bwd(&alloc, &s, batch));
        }
        s.synchronize().unwrap();
        // Capture forward + backward on the same stream, into the same pool.
        let diversion = begin(&alloc, &pool, &s);
        outputs.push(fwd_bwd(&alloc, &s, batch));
        let graph: Graph<SimBackend> = s.end_capture().unwrap();
        drop(diversion);
        graphs.push(graph);
        drop(eager);
        // Replays (in capture order) allocate nothing.
        let reserved = alloc.memory_reserved();
        for g in &graphs {
            g.launch(&s).unwrap();
        }
        assert_eq!(alloc.memory_reserved(), reserved);
    }
    s.synchronize().unwrap();
    let snap = pool.snapshot();
    let streams: std::collections::BTreeSet<_> =
        snap.segments.iter().map(|seg| seg.stream).collect();
    assert!(
        snap.segments.len() >= 2,
        "the pool grew: {} segments",
        snap.segments.len()
    );
    assert!(snap
        .segments
        .iter()
        .any(|seg| seg.segment_type == braid_allocator::SegmentType::Small));
    assert!(snap
        .segments
        .iter()
        .any(|seg| seg.segment_type == braid_allocator::SegmentType::Large));
    assert_eq!(
        streams,
        std::collections::BTreeSet::from([s.id()]),
        "every graph-pool segment belongs to the graphed stream"
    );
    // No default-pool segment landed on the graphed stream.
    assert!(alloc
        .snapshot()
        .segments
        .iter()
        .filter(|seg| seg.pool_id != pool.id())
        .all(|seg| seg.stream == main.id()));
    drop(outputs);
    drop(graphs);
    alloc.check_invariants().unwrap();
}
