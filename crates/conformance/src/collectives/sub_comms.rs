//! Sub-communicators ([`braid_collective::Communicator::split`], HCCL's
//! `HcclCreateSubCommConfig`): some ranks of a communicator run collectives of their own,
//! which involve only them; the parent keeps working; bad lists are refused with typed
//! errors before anything happens.

use super::{value, Ranks, N, SHAPES};
use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, CollectiveError, ReduceOp};

/// A rank, the list it splits off, and whether the error it gets is the right one.
type Refusal = (usize, &'static [u32], fn(&CollectiveError) -> bool);

/// Ranks {1, 3} of four split off: their all-reduce sums only their data, a mismatch between
/// them is refused, the other ranks' buffers are untouched, and the parent's all-reduce
/// still sums all four. Empty lists, ranks out of range or twice, non-members and a member
/// passing another list are refused with their errors.
pub fn sub_communicator_reduces_its_members_only<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let (_, dtype) = SHAPES[2];
    let rs = Ranks::new(h, 4, dtype, "sub-communicator")?;
    let members = [1u32, 3];
    let refusals: [Refusal; 4] = [
        (1, &[], |e| {
            matches!(e, CollectiveError::EmptySubComm { id: 7 })
        }),
        (1, &[1, 4], |e| {
            matches!(e, CollectiveError::RankOutOfRange { rank: 4, ranks: 4 })
        }),
        (1, &[1, 3, 1], |e| {
            matches!(e, CollectiveError::DuplicateRank { id: 7, rank: 1 })
        }),
        (0, &[1, 3], |e| {
            matches!(e, CollectiveError::NotAMember { id: 7, rank: 0, .. })
        }),
    ];
    for (r, list, expected) in refusals {
        match rs.comms[r].split(list, 7) {
            Err(e) if expected(&e) => {}
            other => {
                return Err(CaseError::new(format!(
                    "rank {r} splitting off {list:?}: got {other:?}"
                )))
            }
        }
    }
    let sub1 = rs.comms[1].split(&members, 7)?;
    match rs.comms[3].split(&[3, 1], 7) {
        Err(CollectiveError::SubCommMismatch { id: 7, rank: 3, .. }) => {}
        other => {
            return Err(CaseError::new(format!(
                "rank 3 splitting off [3, 1] after rank 1 made [1, 3]: got {other:?}"
            )))
        }
    }
    let sub3 = rs.comms[3].split(&members, 7)?;
    let subs = [(1usize, &sub1), (3, &sub3)];
    for (sub_rank, (r, sub)) in subs.iter().enumerate() {
        if (sub.rank(), sub.ranks()) != (sub_rank as u32, 2) || !sub.device().same_as(rs.device(*r))
        {
            return Err(CaseError::new(format!(
                "rank {r}'s sub-communicator is rank {} of {} on {}, expected rank {sub_rank} of 2 on its device",
                sub.rank(),
                sub.ranks(),
                sub.device().id()
            )));
        }
    }
    let bufs = (0..4)
        .map(|r| rs.upload(r, &super::values(r, 0, N)))
        .collect::<Result<Vec<_>, _>>()?;
    if sub1.checks_mismatch() {
        sub1.all_reduce(&rs.streams[1], &bufs[1], &bufs[1], dtype, ReduceOp::Sum)?;
        match sub3.all_reduce(&rs.streams[3], &bufs[3], &bufs[3], dtype, ReduceOp::Max) {
            Err(CollectiveError::Mismatch { rank: 1, .. }) => {}
            other => {
                return Err(CaseError::new(format!(
                    "a max against the other member's sum on the sub-communicator: got {other:?}"
                )))
            }
        }
        sub3.all_reduce(&rs.streams[3], &bufs[3], &bufs[3], dtype, ReduceOp::Sum)?;
    } else {
        for (r, sub) in subs {
            sub.all_reduce(&rs.streams[r], &bufs[r], &bufs[r], dtype, ReduceOp::Sum)?;
        }
    }
    let pair: Vec<f32> = (0..N).map(|i| value(1, i) + value(3, i)).collect();
    for (r, b) in bufs.iter().enumerate() {
        let want = if r % 2 == 1 {
            pair.clone()
        } else {
            super::values(r, 0, N)
        };
        rs.expect(r, b, &want)?;
    }
    for (r, b) in bufs.iter().enumerate() {
        rs.comms[r].all_reduce(&rs.streams[r], b, b, dtype, ReduceOp::Sum)?;
    }
    let all: Vec<f32> = (0..N)
        .map(|i| value(0, i) + value(2, i) + 2.0 * (value(1, i) + value(3, i)))
        .collect();
    for (r, b) in bufs.iter().enumerate() {
        rs.expect(r, b, &all)?;
    }
    Ok(())
}
