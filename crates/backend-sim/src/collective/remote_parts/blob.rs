//! One rank's part of a remote collective as the transport carries it: what every other rank
//! needs to match the ranks' calls, cost the collective and compute its effect.
//!
//! Little-endian: the ready time `u64`; the call: operation (tag `u8`, reduction `u8`, root
//! or peer `u32`), send and receive addresses `u64` each, count `u64`, data type `u8`, then
//! `0u8` without blocks or `1u8` and the send then the receive blocks (each: `u32` entries,
//! the counts, `u32` entries, the displacements, `u64` each); then the send bytes (data
//! mode), to the end.

use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, ReduceOp, VCounts};
use braid_stream_core::dtype::DType;
use braid_stream_core::types::DevicePtr;
use std::sync::Arc;

/// A rank's part, decoded.
#[derive(Debug, PartialEq)]
pub(super) struct Blob {
    /// When the part is ready, in its process's virtual time.
    pub ready: u64,
    /// The call as its rank issued it (its addresses are its device's, not this one's).
    pub call: CollectiveCall,
    /// Its send bytes (empty in timing mode or where it sends nothing).
    pub send: Vec<u8>,
}

/// The blob of a part ready at `ready`, of `call`; its send bytes follow (appended by the
/// caller).
pub(super) fn encode(ready: u64, call: &CollectiveCall) -> Vec<u8> {
    let mut out = ready.to_le_bytes().to_vec();
    let (tag, reduction, param) = op_code(call.op);
    out.push(tag);
    out.push(reduction);
    out.extend(param.to_le_bytes());
    out.extend(call.send.0.to_le_bytes());
    out.extend(call.recv.0.to_le_bytes());
    out.extend(call.count.to_le_bytes());
    out.push(index_of(&DType::ALL, call.dtype));
    match call.v.as_deref() {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            for blocks in [&v.send, &v.recv] {
                for values in [&blocks.counts, &blocks.displs] {
                    out.extend((values.len() as u32).to_le_bytes());
                    values.iter().for_each(|x| out.extend(x.to_le_bytes()));
                }
            }
        }
    }
    out
}

/// The part `bytes` holds; `None` when they are not a blob [`encode`] made.
pub(super) fn decode(bytes: &[u8]) -> Option<Blob> {
    let mut r = Reader(bytes);
    let ready = r.u64()?;
    let op = op_of(r.u8()?, r.u8()?, r.u32()?)?;
    let send = DevicePtr(r.u64()?);
    let recv = DevicePtr(r.u64()?);
    let count = r.u64()?;
    let dtype = *DType::ALL.get(usize::from(r.u8()?))?;
    let v = match r.u8()? {
        0 => None,
        1 => {
            let mut blocks = || {
                Some(Blocks {
                    counts: r.u64s()?,
                    displs: r.u64s()?,
                })
            };
            let send = blocks()?;
            let recv = blocks()?;
            Some(Arc::new(VCounts { send, recv }))
        }
        _ => return None,
    };
    Some(Blob {
        ready,
        call: CollectiveCall {
            op,
            send,
            recv,
            count,
            dtype,
            v,
        },
        send: r.0.to_vec(),
    })
}

/// `item`'s index in `all` (one byte: every list here is short).
fn index_of<T: PartialEq>(all: &[T], item: T) -> u8 {
    all.iter().position(|x| *x == item).unwrap_or(0) as u8
}

/// An operation's tag, reduction and root or peer.
fn op_code(op: CollectiveOp) -> (u8, u8, u32) {
    let reduction = |r| index_of(&ReduceOp::ALL, r);
    match op {
        CollectiveOp::AllReduce(r) => (0, reduction(r), 0),
        CollectiveOp::AllGather => (1, 0, 0),
        CollectiveOp::ReduceScatter(r) => (2, reduction(r), 0),
        CollectiveOp::Broadcast { root } => (3, 0, root),
        CollectiveOp::Send { peer } => (4, 0, peer),
        CollectiveOp::Recv { peer } => (5, 0, peer),
        CollectiveOp::AllToAll => (6, 0, 0),
        CollectiveOp::Barrier => (7, 0, 0),
        CollectiveOp::Reduce { op, root } => (8, reduction(op), root),
        CollectiveOp::Scatter { root } => (9, 0, root),
        CollectiveOp::AllGatherV => (10, 0, 0),
        CollectiveOp::ReduceScatterV(r) => (11, reduction(r), 0),
        CollectiveOp::AllToAllV => (12, 0, 0),
    }
}

/// The operation [`op_code`] gave `(tag, reduction, param)`.
fn op_of(tag: u8, reduction: u8, param: u32) -> Option<CollectiveOp> {
    let r = *ReduceOp::ALL.get(usize::from(reduction))?;
    Some(match tag {
        0 => CollectiveOp::AllReduce(r),
        1 => CollectiveOp::AllGather,
        2 => CollectiveOp::ReduceScatter(r),
        3 => CollectiveOp::Broadcast { root: param },
        4 => CollectiveOp::Send { peer: param },
        5 => CollectiveOp::Recv { peer: param },
        6 => CollectiveOp::AllToAll,
        7 => CollectiveOp::Barrier,
        8 => CollectiveOp::Reduce { op: r, root: param },
        9 => CollectiveOp::Scatter { root: param },
        10 => CollectiveOp::AllGatherV,
        11 => CollectiveOp::ReduceScatterV(r),
        12 => CollectiveOp::AllToAllV,
        _ => return None,
    })
}

/// Reads little-endian values off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    /// A `u32` length, then that many `u64`s (refused when the bytes left cannot hold them,
    /// before anything is allocated).
    fn u64s(&mut self) -> Option<Vec<u64>> {
        let len = self.u32()? as usize;
        if self.0.len() / 8 < len {
            return None;
        }
        (0..len).map(|_| self.u64()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v_call(op: CollectiveOp, v: VCounts) -> CollectiveCall {
        CollectiveCall::variable(op, DevicePtr(0x1000), DevicePtr(0x2000), 7, DType::BF16, v)
    }

    #[test]
    fn every_call_survives_its_blob_with_the_send_bytes_after_it() {
        let mut calls: Vec<CollectiveCall> = [
            CollectiveOp::AllReduce(ReduceOp::Avg),
            CollectiveOp::AllGather,
            CollectiveOp::ReduceScatter(ReduceOp::Min),
            CollectiveOp::Broadcast { root: 70_000 },
            CollectiveOp::Send { peer: u32::MAX },
            CollectiveOp::Recv { peer: 3 },
            CollectiveOp::AllToAll,
            CollectiveOp::Barrier,
            CollectiveOp::Reduce {
                op: ReduceOp::Prod,
                root: 2,
            },
            CollectiveOp::Scatter { root: 1 },
        ]
        .into_iter()
        .zip(DType::ALL.into_iter().cycle())
        .map(|(op, dtype)| CollectiveCall::new(op, DevicePtr(1), DevicePtr(u64::MAX), 9, dtype))
        .collect();
        let uneven = VCounts {
            send: Blocks::packed(&[3, 0, 5]),
            recv: Blocks {
                counts: vec![1, 2],
                displs: vec![9, 0],
            },
        };
        calls.push(v_call(CollectiveOp::AllGatherV, uneven.clone()));
        calls.push(v_call(CollectiveOp::ReduceScatterV(ReduceOp::Max), uneven));
        calls.push(v_call(CollectiveOp::AllToAllV, VCounts::default()));
        for (i, call) in calls.into_iter().enumerate() {
            let mut bytes = encode(i as u64 * 1000, &call);
            bytes.extend([1, 2, 3]);
            let blob = decode(&bytes).unwrap();
            assert_eq!(
                blob,
                Blob {
                    ready: i as u64 * 1000,
                    call,
                    send: vec![1, 2, 3]
                }
            );
        }
    }

    #[test]
    fn bytes_that_are_not_a_blob_decode_to_nothing() {
        let call = v_call(CollectiveOp::AllToAllV, VCounts::default());
        let whole = encode(5, &call);
        // Cut anywhere before its end (the send bytes may be empty, the rest may not).
        for len in 0..whole.len() {
            assert_eq!(decode(&whole[..len]), None, "cut at {len}");
        }
        // An unknown operation, reduction, data type or blocks flag.
        for (at, value) in [(8, 13), (9, 5), (38, 13), (39, 2)] {
            let mut bad = whole.clone();
            bad[at] = value;
            assert_eq!(decode(&bad), None, "byte {at} = {value}");
        }
        // A length the bytes cannot hold is refused before anything is allocated.
        let mut huge = encode(
            5,
            &CollectiveCall::new(
                CollectiveOp::Barrier,
                DevicePtr(0),
                DevicePtr(0),
                0,
                DType::F32,
            ),
        );
        *huge.last_mut().unwrap() = 1;
        huge.extend(u32::MAX.to_le_bytes());
        assert_eq!(decode(&huge), None);
    }
}
