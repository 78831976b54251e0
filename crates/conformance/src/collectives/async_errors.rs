//! Asynchronous communicator errors ([`braid_collective::Communicator::async_error`],
//! `HcclGetCommAsyncError`): none on a healthy communicator; after a host wait on a
//! collective that cannot complete (a rank never issued its part), the communicator reports
//! it, keeps reporting it, and still runs collectives.

use super::{Ranks, SHAPES};
use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, CollectiveError, ReduceOp};

/// A collective only rank 0 issued: the host wait on it fails, the communicator then has an
/// asynchronous error naming the rank, and the late part completes the call all the same.
pub fn async_error_after_an_incomplete_collective<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let (_, dtype) = SHAPES[0];
    let rs = Ranks::new(h, 2, dtype, "asynchronous error")?;
    let bufs = (0..2)
        .map(|r| rs.upload(r, &[r as f32 + 1.0; 4]))
        .collect::<Result<Vec<_>, _>>()?;
    // This thread drives both ranks, so the failing wait below fails at once.
    for (r, b) in bufs.iter().enumerate() {
        rs.comms[r].all_reduce(&rs.streams[r], b, b, dtype, ReduceOp::Sum)?;
    }
    for (r, b) in bufs.iter().enumerate() {
        rs.expect(r, b, &[3.0; 4])?;
        if let Some(e) = rs.comms[r].async_error()? {
            return Err(CaseError::new(format!(
                "rank {r}: a healthy communicator reports {e}"
            )));
        }
    }
    rs.comms[0].all_reduce(&rs.streams[0], &bufs[0], &bufs[0], dtype, ReduceOp::Sum)?;
    if rs.streams[0].synchronize().is_ok() {
        return Err(CaseError::new(
            "a synchronize on an all-reduce rank 1 never issued succeeded",
        ));
    }
    for _ in 0..2 {
        match rs.comms[0].async_error()? {
            Some(CollectiveError::Async { rank: 0, source }) if !source.to_string().is_empty() => {}
            other => {
                return Err(CaseError::new(format!(
                    "after a failed wait on a collective: expected rank 0's asynchronous error, got {other:?}"
                )))
            }
        }
    }
    // The late part completes the call; the communicator still works.
    rs.comms[1].all_reduce(&rs.streams[1], &bufs[1], &bufs[1], dtype, ReduceOp::Sum)?;
    for (r, b) in bufs.iter().enumerate() {
        rs.expect(r, b, &[6.0; 4])?;
    }
    Ok(())
}
