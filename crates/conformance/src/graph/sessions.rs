//! Capture sessions (D34, D36, D38, D46): capture and replay into the graph's pool, an empty
//! capture, recapture into the same pool, and repeated captures that leak nothing.

use super::{add, sum, N};
use crate::support::{all_equal, allocator, allocator_works, download, fill};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_graph_capture::{CaptureSession, CapturedGraph, GraphError, GraphPool};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Kernel, Stream};

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
