//! Task groups inside a `CaptureSession`: the group is marked on the session's stream, the
//! captured graph is updated without recapturing, and its replays compute with the new
//! parameters; a group of another session's graph is refused and both graphs still work.

mod common;

use braid_graph_capture::{CaptureSession, GraphError};
use braid_stream_core::{Error, Kernel};
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
            Err(GraphError::Stream(Error::TaskGroupOfOtherGraph { .. }))
        ),
        "{refused:?}"
    );
    other.launch(&s).unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(read(&s, other_out.slice()), vec![7.0; 16]);
    assert_eq!(read(&s, out.slice()), vec![3.0; 16]);
}
