//! Graph pools (D39, D42, D43): sharing a pool between graphs, its segment accounting, side
//! streams' allocations inside it, its lifetime, and the replay order that graphs sharing a
//! pool must keep.

use super::{add, sum, N};
use crate::support::{all_equal, allocator, allocator_works, download, fill, KIB, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, BlockState, CachingAllocator, DeviceBuffer, PoolId};
use braid_graph_capture::{
    graph_pool_handle, CaptureSession, CapturedGraph, GraphError, RunContext,
};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Kernel, Stream};

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
