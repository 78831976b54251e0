//! The variable-count collectives of a [`Communicator`] (`HcclAllGatherV`,
//! `HcclReduceScatterV`, `HcclAlltoAllV`): each rank's block of a buffer is given by
//! [`Blocks`], one element count and one element displacement per rank, as HCCL's `u64`
//! arrays. Counts may be zero for some ranks.
//!
//! Everything is checked before anything is enqueued: one entry per rank, ends that fit in
//! 64 bits and inside the buffer, receive blocks that do not overlap, this rank's own count
//! equal to its buffer, send and receive spans apart or exactly in place (an
//! all-gather-v's send buffer at exactly the rank's receive block, a reduce-scatter-v's
//! receive buffer at exactly the rank's send block). The blocks are part of what the ranks must agree on, as HCCL
//! documents it: the same receive blocks on every rank of an all-gather-v, the same send
//! blocks on every rank of a reduce-scatter-v, and for an all-to-all-v rank `i`'s send count
//! to `j` equal to rank `j`'s receive count from `i`; a rank that disagrees gets
//! [`CollectiveError::Mismatch`] naming the rank, the call and the block.

use crate::communicator::Communicator;
use crate::error::{CollectiveError, Result};
use crate::ops::elements;
use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, ReduceOp, VCounts};
use braid_stream_core::hal::CollectiveBackend;
use braid_stream_core::CollectiveBuffer;
use braid_stream_core::{DType, DeviceSlice, Stream, StreamPosition};

impl<B: CollectiveBackend> Communicator<B> {
    /// Every rank's `recv` gets every rank's `send`, rank `j`'s at its block of
    /// `recv_blocks` (`HcclAllGatherV`): `send` holds this rank's count of `recv_blocks`
    /// (which may be zero), and every rank passes the same `recv_blocks`. The bytes of
    /// `recv` outside the blocks keep what they hold.
    pub fn all_gather_v(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        recv_blocks: &Blocks,
        dtype: DType,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::AllGatherV;
        let v = VCounts {
            recv: recv_blocks.clone(),
            ..VCounts::default()
        };
        let own = recv_blocks.counts.get(self.rank() as usize).copied();
        self.enqueue_v(
            stream,
            op,
            send.device_slice(),
            recv.device_slice(),
            v,
            dtype,
            own,
        )
    }

    /// Rank `r`'s `recv` gets the reduction by `op` of block `r` of every rank's `send`
    /// (`HcclReduceScatterV`): every rank passes the same `send_blocks`, and `recv` holds
    /// this rank's count of them (which may be zero).
    pub fn reduce_scatter_v(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        send_blocks: &Blocks,
        recv: impl CollectiveBuffer,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::ReduceScatterV(op);
        let v = VCounts {
            send: send_blocks.clone(),
            ..VCounts::default()
        };
        let own = send_blocks.counts.get(self.rank() as usize).copied();
        self.enqueue_v(
            stream,
            op,
            send.device_slice(),
            recv.device_slice(),
            v,
            dtype,
            own,
        )
    }

    /// Block `j` of this rank's `send` (of `send_blocks`) goes to rank `j`, which places it
    /// at its block `rank` of `recv_blocks` (`HcclAlltoAllV`): this rank's send count to
    /// `j` must be rank `j`'s receive count from this rank. Displacements are each rank's
    /// own; the bytes of `recv` outside the blocks keep what they hold.
    pub fn all_to_all_v(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        send_blocks: &Blocks,
        recv: impl CollectiveBuffer,
        recv_blocks: &Blocks,
        dtype: DType,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::AllToAllV;
        let v = VCounts {
            send: send_blocks.clone(),
            recv: recv_blocks.clone(),
        };
        self.enqueue_v(
            stream,
            op,
            send.device_slice(),
            recv.device_slice(),
            v,
            dtype,
            None,
        )
    }

    /// Checks a variable-count call (stream, blocks, buffers; `own` is this rank's count where
    /// its other buffer holds exactly that) and submits it through the mismatch check.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_v(
        &self,
        stream: &Stream<B>,
        op: CollectiveOp,
        send: DeviceSlice,
        recv: DeviceSlice,
        v: VCounts,
        dtype: DType,
        own: Option<u64>,
    ) -> Result<StreamPosition> {
        let (rank, ranks) = (self.rank(), self.ranks());
        self.check_stream(stream, op)?;
        let uses_send = !matches!(op, CollectiveOp::AllGatherV);
        let uses_recv = !matches!(op, CollectiveOp::ReduceScatterV(_));
        let sides = [
            ("send", &v.send, send, uses_send),
            ("recv", &v.recv, recv, uses_recv),
        ];
        for (buffer, blocks, slice, used) in sides {
            if !used {
                continue;
            }
            let bad = |source| CollectiveError::BadBlocks {
                op,
                rank,
                buffer,
                source,
            };
            let extent = blocks.check(ranks, dtype, buffer == "recv").map_err(bad)?;
            if extent > slice.len {
                let block = (0u32..)
                    .zip(blocks.counts.iter().zip(&blocks.displs))
                    .filter(|(_, (c, _))| **c > 0)
                    .max_by_key(|(_, (c, d))| **c + **d)
                    .map_or(0, |(r, _)| r);
                return Err(CollectiveError::BlockOutOfBuffer {
                    op,
                    rank,
                    buffer,
                    block,
                    end: extent,
                    len: slice.len,
                });
            }
        }
        // The buffer without blocks holds exactly this rank's count.
        let (count, bytes) = match own {
            Some(own) => {
                let (buffer, slice) = if uses_send {
                    ("recv", recv)
                } else {
                    ("send", send)
                };
                let count = elements(op, buffer, slice, dtype)?;
                if count != own {
                    return Err(CollectiveError::BufferSize {
                        op,
                        buffer,
                        count: own,
                        dtype,
                        ranks,
                        expected: own.saturating_mul(dtype.size()),
                        found: slice.len,
                    });
                }
                (count, slice.len)
            }
            None => (v.send.total(), send.len.max(recv.len)),
        };
        let call = CollectiveCall::variable(op, send.ptr, recv.ptr, count, dtype, v);
        self.check_overlap(&call)?;
        self.launch_checked(stream, call, bytes)
    }
}
