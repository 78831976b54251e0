//! Private pools beyond the conformance suite's cases (`braid_conformance::allocator`: E50,
//! E54, E55, A5; `braid_conformance::graph`: D42, D43): no-split pools (E52), allocation inside
//! a capture without event polling (A4) or garbage collection, small requests served by large
//! cached blocks, and per-stream segments of graphed work (C33).

use crate::common;

use braid_allocator::{AllocatorConfig, DeviceBuffer, PoolFilter, PoolId, PoolOptions};
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

// ----- E52: user pools -----

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

// ----- A4: allocation inside a capture -----

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

// ----- small requests in a private pool -----

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
