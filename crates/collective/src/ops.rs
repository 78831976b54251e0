//! The collectives of a [`Communicator`], each one rank's part enqueued on a stream of the
//! rank's device as an operator with declared reads and writes
//! ([`braid_stream_core::Stream::launch_collective`]): ordering, automatic allocator lifetime, capture
//! into graphs and replay work as for any kernel.
//!
//! Element counts come from the buffers' lengths; every check runs before anything is
//! enqueued, and a refused call changes nothing. Send and receive buffers are apart or
//! exactly in place ([`braid_stream_core::collective::InPlace`]: the same buffer, an
//! all-gather's send buffer at exactly the rank's block of its receive buffer, a
//! reduce-scatter's or scatter's receive buffer at exactly the rank's block of its send
//! buffer); any other overlap, which HCCL and NCCL leave undefined, is
//! [`CollectiveError::OverlappingBuffers`].

use crate::communicator::Communicator;
use crate::error::{CollectiveError, Result};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::hal::CollectiveBackend;
use braid_stream_core::types::DevicePtr;
use braid_stream_core::CollectiveBuffer;
use braid_stream_core::{DType, DeviceSlice, SizeOverflow, Stream, StreamPosition, WrongDevice};

/// Elements of `dtype` in `slice`, refusing a partial element.
pub(crate) fn elements(
    op: CollectiveOp,
    buffer: &'static str,
    slice: DeviceSlice,
    dtype: DType,
) -> Result<u64> {
    if slice.len % dtype.size() != 0 {
        return Err(CollectiveError::PartialElement {
            op,
            buffer,
            len: slice.len,
            dtype,
        });
    }
    Ok(slice.len / dtype.size())
}

impl<B: CollectiveBackend> Communicator<B> {
    /// Every rank's `recv` gets the reduction by `op` of every rank's `send`
    /// (`HcclAllReduce`). Both buffers hold the same whole number of `dtype` elements; they
    /// may be the same buffer (in place).
    pub fn all_reduce(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::AllReduce(op);
        let send = send.device_slice();
        let count = elements(op, "send", send, dtype)?;
        self.enqueue(stream, op, count, dtype, send, recv.device_slice())
    }

    /// Every rank's `recv` gets every rank's `send`, in rank order (`HcclAllGather`): `recv`
    /// holds `ranks` times `send`'s elements.
    pub fn all_gather(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        dtype: DType,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::AllGather;
        let send = send.device_slice();
        let count = elements(op, "send", send, dtype)?;
        self.enqueue(stream, op, count, dtype, send, recv.device_slice())
    }

    /// Rank `r`'s `recv` gets block `r` of the reduction by `op` of every rank's `send`
    /// (`HcclReduceScatter`): `send` holds `ranks` times `recv`'s elements.
    pub fn reduce_scatter(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::ReduceScatter(op);
        let recv = recv.device_slice();
        let count = elements(op, "recv", recv, dtype)?;
        self.enqueue(stream, op, count, dtype, send.device_slice(), recv)
    }

    /// Every rank's `buffer` gets the root's `buffer` (`HcclBroadcast`, in place): the root
    /// reads it, the others write it.
    pub fn broadcast(
        &self,
        stream: &Stream<B>,
        buffer: impl CollectiveBuffer,
        dtype: DType,
        root: u32,
    ) -> Result<StreamPosition> {
        self.check_root(root)?;
        let op = CollectiveOp::Broadcast { root };
        let buffer = buffer.device_slice();
        let count = elements(op, "buffer", buffer, dtype)?;
        self.enqueue(stream, op, count, dtype, buffer, buffer)
    }

    /// The root's `recv` gets the reduction by `op` of every rank's `send` (`HcclReduce`):
    /// every rank passes `send`; `recv` (as many elements) is written on the root only and
    /// may be empty elsewhere. A root out of range is refused before anything is enqueued.
    pub fn reduce(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        dtype: DType,
        op: ReduceOp,
        root: u32,
    ) -> Result<StreamPosition> {
        self.check_root(root)?;
        let op = CollectiveOp::Reduce { op, root };
        let send = send.device_slice();
        let count = elements(op, "send", send, dtype)?;
        self.enqueue(stream, op, count, dtype, send, recv.device_slice())
    }

    /// Block `r` of the root's `send` goes to rank `r`'s `recv` (`HcclScatter`): `send` holds
    /// `ranks` times `recv`'s elements on the root and is not read elsewhere. HCCL has no
    /// public gather: use [`Communicator::all_gather`]. A root out of range is refused before
    /// anything is enqueued.
    pub fn scatter(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        dtype: DType,
        root: u32,
    ) -> Result<StreamPosition> {
        self.check_root(root)?;
        let op = CollectiveOp::Scatter { root };
        let recv = recv.device_slice();
        let count = elements(op, "recv", recv, dtype)?;
        self.enqueue(stream, op, count, dtype, send.device_slice(), recv)
    }

    /// Sends `buffer` to rank `peer`, which posts the matching [`Communicator::recv`]
    /// (`HcclSend`).
    pub fn send(
        &self,
        stream: &Stream<B>,
        buffer: impl CollectiveBuffer,
        dtype: DType,
        peer: u32,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::Send { peer };
        self.point_to_point(stream, op, "send", buffer.device_slice(), dtype, peer)
    }

    /// Receives into `buffer` what rank `peer` sends with the matching
    /// [`Communicator::send`] (`HcclRecv`).
    pub fn recv(
        &self,
        stream: &Stream<B>,
        buffer: impl CollectiveBuffer,
        dtype: DType,
        peer: u32,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::Recv { peer };
        self.point_to_point(stream, op, "recv", buffer.device_slice(), dtype, peer)
    }

    /// Block `j` of this rank's `send` goes to block `rank` of rank `j`'s `recv`
    /// (`HcclAlltoAll`): both buffers hold `ranks` equal blocks of elements.
    pub fn all_to_all(
        &self,
        stream: &Stream<B>,
        send: impl CollectiveBuffer,
        recv: impl CollectiveBuffer,
        dtype: DType,
    ) -> Result<StreamPosition> {
        let op = CollectiveOp::AllToAll;
        let send = send.device_slice();
        let total = elements(op, "send", send, dtype)?;
        let ranks = u64::from(self.ranks());
        if total % ranks != 0 {
            return Err(CollectiveError::UnevenBlocks {
                op,
                buffer: "send",
                elements: total,
                ranks: self.ranks(),
            });
        }
        self.enqueue(stream, op, total / ranks, dtype, send, recv.device_slice())
    }

    /// Waits, in stream order, until every rank's stream has reached its barrier
    /// (`HcclBarrier`): work enqueued on `stream` after it starts once every rank has issued
    /// and reached its own. It moves no data and is matched like any collective.
    pub fn barrier(&self, stream: &Stream<B>) -> Result<StreamPosition> {
        let none = DeviceSlice::new(DevicePtr(0), 0);
        self.enqueue(stream, CollectiveOp::Barrier, 0, DType::F32, none, none)
    }

    /// A send or a receive (`op`, of `peer`) of the whole of `buffer`.
    fn point_to_point(
        &self,
        stream: &Stream<B>,
        op: CollectiveOp,
        name: &'static str,
        buffer: DeviceSlice,
        dtype: DType,
        peer: u32,
    ) -> Result<StreamPosition> {
        self.check_peer(op, peer)?;
        let count = elements(op, name, buffer, dtype)?;
        self.enqueue(stream, op, count, dtype, buffer, buffer)
    }

    /// A root must be a rank of the communicator.
    fn check_root(&self, root: u32) -> Result<()> {
        if root >= self.ranks() {
            return Err(CollectiveError::RootOutOfRange {
                root,
                ranks: self.ranks(),
            });
        }
        Ok(())
    }

    /// A send or receive peer must be another rank of the communicator.
    pub(crate) fn check_peer(&self, op: CollectiveOp, peer: u32) -> Result<()> {
        if peer >= self.ranks() || peer == self.rank() {
            return Err(CollectiveError::BadPeer {
                op,
                rank: self.rank(),
                peer,
                ranks: self.ranks(),
            });
        }
        Ok(())
    }

    /// The checks every operation shares, then the mismatch check and the submission.
    fn enqueue(
        &self,
        stream: &Stream<B>,
        op: CollectiveOp,
        count: u64,
        dtype: DType,
        send: DeviceSlice,
        recv: DeviceSlice,
    ) -> Result<StreamPosition> {
        self.check_no_group(op)?;
        let (rank, ranks) = (self.rank(), self.ranks());
        self.check_stream(stream, op)?;
        if count == 0 && op != CollectiveOp::Barrier {
            return Err(CollectiveError::ZeroCount { op });
        }
        let call = CollectiveCall {
            op,
            send: send.ptr,
            recv: recv.ptr,
            count,
            dtype,
            v: None,
        };
        if op.reads_send(rank) {
            check_size(&call, "send", send, call.send_len(rank, ranks), ranks)?;
        }
        if op.writes_recv(rank) {
            check_size(&call, "recv", recv, call.recv_len(rank, ranks), ranks)?;
        }
        self.check_overlap(&call)?;
        self.launch_checked(stream, call, send.len.max(recv.len))
    }

    /// Refuses send and receive buffers that overlap without being exactly in place
    /// ([`CollectiveCall::overlap`]).
    pub(crate) fn check_overlap(&self, call: &CollectiveCall) -> Result<()> {
        match call.overlap(self.rank(), self.ranks()) {
            None => Ok(()),
            Some(overlap) => Err(CollectiveError::OverlappingBuffers {
                op: call.op,
                rank: self.rank(),
                send: overlap.send,
                recv: overlap.recv,
                in_place: overlap.in_place,
            }),
        }
    }

    /// A collective's stream must be one of the rank's device.
    pub(crate) fn check_stream(&self, stream: &Stream<B>, op: CollectiveOp) -> Result<()> {
        if !stream.device().same_as(self.device()) {
            return Err(CollectiveError::WrongDevice(Box::new(WrongDevice {
                call: format!("{op} of rank {}", self.rank()).into(),
                what: "stream",
                expected: self.device().id(),
                found: stream.device().id(),
            })));
        }
        Ok(())
    }

    /// Submits a checked `call` (of `bytes`, for the trace) through the mismatch check.
    pub(crate) fn launch_checked(
        &self,
        stream: &Stream<B>,
        call: CollectiveCall,
        bytes: u64,
    ) -> Result<StreamPosition> {
        let (rank, ranks, op, dtype) = (self.rank(), self.ranks(), call.op, call.dtype);
        let label = op.to_string();
        let span = tracing::debug_span!(
            "collective",
            rank,
            ranks,
            op = %op,
            dtype = %dtype,
            bytes,
        );
        let _entered = span.enter();
        let comm = &self.inner.comm;
        let mut position = None;
        let mut launch = || -> Result<()> {
            let pos = stream.launch_collective(comm, &call, &label)?;
            position = Some(pos);
            Ok(())
        };
        match &self.inner.check {
            Some(check) => check.admit(rank, &call.signature(), &mut launch)?,
            None => launch()?,
        }
        tracing::trace!("enqueued");
        // `launch` ran and succeeded: both paths above return early otherwise.
        position.ok_or(CollectiveError::NotLaunched { op, rank })
    }
}

/// A buffer must hold exactly what the call uses of it.
fn check_size(
    call: &CollectiveCall,
    buffer: &'static str,
    slice: DeviceSlice,
    expected: Option<u64>,
    ranks: u32,
) -> Result<()> {
    let expected = expected.ok_or_else(|| {
        CollectiveError::SizeOverflow(SizeOverflow {
            call: call.op.name(),
            what: format!(
                "the {buffer} buffer: {} {} elements over {ranks} rank(s)",
                call.count, call.dtype
            ),
        })
    })?;
    if slice.len != expected {
        return Err(CollectiveError::BufferSize {
            op: call.op,
            buffer,
            count: call.count,
            dtype: call.dtype,
            ranks,
            expected,
            found: slice.len,
        });
    }
    Ok(())
}
