//! A batch of one rank's sends and receives enqueued as one operator
//! ([`Stream::launch_send_recv_batch`], HCCL's `HcclBatchSendRecv`).

use super::Stream;
use crate::collective::{CollectiveCall, CollectiveOp};
use crate::error::Result;
use crate::hal::{self, Comm as _};
use crate::lowered::Lowered;
use crate::ordering::StreamPosition;
use crate::types::DeviceSlice;
use crate::uses::Access;

impl<B: hal::CollectiveBackend> Stream<B> {
    /// Enqueues rank `comm.rank()`'s sends and receives `calls` with its backend communicator
    /// `comm` as one operator (the backend's
    /// [`hal::CollectiveBackend::launch_send_recv_batch`]), labelled `label`: it reads every
    /// send's buffer and writes every receive's, so ordering, the allocator's automatic mode
    /// and capture treat the batch like one kernel. `calls` go to the backend in the order
    /// given (`braid-collective` sorts them with [`crate::collective::batch_order`] first); an
    /// operation other than a send or a receive, or a peer that is not another rank, is a
    /// refused argument and nothing is enqueued. Nothing checks that the peers agree: that
    /// is `braid-collective`'s job.
    pub fn launch_send_recv_batch(
        &self,
        comm: &B::Comm,
        calls: &[CollectiveCall],
        label: &str,
    ) -> Result<StreamPosition> {
        let (rank, ranks) = (comm.rank(), comm.ranks());
        let mut uses = Vec::with_capacity(calls.len());
        for call in calls {
            let bad =
                |why: String| hal::HalError::InvalidArgument(format!("{label}: {} {why}", call.op));
            let (ptr, access) = match call.op {
                CollectiveOp::Send { peer } | CollectiveOp::Recv { peer }
                    if peer >= ranks || peer == rank =>
                {
                    return Err(bad(format!(
                        "of rank {rank}: the peer must be another rank of the {ranks}"
                    ))
                    .into())
                }
                CollectiveOp::Send { .. } => (call.send, Access::Read),
                CollectiveOp::Recv { .. } => (call.recv, Access::Write),
                _ => return Err(bad("is not a send or a receive".into()).into()),
            };
            let len = call
                .count
                .checked_mul(call.dtype.size())
                .ok_or_else(|| bad(format!("of {} elements overflows", call.count)))?;
            uses.push((DeviceSlice::new(ptr, len), access));
        }
        let enqueue = |s: &B::Stream| B::launch_send_recv_batch(s, comm, calls, label);
        self.submit_operator(Lowered::Collective {
            label,
            uses: &uses,
            enqueue: &enqueue,
        })
    }
}
