//! The variable-count collectives (all-gather-v, reduce-scatter-v, all-to-all-v): each
//! part's blocks checked as HCCL's rules ask, and what the call does to the numbers.
//!
//! A receive buffer is declared (and written back) over the span of its blocks; the bytes
//! between blocks keep what they held before the call, read at its start.

use super::effect::{block, reduce};
use crate::engine::invalid;
use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, VCounts};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::HalError;

/// Checks rank `rank`'s part `call` of a variable-count operation among `ranks`: blocks
/// given, one per rank, ends that fit, receive blocks that do not overlap, and this rank's
/// own count equal to its block (HCCL: `sendCount` of an all-gather-v is `recvCounts[rank]`,
/// `recvCount` of a reduce-scatter-v is `sendCounts[rank]`).
pub(crate) fn check(call: &CollectiveCall, rank: u32, ranks: u32) -> Result<(), HalError> {
    let op = call.op;
    let v = call
        .v
        .as_deref()
        .ok_or_else(|| invalid(format!("{op} of rank {rank}: no per-rank counts given")))?;
    let uses_send = matches!(
        op,
        CollectiveOp::ReduceScatterV(_) | CollectiveOp::AllToAllV
    );
    let uses_recv = matches!(op, CollectiveOp::AllGatherV | CollectiveOp::AllToAllV);
    for (side, blocks, used) in [
        ("send", &v.send, uses_send),
        ("receive", &v.recv, uses_recv),
    ] {
        if used {
            blocks
                .check(ranks, call.dtype, side == "receive")
                .map_err(|e| invalid(format!("{op} of rank {rank}, {side} blocks: {e}")))?;
        }
    }
    let own = match op {
        CollectiveOp::AllGatherV => v.recv.counts.get(rank as usize),
        CollectiveOp::ReduceScatterV(_) => v.send.counts.get(rank as usize),
        _ => return Ok(()),
    };
    if own != Some(&call.count) {
        return Err(invalid(format!(
            "{op} of rank {rank}: its count {} is not its block's count {}",
            call.count,
            own.copied().unwrap_or(0)
        )));
    }
    Ok(())
}

/// The message size of the alpha–beta model for one part: the ranks times the largest block
/// of an all-gather-v or reduce-scatter-v (a ring step moves one block, so the largest paces
/// it), the larger of the part's send and receive totals of an all-to-all-v. `None` on
/// overflow or without blocks.
pub(crate) fn model_bytes(call: &CollectiveCall, ranks: u32) -> Option<u64> {
    let v = call.v.as_deref()?;
    let elements = match call.op {
        CollectiveOp::AllGatherV => v.recv.largest().checked_mul(u64::from(ranks))?,
        CollectiveOp::ReduceScatterV(_) => v.send.largest().checked_mul(u64::from(ranks))?,
        _ => v.send.total().max(v.recv.total()),
    };
    elements.checked_mul(call.dtype.size())
}

/// The operation whose algorithms (and their alpha–beta times) a variable-count operation
/// runs with: all-gather, reduce-scatter, all-to-all.
pub(crate) fn even_counterpart(op: CollectiveOp) -> CollectiveOp {
    match op {
        CollectiveOp::AllGatherV => CollectiveOp::AllGather,
        CollectiveOp::ReduceScatterV(r) => CollectiveOp::ReduceScatter(r),
        CollectiveOp::AllToAllV => CollectiveOp::AllToAll,
        other => other,
    }
}

/// Element range `(first, count)` of a block, in bytes of `dtype`.
fn bytes_of(blocks: &Blocks, rank: usize, size: usize) -> (usize, usize) {
    let (count, displ) = blocks.block(rank).unwrap_or((0, 0));
    (displ as usize * size, count as usize * size)
}

/// Every participant's receive bytes (its whole receive span) for `op`, from every
/// participant's send bytes (`sends[r]`), blocks (`layouts[r]`) and receive bytes before the
/// call (`before[r]`, what the gaps between blocks keep).
pub(crate) fn receive(
    op: CollectiveOp,
    dtype: DType,
    layouts: &[Option<&VCounts>],
    sends: &[&[u8]],
    before: Vec<Vec<u8>>,
) -> Vec<Vec<u8>> {
    let size = dtype.size() as usize;
    let empty = VCounts::default();
    let layout = |r: usize| layouts.get(r).copied().flatten().unwrap_or(&empty);
    let mut out = before;
    let mut put = |r: usize, at: usize, bytes: &[u8]| {
        let buf = &mut out[r];
        if buf.len() < at + bytes.len() {
            buf.resize(at + bytes.len(), 0);
        }
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    };
    let ranks = sends.len();
    match op {
        CollectiveOp::AllGatherV => {
            for r in 0..ranks {
                for (j, send) in sends.iter().enumerate() {
                    let (at, len) = bytes_of(&layout(r).recv, j, size);
                    put(r, at, &block(send, 0, len));
                }
            }
        }
        CollectiveOp::ReduceScatterV(reduction) => {
            for r in 0..ranks {
                // Rank r's block of every rank's send (the blocks agree; each rank's own
                // layout is used to read its buffer).
                let inputs: Vec<Vec<u8>> = (0..ranks)
                    .map(|i| {
                        let (at, len) = bytes_of(&layout(i).send, r, size);
                        block(sends[i], at, len)
                    })
                    .collect();
                let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
                let count = layout(r).send.block(r).map_or(0, |(c, _)| c as usize);
                put(r, 0, &reduce(reduction, dtype, &refs, 0, count));
            }
        }
        CollectiveOp::AllToAllV => {
            for j in 0..ranks {
                for (i, send) in sends.iter().enumerate() {
                    let (from, len) = bytes_of(&layout(i).send, j, size);
                    let (at, _) = bytes_of(&layout(j).recv, i, size);
                    put(j, at, &block(send, from, len));
                }
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::collective::ReduceOp;
    use braid_stream_core::types::DevicePtr;
    use std::sync::Arc;

    fn f32s(values: &[f32]) -> Vec<u8> {
        DType::F32.encode(values).to_vec()
    }

    fn back(bytes: &[u8]) -> Vec<f32> {
        DType::F32.decode(bytes)
    }

    fn v_call(op: CollectiveOp, count: u64, v: VCounts) -> CollectiveCall {
        let mut call = CollectiveCall::new(op, DevicePtr(0), DevicePtr(0), count, DType::F32);
        call.v = Some(Arc::new(v));
        call
    }

    #[test]
    fn an_all_gather_v_places_each_rank_s_block_and_keeps_the_gaps() {
        // Rank 0 sends 2, rank 1 nothing, rank 2 one element; a gap of one at offset 2.
        let recv = Blocks {
            counts: vec![2, 0, 1],
            displs: vec![0, 2, 3],
        };
        let v = VCounts {
            recv,
            ..VCounts::default()
        };
        let sends = [f32s(&[1.0, 2.0]), Vec::new(), f32s(&[7.0])];
        let refs: Vec<&[u8]> = sends.iter().map(Vec::as_slice).collect();
        let before = vec![f32s(&[9.0; 4]); 3];
        let out = receive(
            CollectiveOp::AllGatherV,
            DType::F32,
            &[Some(&v); 3],
            &refs,
            before,
        );
        for bytes in &out {
            assert_eq!(back(bytes), [1.0, 2.0, 9.0, 7.0]);
        }
    }

    #[test]
    fn a_reduce_scatter_v_reduces_each_rank_s_uneven_block() {
        let send = Blocks::packed(&[1, 2, 0]);
        let v = VCounts {
            send,
            ..VCounts::default()
        };
        let sends = [
            f32s(&[1.0, 2.0, 3.0]),
            f32s(&[10.0, 20.0, 30.0]),
            f32s(&[5.0, 5.0, 5.0]),
        ];
        let refs: Vec<&[u8]> = sends.iter().map(Vec::as_slice).collect();
        let out = receive(
            CollectiveOp::ReduceScatterV(ReduceOp::Sum),
            DType::F32,
            &[Some(&v); 3],
            &refs,
            vec![Vec::new(); 3],
        );
        assert_eq!(back(&out[0]), [16.0]);
        assert_eq!(back(&out[1]), [27.0, 38.0]);
        assert!(out[2].is_empty());
    }

    #[test]
    fn an_all_to_all_v_moves_each_block_to_its_peer_s_displacement() {
        // Rank 0 sends [a] to 0 and [b, c] to 1; rank 1 sends nothing to 0 and [d] to 1.
        let r0 = VCounts {
            send: Blocks::packed(&[1, 2]),
            recv: Blocks {
                counts: vec![1, 0],
                displs: vec![0, 0],
            },
        };
        let r1 = VCounts {
            send: Blocks {
                counts: vec![0, 1],
                displs: vec![0, 0],
            },
            // From rank 1 first, then rank 0's two elements.
            recv: Blocks {
                counts: vec![2, 1],
                displs: vec![1, 0],
            },
        };
        let sends = [f32s(&[1.0, 2.0, 3.0]), f32s(&[4.0])];
        let refs: Vec<&[u8]> = sends.iter().map(Vec::as_slice).collect();
        let out = receive(
            CollectiveOp::AllToAllV,
            DType::F32,
            &[Some(&r0), Some(&r1)],
            &refs,
            vec![Vec::new(); 2],
        );
        assert_eq!(back(&out[0]), [1.0]);
        assert_eq!(back(&out[1]), [4.0, 2.0, 3.0]);
    }

    #[test]
    fn a_part_s_own_count_must_be_its_block() {
        let v = VCounts {
            recv: Blocks::packed(&[2, 3]),
            ..VCounts::default()
        };
        assert!(check(&v_call(CollectiveOp::AllGatherV, 3, v.clone()), 1, 2).is_ok());
        let err = check(&v_call(CollectiveOp::AllGatherV, 2, v.clone()), 1, 2).unwrap_err();
        assert!(
            err.to_string()
                .contains("count 2 is not its block's count 3"),
            "{err}"
        );
        let err = check(&v_call(CollectiveOp::AllGatherV, 2, v), 0, 3).unwrap_err();
        assert!(err.to_string().contains("one per rank"), "{err}");
        let none = CollectiveCall::new(
            CollectiveOp::AllToAllV,
            DevicePtr(0),
            DevicePtr(0),
            0,
            DType::F32,
        );
        assert!(check(&none, 0, 2)
            .unwrap_err()
            .to_string()
            .contains("no per-rank counts"));
        assert!(err_is_invalid(check(&none, 0, 2)));
    }

    fn err_is_invalid(r: Result<(), HalError>) -> bool {
        r.is_err_and(|e| e.is_invalid_argument())
    }

    #[test]
    fn model_bytes_follow_the_largest_block_or_the_larger_total() {
        let ag = v_call(
            CollectiveOp::AllGatherV,
            1,
            VCounts {
                recv: Blocks::packed(&[1, 4, 0, 2]),
                ..VCounts::default()
            },
        );
        assert_eq!(model_bytes(&ag, 4), Some(4 * 4 * 4));
        let a2a = v_call(
            CollectiveOp::AllToAllV,
            3,
            VCounts {
                send: Blocks::packed(&[1, 2]),
                recv: Blocks::packed(&[5, 0]),
            },
        );
        assert_eq!(model_bytes(&a2a, 2), Some(5 * 4));
        assert_eq!(
            even_counterpart(CollectiveOp::AllToAllV),
            CollectiveOp::AllToAll
        );
    }
}
