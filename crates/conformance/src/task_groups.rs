//! Task groups: captured operators re-issued with new parameters without recapturing
//! ([`Graph::update`]), and every misuse a typed error after which the graph still works.

use crate::support::{download, fill, long_work, still_works, upload};
use crate::{CaseError, Harness, ScaleOpArgs};
use braid_stream_core::hal::Backend;
use braid_stream_core::{
    CaptureMode, CustomOp, DType, Device, DeviceMemory, DeviceSlice, Graph, Kernel, OpCost, Stream,
    StreamError, TaskGroup,
};

/// Floats per buffer.
const N: u64 = 64;
/// Workspace of the scale operator (a dedicated buffer: the update stream's workspace cache
/// would be reused by its later work while the graph still reads it).
const WORKSPACE: u64 = 4096;

/// `y = factor · x` as a user operator, its scalar a parameter an update changes.
fn scale_op<B: Backend>(
    h: &Harness<B>,
    x: DeviceSlice,
    y: DeviceSlice,
    workspace: DeviceSlice,
    factor: f32,
) -> Result<CustomOp<B>, CaseError> {
    let body = h.scale_body(ScaleOpArgs {
        x,
        y,
        elements: N,
        dtype: DType::F32,
        factor,
        workspace,
    })?;
    Ok(CustomOp::<B>::new("scale")
        .dtype(DType::F32)
        .read_shaped(x, &[N])
        .write_shaped(y, &[N])
        .cost(OpCost::Fixed { ns: 1_000 })
        .body(body))
}

/// A graph on `s` whose task group fills `z` with `value` (a built-in kernel's scalar) and
/// scales `x` into `y` by `factor` (a user operator's scalar).
#[allow(clippy::too_many_arguments)]
fn capture_group<B: Backend>(
    h: &Harness<B>,
    s: &Stream<B>,
    z: DeviceSlice,
    x: DeviceSlice,
    y: DeviceSlice,
    workspace: DeviceSlice,
    value: f32,
    factor: f32,
) -> Result<(Graph<B>, TaskGroup), CaseError> {
    let op = scale_op(h, x, y, workspace, factor)?;
    s.begin_capture(CaptureMode::Global)?;
    let body = (|| -> Result<TaskGroup, CaseError> {
        s.begin_task_group()?;
        s.launch(&Kernel::Fill { dst: z, value })?;
        s.launch_op(&op)?;
        Ok(s.end_task_group()?)
    })();
    let graph = s.end_capture()?;
    Ok((graph, body?))
}

/// Three buffers of `N` floats.
fn three<B: Backend>(device: &Device<B>) -> Result<[DeviceMemory<B>; 3], CaseError> {
    Ok([
        device.alloc(N * 4)?,
        device.alloc(N * 4)?,
        device.alloc(N * 4)?,
    ])
}

/// An update re-issues the group with a new fill value, a new factor and new buffers of the
/// same shape; the next launch (on another stream, ordered after the update by braid) computes
/// with them, without a recapture.
pub fn task_group_update_changes_results<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem: Vec<_> = (0..6)
        .map(|_| device.alloc(N * 4))
        .collect::<Result<_, _>>()?;
    let [z, x, y, x2, y2, _] = [0, 1, 2, 3, 4, 5].map(|i| mem[i].slice());
    let ws = device.alloc(WORKSPACE)?;
    let xs: Vec<f32> = (0..N).map(|i| i as f32).collect();
    upload(&s, x, &xs)?;
    upload(&s, x2, &xs.iter().map(|v| v + 1.0).collect::<Vec<_>>())?;
    let (graph, group) = capture_group(h, &s, z, x, y, ws.slice(), 1.0, 2.0)?;
    ensure_eq!(group.len(), 2, "operators in the group");
    let nodes = graph.node_count();
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![1.0; N as usize],
        "z after the first launch"
    );
    ensure_eq!(
        download(&s, y)?,
        xs.iter().map(|v| v * 2.0).collect::<Vec<_>>(),
        "y = 2x after the first launch"
    );
    s.synchronize()?;
    let op = scale_op(h, x2, y2, ws.slice(), 3.0)?;
    let event = graph.update(&group, &u, |u| {
        u.launch(&Kernel::Fill { dst: z, value: 5.0 })?;
        u.launch_op(&op)?;
        Ok(())
    })?;
    ensure_eq!(graph.update_count(), 1, "updates counted");
    ensure_eq!(graph.node_count(), nodes, "nodes after the update");
    fill(&s, y, 0.0)?;
    graph.launch(&s)?;
    let at = event
        .recorded_at()
        .ok_or_else(|| CaseError::new("update event unrecorded"))?;
    ensure!(
        device.is_ordered_before(at, &s),
        "the launch is not ordered after the update"
    );
    ensure_eq!(
        download(&s, z)?,
        vec![5.0; N as usize],
        "z after the update"
    );
    ensure_eq!(
        download(&s, y2)?,
        xs.iter().map(|v| (v + 1.0) * 3.0).collect::<Vec<_>>(),
        "y2 = 3·x2 after the update"
    );
    ensure_eq!(
        download(&s, y)?,
        vec![0.0; N as usize],
        "y, no longer written"
    );
    still_works(&device)
}

/// Re-issues operators on an update stream.
type Issue<'a, B> = dyn Fn(&Stream<B>) -> braid_stream_core::Result<()> + 'a;

/// An update whose operators differ in kind, data type, shape or count is refused naming the
/// difference, and the graph keeps computing what it did.
pub fn task_update_mismatch_is_typed_and_changes_nothing<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let (z, x, y, big) = (
        device.alloc(N * 4)?,
        device.alloc(N * 4)?,
        device.alloc(N * 4)?,
        device.alloc(2 * N * 4)?,
    );
    let ws = device.alloc(WORKSPACE)?;
    upload(&s, x.slice(), &vec![1.0; N as usize])?;
    let (graph, group) =
        capture_group(h, &s, z.slice(), x.slice(), y.slice(), ws.slice(), 1.0, 2.0)?;
    let op = scale_op(h, x.slice(), y.slice(), ws.slice(), 7.0)?;
    let fill9 = Kernel::Fill {
        dst: z.slice(),
        value: 9.0,
    };
    let cases: Vec<(&str, Box<Issue<'_, B>>)> = vec![
        (
            "kind",
            Box::new(|u| {
                u.launch(
                    Kernel::Scale {
                        src: z.slice(),
                        dst: z.slice(),
                        factor: 2.0,
                    }
                    .typed(DType::F32),
                )
                .map(|_| ())
            }),
        ),
        (
            "data type",
            Box::new(|u| u.launch(fill9.clone().typed(DType::F16)).map(|_| ())),
        ),
        (
            "shape",
            Box::new(|u| {
                u.launch(&Kernel::Fill {
                    dst: big.slice(),
                    value: 9.0,
                })
                .map(|_| ())
            }),
        ),
        (
            "count (too few)",
            Box::new(|u| u.launch(&fill9).map(|_| ())),
        ),
    ];
    for (what, issue) in &cases {
        expect_err!(
            graph.update(&group, &u, |u| issue(u)),
            StreamError::TaskUpdateMismatch { .. },
            "an update differing in {what}"
        );
        graph.launch(&s)?;
        ensure_eq!(
            download(&s, z.slice())?,
            vec![1.0; N as usize],
            "z after the refused {what}"
        );
        ensure_eq!(
            download(&s, y.slice())?,
            vec![2.0; N as usize],
            "y after the refused {what}"
        );
        s.synchronize()?;
    }
    ensure_eq!(graph.update_count(), 0, "updates counted after refusals");
    // One too many: refused, the whole group re-issued before it stands (as ACL applies it).
    expect_err!(
        graph.update(&group, &u, |u| {
            u.launch(&fill9)?;
            u.launch_op(&op)?;
            u.launch(&fill9).map(|_| ())
        }),
        StreamError::TaskUpdateMismatch { index: 2, .. },
        "an update with one operator too many"
    );
    ensure_eq!(
        graph.update_count(),
        1,
        "the complete update before the extra operator"
    );
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, z.slice())?,
        vec![9.0; N as usize],
        "z after the complete update"
    );
    ensure_eq!(
        download(&s, y.slice())?,
        vec![7.0; N as usize],
        "y after the complete update"
    );
    still_works(&device)
}

/// A task group of another graph is refused; both graphs still launch.
pub fn task_group_of_another_graph_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = three(&device)?;
    let [z, x, y] = [0, 1, 2].map(|i| mem[i].slice());
    let ws = device.alloc(WORKSPACE)?;
    let (a, group_a) = capture_group(h, &s, z, x, y, ws.slice(), 1.0, 2.0)?;
    let (b, _group_b) = capture_group(h, &s, z, x, y, ws.slice(), 3.0, 2.0)?;
    expect_err!(
        b.update(&group_a, &u, |_| Ok(())),
        StreamError::TaskGroupOfOtherGraph { .. },
        "graph b updated with graph a's group"
    );
    b.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![3.0; N as usize],
        "graph b after the refusal"
    );
    a.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![1.0; N as usize],
        "graph a after the refusal"
    );
    still_works(&device)
}

/// An update while a launch of the graph may still run is refused (never half-applied); after
/// the host observes the launch, the same update goes through.
pub fn task_update_racing_a_launch_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = three(&device)?;
    let [z, x, y] = [0, 1, 2].map(|i| mem[i].slice());
    let ws = device.alloc(WORKSPACE)?;
    let (graph, group) = capture_group(h, &s, z, x, y, ws.slice(), 1.0, 2.0)?;
    let op = scale_op(h, x, y, ws.slice(), 2.0)?;
    long_work(&s)?;
    graph.launch(&s)?;
    let update = |u: &Stream<B>| -> braid_stream_core::Result<()> {
        u.launch(&Kernel::Fill { dst: z, value: 4.0 })?;
        u.launch_op(&op).map(|_| ())
    };
    expect_err!(
        graph.update(&group, &u, update),
        StreamError::UpdateWhileLaunchInFlight { stream } if stream == s.id(),
        "an update while a launch runs"
    );
    ensure_eq!(
        download(&s, z)?,
        vec![1.0; N as usize],
        "z of the launch in flight"
    );
    s.synchronize()?;
    graph.update(&group, &u, update)?;
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![4.0; N as usize],
        "z after the update"
    );
    still_works(&device)
}

/// Task groups outside a capture, unopened or nested, non-operator work in a group and an
/// update on a capturing stream are typed errors; the capture and the device still work.
pub fn task_group_misuse_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = three(&device)?;
    let [z, x, y] = [0, 1, 2].map(|i| mem[i].slice());
    let ws = device.alloc(WORKSPACE)?;
    expect_err!(
        s.begin_task_group(),
        StreamError::TaskGroupOutsideCapture { .. },
        "group outside a capture"
    );
    expect_err!(
        s.end_task_group(),
        StreamError::NoOpenTaskGroup { .. },
        "end without a group"
    );
    s.begin_capture(CaptureMode::Global)?;
    let inside = (|| -> Result<(), CaseError> {
        expect_err!(
            s.end_task_group(),
            StreamError::NoOpenTaskGroup { .. },
            "end without a group in a capture"
        );
        s.begin_task_group()?;
        expect_err!(
            s.begin_task_group(),
            StreamError::TaskGroupAlreadyOpen { .. },
            "a nested group"
        );
        expect_err!(
            s.copy_h2d(z, braid_stream_core::f32_bytes(&[0.0; N as usize])),
            StreamError::NotAnOperatorInTaskGroup { .. },
            "a copy in a group"
        );
        s.launch(&Kernel::Fill { dst: z, value: 6.0 })?;
        s.end_task_group()?;
        Ok(())
    })();
    let graph = s.end_capture()?;
    inside?;
    let (_, group) = capture_group(h, &s, z, x, y, ws.slice(), 1.0, 2.0)?;
    expect_err!(
        graph.update(&group, &u, |_| Ok(())),
        StreamError::TaskGroupOfOtherGraph { .. },
        "another capture's group"
    );
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![6.0; N as usize],
        "the graph after the misuse"
    );
    still_works(&device)
}

/// A capture ended while a task group is still open — on the origin stream, or on a side
/// stream that joined the capture — is refused with a typed error naming the stream, as an
/// unjoined stream is: the capture is discarded, every stream is eager again with no group
/// open, and a later capture with its group closed captures, updates and replays.
pub fn end_capture_with_an_open_task_group_refused<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, side, u) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let mem = three(&device)?;
    let [z, x, _] = [0, 1, 2].map(|i| mem[i].slice());
    for on_side in [false, true] {
        let open = if on_side { &side } else { &s };
        s.begin_capture(CaptureMode::Global)?;
        let inside = (|| -> Result<(), CaseError> {
            if on_side {
                side.wait(&s.record_event()?)?;
            }
            open.begin_task_group()?;
            fill(open, x, 3.0)?;
            Ok(())
        })();
        expect_err!(
            s.end_capture(),
            StreamError::TaskGroupOpenAtCaptureEnd { stream, origin }
                if stream == open.id() && origin == s.id(),
            "a capture ended with a group open (on the side stream: {on_side})"
        );
        inside?;
        ensure!(
            !s.is_capturing() && !side.is_capturing(),
            "streams still capturing after the refusal"
        );
        expect_err!(
            open.end_task_group(),
            StreamError::NoOpenTaskGroup { .. },
            "the discarded capture's group"
        );
        fill(open, z, 2.0)?;
        ensure_eq!(
            download(open, z)?,
            vec![2.0; N as usize],
            "eager work after the refusal"
        );
    }
    s.begin_capture(CaptureMode::Global)?;
    let marked = (|| {
        s.begin_task_group()?;
        s.launch(&Kernel::Fill { dst: z, value: 4.0 })?;
        s.end_task_group()
    })();
    let graph = s.end_capture()?;
    let group = marked?;
    graph.update(&group, &u, |u| {
        u.launch(&Kernel::Fill { dst: z, value: 6.0 }).map(|_| ())
    })?;
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![6.0; N as usize],
        "an updated graph captured after the refusals"
    );
    still_works(&device)
}

/// A closure that panics inside `Graph::update` poisons nothing: the panic reaches the
/// caller, and afterwards the update stream takes copies, memsets and operators, the graph
/// takes updates and launches, and a panic after the whole group was re-issued leaves the
/// graph as an error there does (the complete update stands, as ACL applies it, and the next
/// launch waits for it).
pub fn panic_in_an_update_poisons_nothing<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let device = h.device()?;
    let (s, u) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = three(&device)?;
    let [z, x, y] = [0, 1, 2].map(|i| mem[i].slice());
    s.begin_capture(CaptureMode::Global)?;
    let marked = (|| {
        s.begin_task_group()?;
        s.launch(&Kernel::Fill { dst: z, value: 1.0 })?;
        s.launch(&Kernel::Fill { dst: x, value: 1.0 })?;
        s.end_task_group()
    })();
    let graph = s.end_capture()?;
    let group = marked?;
    // One panic halfway through the group (nothing changes), one after all of it.
    for (issued, expected) in [(1, 1.0), (2, 8.0)] {
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            graph.update(&group, &u, |u| {
                for dst in [z, x].into_iter().take(issued) {
                    u.launch(&Kernel::Fill { dst, value: 8.0 })?;
                }
                // Unwinds as a panic does, without the panic hook's message and backtrace
                // in the output of every run of the suite.
                std::panic::resume_unwind(Box::new("a bug in the update's closure"));
            })
        }));
        ensure!(
            panicked.is_err(),
            "the closure's panic did not reach the caller"
        );
        u.memset(y, 0)?;
        u.copy_d2d(x, y)?;
        u.launch(&Kernel::Fill { dst: y, value: 3.0 })?;
        ensure_eq!(
            download(&u, y)?,
            vec![3.0; N as usize],
            "the update stream after a panic ({issued} issued)"
        );
        graph.launch(&s)?;
        ensure_eq!(
            download(&s, z)?,
            vec![expected; N as usize],
            "z replayed after a panic with {issued} of 2 operators issued"
        );
    }
    graph.update(&group, &u, |u| {
        u.launch(&Kernel::Fill { dst: z, value: 5.0 })?;
        u.launch(&Kernel::Fill { dst: x, value: 5.0 }).map(|_| ())
    })?;
    graph.launch(&s)?;
    ensure_eq!(
        download(&s, z)?,
        vec![5.0; N as usize],
        "z after an update following the panics"
    );
    still_works(&device)
}
