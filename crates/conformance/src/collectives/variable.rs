//! The variable-count collectives (all-gather-v, reduce-scatter-v, all-to-all-v) with uneven
//! counts, some of them zero, and blocks laid out with gaps and out of rank order: every
//! block lands where its displacement says, the gaps keep what they held, and a refused call
//! (bad blocks, a buffer too small, a rank whose blocks disagree) leaves the communicator
//! working.

use super::{reduced, values, Ranks, SHAPES};
use crate::{CaseError, Harness};
use braid_collective::{Blocks, BlocksError, CollectiveBackend, CollectiveError, ReduceOp};
use braid_stream_core::{DType, DeviceMemory, DeviceSlice};

/// What the gaps between receive blocks hold before (and after) a call.
const GAP: f32 = 7.0;

/// Rank `r`'s uneven count (rank 1's is zero).
fn count(r: usize) -> u64 {
    [3, 0, 5, 2][r % 4]
}

/// One block per rank of `counts`, with a one-element gap after each, placed in reverse
/// rank order when `reversed`; returns the blocks and the elements the buffer spans.
fn spaced(counts: &[u64], reversed: bool) -> (Blocks, usize) {
    let mut displs = vec![0; counts.len()];
    let mut at = 0;
    let order: Vec<usize> = if reversed {
        (0..counts.len()).rev().collect()
    } else {
        (0..counts.len()).collect()
    };
    for r in order {
        displs[r] = at;
        at += counts[r] + 1;
    }
    let blocks = Blocks {
        counts: counts.to_vec(),
        displs,
    };
    (blocks, at as usize)
}

impl<B: CollectiveBackend> Ranks<B> {
    /// Rank `r`'s memory holding `values`, as a slice of exactly their length (an empty slice
    /// of a one-element buffer when there are none).
    #[track_caller]
    fn upload_exact(
        &self,
        r: usize,
        values: &[f32],
    ) -> Result<(DeviceMemory<B>, DeviceSlice), CaseError> {
        let mem = self.upload(r, if values.is_empty() { &[0.0] } else { values })?;
        let len = values.len() as u64 * self.dtype.size();
        let slice = mem.range(0, len)?;
        Ok((mem, slice))
    }

    /// Checks rank `r`'s `recv` (of `spans` elements): `blocks[j]` holds `block(j)`, the
    /// rest [`GAP`].
    #[track_caller]
    fn expect_blocks(
        &self,
        r: usize,
        recv: &DeviceMemory<B>,
        blocks: &Blocks,
        spans: usize,
        block: impl Fn(usize) -> Vec<f32>,
    ) -> Result<(), CaseError> {
        let mut want = vec![GAP; spans];
        for j in 0..self.n() {
            let at = blocks.displs[j] as usize;
            let data = block(j);
            want[at..at + data.len()].copy_from_slice(&data);
        }
        self.expect(r, recv, &want)
    }
}

/// `all_gather_v`: rank `r` sends its uneven count (zero for rank 1); every rank's output
/// holds each rank's block at its displacement (blocks in reverse rank order, gaps kept).
pub fn all_gather_v_uneven<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "all-gather-v")?;
        let n = rs.n();
        let counts: Vec<u64> = (0..n).map(count).collect();
        let (blocks, spans) = spaced(&counts, true);
        let mut out = Vec::new();
        for (r, &count) in counts.iter().enumerate() {
            let (send, slice) = rs.upload_exact(r, &values(r, 0, count as usize))?;
            let recv = rs.upload(r, &vec![GAP; spans])?;
            rs.comms[r].all_gather_v(&rs.streams[r], slice, &recv, &blocks, dtype)?;
            out.push((send, recv));
        }
        for (r, (_, recv)) in out.iter().enumerate() {
            rs.expect_blocks(r, recv, &blocks, spans, |j| {
                values(j, 0, counts[j] as usize)
            })?;
        }
    }
    Ok(())
}

/// `reduce_scatter_v` with a sum, a maximum and an average: rank `r` gets the reduction of
/// block `r` (uneven, zero for rank 1, laid out with gaps) of every rank's input.
pub fn reduce_scatter_v_uneven<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg] {
        for (ranks, dtype) in SHAPES {
            let rs = Ranks::new(h, ranks, dtype, &format!("reduce-scatter-v {op:?}"))?;
            let n = rs.n();
            let counts: Vec<u64> = (0..n).map(count).collect();
            let (blocks, spans) = spaced(&counts, false);
            let mut out = Vec::new();
            for (r, &count) in counts.iter().enumerate() {
                let send = rs.upload(r, &values(r, 0, spans))?;
                let (recv, slice) = rs.upload_exact(r, &vec![0.0; count as usize])?;
                rs.comms[r].reduce_scatter_v(&rs.streams[r], &send, &blocks, slice, dtype, op)?;
                out.push((send, recv, slice));
            }
            for (r, (_, _, slice)) in out.iter().enumerate() {
                let from = blocks.displs[r] as usize;
                let want: Vec<f32> = (from..from + counts[r] as usize)
                    .map(|i| reduced(op, n, i))
                    .collect();
                let got = rs.streams[r].copy_d2h(*slice)?.wait_as(dtype)?;
                if got != want {
                    return Err(CaseError::new(format!(
                        "{}: rank {r} read {got:?}, expected {want:?}",
                        rs.what
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Elements rank `i` sends rank `j` in [`all_to_all_v_uneven`] (some zero, rank to itself
/// included).
fn pair_count(i: usize, j: usize) -> u64 {
    ((i + 2 * j) % 3) as u64
}

/// `all_to_all_v`: rank `i` sends `pair_count(i, j)` elements to rank `j` from its packed
/// send blocks; rank `j` places them at its own displacements (reverse order, with gaps).
pub fn all_to_all_v_uneven<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "all-to-all-v")?;
        let n = rs.n();
        let sends: Vec<Blocks> = (0..n)
            .map(|i| Blocks::packed(&(0..n).map(|j| pair_count(i, j)).collect::<Vec<_>>()))
            .collect();
        let recvs: Vec<(Blocks, usize)> = (0..n)
            .map(|j| spaced(&(0..n).map(|i| pair_count(i, j)).collect::<Vec<_>>(), true))
            .collect();
        let mut out = Vec::new();
        for r in 0..n {
            let total = sends[r].total() as usize;
            let send = rs.upload(r, &values(r, 0, total.max(1)))?;
            let recv = rs.upload(r, &vec![GAP; recvs[r].1])?;
            let (stream, comm) = (&rs.streams[r], &rs.comms[r]);
            comm.all_to_all_v(stream, &send, &sends[r], &recv, &recvs[r].0, dtype)?;
            out.push((send, recv));
        }
        for (j, (_, recv)) in out.iter().enumerate() {
            let (blocks, spans) = &recvs[j];
            rs.expect_blocks(j, recv, blocks, *spans, |i| {
                values(i, sends[i].displs[j] as usize, pair_count(i, j) as usize)
            })?;
        }
    }
    Ok(())
}

/// Bad blocks are refused before anything is enqueued, naming what is wrong; a rank whose
/// blocks differ from the others' is a mismatch naming it; the right calls then run.
pub fn variable_counts_refused_then_usable<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let dtype = DType::F32;
    let rs = Ranks::new(h, 2, dtype, "variable-count refusals")?;
    let (blocks, spans) = spaced(&[2, 1], false);
    let sends: Vec<_> = (0..2)
        .map(|r| rs.upload(r, &values(r, 0, blocks.counts[r] as usize)))
        .collect::<Result<_, _>>()?;
    let recvs: Vec<_> = (0..2)
        .map(|r| rs.upload(r, &vec![GAP; spans]))
        .collect::<Result<_, _>>()?;
    let (comm, stream) = (&rs.comms[1], &rs.streams[1]);
    let refused =
        |what: &str, err: Result<_, CollectiveError>, ok: fn(&CollectiveError) -> bool| match err {
            Err(e) if ok(&e) => Ok(()),
            other => Err(CaseError::new(format!(
                "{}: {what}: expected a typed refusal, got {other:?}",
                rs.what
            ))),
        };
    let three = Blocks::packed(&[1, 1, 0]);
    refused(
        "counts for 3 ranks",
        comm.all_gather_v(stream, &sends[1], &recvs[1], &three, dtype),
        |e| {
            matches!(
                e,
                CollectiveError::BadBlocks {
                    source: BlocksError::Length { ranks: 2, .. },
                    ..
                }
            )
        },
    )?;
    let far = Blocks {
        counts: vec![2, 1],
        displs: vec![0, spans as u64],
    };
    refused(
        "a block past the buffer",
        comm.all_gather_v(stream, &sends[1], &recvs[1], &far, dtype),
        |e| matches!(e, CollectiveError::BlockOutOfBuffer { block: 1, .. }),
    )?;
    refused(
        "a send of another count than its block",
        comm.all_gather_v(stream, &sends[0], &recvs[1], &blocks, dtype),
        |e| matches!(e, CollectiveError::BufferSize { buffer: "send", .. }),
    )?;
    // Rank 0 issues the call; rank 1 with other blocks (its own count the same) is refused.
    rs.comms[0].all_gather_v(&rs.streams[0], &sends[0], &recvs[0], &blocks, dtype)?;
    let other = Blocks {
        counts: vec![2, 1],
        displs: vec![1, 0],
    };
    refused(
        "blocks other than rank 0's",
        comm.all_gather_v(stream, &sends[1], &recvs[1], &other, dtype),
        |e| {
            matches!(
                e,
                CollectiveError::Mismatch {
                    rank: 1,
                    call: 0,
                    ..
                }
            )
        },
    )?;
    comm.all_gather_v(stream, &sends[1], &recvs[1], &blocks, dtype)?;
    for (r, recv) in recvs.iter().enumerate() {
        rs.expect_blocks(r, recv, &blocks, spans, |j| {
            values(j, 0, blocks.counts[j] as usize)
        })?;
    }
    Ok(())
}
