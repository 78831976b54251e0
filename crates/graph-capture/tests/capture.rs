//! Capture sessions and graph pools: scenarios D34-D39, D43, D45, D46, D48 and G58, the
//! capture rules as typed errors, and tagged side streams.

mod common;

use braid_allocator::{AllocError, PoolId};
use braid_graph_capture::{graph_pool_handle, CaptureSession, GraphError, GraphPool};
use braid_stream_core::{Kernel, StreamError};
use common::*;

const N: u64 = 1000;

/// Captures `iters` × `b = b + 1` starting from `a`; returns the graph and `b`.
fn capture_increments(
    alloc: &Alloc,
    s: &braid_stream_core::Stream<B>,
    pool: Option<&GraphPool<B>>,
    a: &Buf,
    ones: &Buf,
    iters: usize,
) -> (braid_graph_capture::CapturedGraph<B>, Buf) {
    let mut session = CaptureSession::new(alloc, s);
    if let Some(pool) = pool {
        session = session.pool(pool);
    }
    session
        .run(|ctx| {
            let mut b = add(ctx, a.slice(), ones.slice())?;
            for _ in 1..iters {
                b = add(ctx, b.slice(), ones.slice())?;
            }
            Ok(b)
        })
        .unwrap()
}

#[test]
fn d34_capture_and_replay() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let a = alloc.alloc(N * 4, &s).unwrap();
    let ones = alloc.alloc(N * 4, &s).unwrap();
    fill(&s, &a, 1.0);
    fill(&s, &ones, 1.0);
    let (graph, b) = capture_increments(&alloc, &s, None, &a, &ones, 10);
    assert_eq!(b.pool(), graph.pool().id());
    assert_eq!(graph.node_count(), 10);
    graph.launch(&s).unwrap();
    assert_eq!(sum(&s, b.slice()), 11.0 * N as f32);
    // Replays on another stream are ordered after the previous one.
    let other = dev.create_stream(0).unwrap();
    graph.launch(&other).unwrap();
    assert_eq!(sum(&other, b.slice()), 11.0 * N as f32);
    assert_eq!(reports(&dev), 0);
}

#[test]
fn d35_capture_on_the_default_stream_fails_and_leaves_things_usable() {
    let (dev, alloc) = setup(64 * MIB);
    let main = dev.default_stream();
    let err = CaptureSession::new(&alloc, &main)
        .run(|ctx| ctx.alloc(16))
        .unwrap_err();
    assert!(
        matches!(err, GraphError::Stream(StreamError::CaptureOnDefaultStream)),
        "{err}"
    );
    let x = alloc.alloc(16, &main).unwrap();
    assert_eq!(x.pool(), PoolId::DEFAULT);
    assert!(
        alloc.private_pools().is_empty(),
        "the session's pool is gone"
    );
}

#[test]
fn d36_empty_capture_gives_an_empty_graph() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let (graph, ()) = CaptureSession::new(&alloc, &s).run(|_| Ok(())).unwrap();
    assert!(graph.is_empty());
    graph.launch(&s).unwrap();
}

#[test]
fn d37_oom_inside_capture_does_not_wedge() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let err = CaptureSession::new(&alloc, &s)
        .run(|ctx| {
            let _small = ctx.alloc(4 * KIB)?;
            ctx.alloc(4 << 40)
        })
        .unwrap_err();
    assert!(
        matches!(err, GraphError::Alloc(AllocError::OutOfMemory(_))),
        "{err}"
    );
    assert!(!s.is_capturing());
    let x = alloc.alloc(4 * KIB, &s).unwrap();
    fill(&s, &x, 2.0);
    assert_eq!(sum(&s, x.slice()), 2048.0);
    alloc.check_invariants().unwrap();
}

#[test]
fn d38_reset_and_recapture_into_the_same_pool() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let a = alloc.alloc(N * 4, &s).unwrap();
    let ones = alloc.alloc(N * 4, &s).unwrap();
    fill(&s, &a, 1.0);
    fill(&s, &ones, 1.0);
    let (graph, b) = capture_increments(&alloc, &s, None, &a, &ones, 10);
    graph.launch(&s).unwrap();
    assert_eq!(sum(&s, b.slice()), 11.0 * N as f32);
    let pool = graph.pool().clone();
    drop((graph, b)); // reset()
    let (graph, b) = capture_increments(&alloc, &s, Some(&pool), &a, &ones, 21);
    graph.launch(&s).unwrap();
    assert_eq!(sum(&s, b.slice()), 22.0 * N as f32);
    assert_eq!(reports(&dev), 0);
}

/// PyTorch's `func_with_temps`: `(t.clone() + val) + (t.clone() + val)`.
fn func_with_temps(
    ctx: &braid_graph_capture::RunContext<'_, B>,
    t: &Buf,
    val: &Buf,
) -> Result<Buf, GraphError> {
    let s = ctx.current_stream();
    let clone = |t: &Buf| -> Result<Buf, GraphError> {
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

#[derive(Clone, Copy, PartialEq, Debug)]
enum Share {
    No,
    ViaPool,
    ViaHandle,
}

/// D39; returns the reserved bytes after the scenario.
fn d39(share: Share) -> u64 {
    let (dev, alloc) = setup(256 * MIB);
    let main = dev.default_stream();
    let s = dev.create_stream(0).unwrap();
    let a = alloc.alloc(N * 4, &main).unwrap();
    let one = alloc.alloc(N * 4, &main).unwrap();
    let three = alloc.alloc(N * 4, &main).unwrap();
    fill(&main, &a, 1.0);
    fill(&main, &one, 1.0);
    fill(&main, &three, 3.0);
    s.wait_stream(&main).unwrap();
    let handle = (share == Share::ViaHandle).then(|| graph_pool_handle(&alloc));
    let mut first = CaptureSession::new(&alloc, &s);
    if let Some(h) = &handle {
        first = first.pool(h);
    }
    let (g0, b0) = first
        .run(|ctx| {
            let mut b = ctx.alloc(N * 4)?;
            ctx.stream().launch(&Kernel::Copy {
                src: a.slice(),
                dst: b.slice(),
            })?;
            for _ in 0..5 {
                b = func_with_temps(ctx, &b, &one)?;
            }
            Ok(b)
        })
        .unwrap();
    let mut second = CaptureSession::new(&alloc, &s);
    match share {
        Share::No => {}
        Share::ViaPool => second = second.pool(g0.pool()),
        Share::ViaHandle => second = second.pool(handle.as_ref().unwrap()),
    }
    let (g1, b1) = second
        .run(|ctx| {
            let mut b = func_with_temps(ctx, &b0, &one)?;
            for _ in 1..5 {
                b = func_with_temps(ctx, &b, &one)?;
            }
            Ok(b)
        })
        .unwrap();
    main.wait_stream(&s).unwrap();
    // Unrelated eager work between the replays.
    let eager = braid_graph_capture::RunContext::eager(&alloc, &main).unwrap();
    let mut c = {
        let c = alloc.alloc(N * 4, &main).unwrap();
        main.launch(&Kernel::Copy {
            src: a.slice(),
            dst: c.slice(),
        })
        .unwrap();
        c
    };
    for _ in 0..2 {
        c = func_with_temps(&eager, &c, &three).unwrap();
    }
    g0.launch(&main).unwrap();
    for _ in 0..2 {
        c = func_with_temps(&eager, &c, &three).unwrap();
    }
    g1.launch(&main).unwrap();
    for _ in 0..2 {
        c = func_with_temps(&eager, &c, &three).unwrap();
    }
    assert_eq!(sum(&main, b1.slice()), N as f32 * 3070.0);
    assert_eq!(sum(&main, c.slice()), N as f32 * 442.0);
    assert_eq!(reports(&dev), 0);
    alloc.memory_reserved()
}

#[test]
fn d39_a_shared_pool_saves_one_small_segment() {
    let unshared = d39(Share::No);
    assert_eq!(unshared - d39(Share::ViaPool), 2 * MIB);
    assert_eq!(unshared - d39(Share::ViaHandle), 2 * MIB);
}

#[test]
fn d45_synchronize_inside_capture_is_refused() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let err = CaptureSession::new(&alloc, &s)
        .run(|ctx| {
            let x = ctx.alloc(16)?;
            fill(ctx.stream(), &x, 1.0);
            ctx.stream().synchronize()?; // `.item()`
            Ok(x)
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            GraphError::Stream(StreamError::ForbiddenDuringCapture {
                call: "Stream::synchronize",
                ..
            })
        ),
        "{err}"
    );
    s.synchronize().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
}

#[test]
fn d46_repeated_captures_do_not_leak() {
    let (dev, alloc) = setup(256 * MIB);
    let s = dev.create_stream(0).unwrap();
    let a = alloc.alloc(64 * 64 * 4, &s).unwrap();
    fill(&s, &a, 1.0);
    let mut after_first = 0;
    for i in 0..100 {
        let (graph, c) = CaptureSession::new(&alloc, &s)
            .run(|ctx| {
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
            })
            .unwrap();
        graph.launch(&s).unwrap();
        drop((graph, c));
        alloc.empty_cache();
        if i == 0 {
            after_first = alloc.memory_reserved();
        }
    }
    assert_eq!(alloc.memory_reserved(), after_first);
    assert!(alloc.private_pools().is_empty());
}

/// D48: fork/join through tagged streams inside the capture, `empty_cache` after it, replay
/// against eager, then new data in the static input.
#[test]
fn d48_multi_stream_capture_survives_empty_cache() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let x = alloc.alloc(N * 4, &s).unwrap();
    let w = alloc.alloc(N * 4, &s).unwrap();
    fill(&s, &w, 2.0);
    let branches = |ctx: &braid_graph_capture::RunContext<'_, B>| -> Result<Buf, GraphError> {
        // Two parallel branches on tagged streams, summed on the origin.
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
    };
    let (graph, out) = CaptureSession::new(&alloc, &s).run(branches).unwrap();
    alloc.empty_cache();
    for value in [1.0f32, 5.0] {
        fill(&s, &x, value);
        graph.launch(&s).unwrap();
        let got = read(&s, out.slice());
        assert!(
            got.iter().all(|v| *v == (value + 2.0) + 2.0 * value),
            "{got:?}"
        );
    }
    assert_eq!(reports(&dev), 0, "{:?}", dev.hal().sanitizer_reports());
}

/// G58: two tagged events recorded on the main stream, each waited by one side stream; the
/// session joins both side streams back (TorchAir's closure records).
#[test]
fn g58_tagged_events_and_automatic_join() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let x = alloc.alloc(N * 4, &s).unwrap();
    fill(&s, &x, 1.0);
    let e1 = dev.create_tagged_event("g58_e1").unwrap();
    let e2 = dev.create_tagged_event("g58_e2").unwrap();
    let (graph, (y1, y2)) = CaptureSession::new(&alloc, &s)
        .run(|ctx| {
            let a = add(ctx, x.slice(), x.slice())?;
            e1.record_on_current_stream()?;
            let b = add(ctx, a.slice(), x.slice())?;
            e2.record_on_current_stream()?;
            // Plain device switches: the tagged event waits make the streams join.
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
        })
        .unwrap();
    graph.launch(&s).unwrap();
    assert!(read(&s, y1.slice()).iter().all(|v| *v == 4.0));
    assert!(read(&s, y2.slice()).iter().all(|v| *v == 6.0));
    assert_eq!(reports(&dev), 0);
}

#[test]
fn an_unjoined_untagged_stream_is_a_typed_error() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let side = dev.create_stream(0).unwrap();
    let err = CaptureSession::new(&alloc, &s)
        .run(|ctx| {
            let x = ctx.alloc(N * 4)?;
            fill(ctx.stream(), &x, 1.0);
            side.wait_stream(ctx.stream())?;
            fill(&side, &x, 2.0);
            Ok(x)
        })
        .unwrap_err();
    match err {
        GraphError::Stream(StreamError::UnjoinedStream { stream, origin, .. }) => {
            assert_eq!((stream, origin), (side.id(), s.id()));
        }
        other => panic!("{other}"),
    }
    assert!(!side.is_capturing() && !s.is_capturing());
    assert_eq!(alloc.memory_allocated(), 0);
    fill(&side, &alloc.alloc(16, &side).unwrap(), 1.0);
}

#[test]
fn a_panicking_closure_ends_the_capture() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = CaptureSession::new(&alloc, &s).run(|ctx| -> Result<(), GraphError> {
            let _x = ctx.alloc(16)?;
            panic!("model bug");
        });
    }));
    assert!(result.is_err());
    assert!(!s.is_capturing());
    assert!(!dev.is_capturing());
    s.synchronize().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
}

/// record_tagged_stream inside a capture: the block comes back only after the join.
#[test]
fn record_tagged_stream_inside_capture() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let (graph, (r, reused_early, reused_after_join)) = CaptureSession::new(&alloc, &s)
        .run(|ctx| {
            let a = ctx.alloc(N * 4)?;
            fill(ctx.stream(), &a, 1.0);
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
            fill(ctx.stream(), &after, 9.0);
            Ok((r, early.ptr() == a_ptr, after.ptr() == a_ptr))
        })
        .unwrap();
    assert!(!reused_early);
    assert!(reused_after_join);
    graph.launch(&s).unwrap();
    assert_eq!(read(&s, r.slice()), vec![N as f32]);
    assert_eq!(reports(&dev), 0);
}

#[test]
fn a_pool_lives_while_a_graph_or_output_uses_it() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let pool = graph_pool_handle(&alloc);
    let id = pool.id();
    let x = alloc.alloc(16, &s).unwrap();
    let (graph, out) = CaptureSession::new(&alloc, &s)
        .pool(&pool)
        .run(|ctx| {
            let out = ctx.alloc(16)?;
            ctx.stream().launch(&Kernel::Scale {
                src: x.slice(),
                dst: out.slice(),
                factor: 3.0,
            })?;
            Ok(out)
        })
        .unwrap();
    assert_eq!(pool.use_count(), 2, "the handle and the graph");
    drop(pool);
    fill(&s, &x, 1.0);
    graph.launch(&s).unwrap();
    assert_eq!(read(&s, out.slice()), vec![3.0; 4]);
    drop(graph);
    alloc.empty_cache();
    assert_eq!(alloc.pool_stats(id).unwrap().use_count, 0);
    assert_eq!(
        read(&s, out.slice()),
        vec![3.0; 4],
        "the output is still valid"
    );
    drop(out);
    alloc.empty_cache();
    assert_eq!(alloc.pool_stats(id), None);
}
