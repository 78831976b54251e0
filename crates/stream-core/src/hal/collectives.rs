//! The collective extension of the hal: backends that run collectives (HCCL's communicator
//! calls) implement [`CollectiveBackend`] in their own crate, as wgpu-hal's optional
//! capabilities are traits each backend implements. Thin and unvalidated like the rest of
//! the hal: the front layer (`braid-collective`) checks every call first.

use super::{Backend, HalError};
use crate::collective::{CollectiveCall, RootInfo};
use crate::types::DeviceSlice;

/// One rank's native communicator (`HcclComm`): which rank it is, of how many.
pub trait Comm: Send + Sync + 'static {
    /// This communicator's rank.
    fn rank(&self) -> u32;

    /// The number of ranks of the communicator.
    fn ranks(&self) -> u32;
}

/// A backend that can run collectives: communicators, and one rank's part of a collective
/// enqueued on one of its streams ([`crate::Stream::launch_collective`] is the front layer's
/// way in).
pub trait CollectiveBackend: Backend {
    /// One rank's native communicator.
    type Comm: Comm;

    /// Whether single-process communicators of this backend must check every call for
    /// mismatches whatever the user's options say (the simulator: a hang there helps nobody).
    const ALWAYS_CHECKS_MISMATCH: bool;

    /// One communicator per device, rank `i` on `devices[i]`, all in this process
    /// (`HcclCommInitAll`).
    fn init_all(devices: &[&Self::Device]) -> Result<Vec<Self::Comm>, HalError>;

    /// A fresh root info for a communicator whose rank 0 runs on `device` (`HcclGetRootInfo`).
    fn root_info(device: &Self::Device) -> Result<RootInfo, HalError>;

    /// Joins the communicator of `ranks` ranks described by `info` as rank `rank`
    /// (`HcclCommInitRootInfo`). Bytes that are not a root info, or a root info whose
    /// communicator does not take this rank, are a refused argument
    /// ([`HalError::is_invalid_argument`]).
    fn init_root_info(
        device: &Self::Device,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<Self::Comm, HalError>;

    /// This rank's handle of sub-communicator `sub_id` of `parent`, made of the parent's ranks
    /// `ranks` in that order (sub-rank `i` is parent rank `ranks[i]`, on that rank's device);
    /// the caller is sub-rank `sub_rank` (`HcclCreateSubCommConfig`). Every member calls it
    /// with the same list and id. The default is [`HalError::Unsupported`].
    fn create_sub_comm(
        parent: &Self::Comm,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Result<Self::Comm, HalError> {
        let _ = (parent, ranks, sub_id, sub_rank);
        Err(HalError::Unsupported("create_sub_comm"))
    }

    /// Enqueues this rank's part of `call` on `stream` (`HcclAllReduce` and friends),
    /// labelled `label` in timelines.
    fn launch_collective(
        stream: &Self::Stream,
        comm: &Self::Comm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError>;

    /// Bytes of device workspace this rank's part of `call` needs beside its buffers (an
    /// average HCCL lacks, scaled before the sum, scales a copy of the send buffer there).
    /// The front layer takes them in stream order ([`crate::Stream::workspace`]) and hands
    /// them to [`CollectiveBackend::launch_collective_in`]. The default needs none.
    fn collective_workspace(comm: &Self::Comm, call: &CollectiveCall) -> u64 {
        let _ = (comm, call);
        0
    }

    /// [`CollectiveBackend::launch_collective`] with `workspace`: at least
    /// [`CollectiveBackend::collective_workspace`] bytes of this device, reserved in stream
    /// order for the part (empty when it needs none). The default ignores it.
    fn launch_collective_in(
        stream: &Self::Stream,
        comm: &Self::Comm,
        call: &CollectiveCall,
        label: &str,
        workspace: DeviceSlice,
    ) -> Result<(), HalError> {
        let _ = workspace;
        Self::launch_collective(stream, comm, call, label)
    }

    /// Opens a group of calls on the calling thread (`HcclGroupStart`): the backend may hold
    /// the calls issued until [`CollectiveBackend::group_end`] and run them as one. The
    /// default does nothing (the simulator needs no grouping: the front layer issues a
    /// group's sends and receives in an order that cannot deadlock,
    /// [`crate::collective::batch_order`]).
    fn group_start(comm: &Self::Comm) -> Result<(), HalError> {
        let _ = comm;
        Ok(())
    }

    /// Closes the group [`CollectiveBackend::group_start`] opened (`HcclGroupEnd`). The
    /// default does nothing.
    fn group_end(comm: &Self::Comm) -> Result<(), HalError> {
        let _ = comm;
        Ok(())
    }

    /// Enqueues this rank's sends and receives `calls` (each a [`crate::collective::CollectiveOp::Send`]
    /// or [`crate::collective::CollectiveOp::Recv`]) on `stream` as one batch
    /// (`HcclBatchSendRecv`), labelled `label`. The front layer hands them in
    /// [`crate::collective::batch_order`]; the default enqueues them one by one in that order.
    fn launch_send_recv_batch(
        stream: &Self::Stream,
        comm: &Self::Comm,
        calls: &[CollectiveCall],
        label: &str,
    ) -> Result<(), HalError> {
        calls
            .iter()
            .try_for_each(|call| Self::launch_collective(stream, comm, call, label))
    }

    /// A failure of `comm`'s collectives that happened after their calls returned
    /// (`HcclGetCommAsyncError`): a collective that timed out or failed on the device. `None`
    /// while there is none; once there is one, HCCL keeps reporting it for the communicator's
    /// life. The default has none to report.
    fn comm_async_error(comm: &Self::Comm) -> Result<Option<HalError>, HalError> {
        let _ = comm;
        Ok(None)
    }
}
