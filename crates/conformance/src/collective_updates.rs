//! Collectives in task groups: an all-reduce captured in a task group on every rank is
//! re-issued with new buffers by [`Graph::update`](braid_stream_core::Graph::update) (ACL's
//! `aclmdlRICaptureTaskUpdateBegin`/`End`), and the next replays reduce the new buffers
//! without a recapture; an update with another element count is refused on every rank and the
//! graphs keep reducing what they did.

use crate::collectives::{reduced, values, Ranks};
use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, CollectiveError, ReduceOp};
use braid_stream_core::hal::HalError;
use braid_stream_core::{CaptureMode, DType, Graph, StreamError, TaskGroup};

/// Elements each rank reduces.
const N: usize = 64;

/// A collective's error inside [`Graph::update`]'s closure (which returns the stream layer's
/// error): stream errors pass unchanged, the others as an invalid argument with their text.
fn in_update(e: CollectiveError) -> StreamError {
    match e {
        CollectiveError::Stream(e) => e,
        other => StreamError::Backend(HalError::InvalidArgument(other.to_string())),
    }
}

/// The re-issued all-reduce reduces its new send buffers at the next replay on every rank;
/// an update with half the count is refused naming the difference and changes nothing.
pub fn task_update_reissues_an_all_reduce<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let dtype = DType::F32;
    let op = ReduceOp::Sum;
    let rs = Ranks::new(h, 2, dtype, "an all-reduce in a task group")?;
    let n = rs.n();
    let mut first = Vec::new();
    let mut second = Vec::new();
    let mut half = Vec::new();
    let mut recv = Vec::new();
    for r in 0..n {
        first.push(rs.upload(r, &values(r, 0, N))?);
        second.push(rs.upload(r, &values(r, 1, N))?);
        half.push(rs.zeros(r, N / 2)?);
        recv.push(rs.zeros(r, N)?);
    }
    let mut graphs: Vec<(Graph<B>, TaskGroup)> = Vec::new();
    for r in 0..n {
        let s = &rs.streams[r];
        s.begin_capture(CaptureMode::ThreadLocal)?;
        let group = (|| -> Result<TaskGroup, CaseError> {
            s.begin_task_group()?;
            rs.comms[r].all_reduce(s, &first[r], &recv[r], dtype, op)?;
            Ok(s.end_task_group()?)
        })();
        let graph = s.end_capture()?;
        graphs.push((graph, group?));
    }
    let reduced_from =
        |from: usize| -> Vec<f32> { (from..from + N).map(|i| reduced(op, n, i)).collect() };
    let launch_all = |graphs: &[(Graph<B>, TaskGroup)]| -> Result<(), CaseError> {
        for (r, (graph, _)) in graphs.iter().enumerate() {
            rs.streams[r].copy_h2d(recv[r].slice(), dtype.encode(&[0.0; N]))?;
            graph.launch(&rs.streams[r])?;
        }
        Ok(())
    };
    launch_all(&graphs)?;
    for (r, recv) in recv.iter().enumerate() {
        rs.expect(r, recv, &reduced_from(0))?;
    }
    let updates = (0..n)
        .map(|r| rs.comms[r].device().create_stream(0))
        .collect::<braid_stream_core::Result<Vec<_>>>()?;
    for (r, (graph, group)) in graphs.iter().enumerate() {
        expect_err!(
            graph.update(group, &updates[r], |u| {
                rs.comms[r]
                    .all_reduce(u, &half[r], &half[r], dtype, op)
                    .map(drop)
                    .map_err(in_update)
            }),
            StreamError::TaskUpdateMismatch { .. },
            "rank {r}: an update re-issuing the all-reduce with half the count"
        );
    }
    launch_all(&graphs)?;
    for (r, recv) in recv.iter().enumerate() {
        rs.expect(r, recv, &reduced_from(0))?;
    }
    for (r, (graph, group)) in graphs.iter().enumerate() {
        graph.update(group, &updates[r], |u| {
            rs.comms[r]
                .all_reduce(u, &second[r], &recv[r], dtype, op)
                .map(drop)
                .map_err(in_update)
        })?;
        ensure_eq!(graph.update_count(), 1, "rank {r}: updates counted");
    }
    launch_all(&graphs)?;
    for (r, (recv, first)) in recv.iter().zip(&first).enumerate() {
        rs.expect(r, recv, &reduced_from(1))?;
        rs.expect(r, first, &values(r, 0, N))?;
    }
    // Eager collectives go on after the updates.
    for (r, (first, recv)) in first.iter().zip(&recv).enumerate() {
        rs.comms[r].all_reduce(&rs.streams[r], first, recv, dtype, op)?;
    }
    for (r, recv) in recv.iter().enumerate() {
        rs.expect(r, recv, &reduced_from(0))?;
    }
    Ok(())
}
