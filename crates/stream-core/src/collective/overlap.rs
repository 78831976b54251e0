//! Whether a rank's send and receive ranges may overlap: HCCL and NCCL define a collective
//! whose buffers are apart or exactly in place, and leave every other overlap undefined (the
//! result depends on the algorithm's order of reads and writes). [`CollectiveCall::overlap`]
//! finds such a call before it is enqueued; [`InPlace`] says what in place means for it.

use super::{CollectiveCall, CollectiveOp};
use crate::types::{DevicePtr, DeviceSlice};
use std::fmt;

/// The in-place form of a collective on one rank.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum InPlace {
    /// One buffer for both (all-reduce, reduce, broadcast, all-to-all).
    SameBuffer,
    /// The send buffer at exactly this rank's block of the receive buffer, this range
    /// (all-gather, all-gather-v).
    SendIsOwnBlock(DeviceSlice),
    /// The receive buffer at exactly this rank's block of the send buffer, this range
    /// (reduce-scatter, reduce-scatter-v, scatter on the root).
    RecvIsOwnBlock(DeviceSlice),
}

impl fmt::Display for InPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InPlace::SameBuffer => f.write_str("the same buffer for both (in place)"),
            InPlace::SendIsOwnBlock(block) => write!(
                f,
                "in place, the send buffer at exactly this rank's block of the receive buffer, {block}"
            ),
            InPlace::RecvIsOwnBlock(block) => write!(
                f,
                "in place, the receive buffer at exactly this rank's block of the send buffer, {block}"
            ),
        }
    }
}

/// A rank's send and receive ranges that overlap without being in place.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Overlap {
    /// The bytes the call reads.
    pub send: DeviceSlice,
    /// The bytes the call writes.
    pub recv: DeviceSlice,
    /// What in place would be for this call.
    pub in_place: InPlace,
}

impl CollectiveCall {
    /// The in-place form of this call on rank `rank` (`None` when a block's address
    /// overflows, or a variable-count call has no blocks).
    pub fn in_place(&self, rank: u32) -> Option<InPlace> {
        let size = self.dtype.size();
        let block = |base: DevicePtr, first_element: u64| -> Option<DeviceSlice> {
            let at = base.0.checked_add(first_element.checked_mul(size)?)?;
            Some(DeviceSlice::new(
                DevicePtr(at),
                self.count.checked_mul(size)?,
            ))
        };
        let displ = |blocks: &super::Blocks| blocks.displs.get(rank as usize).copied();
        let v = self.v.as_deref();
        let own = u64::from(rank).checked_mul(self.count);
        Some(match self.op {
            CollectiveOp::AllGather => InPlace::SendIsOwnBlock(block(self.recv, own?)?),
            CollectiveOp::AllGatherV => {
                InPlace::SendIsOwnBlock(block(self.recv, displ(&v?.recv)?)?)
            }
            CollectiveOp::ReduceScatter(_) | CollectiveOp::Scatter { .. } => {
                InPlace::RecvIsOwnBlock(block(self.send, own?)?)
            }
            CollectiveOp::ReduceScatterV(_) => {
                InPlace::RecvIsOwnBlock(block(self.send, displ(&v?.send)?)?)
            }
            _ => InPlace::SameBuffer,
        })
    }

    /// The overlap of this rank's send and receive ranges (in a communicator of `ranks`
    /// ranks) when the call is neither apart nor exactly in place ([`InPlace`]); `None` when
    /// it may run, or on overflow (which the size checks refuse).
    pub fn overlap(&self, rank: u32, ranks: u32) -> Option<Overlap> {
        if !(self.op.reads_send(rank) && self.op.writes_recv(rank)) {
            return None;
        }
        let (send, recv) = self.ranges(rank, ranks)?;
        if !send.overlaps(&recv) || send == recv {
            return None;
        }
        let in_place = self.in_place(rank)?;
        let exact = match in_place {
            InPlace::SameBuffer => false,
            InPlace::SendIsOwnBlock(block) => send == block,
            InPlace::RecvIsOwnBlock(block) => recv == block,
        };
        (!exact).then_some(Overlap {
            send,
            recv,
            in_place,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Blocks, ReduceOp, VCounts};
    use super::*;
    use crate::dtype::DType;

    /// A call of 8 `f32` per rank with its buffers at `send` and `recv`.
    fn call(op: CollectiveOp, send: u64, recv: u64) -> CollectiveCall {
        CollectiveCall::new(op, DevicePtr(send), DevicePtr(recv), 8, DType::F32)
    }

    #[test]
    fn buffers_apart_or_the_same_may_run() {
        let sum = CollectiveOp::AllReduce(ReduceOp::Sum);
        assert_eq!(call(sum, 0x1000, 0x2000).overlap(0, 2), None);
        assert_eq!(call(sum, 0x1000, 0x1020).overlap(0, 2), None, "adjacent");
        assert_eq!(call(sum, 0x1000, 0x1000).overlap(0, 2), None, "in place");
        // A send and a receive use one buffer each.
        let send = call(CollectiveOp::Send { peer: 1 }, 0x1000, 0x1000);
        assert_eq!(send.overlap(0, 2), None);
        // A reduce's receive buffer off the root is not written.
        let reduce = CollectiveOp::Reduce {
            op: ReduceOp::Max,
            root: 0,
        };
        assert_eq!(call(reduce, 0x1000, 0x1010).overlap(1, 2), None);
    }

    #[test]
    fn a_partial_overlap_is_found_with_its_in_place_form() {
        let sum = CollectiveOp::AllReduce(ReduceOp::Sum);
        let found = call(sum, 0x1000, 0x1010).overlap(0, 2).unwrap();
        assert_eq!(found.send, DeviceSlice::new(DevicePtr(0x1000), 32));
        assert_eq!(found.recv, DeviceSlice::new(DevicePtr(0x1010), 32));
        assert_eq!(found.in_place, InPlace::SameBuffer);
        let reduce = CollectiveOp::Reduce {
            op: ReduceOp::Max,
            root: 1,
        };
        assert!(call(reduce, 0x1000, 0x1010).overlap(1, 2).is_some());
    }

    #[test]
    fn an_all_gather_is_in_place_from_exactly_its_own_block() {
        let own = |rank: u32| {
            call(
                CollectiveOp::AllGather,
                0x1000 + 32 * u64::from(rank),
                0x1000,
            )
        };
        assert_eq!(own(1).overlap(1, 4), None);
        let other = own(2).overlap(1, 4).unwrap();
        let block = DeviceSlice::new(DevicePtr(0x1020), 32);
        assert_eq!(other.in_place, InPlace::SendIsOwnBlock(block));
        assert!(other
            .in_place
            .to_string()
            .contains("send buffer at exactly"));
        let straddling = call(CollectiveOp::AllGather, 0x1010, 0x1000);
        assert!(straddling.overlap(0, 4).is_some());
    }

    #[test]
    fn a_reduce_scatter_or_scatter_is_in_place_into_exactly_its_own_block() {
        let rs = CollectiveOp::ReduceScatter(ReduceOp::Sum);
        assert_eq!(call(rs, 0x1000, 0x1040).overlap(2, 4), None);
        let wrong = call(rs, 0x1000, 0x1020).overlap(2, 4).unwrap();
        let block = DeviceSlice::new(DevicePtr(0x1040), 32);
        assert_eq!(wrong.in_place, InPlace::RecvIsOwnBlock(block));
        let scatter = CollectiveOp::Scatter { root: 0 };
        assert_eq!(call(scatter, 0x1000, 0x1000).overlap(0, 4), None);
        assert!(call(scatter, 0x1000, 0x1020).overlap(0, 4).is_some());
        // Off the root, a scatter reads no send buffer.
        assert_eq!(call(scatter, 0x1000, 0x1020).overlap(1, 4), None);
    }

    #[test]
    fn variable_counts_are_in_place_at_their_displacement() {
        let blocks = Blocks {
            counts: vec![2, 3],
            displs: vec![3, 0],
        };
        let agv = |send: u64| {
            CollectiveCall::variable(
                CollectiveOp::AllGatherV,
                DevicePtr(send),
                DevicePtr(0x1000),
                2,
                DType::F32,
                VCounts {
                    recv: blocks.clone(),
                    ..VCounts::default()
                },
            )
        };
        assert_eq!(
            agv(0x100c).overlap(0, 2),
            None,
            "rank 0's block at element 3"
        );
        assert!(agv(0x1000).overlap(0, 2).is_some(), "rank 1's block");
        let rsv = |recv: u64| {
            CollectiveCall::variable(
                CollectiveOp::ReduceScatterV(ReduceOp::Sum),
                DevicePtr(0x1000),
                DevicePtr(recv),
                3,
                DType::F32,
                VCounts {
                    send: blocks.clone(),
                    ..VCounts::default()
                },
            )
        };
        assert_eq!(
            rsv(0x1000).overlap(1, 2),
            None,
            "rank 1's block at element 0"
        );
        assert!(rsv(0x1004).overlap(1, 2).is_some());
    }
}
