//! [`AclComm`]: one rank's HCCL communicator, and the hal's collective extension for ACL
//! ([`CollectiveBackend`] for [`AclBackend`]): one rank's part of a collective enqueued on a
//! stream. Every HCCL call goes through [`HcclCalls`].

use super::average::Scale;
use super::calls::Buffers;
use super::error::Hccl;
use super::variable;
use crate::bind;
use crate::calls::Handle;
use crate::device::AclDevice;
use crate::stream::AclStream;
use crate::AclBackend;
use braid_acl_sys::hccl::codes::HCCL_SUCCESS;
use braid_acl_sys::hccl::*;
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp, RootInfo};
use braid_stream_core::hal::{self, CollectiveBackend, Comm, HalError};
use braid_stream_core::types::DeviceSlice;
use std::collections::HashSet;
use std::ffi::c_void;
use std::fmt;

/// One rank's HCCL communicator (`HcclComm`) on one device. Destroyed
/// (`HcclCommDestroy`, with its device bound) when dropped; a failure there is reported by
/// the device's next call.
pub struct AclComm {
    pub(super) hccl: Hccl,
    pub(super) device: AclDevice,
    pub(super) raw: Handle,
    pub(super) rank: u32,
    pub(super) ranks: u32,
}

impl fmt::Debug for AclComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclComm")
            .field("device", &self.device.shared.ordinal)
            .field("rank", &self.rank)
            .field("ranks", &self.ranks)
            .field("raw", &format_args!("{:#x}", self.raw))
            .finish()
    }
}

pub use braid_acl_sys::dtypes::hccl_data_type as dtype_of;

/// HCCL's reduce operation for braid's. HCCL has no average: an average runs HCCL's sum, with
/// braid's scale by `1 / ranks` on the same stream (see `hccl::average`).
pub fn reduce_op_of(op: ReduceOp) -> HcclReduceOp {
    match op {
        ReduceOp::Sum | ReduceOp::Avg => HCCL_REDUCE_SUM,
        ReduceOp::Prod => HCCL_REDUCE_PROD,
        ReduceOp::Max => HCCL_REDUCE_MAX,
        ReduceOp::Min => HCCL_REDUCE_MIN,
    }
}

impl AclComm {
    /// One communicator per device of this process, rank `i` on `devices[i]`
    /// (`HcclCommInitAll`). The devices must be distinct devices of one ACL library.
    pub fn init_all(devices: &[&AclDevice]) -> Result<Vec<AclComm>, HalError> {
        let Some(first) = devices.first() else {
            return Err(HalError::InvalidArgument(
                "HcclCommInitAll needs at least one device".into(),
            ));
        };
        let mut seen = HashSet::new();
        for d in devices {
            if !seen.insert(d.shared.ordinal) {
                return Err(HalError::InvalidArgument(format!(
                    "HcclCommInitAll: device {} is listed twice",
                    d.shared.ordinal
                )));
            }
            if d.shared.library_key() != first.shared.library_key() {
                return Err(HalError::InvalidArgument(format!(
                    "HcclCommInitAll: device {} comes from another ACL library than device {}",
                    d.shared.ordinal, first.shared.ordinal
                )));
            }
        }
        let ranks = u32::try_from(devices.len())
            .map_err(|_| HalError::InvalidArgument("too many devices".into()))?;
        let hccl = Hccl::of(first)?;
        let ids: Vec<i32> = devices.iter().map(|d| d.shared.ordinal as i32).collect();
        first.shared.bind()?;
        let made = hccl.calls.comm_init_all(&ids);
        // HCCL sets each device while it builds the communicators: the thread's current
        // device is no longer known, so the next call binds its own again.
        bind::forget_current();
        let raw = hccl.result("HcclCommInitAll", made)?;
        if raw.len() != devices.len() {
            return Err(HalError::InvalidArgument(format!(
                "HcclCommInitAll made {} communicator(s) for {} device(s)",
                raw.len(),
                devices.len()
            )));
        }
        Ok(devices
            .iter()
            .zip(raw)
            .zip(0..)
            .map(|((d, raw), rank)| AclComm {
                hccl: hccl.clone(),
                device: (*d).clone(),
                raw,
                rank,
                ranks,
            })
            .collect())
    }

    /// A fresh root info for a communicator whose rank 0 runs on `device`
    /// (`HcclGetRootInfo`): the bytes the user ships to every other rank.
    pub fn root_info(device: &AclDevice) -> Result<RootInfo, HalError> {
        let hccl = Hccl::of(device)?;
        device.shared.bind()?;
        let info = hccl.result("HcclGetRootInfo", hccl.calls.get_root_info())?;
        Ok(RootInfo(info))
    }

    /// Joins the communicator of `ranks` ranks that `info` describes as rank `rank` on
    /// `device` (`HcclCommInitRootInfo`). HCCL returns once every rank has joined, so each
    /// rank joins from its own thread or process; `braid-acl-sim` returns at once and runs a
    /// collective when every rank has joined and issued its part. Bytes HCCL refuses
    /// (`HCCL_E_PARA`) are [`HalError::NativeInvalidArgument`].
    pub fn init_root_info(
        device: &AclDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<AclComm, HalError> {
        if rank >= ranks {
            return Err(HalError::InvalidArgument(format!(
                "HcclCommInitRootInfo: rank {rank} is not below the rank count {ranks}"
            )));
        }
        let hccl = Hccl::of(device)?;
        device.shared.bind()?;
        let joined = hccl.calls.comm_init_root_info(ranks, &info.0, rank);
        let raw = hccl.result("HcclCommInitRootInfo", joined)?;
        Ok(AclComm {
            hccl,
            device: device.clone(),
            raw,
            rank,
            ranks,
        })
    }

    /// The device this rank runs on.
    pub fn device(&self) -> &AclDevice {
        &self.device
    }

    /// The raw `HcclComm`, for HCCL calls braid does not wrap.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw as *mut c_void
    }

    /// Asks HCCL for the rank and rank count (`HcclGetRankId`, `HcclGetRankSize`).
    pub fn query_rank_and_size(&self) -> Result<(u32, u32), HalError> {
        self.device.shared.bind()?;
        let calls = &self.hccl.calls;
        let rank = self.hccl.result("HcclGetRankId", calls.rank_id(self.raw))?;
        let size = self
            .hccl
            .result("HcclGetRankSize", calls.rank_size(self.raw))?;
        Ok((rank, size))
    }

    /// Bytes of workspace this rank's part of `call` needs: a copy of its send buffer for an
    /// average scaled before its sum ([`ReduceOp::scales_before_sum`]), none otherwise.
    pub(super) fn workspace_for(&self, call: &CollectiveCall) -> u64 {
        match reduction_of(call.op) {
            Some(op) if op.scales_before_sum(call.dtype) => {
                call.send_len(self.rank, self.ranks).unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// Enqueues this rank's part of `call` on `stream`, with `workspace` (at least
    /// [`AclComm::workspace_for`] bytes) for an average scaled before its sum (see
    /// [`AclBackend::launch_collective`]).
    pub(super) fn launch(
        &self,
        stream: &AclStream,
        call: &CollectiveCall,
        label: &str,
        workspace: DeviceSlice,
    ) -> Result<(), HalError> {
        self.check_stream(stream, label)?;
        let (calls, c, s) = (&self.hccl.calls, self.raw, stream.raw);
        let mut b = Buffers {
            send: call.send.0,
            recv: call.recv.0,
            count: call.count,
            dtype: dtype_of(call.dtype),
        };
        stream.shared.bind()?;
        // An average's scales are planned before anything is enqueued: a refusal enqueues
        // nothing. Scaled before the sum: a copy of the send buffer in the workspace, which
        // HCCL then sums.
        let scale_first = self.plan_scale_first(call, label, workspace)?;
        if scale_first.is_some() {
            b.send = workspace.ptr.0;
        }
        let scales_after =
            reduction_of(call.op).is_some_and(|op| !op.scales_before_sum(call.dtype));
        let scale = match call.op {
            _ if !scales_after => None,
            CollectiveOp::Reduce { op, root } if root == self.rank => op
                .scale(self.ranks)
                .map(|factor| Scale::plan(call.recv, call.recv, call.count, call.dtype, factor))
                .transpose()?,
            CollectiveOp::AllReduce(op) | CollectiveOp::ReduceScatter(op) => op
                .scale(self.ranks)
                .map(|factor| Scale::plan(call.recv, call.recv, call.count, call.dtype, factor))
                .transpose()?,
            // A rank whose block is empty has nothing to scale.
            CollectiveOp::ReduceScatterV(op) if call.count > 0 => op
                .scale(self.ranks)
                .map(|factor| Scale::plan(call.recv, call.recv, call.count, call.dtype, factor))
                .transpose()?,
            _ => None,
        };
        tracing::trace!(label, op = %call.op, count = call.count, "HCCL collective");
        if let Some(scale_first) = scale_first {
            scale_first.launch(stream.raw)?;
            stream.shared.note_work(stream.raw, 1);
        }
        let (name, code) = match call.op {
            CollectiveOp::AllReduce(op) => {
                ("HcclAllReduce", calls.all_reduce(b, reduce_op_of(op), c, s))
            }
            CollectiveOp::AllGather => ("HcclAllGather", calls.all_gather(b, c, s)),
            CollectiveOp::ReduceScatter(op) => (
                "HcclReduceScatter",
                calls.reduce_scatter(b, reduce_op_of(op), c, s),
            ),
            CollectiveOp::Broadcast { root } => {
                // In place: the root sends its buffer, every rank receives into its own.
                let buf = if self.rank == root { b.send } else { b.recv };
                (
                    "HcclBroadcast",
                    calls.broadcast(buf, b.count, b.dtype, root, c, s),
                )
            }
            CollectiveOp::Send { peer } => ("HcclSend", calls.send(b, peer, c, s)),
            CollectiveOp::Recv { peer } => ("HcclRecv", calls.recv(b, peer, c, s)),
            CollectiveOp::Barrier => ("HcclBarrier", calls.barrier(c, s)),
            CollectiveOp::Reduce { op, root } => {
                ("HcclReduce", calls.reduce(b, reduce_op_of(op), root, c, s))
            }
            CollectiveOp::Scatter { root } => match calls.scatter(b, root, c, s) {
                Some(code) => ("HcclScatter", code),
                None => {
                    return Err(HalError::Unsupported(
                        "scatter: this libhccl.so has no HcclScatter",
                    ))
                }
            },
            CollectiveOp::AllToAll => match calls.all_to_all(b, c, s) {
                Some(code) => ("HcclAlltoAll", code),
                None => {
                    return Err(HalError::Unsupported(
                        "all-to-all: this libhccl.so has no HcclAlltoAll",
                    ))
                }
            },
            CollectiveOp::AllGatherV
            | CollectiveOp::ReduceScatterV(_)
            | CollectiveOp::AllToAllV => {
                variable::launch(calls.as_ref(), b, call, self.ranks, c, s)?
            }
        };
        self.hccl.check(name, code)?;
        stream.shared.note_work(stream.raw, 1);
        if let Some(scale) = scale {
            scale.launch(stream.raw)?;
            stream.shared.note_work(stream.raw, 1);
        }
        if let CollectiveOp::Broadcast { root } = call.op {
            if self.rank == root && call.send != call.recv {
                // HCCL's broadcast leaves the root's buffer as it was: the root's own copy
                // into a separate receive buffer follows it on the stream.
                let len = call.recv_len(self.rank, self.ranks).ok_or_else(|| {
                    HalError::InvalidArgument(format!("{label}: broadcast length overflows"))
                })?;
                hal::Stream::memcpy_d2d(stream, call.recv, call.send, len)?;
            }
        }
        Ok(())
    }
}

/// The reduction of a reducing operation.
fn reduction_of(op: CollectiveOp) -> Option<ReduceOp> {
    match op {
        CollectiveOp::AllReduce(r)
        | CollectiveOp::ReduceScatter(r)
        | CollectiveOp::ReduceScatterV(r)
        | CollectiveOp::Reduce { op: r, .. } => Some(r),
        _ => None,
    }
}

impl AclComm {
    /// The scale of a copy of the send buffer into `workspace`, for an average scaled before
    /// its sum; `None` for every other call.
    fn plan_scale_first(
        &self,
        call: &CollectiveCall,
        label: &str,
        workspace: DeviceSlice,
    ) -> Result<Option<Scale>, HalError> {
        let Some(factor) = reduction_of(call.op)
            .filter(|op| op.scales_before_sum(call.dtype))
            .and_then(|op| op.scale(self.ranks))
        else {
            return Ok(None);
        };
        let bytes = self.workspace_for(call);
        if bytes == 0 {
            return Ok(None);
        }
        if workspace.len < bytes {
            return Err(HalError::InvalidArgument(format!(
                "{label}: an average in {} scales a copy of the send buffer before HCCL sums it: \
                 it needs {bytes} bytes of workspace, {} were given (Stream::launch_collective \
                 takes them)",
                call.dtype, workspace.len
            )));
        }
        let elements = bytes / call.dtype.size();
        Scale::plan(call.send, workspace.ptr, elements, call.dtype, factor).map(Some)
    }

    /// Refuses a stream of another device than the communicator's.
    pub(super) fn check_stream(&self, stream: &AclStream, label: &str) -> Result<(), HalError> {
        let ordinal = stream.shared.ordinal;
        if self.device.shared.ordinal != ordinal {
            return Err(HalError::InvalidArgument(format!(
                "{label}: the communicator of rank {} is on ACL device {}, the stream on ACL device {ordinal}",
                self.rank, self.device.shared.ordinal
            )));
        }
        Ok(())
    }
}

impl Drop for AclComm {
    fn drop(&mut self) {
        let (hccl, raw) = (&self.hccl, self.raw);
        self.device
            .shared
            .release_checked(|| match hccl.calls.comm_destroy(raw) {
                HCCL_SUCCESS => Ok(()),
                code => Err(hccl.acl_error("HcclCommDestroy", code)),
            });
    }
}

impl Comm for AclComm {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn ranks(&self) -> u32 {
        self.ranks
    }
}

/// Collectives through HCCL. Mismatch checking is the front layer's option
/// (`braid_collective::CommOptions::check_mismatch`, on by default): HCCL itself hangs.
impl CollectiveBackend for AclBackend {
    type Comm = AclComm;
    const ALWAYS_CHECKS_MISMATCH: bool = false;

    fn init_all(devices: &[&AclDevice]) -> Result<Vec<AclComm>, HalError> {
        AclComm::init_all(devices)
    }

    fn root_info(device: &AclDevice) -> Result<RootInfo, HalError> {
        AclComm::root_info(device)
    }

    fn init_root_info(
        device: &AclDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<AclComm, HalError> {
        AclComm::init_root_info(device, ranks, rank, info)
    }

    /// Enqueues this rank's part of `call` on `stream` with `comm` (`HcclAllReduce`,
    /// `HcclAllGather`, `HcclReduceScatter`, `HcclBroadcast`, `HcclSend`, `HcclRecv`,
    /// `HcclAlltoAll`, `HcclBarrier`, `HcclReduce`, `HcclScatter`, `HcclAllGatherV`,
    /// `HcclReduceScatterV`, `HcclAlltoAllV`; an average is `HcclAllReduce`'s,
    /// `HcclReduceScatter`'s, `HcclReduceScatterV`'s or `HcclReduce`'s sum with `aclnnMuls`
    /// by `1 / ranks` on the same stream: in `float32` of the receive buffer after the sum; in
    /// `float16` and `bfloat16` of a copy of the send buffer before it, in the workspace
    /// [`CollectiveBackend::collective_workspace`] asks for, so that this call, which gets
    /// none, refuses such an average). The communicator must be of the stream's device; buffers are device
    /// addresses of it, valid for the call's lengths until the collective has run
    /// (braid-collective checks them; this call does not). HCCL takes an explicit stream: on
    /// the default stream (a null `aclrtStream`) it answers `HCCL_E_PTR`. A part HCCL
    /// refuses as a bad parameter (`HCCL_E_PARA`; on `braid-acl-sim` a part that does not
    /// match the other ranks') is [`HalError::NativeInvalidArgument`].
    fn launch_collective(
        stream: &AclStream,
        comm: &AclComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        comm.launch(stream, call, label, DeviceSlice::default())
    }

    /// A copy of the send buffer for an average in `float16` or `bfloat16`, scaled before
    /// HCCL sums it; nothing otherwise.
    fn collective_workspace(comm: &AclComm, call: &CollectiveCall) -> u64 {
        comm.workspace_for(call)
    }

    fn launch_collective_in(
        stream: &AclStream,
        comm: &AclComm,
        call: &CollectiveCall,
        label: &str,
        workspace: DeviceSlice,
    ) -> Result<(), HalError> {
        comm.launch(stream, call, label, workspace)
    }

    /// `HcclGroupStart` (nothing on a library without it: see `hccl::group`).
    fn group_start(comm: &AclComm) -> Result<(), HalError> {
        comm.group_start()
    }

    /// `HcclGroupEnd` (nothing on a library without it).
    fn group_end(comm: &AclComm) -> Result<(), HalError> {
        comm.group_end()
    }

    /// `HcclBatchSendRecv` of `calls` (one by one on a library without it).
    fn launch_send_recv_batch(
        stream: &AclStream,
        comm: &AclComm,
        calls: &[CollectiveCall],
        label: &str,
    ) -> Result<(), HalError> {
        comm.launch_batch(stream, calls, label)
    }

    /// `HcclCreateSubCommConfig` (see [`AclComm::create_sub_comm`]).
    fn create_sub_comm(
        parent: &AclComm,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Result<AclComm, HalError> {
        parent.create_sub_comm(ranks, sub_id, sub_rank)
    }

    /// `HcclGetCommAsyncError` (see [`AclComm::async_error`]).
    fn comm_async_error(comm: &AclComm) -> Result<Option<HalError>, HalError> {
        comm.async_error()
    }
}
