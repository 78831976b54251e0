//! Graph capture: the rules (D35, D45, ACL 107025), capture/replay with fork and join (D34),
//! and the caching allocator's memory a graph uses kept alive while it lives.

use crate::support::{
    all_equal, alloc_f32, allocator, allocator_works, download, fill, still_works,
};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, CrossStreamMode};
use braid_stream_core::hal::Backend;
use braid_stream_core::{f32_bytes, CaptureMode, Domain, EventFlags, Kernel, StreamError};

/// D35: beginning a capture on the default stream is `StreamError::CaptureOnDefaultStream`.
pub fn capture_on_default_stream_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let default = device.default_stream();
    for mode in [
        CaptureMode::Global,
        CaptureMode::ThreadLocal,
        CaptureMode::Relaxed,
    ] {
        expect_err!(
            default.begin_capture(mode),
            StreamError::CaptureOnDefaultStream,
            "{mode:?} capture on the default stream"
        );
        ensure!(
            !default.is_capturing(),
            "the default stream is capturing after a refused begin"
        );
    }
    still_works(&device)
}

/// D35: beginning a capture on a stream that is already capturing is `StreamError::AlreadyCapturing`,
/// also for a stream that joined another stream's capture.
pub fn begin_capture_twice_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, side) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    s.begin_capture(CaptureMode::Global)?;
    expect_err!(
        s.begin_capture(CaptureMode::Global),
        StreamError::AlreadyCapturing { stream } if stream == s.id(),
        "second begin on the capturing stream"
    );
    fill(&s, mem.slice(), 1.0)?;
    side.wait(&s.record_event()?)?;
    expect_err!(
        side.begin_capture(CaptureMode::Global),
        StreamError::AlreadyCapturing { stream } if stream == side.id(),
        "begin on a stream that joined the capture"
    );
    s.wait_stream(&side)?;
    let graph = s.end_capture()?;
    ensure!(graph.node_count() > 0, "the graph captured no work");
    still_works(&device)
}

/// D35: ending a capture on a stream that is not capturing is `StreamError::NotCapturing`.
pub fn end_capture_without_capture_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    expect_err!(s.end_capture(), StreamError::NotCapturing { stream } if stream == s.id(), "end without begin");
    expect_err!(
        device.default_stream().end_capture(),
        StreamError::NotCapturing { stream } if stream == device.default_stream().id(),
        "end on the default stream"
    );
    s.begin_capture(CaptureMode::Global)?;
    s.end_capture()?;
    expect_err!(
        s.end_capture(),
        StreamError::NotCapturing { .. },
        "end twice"
    );
    still_works(&device)
}

/// D35: ending a capture on a stream that only joined it is `StreamError::NotCaptureOrigin`; the
/// capture goes on and ends on its origin.
pub fn end_capture_on_joined_stream_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (origin, side) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    origin.begin_capture(CaptureMode::Global)?;
    fill(&origin, mem.slice(), 1.0)?;
    side.wait(&origin.record_event()?)?;
    ensure!(
        side.is_capturing(),
        "waiting on a captured event joins the capture"
    );
    expect_err!(
        side.end_capture(),
        StreamError::NotCaptureOrigin { stream, origin: o } if stream == side.id() && o == origin.id(),
        "end on the joined stream"
    );
    ensure!(
        origin.is_capturing() && side.is_capturing(),
        "a refused end must not end the capture"
    );
    origin.wait_stream(&side)?;
    origin.end_capture()?;
    ensure!(
        !origin.is_capturing() && !side.is_capturing(),
        "both streams back to eager work"
    );
    still_works(&device)
}

/// D45: synchronize or query of a stream, an event or the device during a (global) capture is
/// refused naming the call: `StreamError::ForbiddenDuringCapture` for the capture's own stream and
/// event (no mode allows it), `StreamError::CaptureModeForbids` for eager objects and the device
/// (the capturing thread would need relaxed mode, ACL's 107030).
pub fn blocking_calls_forbidden_during_capture<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, t) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    fill(&t, mem.slice(), 1.0)?;
    let eager_ev = t.record_event()?;
    s.begin_capture(CaptureMode::Global)?;
    s.launch(&Kernel::Scale {
        src: mem.slice(),
        dst: mem.slice(),
        factor: 2.0,
    })?;
    let captured_ev = s.record_event()?;
    let sid = s.id();
    macro_rules! forbidden {
        ($call:expr, $name:literal, $what:literal) => {
            expect_err!(
                $call,
                StreamError::ForbiddenDuringCapture { call, stream } if call == $name && stream == sid,
                $what
            );
        };
    }
    macro_rules! mode_forbids {
        ($call:expr, $name:literal, $what:literal) => {
            expect_err!(
                $call,
                StreamError::CaptureModeForbids {
                    call,
                    stream,
                    capture_mode: CaptureMode::Global,
                    thread_mode: CaptureMode::Global,
                    allowed_by: CaptureMode::Relaxed,
                } if call == $name && stream == sid,
                $what
            );
        };
    }
    forbidden!(
        s.synchronize(),
        "Stream::synchronize",
        "synchronize of the capturing stream"
    );
    forbidden!(s.query(), "Stream::query", "query of the capturing stream");
    mode_forbids!(
        t.synchronize(),
        "Stream::synchronize",
        "synchronize of an eager stream"
    );
    mode_forbids!(t.query(), "Stream::query", "query of an eager stream");
    forbidden!(
        captured_ev.synchronize(),
        "Event::synchronize",
        "synchronize of a captured event"
    );
    forbidden!(
        captured_ev.query(),
        "Event::query",
        "query of a captured event"
    );
    mode_forbids!(
        eager_ev.synchronize(),
        "Event::synchronize",
        "synchronize of an eager event"
    );
    mode_forbids!(eager_ev.query(), "Event::query", "query of an eager event");
    mode_forbids!(
        device.synchronize(),
        "Device::synchronize",
        "device synchronize"
    );
    ensure!(s.is_capturing(), "refused calls must not end the capture");
    let graph = s.end_capture()?;
    s.synchronize()?;
    eager_ev.synchronize()?;
    ensure!(eager_ev.query()?, "eager event query after the capture");
    all_equal(
        &download(&s, mem.slice())?,
        1.0,
        "captured work did not run during capture",
    )?;
    graph.launch(&s)?;
    all_equal(&download(&s, mem.slice())?, 2.0, "replay")?;
    still_works(&device)
}

/// D35: work on the default stream while a global capture is active is
/// `StreamError::DefaultStreamDuringCapture` (it would create an implicit dependency).
pub fn default_stream_forbidden_during_global_capture<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let default = device.default_stream();
    let mem = alloc_f32(&device, 16)?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    let before = default.position();
    s.begin_capture(CaptureMode::Global)?;
    let sid = s.id();
    macro_rules! refused {
        ($call:expr, $name:literal) => {
            expect_err!(
                $call,
                StreamError::DefaultStreamDuringCapture { call, capturing } if call == $name && capturing == sid,
                "{} on the default stream", $name
            );
        };
    }
    refused!(
        default.launch(&Kernel::Fill {
            dst: mem.slice(),
            value: 1.0
        }),
        "Stream::launch"
    );
    refused!(
        default.copy_h2d(mem.slice(), f32_bytes(&[0.0; 16])),
        "Stream::copy_h2d"
    );
    refused!(
        default.copy_d2d(mem.slice(), mem.slice()),
        "Stream::copy_d2d"
    );
    refused!(default.memset(mem.slice(), 0), "Stream::memset");
    refused!(ev.record(&default), "Event::record");
    refused!(default.wait(&ev), "Stream::wait");
    ensure_eq!(
        default.position(),
        before,
        "refused work must not reach the default stream"
    );
    s.end_capture()?;
    still_works(&device)
}

/// ACL 107025: a side stream that joined the capture by waiting on a captured event and was
/// never joined back makes `end_capture` fail with `StreamError::UnjoinedStream` naming that stream.
pub fn unjoined_stream_reported<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (origin, joined, forked) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let mem = alloc_f32(&device, 3 * 64)?;
    let part = |i: u64| mem.range(i * 256, 256);
    origin.begin_capture(CaptureMode::Global)?;
    fill(&origin, part(0)?, 1.0)?;
    let fork = origin.record_event()?;
    joined.wait(&fork)?;
    forked.wait(&fork)?;
    fill(&joined, part(1)?, 2.0)?;
    fill(&forked, part(2)?, 3.0)?;
    origin.wait_stream(&joined)?;
    expect_err!(
        origin.end_capture(),
        StreamError::UnjoinedStream { stream, origin: o, .. } if stream == forked.id() && o == origin.id(),
        "end with a forked stream never joined back"
    );
    for s in [&origin, &joined, &forked] {
        ensure!(
            !s.is_capturing(),
            "{s:?} still capturing after the failed end"
        );
        ensure_eq!(s.domain(), Domain::Eager, "domain of {s:?}");
    }
    still_works(&device)
}

/// D34: on a side stream, capture ten `b = b + 1` over 1000 ones; the capture runs nothing;
/// each replay adds 10 (`b.sum() == 11000`, then 21000), also replayed from another stream.
pub fn capture_and_replay<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, other) = (device.create_stream(0)?, device.create_stream(0)?);
    let n = 1000;
    let (b, ones, sum) = (
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
        alloc_f32(&device, 1)?,
    );
    fill(&s, b.slice(), 1.0)?;
    fill(&s, ones.slice(), 1.0)?;
    s.synchronize()?;
    s.begin_capture(CaptureMode::Global)?;
    ensure!(s.is_capturing(), "is_capturing after begin");
    ensure!(
        matches!(s.domain(), Domain::Capture(_)),
        "domain during capture: {:?}",
        s.domain()
    );
    for _ in 0..10 {
        let pos = s.launch(&Kernel::Add {
            a: b.slice(),
            b: ones.slice(),
            out: b.slice(),
        })?;
        ensure_eq!(pos.domain, s.domain(), "captured work's domain");
    }
    s.launch(&Kernel::ReduceSum {
        src: b.slice(),
        dst: sum.slice(),
    })?;
    let graph = s.end_capture()?;
    ensure!(!s.is_capturing(), "is_capturing after end");
    ensure!(graph.node_count() > 0, "the graph captured no work");
    all_equal(
        &download(&s, b.slice())?,
        1.0,
        "b after capture, before replay",
    )?;
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, sum.slice())?,
        vec![11000.0],
        "b.sum() after one replay"
    );
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, sum.slice())?,
        vec![21000.0],
        "b.sum() after two replays"
    );
    other.wait_stream(&s)?;
    graph.launch(&other)?;
    ensure_eq!(
        download(&other, sum.slice())?,
        vec![31000.0],
        "b.sum() after a replay on another stream"
    );
    all_equal(&download(&other, b.slice())?, 31.0, "b after three replays")?;
    still_works(&device)
}

/// D34 + D43 (fork/join): the origin forks work to a side stream through a captured event and
/// joins it back; the graph replays both branches in order, twice.
pub fn fork_join_capture_replays<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (origin, side, eager) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let n = 512;
    let (b, c, ones) = (
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
    );
    for (buf, v) in [(&b, 1.0), (&c, 1.0), (&ones, 1.0)] {
        fill(&origin, buf.slice(), v)?;
    }
    origin.synchronize()?;
    origin.begin_capture(CaptureMode::Global)?;
    for _ in 0..10 {
        origin.launch(&Kernel::Add {
            a: b.slice(),
            b: ones.slice(),
            out: b.slice(),
        })?;
    }
    let fork = origin.record_event()?;
    side.wait(&fork)?;
    ensure!(
        side.is_capturing(),
        "side joined the capture by waiting on a captured event"
    );
    ensure_eq!(side.domain(), origin.domain(), "side's domain");
    for _ in 0..5 {
        side.launch(&Kernel::Add {
            a: c.slice(),
            b: ones.slice(),
            out: c.slice(),
        })?;
    }
    let side_last = side.launch(&Kernel::Add {
        a: c.slice(),
        b: b.slice(),
        out: c.slice(),
    })?;
    ensure!(
        !device.is_ordered_before(side_last, &origin),
        "side's work is ordered before the join"
    );
    ensure!(
        !device.is_ordered_before(side_last, &eager),
        "captured work is never ordered before eager work"
    );
    origin.wait_stream(&side)?;
    ensure!(
        device.is_ordered_before(side_last, &origin),
        "the join orders side's work before origin"
    );
    origin.launch(&Kernel::Add {
        a: b.slice(),
        b: c.slice(),
        out: b.slice(),
    })?;
    let graph = origin.end_capture()?;
    ensure!(!side.is_capturing(), "side is back to eager work");
    all_equal(&download(&origin, b.slice())?, 1.0, "b before replay")?;
    // One replay: b = 1 + 10 = 11; c = 1 + 5 + 11 = 17; b = 11 + 17 = 28.
    graph.launch(&origin)?;
    all_equal(&download(&origin, b.slice())?, 28.0, "b after one replay")?;
    all_equal(&download(&origin, c.slice())?, 17.0, "c after one replay")?;
    // Second: b = 38; c = 17 + 5 + 38 = 60; b = 38 + 60 = 98.
    graph.launch(&origin)?;
    all_equal(&download(&origin, b.slice())?, 98.0, "b after two replays")?;
    all_equal(&download(&origin, c.slice())?, 60.0, "c after two replays")?;
    still_works(&device)
}

/// D45 (capture modes): with `ThreadLocal` another thread may synchronize its own stream while
/// this one may not; with `Relaxed` both may synchronize unrelated streams. Nobody may
/// synchronize the capturing stream itself.
pub fn thread_local_and_relaxed_capture<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, unrelated) = (device.create_stream(0)?, device.create_stream(0)?);
    let (mem, other_mem) = (alloc_f32(&device, 64)?, alloc_f32(&device, 64)?);
    for mode in [CaptureMode::ThreadLocal, CaptureMode::Relaxed] {
        fill(&s, mem.slice(), 0.0)?;
        unrelated.launch(&Kernel::Busy { duration_ns: 1_000 })?;
        s.synchronize()?;
        s.begin_capture(mode)?;
        fill(&s, mem.slice(), 5.0)?;
        let sid = s.id();
        let other_thread = std::thread::scope(|scope| {
            scope
                .spawn(|| -> Result<(), CaseError> {
                    let own = device.create_stream(0)?;
                    let buf = other_mem.slice();
                    fill(&own, buf, 7.0)?;
                    own.synchronize()?;
                    ensure!(
                        own.query()?,
                        "{mode:?}: another thread's query of its own stream"
                    );
                    all_equal(&download(&own, buf)?, 7.0, "other thread's data")?;
                    expect_err!(
                        s.synchronize(),
                        StreamError::ForbiddenDuringCapture { stream, .. } if stream == sid,
                        "{mode:?}: synchronize of the capturing stream from another thread"
                    );
                    Ok(())
                })
                .join()
                .unwrap_or_else(|_| Err(CaseError::new("the other thread panicked")))
        });
        other_thread?;
        match mode {
            CaptureMode::Relaxed => unrelated.synchronize()?,
            _ => expect_err!(
                unrelated.synchronize(),
                StreamError::CaptureModeForbids {
                    call: "Stream::synchronize",
                    stream,
                    allowed_by: CaptureMode::Relaxed,
                    ..
                } if stream == sid,
                "{mode:?}: the capturing thread synchronizing an unrelated stream"
            ),
        }
        expect_err!(
            s.synchronize(),
            StreamError::ForbiddenDuringCapture { call: "Stream::synchronize", stream } if stream == sid,
            "{mode:?}: synchronize of the capturing stream"
        );
        let graph = s.end_capture()?;
        all_equal(
            &download(&s, mem.slice())?,
            0.0,
            "captured fill did not run",
        )?;
        graph.launch(&s)?;
        all_equal(
            &download(&s, mem.slice())?,
            5.0,
            "replay of the captured fill",
        )?;
    }
    still_works(&device)
}

/// Capture isolation: a capturing stream waiting on an eager event or on an event of another
/// capture, or an eager stream waiting on an event recorded in a capture that has ended, is
/// `StreamError::CaptureIsolation`.
pub fn capturing_stream_cannot_wait_on_eager_event<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, t) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    fill(&t, mem.slice(), 1.0)?;
    let eager_ev = t.record_event()?;
    s.begin_capture(CaptureMode::Global)?;
    expect_err!(
        s.wait(&eager_ev),
        StreamError::CaptureIsolation { stream, .. } if stream == s.id(),
        "capturing stream waiting on an eager event"
    );
    fill(&s, mem.slice(), 2.0)?;
    let captured_ev = s.record_event()?;
    // A second, concurrent capture cannot wait on the first one's events.
    let u = device.create_stream(0)?;
    u.begin_capture(CaptureMode::Global)?;
    expect_err!(
        u.wait(&captured_ev),
        StreamError::CaptureIsolation { stream, .. } if stream == u.id(),
        "capturing stream waiting on an event of another capture"
    );
    ensure!(
        !s.is_capturing() || s.domain() != u.domain(),
        "the captures stayed separate"
    );
    u.end_capture()?;
    let graph = s.end_capture()?;
    expect_err!(
        t.wait(&captured_ev),
        StreamError::CaptureIsolation { stream, .. } if stream == t.id(),
        "eager stream waiting on an event of an ended capture"
    );
    drop(graph);
    still_works(&device)
}

/// D45: eager-only calls are refused on a capturing stream: a device-to-host copy (it needs a
/// host wait) and launching a graph into the capture, both `StreamError::ForbiddenDuringCapture`.
pub fn d2h_copy_refused_during_capture<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = alloc_f32(&device, 64)?;
    s.begin_capture(CaptureMode::Global)?;
    fill(&s, mem.slice(), 1.0)?;
    let graph = s.end_capture()?;
    s.begin_capture(CaptureMode::Global)?;
    expect_err!(
        s.copy_d2h(mem.slice()),
        StreamError::ForbiddenDuringCapture { call: "Stream::copy_d2h", stream } if stream == s.id(),
        "device-to-host copy in a capture"
    );
    expect_err!(
        graph.launch(&s),
        StreamError::ForbiddenDuringCapture { call: "Graph::launch", stream } if stream == s.id(),
        "graph launch into a capture"
    );
    s.end_capture()?;
    graph.launch(&s)?;
    all_equal(
        &download(&s, mem.slice())?,
        1.0,
        "replay after the refusals",
    )?;
    still_works(&device)
}

/// A graph captured with the plain capture API keeps the caching allocator's buffers its work
/// reads and writes allocated while it lives (in either cross-stream mode): capture
/// `y = 2 * x`, drop `y`, allocate the same size and fill it, replay: the new buffer is not
/// `y`'s memory and keeps its value. Once the graph is gone and its replay has completed, the
/// memory is freed; a graph dropped first leaves nothing held.
pub fn graph_keeps_captured_buffers_alive<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    const BYTES: u64 = 4096;
    for mode in [CrossStreamMode::Manual, CrossStreamMode::Automatic] {
        let device = h.device()?;
        let alloc = allocator(&device, AllocatorConfig::new().cross_stream(mode))?;
        let s = device.create_stream(0)?;
        let (x, y) = (alloc.alloc(BYTES, &s)?, alloc.alloc(BYTES, &s)?);
        fill(&s, x.slice(), 3.0)?;
        s.begin_capture(CaptureMode::Global)?;
        s.launch(&Kernel::Scale {
            src: x.slice(),
            dst: y.slice(),
            factor: 2.0,
        })?;
        let graph = s.end_capture()?;
        let y_ptr = y.ptr();
        drop(y);
        let z = alloc.alloc(BYTES, &s)?;
        ensure!(
            z.ptr() != y_ptr,
            "{mode:?}: the memory of a buffer a live graph writes was handed out again"
        );
        ensure!(
            alloc.pending_free_bytes() >= BYTES,
            "{mode:?}: the dropped buffer is not held for the graph"
        );
        fill(&s, z.slice(), 5.0)?;
        graph.launch(&s)?;
        all_equal(
            &download(&s, z.slice())?,
            5.0,
            "a buffer allocated after the drop",
        )?;
        drop(graph);
        s.synchronize()?;
        let again = alloc.alloc(BYTES, &s)?;
        ensure_eq!(
            again.ptr(),
            y_ptr,
            "{mode:?}: the memory comes back once the graph is gone"
        );
        ensure_eq!(alloc.pending_free_bytes(), 0, "{mode:?}: nothing held");
        drop((again, z));

        // A graph dropped before the buffers it uses holds nothing back.
        s.begin_capture(CaptureMode::Global)?;
        fill(&s, x.slice(), 1.0)?;
        drop(s.end_capture()?);
        let x_ptr = x.ptr();
        drop(x);
        ensure_eq!(
            alloc.alloc(BYTES, &s)?.ptr(),
            x_ptr,
            "{mode:?}: a buffer freed after its graph is reused at once"
        );
        allocator_works(&alloc)?;
        ensure_eq!(
            alloc.memory_stats().allocated_bytes.all.current,
            0,
            "{mode:?}: allocated bytes at the end"
        );
    }
    Ok(())
}
