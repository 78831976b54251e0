//! Capture rules and misuse as typed errors (D35, D37, D45, unjoined streams, foreign
//! streams and pools, failing and panicking models), each followed by proof that the
//! allocator and the streams stay usable.

use super::runner::scale_model;
use super::{sum, N};
use crate::support::{all_equal, allocator, allocator_works, download, fill, wrong_device, KIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, PoolId};
use braid_graph_capture::{
    graph_pool_handle, CaptureSession, GraphError, GraphRunner, InputKind, MemoryReuse,
    RunnerConfig,
};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Kernel, StreamError};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

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
    let on_side = alloc.alloc(16, &side)?;
    fill(&side, on_side.slice(), 1.0)?;
    all_equal(
        &download(&side, on_side.slice())?,
        1.0,
        "work on the unjoined stream after the capture",
    )?;
    drop(on_side);
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
