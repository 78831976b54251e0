//! Updated graphs keep what they use: a graph holds every caching-allocator buffer a task
//! update names ([`braid_stream_core::Graph::update`], `CapturedGraph::update`,
//! `GraphRunner::run_updating`), as it holds the buffers its capture used, until the graph is
//! dropped or a later update of the group stops naming it. A buffer dropped while an update
//! names it is handed to no one, and the next launch is refused naming its address, so a
//! replay never writes into, nor computes from, another owner's memory.

use crate::support::{all_equal, allocator, allocator_works, download, fill};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, CachingAllocator, CrossStreamMode};
use braid_graph_capture::{CaptureSession, GraphError, GraphRunner, InputKind, RunnerConfig};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, DeviceSlice, Kernel, Stream, StreamError};

/// Bytes of each buffer (256 floats).
const BYTES: u64 = 1024;
/// The factor the group's operator scales by.
const FACTOR: f32 = 7.0;

/// `dst = FACTOR · src` on `s`.
fn scale<B: Backend>(
    s: &Stream<B>,
    src: DeviceSlice,
    dst: DeviceSlice,
) -> braid_stream_core::Result<()> {
    s.launch(&Kernel::Scale {
        src,
        dst,
        factor: FACTOR,
    })
    .map(|_| ())
}

/// Which operand of the group's operator the update moves to the victim buffer.
#[derive(Clone, Copy, Debug)]
enum Moved {
    /// The operator writes the victim.
    Destination,
    /// The operator reads the victim.
    Source,
}

/// After an update named `victim` and `victim` was dropped: a new buffer of the same size
/// gets other memory, the dropped block is pending for the graph, and `launch` is refused
/// naming the dropped address without touching the new buffer (filled with 42).
fn dropped_victim_is_refused<B: Backend>(
    alloc: &CachingAllocator<B>,
    s: &Stream<B>,
    victim_addr: u64,
    launch: impl FnOnce() -> Result<(), GraphError>,
    what: &str,
) -> Result<(), CaseError> {
    let newcomer = alloc.alloc(BYTES, s)?;
    ensure!(
        newcomer.ptr().0 != victim_addr,
        "{what}: the memory of a buffer an update of a live graph names was handed out again"
    );
    ensure!(
        alloc.pending_free_bytes() >= BYTES,
        "{what}: the dropped buffer is not held for the graph"
    );
    fill(s, newcomer.slice(), 42.0)?;
    let position = s.position();
    expect_err!(
        launch(),
        GraphError::Stream(StreamError::GraphUsesDroppedBuffer { addr, .. }) if addr == victim_addr,
        "{what}: a launch whose update names a dropped buffer"
    );
    ensure_eq!(
        s.position(),
        position,
        "{what}: nothing enqueued by the refusal"
    );
    all_equal(
        &download(s, newcomer.slice())?,
        42.0,
        &format!("{what}: the buffer allocated after the drop"),
    )
}

/// `Graph::update` of a plainly captured graph (`Stream::begin_capture`): the group scales
/// `a` into `out`; an update moves the destination (or the source) to `victim`, which is then
/// dropped. The next launch is refused naming `victim`'s address and a new buffer of that
/// size gets other memory; a later update back to `out` (or dropping the graph) lets the
/// memory go, and the graph computes again. In both cross-stream modes.
pub fn updated_graph_keeps_its_new_buffers<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    for mode in [CrossStreamMode::Manual, CrossStreamMode::Automatic] {
        for moved in [Moved::Destination, Moved::Source] {
            let what = format!("{mode:?}, {moved:?}");
            let device = h.device()?;
            let alloc = allocator(&device, AllocatorConfig::new().cross_stream(mode))?;
            let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
            let (a, out) = (alloc.alloc(BYTES, &s)?, alloc.alloc(BYTES, &s)?);
            fill(&s, a.slice(), 1.0)?;
            s.begin_capture(CaptureMode::Global)?;
            let marked = (|| {
                s.begin_task_group()?;
                scale(&s, a.slice(), out.slice())?;
                s.end_task_group()
            })();
            let graph = s.end_capture()?;
            let group = marked?;
            let victim = alloc.alloc(BYTES, &s)?;
            fill(&s, victim.slice(), 2.0)?;
            s.synchronize()?;
            graph.update(&group, &u, |u| match moved {
                Moved::Destination => scale(u, a.slice(), victim.slice()),
                Moved::Source => scale(u, victim.slice(), out.slice()),
            })?;
            graph.launch(&s)?;
            let (written, expected) = match moved {
                Moved::Destination => (victim.slice(), FACTOR),
                Moved::Source => (out.slice(), 2.0 * FACTOR),
            };
            all_equal(
                &download(&s, written)?,
                expected,
                &format!("{what}: after the update"),
            )?;
            let victim_addr = victim.ptr().0;
            drop(victim);
            dropped_victim_is_refused(
                &alloc,
                &s,
                victim_addr,
                || Ok(graph.launch(&s).map(|_| ())?),
                &what,
            )?;
            match moved {
                Moved::Destination => {
                    // A later update that no longer names the victim lets its memory go.
                    graph.update(&group, &u, |u| scale(u, a.slice(), out.slice()))?;
                    graph.launch(&s)?;
                    all_equal(
                        &download(&s, out.slice())?,
                        FACTOR,
                        &format!("{what}: after the update back to out"),
                    )?;
                }
                Moved::Source => {
                    // Dropping the graph lets it go too.
                    drop(graph);
                }
            }
            s.synchronize()?;
            let probe = alloc.alloc(BYTES, &s)?;
            ensure_eq!(
                alloc.pending_free_bytes(),
                0,
                "{what}: the victim's memory once nothing names it"
            );
            drop((probe, a, out));
            allocator_works(&alloc)?;
        }
    }
    Ok(())
}

/// `CapturedGraph::update` of a capture session's graph: an update that fills a buffer made
/// outside the session (`victim`) holds it; dropped, its memory is not handed out again and
/// the next launch is refused naming it.
pub fn updated_session_graph_keeps_its_new_buffers<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let (graph, (out, group)) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let out = ctx.alloc(BYTES)?;
        ctx.stream().begin_task_group()?;
        ctx.stream().launch(&Kernel::Fill {
            dst: out.slice(),
            value: FACTOR,
        })?;
        let group = ctx.stream().end_task_group()?;
        Ok((out, group))
    })?;
    let victim = alloc.alloc(BYTES, &s)?;
    graph.update(&group, &u, |u| {
        u.launch(&Kernel::Fill {
            dst: victim.slice(),
            value: FACTOR,
        })
        .map(|_| ())
    })?;
    graph.launch(&s)?;
    all_equal(
        &download(&s, victim.slice())?,
        FACTOR,
        "the victim after the update",
    )?;
    let victim_addr = victim.ptr().0;
    drop(victim);
    dropped_victim_is_refused(
        &alloc,
        &s,
        victim_addr,
        || graph.launch(&s).map(|_| ()),
        "session",
    )?;
    graph.update(&group, &u, |u| {
        u.launch(&Kernel::Fill {
            dst: out.slice(),
            value: 3.0,
        })
        .map(|_| ())
    })?;
    graph.launch(&s)?;
    all_equal(
        &download(&s, out.slice())?,
        3.0,
        "out after the update back",
    )?;
    drop((graph, out));
    allocator_works(&alloc)
}

/// `GraphRunner::run_updating` with a source the update names (a buffer outside the runner):
/// once the source is dropped, the next replay is refused naming it instead of computing
/// from its memory's next owner; an update back to a live source replays again.
pub fn runner_updates_keep_their_buffers<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let x = alloc.alloc(BYTES, &s)?;
    fill(&s, x.slice(), 1.0)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(vec![InputKind::Parameter]),
        |ctx, inputs| {
            let out = ctx.alloc(inputs[0].len)?;
            ctx.begin_task_group()?;
            scale(&ctx.current_stream(), inputs[0], out.slice())?;
            ctx.end_task_group()?;
            Ok(vec![out])
        },
    )?;
    runner.run(&s, &[x.slice()])?; // warm-up
    let out = runner.run(&s, &[x.slice()])?.slices()?[0]; // capture and replay
    let victim = alloc.alloc(BYTES, &s)?;
    fill(&s, victim.slice(), 2.0)?;
    s.synchronize()?;
    runner.run_updating(&s, &[x.slice()], |_, u| scale(u, victim.slice(), out))?;
    all_equal(&download(&s, out)?, 2.0 * FACTOR, "out from the victim")?;
    let victim_addr = victim.ptr().0;
    drop(victim);
    dropped_victim_is_refused(
        &alloc,
        &s,
        victim_addr,
        || runner.run(&s, &[x.slice()]).map(|_| ()),
        "runner",
    )?;
    runner.run_updating(&s, &[x.slice()], |_, u| scale(u, x.slice(), out))?;
    all_equal(&download(&s, out)?, FACTOR, "out from x again")?;
    drop((runner, x));
    allocator_works(&alloc)
}
