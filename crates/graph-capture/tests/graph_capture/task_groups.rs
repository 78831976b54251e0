//! Task groups inside a `CaptureSession`: the group is marked on the session's stream, the
//! captured graph is updated without recapturing, and its replays compute with the new
//! parameters; a group of another session's graph is refused and both graphs still work.

use crate::common;

use braid_graph_capture::{CaptureSession, GraphError};
use braid_stream_core::{Kernel, StreamError};
use common::*;

#[test]
fn session_task_group_updates_without_recapture() {
    let (dev, alloc) = setup(64 * MIB);
    let (s, u) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let run = |value: f32| {
        CaptureSession::new(&alloc, &s)
            .run(|ctx| {
                let out = ctx.alloc(64)?;
                ctx.stream().begin_task_group()?;
                ctx.stream().launch(&Kernel::Fill {
                    dst: out.slice(),
                    value,
                })?;
                let group = ctx.stream().end_task_group()?;
                Ok((out, group))
            })
            .unwrap()
    };
    let (graph, (out, group)) = run(1.0);
    let (other, (other_out, other_group)) = run(7.0);
    graph.launch(&s).unwrap();
    assert_eq!(read(&s, out.slice()), vec![1.0; 16]);
    s.synchronize().unwrap();
    graph
        .update(&group, &u, |u| {
            u.launch(&Kernel::Fill {
                dst: out.slice(),
                value: 3.0,
            })
            .map(|_| ())
        })
        .unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(read(&s, out.slice()), vec![3.0; 16]);
    assert_eq!(graph.graph().update_count(), 1);
    let refused = graph.update(&other_group, &u, |_| Ok(()));
    assert!(
        matches!(
            refused,
            Err(GraphError::Stream(
                StreamError::TaskGroupOfOtherGraph { .. }
            ))
        ),
        "{refused:?}"
    );
    other.launch(&s).unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(read(&s, other_out.slice()), vec![7.0; 16]);
    assert_eq!(read(&s, out.slice()), vec![3.0; 16]);
}

/// `GraphRunner::run_updating`: per-call parameters update the replayed graph's task group
/// instead of recapturing; the counters show the updates, the replays and no recapture.
#[test]
fn runner_updates_task_groups_instead_of_recapturing() {
    use braid_graph_capture::{GraphRunner, InputKind, RunnerConfig};
    use braid_stream_core::DeviceSlice;
    use std::cell::Cell;
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let x = alloc.alloc(64, &s).unwrap();
    fill(&s, &x, 1.0);
    let factor = Cell::new(2.0f32);
    let captured_out: Cell<Option<DeviceSlice>> = Cell::new(None);
    let config = RunnerConfig::new(vec![InputKind::Parameter]);
    let mut runner = GraphRunner::new(&alloc, config, |ctx, inputs| {
        let out = ctx.alloc(inputs[0].len)?;
        ctx.begin_task_group()?;
        ctx.current_stream().launch(&Kernel::Scale {
            src: inputs[0],
            dst: out.slice(),
            factor: factor.get(),
        })?;
        ctx.end_task_group()?;
        captured_out.set(Some(out.slice()));
        Ok(vec![out])
    })
    .unwrap();
    for step in 0..6 {
        let f = 2.0 + step as f32;
        factor.set(f);
        let out = runner
            .run_updating(&s, &[x.slice()], |group, u| {
                assert_eq!(group, 0);
                u.launch(&Kernel::Scale {
                    src: x.slice(),
                    dst: captured_out.get().expect("captured"),
                    factor: f,
                })
                .map(|_| ())
            })
            .unwrap()
            .slices()
            .unwrap()[0];
        assert_eq!(read(&s, out), vec![f; 16], "step {step}");
    }
    let stats = runner.stats();
    assert_eq!(stats.captures, 1);
    assert_eq!(stats.recaptures(), 0);
    // Warm-up (1 call), capture (1 call), then 4 replays, each after an update.
    assert_eq!(stats.replays, 4);
    assert_eq!(stats.updates, 4);
}
