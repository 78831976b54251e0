//! Graph capture ([`braid_graph_capture`]) on every backend: capture sessions with private and
//! shared pools (D34–D39, D42, D43, D45, D46, D48), tagged side streams and events (G58), the
//! `GraphRunner` (D49, recapture of moved inputs, TorchAir's memory modes), and every capture
//! rule as a typed error after which the allocator and the streams stay usable.

use crate::support::{
    all_equal, allocator, allocator_works, download, fill, wrong_device, KIB, MIB,
};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, BlockState, CachingAllocator, DeviceBuffer, PoolId};
use braid_graph_capture::{
    graph_pool_handle, CaptureSession, CapturedGraph, GraphError, GraphPool, GraphRunner,
    InputKind, MemoryReuse, RunContext, RunnerConfig,
};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DeviceSlice, Kernel, Stream, StreamError};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// Floats in the buffers of the capture cases (PyTorch's tests use 1000).
const N: u64 = 1000;

/// `out = x + c` into a fresh buffer on the current stream.
fn add<B: Backend>(
    ctx: &RunContext<'_, B>,
    x: DeviceSlice,
    c: DeviceSlice,
) -> Result<DeviceBuffer<B>, GraphError> {
    let out = ctx.alloc(x.len)?;
    ctx.current_stream().launch(&Kernel::Add {
        a: x,
        b: c,
        out: out.slice(),
    })?;
    Ok(out)
}

/// The sum of the floats in `slice`, read back on `stream`.
#[track_caller]
fn sum<B: Backend>(stream: &Stream<B>, slice: DeviceSlice) -> Result<f32, CaseError> {
    Ok(download(stream, slice)?.iter().sum())
}

/// Captures `iters` × `b = b + 1` starting from `a` on `s` (into `pool` if given).
fn capture_increments<B: Backend>(
    alloc: &CachingAllocator<B>,
    s: &Stream<B>,
    pool: Option<&GraphPool<B>>,
    a: &DeviceBuffer<B>,
    ones: &DeviceBuffer<B>,
    iters: usize,
) -> Result<(CapturedGraph<B>, DeviceBuffer<B>), GraphError> {
    let mut session = CaptureSession::new(alloc, s);
    if let Some(pool) = pool {
        session = session.pool(pool);
    }
    session.run(|ctx| {
        let mut b = add(ctx, a.slice(), ones.slice())?;
        for _ in 1..iters {
            b = add(ctx, b.slice(), ones.slice())?;
        }
        Ok(b)
    })
}

// ----- D: capture sessions and pools -----

/// D34: on a side stream, capture 10 × `b = b + 1` over 1000 ones; the output lives in the
/// graph's pool, the graph has 10 nodes, and a replay gives `b.sum() == 11000` (also replayed
/// on another stream).
pub fn session_capture_and_replay<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let a = alloc.alloc(N * 4, &s)?;
    let ones = alloc.alloc(N * 4, &s)?;
    fill(&s, a.slice(), 1.0)?;
    fill(&s, ones.slice(), 1.0)?;
    let (graph, b) = capture_increments(&alloc, &s, None, &a, &ones, 10)?;
    ensure_eq!(b.pool(), graph.pool().id(), "the output's pool");
    ensure_eq!(graph.node_count(), 10, "nodes captured");
    graph.launch(&s)?;
    ensure_eq!(
        sum(&s, b.slice())?,
        11.0 * N as f32,
        "b.sum() after a replay"
    );
    let other = device.create_stream(0)?;
    graph.launch(&other)?;
    all_equal(
        &download(&other, b.slice())?,
        11.0,
        "b after a replay on another stream",
    )?;
    drop((graph, b, a, ones));
    allocator_works(&alloc)
}

/// D35: a capture session on the default stream fails with
/// `GraphError::Stream(StreamError::CaptureOnDefaultStream)`; nothing is capturing, the session's
/// pool is gone and allocations go to the default pool.
pub fn session_on_default_stream_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    expect_err!(
        CaptureSession::new(&alloc, &main)
            .run(|ctx| ctx.alloc(16))
            .map(|_| ()),
        GraphError::Stream(StreamError::CaptureOnDefaultStream),
        "a capture session on the default stream"
    );
    ensure!(
        !main.is_capturing() && !device.is_capturing(),
        "capturing after the refusal"
    );
    let x = alloc.alloc(16, &main)?;
    ensure_eq!(x.pool(), PoolId::DEFAULT, "pool of an allocation after");
    ensure!(
        alloc.private_pools().is_empty(),
        "the session's pool is left: {:?}",
        alloc.private_pools()
    );
    drop(x);
    allocator_works(&alloc)
}

/// D36: an empty capture gives an empty graph, which launches.
pub fn empty_session_gives_an_empty_graph<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let (graph, ()) = CaptureSession::new(&alloc, &s).run(|_| Ok(()))?;
    ensure!(
        graph.is_empty() && graph.node_count() == 0,
        "{graph:?} is not empty"
    );
    graph.launch(&s)?;
    s.synchronize()?;
    drop(graph);
    allocator_works(&alloc)
}

/// D37: running out of memory inside a capture is `GraphError::Alloc(OutOfMemory)`; the
/// capture is ended, the closure's memory is back, and the stream computes correctly.
pub fn oom_inside_session_does_not_wedge<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let too_much = device.mem_info()?.total.saturating_mul(2);
    expect_err!(
        CaptureSession::new(&alloc, &s)
            .run(|ctx| {
                let _small = ctx.alloc(4 * KIB)?;
                ctx.alloc(too_much)
            })
            .map(|_| ()),
        GraphError::Alloc(braid_allocator::AllocError::OutOfMemory(_)),
        "allocating twice the device inside a capture"
    );
    ensure!(
        !s.is_capturing() && !device.is_capturing(),
        "still capturing"
    );
    ensure_eq!(alloc.memory_allocated(), 0, "allocated bytes after");
    let x = alloc.alloc(4 * KIB, &s)?;
    fill(&s, x.slice(), 2.0)?;
    ensure_eq!(sum(&s, x.slice())?, 2048.0, "sum after the failed capture");
    drop(x);
    allocator_works(&alloc)
}

/// D38: capture, replay (11000), drop the graph and its output ("reset"), recapture other work
/// into the same pool, replay (22000).
pub fn reset_and_recapture_into_the_same_pool<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let a = alloc.alloc(N * 4, &s)?;
    let ones = alloc.alloc(N * 4, &s)?;
    fill(&s, a.slice(), 1.0)?;
    fill(&s, ones.slice(), 1.0)?;
    let (graph, b) = capture_increments(&alloc, &s, None, &a, &ones, 10)?;
    graph.launch(&s)?;
    ensure_eq!(sum(&s, b.slice())?, 11.0 * N as f32, "the first graph");
    let pool = graph.pool().clone();
    drop((graph, b));
    let (graph, b) = capture_increments(&alloc, &s, Some(&pool), &a, &ones, 21)?;
    ensure!(
        graph.pool().same_as(&pool),
        "the recapture used another pool"
    );
    graph.launch(&s)?;
    ensure_eq!(sum(&s, b.slice())?, 22.0 * N as f32, "the recaptured graph");
    drop((graph, b, pool, a, ones));
    allocator_works(&alloc)
}

/// PyTorch's `func_with_temps`: `(t.clone() + val) + (t.clone() + val)`.
fn func_with_temps<B: Backend>(
    ctx: &RunContext<'_, B>,
    t: &DeviceBuffer<B>,
    val: &DeviceBuffer<B>,
) -> Result<DeviceBuffer<B>, GraphError> {
    let s = ctx.current_stream();
    let clone = |t: &DeviceBuffer<B>| -> Result<DeviceBuffer<B>, GraphError> {
        let c = ctx.alloc(t.requested_size())?;
        s.launch(&Kernel::Copy {
            src: t.slice(),
            dst: c.slice(),
        })?;
        Ok(c)
    };
    let x = add(ctx, clone(t)?.slice(), val.slice())?;
    let y = add(ctx, clone(t)?.slice(), val.slice())?;
    let out = ctx.alloc(t.requested_size())?;
    s.launch(&Kernel::Add {
        a: x.slice(),
        b: y.slice(),
        out: out.slice(),
    })?;
    Ok(out)
}

/// How the second graph of D39 gets its pool.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Share {
    No,
    ViaPool,
    ViaHandle,
}

/// D39 with one way of sharing; returns the reserved bytes at the end.
fn two_successive_graphs<B: Backend>(h: &Harness<B>, share: Share) -> Result<u64, CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let s = device.create_stream(0)?;
    let a = alloc.alloc(N * 4, &main)?;
    let one = alloc.alloc(N * 4, &main)?;
    let three = alloc.alloc(N * 4, &main)?;
    fill(&main, a.slice(), 1.0)?;
    fill(&main, one.slice(), 1.0)?;
    fill(&main, three.slice(), 3.0)?;
    s.wait_stream(&main)?;
    let handle = (share == Share::ViaHandle).then(|| graph_pool_handle(&alloc));
    let mut first = CaptureSession::new(&alloc, &s);
    if let Some(handle) = &handle {
        first = first.pool(handle);
    }
    let (g0, b0) = first.run(|ctx| {
        let b = ctx.alloc(N * 4)?;
        ctx.stream().launch(&Kernel::Copy {
            src: a.slice(),
            dst: b.slice(),
        })?;
        let mut b = b;
        for _ in 0..5 {
            b = func_with_temps(ctx, &b, &one)?;
        }
        Ok(b)
    })?;
    let mut second = CaptureSession::new(&alloc, &s);
    match (share, &handle) {
        (Share::ViaPool, _) => second = second.pool(g0.pool()),
        (Share::ViaHandle, Some(handle)) => second = second.pool(handle),
        _ => {}
    }
    let (g1, b1) = second.run(|ctx| {
        let mut b = func_with_temps(ctx, &b0, &one)?;
        for _ in 1..5 {
            b = func_with_temps(ctx, &b, &one)?;
        }
        Ok(b)
    })?;
    main.wait_stream(&s)?;
    // Unrelated eager work between the replays.
    let eager = RunContext::eager(&alloc, &main)?;
    let mut c = alloc.alloc(N * 4, &main)?;
    main.launch(&Kernel::Copy {
        src: a.slice(),
        dst: c.slice(),
    })?;
    for _ in 0..2 {
        c = func_with_temps(&eager, &c, &three)?;
    }
    g0.launch(&main)?;
    for _ in 0..2 {
        c = func_with_temps(&eager, &c, &three)?;
    }
    g1.launch(&main)?;
    for _ in 0..2 {
        c = func_with_temps(&eager, &c, &three)?;
    }
    ensure_eq!(
        sum(&main, b1.slice())?,
        N as f32 * 3070.0,
        "b1 with {share:?} sharing"
    );
    ensure_eq!(
        sum(&main, c.slice())?,
        N as f32 * 442.0,
        "c with {share:?} sharing"
    );
    let reserved = alloc.memory_reserved();
    drop(eager);
    drop((g0, b0, g1, b1, c, handle));
    allocator_works(&alloc)?;
    Ok(reserved)
}

/// D39: two graphs captured back to back, with eager work between their replays, compute
/// `b == 3070·N` and `c == 442·N`; sharing one pool (the first graph's, or a
/// `graph_pool_handle`) reserves exactly 2 MiB less than not sharing.
pub fn shared_pool_saves_one_small_segment<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let unshared = two_successive_graphs(h, Share::No)?;
    for share in [Share::ViaPool, Share::ViaHandle] {
        let shared = two_successive_graphs(h, share)?;
        ensure_eq!(
            unshared.checked_sub(shared),
            Some(2 * MIB),
            "reserved without sharing ({unshared}) minus with {share:?} sharing ({shared})"
        );
    }
    Ok(())
}

/// D42 for one size: captures `b = a.clone()` then 5 × `b = b.clone() + 1`; returns the new
/// segments and bytes of the graph's pool, and the non-default segments and bytes left once
/// the graph is gone (only the output's). The output stays valid (6 everywhere).
fn graph_pool_accounting<B: Backend>(
    h: &Harness<B>,
    bytes: u64,
) -> Result<(u64, u64, usize, u64), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let s = device.create_stream(0)?;
    let a = alloc.alloc(bytes, &main)?;
    let ones = alloc.alloc(bytes, &main)?;
    fill(&main, a.slice(), 1.0)?;
    fill(&main, ones.slice(), 1.0)?;
    s.wait_stream(&main)?;
    let (graph, b) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let mut b = ctx.alloc(bytes)?;
        ctx.stream().launch(&Kernel::Copy {
            src: a.slice(),
            dst: b.slice(),
        })?;
        for _ in 0..5 {
            let tmp = ctx.alloc(bytes)?;
            ctx.stream().launch(&Kernel::Copy {
                src: b.slice(),
                dst: tmp.slice(),
            })?;
            b = add(ctx, tmp.slice(), ones.slice())?;
        }
        Ok(b)
    })?;
    let stats = graph.pool().stats();
    graph.launch(&s)?;
    alloc.empty_cache();
    ensure_eq!(
        graph.pool().reserved_bytes(),
        stats.reserved_bytes,
        "empty_cache must keep a live graph's pool ({bytes} bytes)"
    );
    drop(graph); // "del g"
    alloc.empty_cache();
    let left: Vec<_> = alloc
        .snapshot()
        .segments
        .into_iter()
        .filter(|g| g.pool_id != PoolId::DEFAULT)
        .collect();
    let active = left
        .iter()
        .flat_map(|g| &g.blocks)
        .filter(|blk| blk.state == BlockState::ActiveAllocated)
        .count();
    ensure_eq!(active, 1, "active blocks left ({bytes} bytes)");
    // The first and last (up to) 64 KiB of the output: reading back 10 MiB costs more than
    // the whole rest of the case in debug builds.
    let window = bytes.min(64 * KIB) / 4 * 4;
    for offset in [0, (bytes / 4 * 4) - window] {
        all_equal(
            &download(&s, b.range(offset, window)?)?,
            6.0,
            &format!("the output after del g ({bytes} bytes, at offset {offset})"),
        )?;
    }
    drop((b, a, ones));
    allocator_works(&alloc)?;
    Ok((
        stats.segments,
        stats.reserved_bytes,
        left.len(),
        left.iter().map(|g| g.total_size).sum(),
    ))
}

/// D42: the graph pool's new segments and bytes per size (512 B: 1 / 2 MiB; 1 MiB: 2 / 4 MiB;
/// 1 MiB + 512: 1 / 20 MiB; 10 MiB − 512: 2 / 40 MiB; 10 MiB + 512: 3 / 36 MiB), unchanged by
/// `empty_cache` while the graph lives; after the graph is dropped one segment with one active
/// block (the output, still valid) is left.
pub fn graph_pool_segment_accounting<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let table = [
        (512, 1, 2 * MIB, 2 * MIB),
        (MIB, 2, 4 * MIB, 2 * MIB),
        (MIB + 512, 1, 20 * MIB, 20 * MIB),
        (10 * MIB - 512, 2, 40 * MIB, 20 * MIB),
        (10 * MIB + 512, 3, 36 * MIB, 12 * MIB),
    ];
    for (bytes, segments, new_bytes, left_bytes) in table {
        ensure_eq!(
            graph_pool_accounting(h, bytes)?,
            (segments, new_bytes, 1, left_bytes),
            "(new segments, new bytes, segments left, bytes left) for {bytes} bytes"
        );
    }
    Ok(())
}

/// D43: a capture on s0 forks work to s1 and joins back: the side stream's allocation goes to
/// the graph's pool too (exactly 2 new segments, both in that pool); after the capture s1
/// allocates from the default pool again.
pub fn side_stream_allocations_go_to_the_graph_pool<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s0 = device.create_stream(0)?;
    let s1 = device.create_stream(0)?;
    let before = alloc.snapshot().segments.len();
    let (graph, (x, y)) = CaptureSession::new(&alloc, &s0).run(|ctx| {
        let x = ctx.alloc(4 * KIB)?;
        s1.wait_stream(ctx.stream())?;
        let y = ctx.allocator().alloc(4 * KIB, &s1)?;
        s1.launch(&Kernel::Fill {
            dst: y.slice(),
            value: 1.0,
        })?;
        ctx.stream().wait_stream(&s1)?;
        Ok((x, y))
    })?;
    let snap = alloc.snapshot();
    ensure_eq!(snap.segments.len() - before, 2, "new segments");
    ensure!(
        snap.segments.iter().all(|g| g.pool_id == graph.pool().id()),
        "a segment outside the graph's pool: {:?}",
        snap.segments
            .iter()
            .map(|g| (g.pool_id, g.stream))
            .collect::<Vec<_>>()
    );
    ensure_eq!(x.pool(), graph.pool().id(), "pool of the origin's buffer");
    ensure_eq!(
        y.pool(),
        graph.pool().id(),
        "pool of the side stream's buffer"
    );
    let after = alloc.alloc(4 * KIB, &s1)?;
    ensure_eq!(after.pool(), PoolId::DEFAULT, "pool after the capture");
    graph.launch(&s0)?;
    all_equal(&download(&s0, y.slice())?, 1.0, "the side stream's output")?;
    drop((after, graph, x, y));
    allocator_works(&alloc)
}

/// D45: synchronizing inside a capture (`.item()`) is
/// `GraphError::Stream(ForbiddenDuringCapture { call: "Stream::synchronize" })`; afterwards
/// the stream synchronizes and the closure's memory is back.
pub fn synchronize_inside_session_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    expect_err!(
        CaptureSession::new(&alloc, &s)
            .run(|ctx| {
                let x = ctx.alloc(16)?;
                ctx.stream().launch(&Kernel::Fill {
                    dst: x.slice(),
                    value: 1.0,
                })?;
                ctx.stream().synchronize()?;
                Ok(x)
            })
            .map(|_| ()),
        GraphError::Stream(StreamError::ForbiddenDuringCapture {
            call: "Stream::synchronize",
            ..
        }),
        "synchronize inside a capture"
    );
    ensure!(!s.is_capturing(), "still capturing");
    s.synchronize()?;
    ensure_eq!(alloc.memory_allocated(), 0, "allocated bytes after");
    allocator_works(&alloc)
}

/// D46: repeated captures (a new graph each time, replayed and dropped, then `empty_cache`) do
/// not leak: reserved memory stays at the first iteration's, no private pool is left.
pub fn repeated_sessions_do_not_leak<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let a = alloc.alloc(64 * 64 * 4, &s)?;
    fill(&s, a.slice(), 1.0)?;
    let mut after_first = 0;
    for i in 0..20 {
        let (graph, c) = CaptureSession::new(&alloc, &s).run(|ctx| {
            let c = ctx.alloc(64 * 64 * 4)?;
            ctx.stream().launch(&Kernel::Matmul {
                a: a.slice(),
                b: a.slice(),
                c: c.slice(),
                m: 64,
                k: 64,
                n: 64,
            })?;
            Ok(c)
        })?;
        graph.launch(&s)?;
        if i == 0 {
            all_equal(&download(&s, c.slice())?, 64.0, "the matmul's output")?;
        }
        drop((graph, c));
        alloc.empty_cache();
        if i == 0 {
            after_first = alloc.memory_reserved();
        }
    }
    ensure_eq!(
        alloc.memory_reserved(),
        after_first,
        "reserved after 20 captures"
    );
    ensure!(
        alloc.private_pools().is_empty(),
        "private pools left: {:?}",
        alloc.private_pools()
    );
    drop(a);
    allocator_works(&alloc)
}

/// D48: fork/join through tagged streams inside the capture (two parallel branches summed on
/// the origin), `empty_cache` right after the capture (the graph's memory survives); replays
/// match eager results, also after new data is written into the static input.
pub fn multi_stream_capture_survives_empty_cache<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let x = alloc.alloc(N * 4, &s)?;
    let w = alloc.alloc(N * 4, &s)?;
    fill(&s, w.slice(), 2.0)?;
    let (graph, out) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let left = {
            let _g = ctx.stream_switch("left", 0)?;
            add(ctx, x.slice(), w.slice())?
        };
        let right = {
            let _g = ctx.stream_switch("right", 0)?;
            add(ctx, x.slice(), x.slice())?
        };
        let done = ctx.device().tagged_stream("left", 0)?.record_event()?;
        ctx.stream().wait(&done)?;
        let done = ctx.device().tagged_stream("right", 0)?.record_event()?;
        ctx.stream().wait(&done)?;
        add(ctx, left.slice(), right.slice())
    })?;
    alloc.empty_cache();
    for value in [1.0f32, 5.0] {
        fill(&s, x.slice(), value)?;
        graph.launch(&s)?;
        all_equal(
            &download(&s, out.slice())?,
            (value + 2.0) + 2.0 * value,
            &format!("replay with x = {value}"),
        )?;
    }
    drop((graph, out, x, w));
    allocator_works(&alloc)
}

/// G58: two tagged events recorded on the capturing stream, each waited on by one tagged side
/// stream (plain device switches); the session joins both side streams back and the replay
/// computes both branches.
pub fn tagged_events_and_automatic_join<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let x = alloc.alloc(N * 4, &s)?;
    fill(&s, x.slice(), 1.0)?;
    let e1 = device.create_tagged_event("g58_e1")?;
    let e2 = device.create_tagged_event("g58_e2")?;
    let (graph, (y1, y2)) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let a = add(ctx, x.slice(), x.slice())?;
        e1.record_on_current_stream()?;
        let b = add(ctx, a.slice(), x.slice())?;
        e2.record_on_current_stream()?;
        let y1 = {
            let _g = ctx.device().stream_switch("g58_s1", 0)?;
            e1.wait_on_current_stream()?;
            add(ctx, a.slice(), a.slice())?
        };
        let y2 = {
            let _g = ctx.device().stream_switch("g58_s2", 0)?;
            e2.wait_on_current_stream()?;
            add(ctx, b.slice(), b.slice())?
        };
        Ok((y1, y2))
    })?;
    ensure!(
        !device.is_capturing(),
        "a side stream is still capturing after the session"
    );
    graph.launch(&s)?;
    all_equal(&download(&s, y1.slice())?, 4.0, "y1 = 2(x + x)")?;
    all_equal(&download(&s, y2.slice())?, 6.0, "y2 = 2(2x + x)")?;
    drop((graph, y1, y2, x));
    allocator_works(&alloc)
}

/// `record_tagged_stream` inside a capture: a block read on a tagged side stream and freed is
/// not reused before the origin joins that stream, and is after; the replay reads intact data.
pub fn record_tagged_stream_inside_session<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let (graph, (r, reused_early, reused_after_join)) =
        CaptureSession::new(&alloc, &s).run(|ctx| {
            let a = ctx.alloc(N * 4)?;
            ctx.stream().launch(&Kernel::Fill {
                dst: a.slice(),
                value: 1.0,
            })?;
            let r = ctx.alloc(4)?;
            {
                let _g = ctx.stream_switch("rts_side", 0)?;
                ctx.current_stream().wait_stream(ctx.stream())?;
                ctx.current_stream().launch(&Kernel::ReduceSum {
                    src: a.slice(),
                    dst: r.slice(),
                })?;
            }
            ctx.record_tagged_stream(&a, "rts_side")?;
            let a_ptr = a.ptr();
            drop(a);
            let early = ctx.alloc(N * 4)?;
            ctx.stream()
                .wait_stream(&ctx.device().tagged_stream("rts_side", 0)?)?;
            let after = ctx.alloc(N * 4)?;
            ctx.stream().launch(&Kernel::Fill {
                dst: after.slice(),
                value: 9.0,
            })?;
            Ok((r, early.ptr() == a_ptr, after.ptr() == a_ptr))
        })?;
    ensure!(!reused_early, "A was reused before the join");
    ensure!(reused_after_join, "A was not reused after the join");
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, r.slice())?,
        vec![N as f32],
        "the side stream's sum of A"
    );
    drop((graph, r));
    allocator_works(&alloc)
}

/// A pool lives while a handle, a graph or an output uses it: dropping the handle keeps the
/// graph working; dropping the graph leaves the pool freeable with the output still valid;
/// freeing the output removes the pool.
pub fn graph_pool_lives_while_used<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = graph_pool_handle(&alloc);
    let id = pool.id();
    let x = alloc.alloc(16, &s)?;
    let (graph, out) = CaptureSession::new(&alloc, &s).pool(&pool).run(|ctx| {
        let out = ctx.alloc(16)?;
        ctx.stream().launch(&Kernel::Scale {
            src: x.slice(),
            dst: out.slice(),
            factor: 3.0,
        })?;
        Ok(out)
    })?;
    ensure_eq!(pool.use_count(), 2, "users: the handle and the graph");
    drop(pool);
    fill(&s, x.slice(), 1.0)?;
    graph.launch(&s)?;
    ensure_eq!(download(&s, out.slice())?, vec![3.0; 4], "the output");
    drop(graph);
    alloc.empty_cache();
    ensure_eq!(
        alloc.pool_stats(id).map(|p| p.use_count),
        Some(0),
        "the pool is freeable but alive"
    );
    ensure_eq!(
        download(&s, out.slice())?,
        vec![3.0; 4],
        "the output after the graph is gone"
    );
    drop(out);
    alloc.empty_cache();
    ensure_eq!(alloc.pool_stats(id), None, "the pool is gone");
    drop(x);
    allocator_works(&alloc)
}

/// Capture rules and misuse as typed errors, each followed by a working allocator: a side
/// stream never joined back (`UnjoinedStream`), a stream or pool of another device or
/// allocator (`WrongDevice`), a failing model (`GraphError::Model`), a panicking closure (the
/// capture is ended, the memory back).
pub fn graph_errors_leave_things_usable<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let side = device.create_stream(0)?;

    match CaptureSession::new(&alloc, &s).run(|ctx| {
        let x = ctx.alloc(N * 4)?;
        ctx.stream().launch(&Kernel::Fill {
            dst: x.slice(),
            value: 1.0,
        })?;
        side.wait_stream(ctx.stream())?;
        side.launch(&Kernel::Fill {
            dst: x.slice(),
            value: 2.0,
        })?;
        Ok(x)
    }) {
        Err(GraphError::Stream(StreamError::UnjoinedStream { stream, origin, .. })) => {
            ensure_eq!((stream, origin), (side.id(), s.id()), "the unjoined stream");
        }
        other => {
            return Err(CaseError::new(format!(
                "a capture with an unjoined side stream: expected UnjoinedStream, got {:?}",
                other.map(|_| ())
            )))
        }
    }
    ensure!(
        !side.is_capturing() && !s.is_capturing(),
        "still capturing after the failed capture"
    );
    ensure_eq!(alloc.memory_allocated(), 0, "allocated bytes after");
    allocator_works(&alloc)?;

    let twin = h.device()?;
    let foreign_stream = twin.create_stream(0)?;
    expect_err!(
        CaptureSession::new(&alloc, &foreign_stream)
            .run(|_| Ok(()))
            .map(|_| ()),
        GraphError::WrongDevice(w) if w == wrong_device("CaptureSession::run", "stream", &device, &twin),
        "a session on a stream of another device"
    );
    let other = allocator(&device, AllocatorConfig::new())?;
    let foreign_pool = graph_pool_handle(&other);
    expect_err!(
        CaptureSession::new(&alloc, &s)
            .pool(&foreign_pool)
            .run(|_| Ok(()))
            .map(|_| ()),
        GraphError::ForeignPool {
            call: "CaptureSession::run"
        },
        "a session into another allocator's pool"
    );
    expect_err!(
        GraphRunner::new(
            &alloc,
            RunnerConfig::new(vec![InputKind::User]).memory(MemoryReuse::Shared(foreign_pool)),
            scale_model::<B>,
        )
        .map(|_| ()),
        GraphError::ForeignPool {
            call: "GraphRunner::new"
        },
        "a runner sharing another allocator's pool"
    );
    ensure!(!s.is_capturing(), "capturing after a refused session");
    allocator_works(&alloc)?;

    expect_err!(
        CaptureSession::new(&alloc, &s)
            .run(|ctx| -> Result<(), GraphError> {
                let _x = ctx.alloc(16)?;
                Err(GraphError::model("model bug"))
            })
            .map(|_| ()),
        GraphError::Model(ref e) if e.to_string() == "model bug",
        "a failing model"
    );
    ensure!(!s.is_capturing(), "capturing after a failed model");
    ensure_eq!(
        alloc.memory_allocated(),
        0,
        "allocated bytes after the model failed"
    );
    allocator_works(&alloc)?;

    let outcome = catch_unwind(AssertUnwindSafe(|| {
        CaptureSession::new(&alloc, &s).run(|ctx| -> Result<(), GraphError> {
            let _x = ctx.alloc(16)?;
            // `resume_unwind` unwinds without running the panic hook (no noise in output).
            resume_unwind(Box::new("model bug"))
        })
    }));
    ensure!(outcome.is_err(), "the closure should have unwound");
    ensure!(
        !s.is_capturing() && !device.is_capturing(),
        "capturing after a panic in the closure"
    );
    s.synchronize()?;
    ensure_eq!(
        alloc.memory_allocated(),
        0,
        "allocated bytes after the panic"
    );
    allocator_works(&other)?;
    allocator_works(&alloc)
}

// ----- the GraphRunner -----

/// `y = 2x + w` (w a parameter, x a user input); `kv += x` when a third (mutated) input is
/// given. Sizes follow x.
fn runner_model<B: Backend>(
    ctx: &RunContext<'_, B>,
    inputs: &[DeviceSlice],
) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
    let (w, x) = (inputs[0], inputs[1]);
    let s = ctx.current_stream();
    let t = ctx.alloc(x.len)?;
    s.launch(&Kernel::Scale {
        src: x,
        dst: t.slice(),
        factor: 2.0,
    })?;
    let y = ctx.alloc(x.len)?;
    s.launch(&Kernel::Add {
        a: t.slice(),
        b: w.sub(0, x.len)
            .ok_or_else(|| GraphError::model("w too short"))?,
        out: y.slice(),
    })?;
    if let Some(kv) = inputs.get(2) {
        s.launch(&Kernel::Add {
            a: *kv,
            b: x,
            out: *kv,
        })?;
    }
    Ok(vec![y])
}

/// `y = 2x`.
fn scale_model<B: Backend>(
    ctx: &RunContext<'_, B>,
    inputs: &[DeviceSlice],
) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
    let y = ctx.alloc(inputs[0].len)?;
    ctx.current_stream().launch(&Kernel::Scale {
        src: inputs[0],
        dst: y.slice(),
        factor: 2.0,
    })?;
    Ok(vec![y])
}

/// A parameter and a user input.
const PARAM_USER: [InputKind; 2] = [InputKind::Parameter, InputKind::User];

/// The runner's outputs match the eager results through warm-up, capture and replay of two
/// shapes (7 calls: 2 warm-ups, 2 captures, 3 replays), with one pool for both shapes.
pub fn runner_matches_eager_across_capture_and_replay<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let w = alloc.alloc(64 * 4, &s)?;
    fill(&s, w.slice(), 0.5)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()),
        runner_model::<B>,
    )?;
    for (i, n) in [16u64, 16, 16, 8, 8, 8, 16].into_iter().enumerate() {
        let x = alloc.alloc(n * 4, &s)?;
        fill(&s, x.slice(), i as f32)?;
        let out = runner.run(&s, &[w.slice(), x.slice()])?;
        ensure_eq!(
            out.read_f32(0)?,
            vec![2.0 * i as f32 + 0.5; n as usize],
            "call {i} with {n} floats"
        );
    }
    let st = runner.stats();
    ensure_eq!(
        (st.calls, st.warmups, st.captures, st.replays),
        (7, 2, 2, 3),
        "(calls, warm-ups, captures, replays)"
    );
    ensure_eq!(runner.graph_count(), 2, "graphs");
    ensure_eq!(runner.pools().len(), 1, "pools (one for all shapes)");
    drop(runner);
    drop(w);
    allocator_works(&alloc)
}

/// D49 with a capture limit: the runner's (captures, replays, eager fallbacks) over 19 calls
/// of 5 shapes with 9, 5, 3, 1, 1 calls each.
fn runner_counts<B: Backend>(h: &Harness<B>, limit: usize) -> Result<(u64, u64, u64), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let w = alloc.alloc(64 * 4, &s)?;
    fill(&s, w.slice(), 1.0)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).capture_limit(limit),
        runner_model::<B>,
    )?;
    let xs = (1..=5)
        .map(|n| alloc.alloc(n * 4, &s))
        .collect::<Result<Vec<_>, _>>()?;
    for (x, calls) in xs.iter().zip([9, 5, 3, 1, 1]) {
        fill(&s, x.slice(), 2.0)?;
        for call in 0..calls {
            let out = runner.run(&s, &[w.slice(), x.slice()])?;
            all_equal(
                &out.read_f32(0)?,
                5.0,
                &format!(
                    "call {call} with {} floats (limit {limit})",
                    x.requested_size() / 4
                ),
            )?;
        }
    }
    let st = runner.stats();
    ensure_eq!(st.calls, 19, "calls");
    drop(runner);
    drop((xs, w));
    allocator_works(&alloc)?;
    Ok((st.captures, st.replays, st.eager_fallbacks))
}

/// D49 (MindSpore's capture on the second call per shape): 19 calls over 5 shapes with 9, 5,
/// 3, 1, 1 calls give 3 captures and 11 replays; with a capture limit of 2, 2 captures, 10
/// replays and 2 eager fallbacks. Every output is correct.
pub fn runner_captures_on_the_second_call_per_shape<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    ensure_eq!(
        runner_counts(h, 64)?,
        (3, 11, 0),
        "(captures, replays, eager fallbacks) with the default limit"
    );
    ensure_eq!(
        runner_counts(h, 2)?,
        (2, 10, 2),
        "(captures, replays, eager fallbacks) with a limit of 2"
    );
    Ok(())
}

/// A mutated input (KV cache) or a parameter that moves makes the runner recapture its key
/// (one recapture each), with correct outputs and the KV cache updated in place; a moved user
/// input is only copied.
pub fn runner_recaptures_moved_inputs<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let kinds = vec![InputKind::Parameter, InputKind::User, InputKind::Mutated];
    let mut runner = GraphRunner::new(&alloc, RunnerConfig::new(kinds), runner_model::<B>)?;
    let w = alloc.alloc(16 * 4, &s)?;
    let w2 = alloc.alloc(16 * 4, &s)?;
    let kv = alloc.alloc(16 * 4, &s)?;
    let kv2 = alloc.alloc(16 * 4, &s)?;
    let x = alloc.alloc(16 * 4, &s)?;
    fill(&s, w.slice(), 1.0)?;
    fill(&s, w2.slice(), 10.0)?;
    fill(&s, x.slice(), 1.0)?;
    fill(&s, kv.slice(), 0.0)?;
    fill(&s, kv2.slice(), 100.0)?;
    for _ in 0..3 {
        runner.run(&s, &[w.slice(), x.slice(), kv.slice()])?;
    }
    ensure_eq!(
        download(&s, kv.slice())?,
        vec![3.0; 16],
        "kv updated in place by 3 calls"
    );
    let out = runner.run(&s, &[w.slice(), x.slice(), kv2.slice()])?;
    ensure_eq!(
        out.read_f32(0)?,
        vec![3.0; 16],
        "y after the KV cache moved"
    );
    ensure_eq!(
        download(&s, kv2.slice())?,
        vec![101.0; 16],
        "the moved KV cache"
    );
    let out = runner.run(&s, &[w2.slice(), x.slice(), kv2.slice()])?;
    ensure_eq!(
        out.read_f32(0)?,
        vec![12.0; 16],
        "y after the parameter moved"
    );
    let st = runner.stats();
    ensure_eq!(
        (
            st.recaptures_mutated_input,
            st.recaptures_parameter,
            st.captures
        ),
        (1, 1, 1),
        "(recaptures for the KV cache, for the parameter, captures)"
    );
    ensure_eq!(runner.graph_count(), 1, "graphs");
    let x2 = alloc.alloc(16 * 4, &s)?;
    fill(&s, x2.slice(), 4.0)?;
    let out = runner.run(&s, &[w2.slice(), x2.slice(), kv2.slice()])?;
    ensure_eq!(
        out.read_f32(0)?,
        vec![18.0; 16],
        "y after the user input moved"
    );
    ensure_eq!(
        runner.stats().recaptures(),
        2,
        "a moved user input does not recapture"
    );
    drop(runner);
    drop((w, w2, kv, kv2, x, x2));
    allocator_works(&alloc)
}

/// TorchAir's mode 1: two runners sharing a user pool run as a pipeline (the first's output
/// feeds the second); reading the first's output after the second replayed is
/// `GraphError::OutputOverwritten`; runners without a custom pool get different pools.
pub fn runners_share_a_user_pool<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let w = alloc.alloc(16 * 4, &s)?;
    fill(&s, w.slice(), 1.0)?;
    let pool = graph_pool_handle(&alloc);
    let config = RunnerConfig::new(PARAM_USER.to_vec())
        .memory(MemoryReuse::Shared(pool.clone()))
        .warmup_calls(0);
    let mut first = GraphRunner::new(&alloc, config.clone(), runner_model::<B>)?;
    let mut second = GraphRunner::new(&alloc, config, runner_model::<B>)?;
    let x = alloc.alloc(16 * 4, &s)?;
    fill(&s, x.slice(), 1.0)?;
    {
        let out1 = first.run(&s, &[w.slice(), x.slice()])?;
        let hidden = out1.slices()?[0];
        let out2 = second.run(&s, &[w.slice(), hidden])?;
        ensure_eq!(out2.read_f32(0)?, vec![7.0; 16], "the pipeline's output");
        expect_err!(
            out1.slices(),
            GraphError::OutputOverwritten { pool: p } if p == pool.id().0,
            "reading the first output after the second runner replayed"
        );
    }
    ensure!(
        first.pools()[0].same_as(&pool) && second.pools()[0].same_as(&pool),
        "the runners do not use the shared pool"
    );
    let mut a = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).warmup_calls(0),
        runner_model::<B>,
    )?;
    let mut b = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).warmup_calls(0),
        runner_model::<B>,
    )?;
    a.run(&s, &[w.slice(), x.slice()])?;
    b.run(&s, &[w.slice(), x.slice()])?;
    ensure!(
        !a.pools()[0].same_as(&b.pools()[0]),
        "runners without a custom pool share one"
    );
    expect_err!(
        a.run(&s, &[]).map(|_| ()),
        GraphError::InputCount {
            expected: 2,
            got: 0
        },
        "a call with no inputs"
    );
    drop((first, second, a, b, pool));
    drop((w, x));
    allocator_works(&alloc)
}

/// A runner whose model forks a branch onto a tagged stream (`stream_switch`) and joins it:
/// warm-up, capture and replays all give `3x + 5x`.
pub fn runner_on_tagged_streams_matches_eager<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    fn branches<B: Backend>(
        ctx: &RunContext<'_, B>,
        inputs: &[DeviceSlice],
    ) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
        let x = inputs[0];
        let left = {
            let _g = ctx.stream_switch("runner_left", 0)?;
            let t = ctx.alloc(x.len)?;
            ctx.current_stream().launch(&Kernel::Scale {
                src: x,
                dst: t.slice(),
                factor: 3.0,
            })?;
            t
        };
        let right = ctx.alloc(x.len)?;
        ctx.stream().launch(&Kernel::Scale {
            src: x,
            dst: right.slice(),
            factor: 5.0,
        })?;
        ctx.stream()
            .wait_stream(&ctx.device().tagged_stream("runner_left", 0)?)?;
        let out = ctx.alloc(x.len)?;
        ctx.stream().launch(&Kernel::Add {
            a: left.slice(),
            b: right.slice(),
            out: out.slice(),
        })?;
        Ok(vec![out])
    }
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(vec![InputKind::User]),
        branches::<B>,
    )?;
    let x = alloc.alloc(256 * 4, &s)?;
    for i in 0..4 {
        fill(&s, x.slice(), i as f32)?;
        let out = runner.run(&s, &[x.slice()])?;
        all_equal(&out.read_f32(0)?, 8.0 * i as f32, &format!("call {i}"))?;
    }
    ensure_eq!(runner.stats().replays, 2, "replays");
    drop(runner);
    drop(x);
    allocator_works(&alloc)
}

/// Captures the chain `g1 → g2 → g3` into one shared pool: `g1` computes `x + 1`, and each
/// next graph adds 1 twice to the previous graph's output, freeing that output during its
/// capture (PyTorch's pattern for graphs sharing a pool), so later captures may reuse its
/// block. Returns the graphs in capture order and the last output.
#[allow(clippy::type_complexity)]
fn three_graph_chain<B: Backend>(
    alloc: &CachingAllocator<B>,
    s: &Stream<B>,
    x: &DeviceBuffer<B>,
    ones: &DeviceBuffer<B>,
) -> Result<(Vec<CapturedGraph<B>>, DeviceBuffer<B>), GraphError> {
    let pool = graph_pool_handle(alloc);
    let (g1, out1) = CaptureSession::new(alloc, s)
        .pool(&pool)
        .run(|ctx| add(ctx, x.slice(), ones.slice()))?;
    let next = |prev: DeviceBuffer<B>| {
        CaptureSession::new(alloc, s).pool(&pool).run(move |ctx| {
            let tmp = add(ctx, prev.slice(), ones.slice())?;
            drop(prev);
            add(ctx, tmp.slice(), ones.slice())
        })
    };
    let (g2, out2) = next(out1)?;
    let (g3, out3) = next(out2)?;
    Ok((vec![g1, g2, g3], out3))
}

/// Issue 13 §6: graphs sharing a pool are safe only in capture order. The three-graph chain
/// (each graph consuming the previous one's output, freed during the next capture) replayed
/// in each of the six orders: capture order computes `x + 5`; every other order is refused at
/// its first launch out of order with [`GraphError::ReplayOrder`] naming the launching graph
/// and the graph whose data it reads — before anything is enqueued, so never silently wrong —
/// and after the refusal the chain still replays correctly in capture order. Relaunching the
/// middle graph after the last one, whose capture reused the middle graph's input block, is
/// refused as overwritten by the last graph.
pub fn shared_pool_replay_order_is_checked<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let x = alloc.alloc(N * 4, &s)?;
    let ones = alloc.alloc(N * 4, &s)?;
    fill(&s, x.slice(), 1.0)?;
    fill(&s, ones.slice(), 1.0)?;
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        let (graphs, out) = three_graph_chain(&alloc, &s, &x, &ones)?;
        for (i, g) in graphs.iter().enumerate() {
            ensure_eq!(g.capture_index(), i as u32 + 1, "capture index");
        }
        fill(&s, out.slice(), -1.0)?;
        let mut next_in_order = 0;
        let mut refused = false;
        for &g in &order {
            let launched = graphs[g].launch(&s);
            if g == next_in_order {
                launched?;
                next_in_order += 1;
                continue;
            }
            let producer = g as u32; // graph g+1 reads graph g's output
            expect_err!(
                launched,
                GraphError::ReplayOrder { graph, producer: p, .. }
                    if graph == g as u32 + 1 && p == producer,
                "launching graph {} in order {order:?}",
                g + 1
            );
            refused = true;
            break;
        }
        if order == [0, 1, 2] {
            ensure!(!refused, "capture order refused");
            all_equal(
                &download(&s, out.slice())?,
                6.0,
                "the chain in capture order",
            )?;
            // The last capture reused the block the middle graph reads.
            expect_err!(
                graphs[1].launch(&s),
                GraphError::ReplayOrder {
                    graph: 2,
                    producer: 1,
                    overwritten_by: Some(3),
                    ..
                },
                "relaunching the middle graph after the last"
            );
        } else {
            ensure!(refused, "order {order:?} was not refused");
            // The refused launch enqueued nothing: the chain still replays in capture order.
            fill(&s, out.slice(), -1.0)?;
            for g in &graphs {
                g.launch(&s)?;
            }
            all_equal(
                &download(&s, out.slice())?,
                6.0,
                "the chain in capture order after a refusal",
            )?;
        }
        drop((graphs, out));
    }
    drop((x, ones));
    allocator_works(&alloc)
}
