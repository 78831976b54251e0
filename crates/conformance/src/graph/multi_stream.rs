//! Multi-stream capture the way TorchAir expresses it (D48, G58): tagged side streams forked
//! and joined inside a capture, tagged events with the automatic join, and
//! `record_tagged_stream` gating reuse inside the capture.

use super::{add, N};
use crate::support::{all_equal, allocator, allocator_works, download, fill};
use crate::{CaseError, Harness};
use braid_allocator::AllocatorConfig;
use braid_graph_capture::CaptureSession;
use braid_stream_core::hal::Backend;
use braid_stream_core::Kernel;

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
