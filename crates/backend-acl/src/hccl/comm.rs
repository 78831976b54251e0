//! [`AclComm`]: one rank's HCCL communicator, and [`AclStream::collective`]: one rank's part of
//! a collective enqueued on a stream.

use super::HcclApi;
use crate::bind;
use crate::device::AclDevice;
use crate::stream::AclStream;
use braid_acl_sys::hccl::*;
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp, RootInfo};
use braid_stream_core::hal::{self, HalError};
use braid_stream_core::DType;
use std::collections::HashSet;
use std::ffi::c_void;
use std::fmt;

/// One rank's HCCL communicator (`HcclComm`) on one device. Destroyed
/// (`HcclCommDestroy`, with its device bound) when dropped; a failure there is reported by
/// the device's next call.
pub struct AclComm {
    api: &'static HcclApi,
    device: AclDevice,
    raw: usize,
    rank: u32,
    ranks: u32,
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

/// HCCL's data type for braid's: fp32, fp16 and bf16 (`HCCL_DATA_TYPE_BFP16`).
pub fn dtype_of(dtype: DType) -> HcclDataType {
    match dtype {
        DType::F32 => HCCL_DATA_TYPE_FP32,
        DType::F16 => HCCL_DATA_TYPE_FP16,
        DType::BF16 => HCCL_DATA_TYPE_BFP16,
    }
}

/// HCCL's reduce operation for braid's.
pub fn reduce_op_of(op: ReduceOp) -> HcclReduceOp {
    match op {
        ReduceOp::Sum => HCCL_REDUCE_SUM,
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
        }
        let api = first.shared.hccl()?;
        for d in devices {
            if !std::ptr::eq(d.shared.hccl()?, api) {
                return Err(HalError::InvalidArgument(format!(
                    "HcclCommInitAll: device {} comes from another ACL library than device {}",
                    d.shared.ordinal, first.shared.ordinal
                )));
            }
        }
        let ranks = u32::try_from(devices.len())
            .map_err(|_| HalError::InvalidArgument("too many devices".into()))?;
        let mut ids: Vec<i32> = devices.iter().map(|d| d.shared.ordinal as i32).collect();
        let mut raw: Vec<HcclComm> = vec![std::ptr::null_mut(); devices.len()];
        first.shared.bind()?;
        // SAFETY: `ids` holds `ranks` device ids and `raw` room for `ranks` handles.
        let code = unsafe { (api.HcclCommInitAll)(ranks, ids.as_mut_ptr(), raw.as_mut_ptr()) };
        // HCCL sets each device while it builds the communicators: the thread's current
        // device is no longer known, so the next call binds its own again.
        bind::forget_current();
        api.check("HcclCommInitAll", code)?;
        Ok(devices
            .iter()
            .zip(raw)
            .zip(0..)
            .map(|((d, raw), rank)| AclComm {
                api,
                device: (*d).clone(),
                raw: raw as usize,
                rank,
                ranks,
            })
            .collect())
    }

    /// A fresh root info for a communicator whose rank 0 runs on `device`
    /// (`HcclGetRootInfo`): the bytes the user ships to every other rank.
    pub fn root_info(device: &AclDevice) -> Result<RootInfo, HalError> {
        let api = device.shared.hccl()?;
        device.shared.bind()?;
        let mut info = Box::new(HcclRootInfo::default());
        // SAFETY: `info` is valid for a write of the whole struct.
        api.check("HcclGetRootInfo", unsafe {
            (api.HcclGetRootInfo)(&mut *info)
        })?;
        Ok(RootInfo(Box::new(info.internal)))
    }

    /// Joins the communicator of `ranks` ranks that `info` describes as rank `rank` on
    /// `device` (`HcclCommInitRootInfo`). HCCL returns once every rank has joined, so each
    /// rank joins from its own thread or process; `braid-acl-sim` returns at once and runs a
    /// collective when every rank has joined and issued its part.
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
        let api = device.shared.hccl()?;
        device.shared.bind()?;
        let root = Box::new(HcclRootInfo { internal: *info.0 });
        let mut raw: HcclComm = std::ptr::null_mut();
        // SAFETY: `root` is a whole root info; `raw` is valid for a write.
        let code = unsafe { (api.HcclCommInitRootInfo)(ranks, &*root, rank, &mut raw) };
        api.check("HcclCommInitRootInfo", code)?;
        Ok(AclComm {
            api,
            device: device.clone(),
            raw: raw as usize,
            rank,
            ranks,
        })
    }

    /// This communicator's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The device this rank runs on.
    pub fn device(&self) -> &AclDevice {
        &self.device
    }

    /// The raw `HcclComm`, for HCCL calls braid does not wrap.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw as *mut c_void
    }

    /// The HCCL table the communicator was made with.
    pub fn api(&self) -> &'static HcclApi {
        self.api
    }

    /// Asks HCCL for the rank and rank count (`HcclGetRankId`, `HcclGetRankSize`).
    pub fn query_rank_and_size(&self) -> Result<(u32, u32), HalError> {
        self.device.shared.bind()?;
        let (mut rank, mut size) = (0u32, 0u32);
        // SAFETY: a live communicator; the out pointers are valid for writes.
        self.api.check("HcclGetRankId", unsafe {
            (self.api.HcclGetRankId)(self.as_raw(), &mut rank)
        })?;
        // SAFETY: as above.
        self.api.check("HcclGetRankSize", unsafe {
            (self.api.HcclGetRankSize)(self.as_raw(), &mut size)
        })?;
        Ok((rank, size))
    }
}

impl Drop for AclComm {
    fn drop(&mut self) {
        let (api, raw) = (self.api, self.as_raw());
        self.device.shared.release("HcclCommDestroy", |_| {
            // SAFETY: the communicator is live and destroyed once, here.
            unsafe { (api.HcclCommDestroy)(raw) }
        });
    }
}

impl AclStream {
    /// Enqueues this rank's part of `call` on this stream with `comm` (`HcclAllReduce`,
    /// `HcclAllGather`, `HcclReduceScatter`, `HcclBroadcast`, `HcclSend`, `HcclRecv`,
    /// `HcclAlltoAll`). The communicator must be of this stream's device; buffers are
    /// device addresses of it, valid for the call's lengths until the collective has run
    /// (braid-collective checks them; this call does not). HCCL takes an explicit stream:
    /// on the default stream (a null `aclrtStream`) it answers `HCCL_E_PTR`.
    pub fn collective(
        &self,
        comm: &AclComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        let ordinal = self.shared.ordinal;
        if comm.device.shared.ordinal != ordinal {
            return Err(HalError::InvalidArgument(format!(
                "{label}: the communicator of rank {} is on ACL device {}, the stream on ACL device {ordinal}",
                comm.rank, comm.device.shared.ordinal
            )));
        }
        let api = comm.api;
        let (c, s) = (comm.as_raw(), self.as_raw());
        let (send, recv) = (call.send.0 as *mut c_void, call.recv.0 as *mut c_void);
        let (count, dtype) = (call.count, dtype_of(call.dtype));
        self.shared.bind()?;
        tracing::trace!(label, op = %call.op, count, "HCCL collective");
        // SAFETY: a live communicator of this stream's device and this live stream; the
        // caller keeps the buffers valid for the call's lengths until it has run.
        let (name, code) = unsafe {
            match call.op {
                CollectiveOp::AllReduce(op) => (
                    "HcclAllReduce",
                    (api.HcclAllReduce)(send, recv, count, dtype, reduce_op_of(op), c, s),
                ),
                CollectiveOp::AllGather => (
                    "HcclAllGather",
                    (api.HcclAllGather)(send, recv, count, dtype, c, s),
                ),
                CollectiveOp::ReduceScatter(op) => (
                    "HcclReduceScatter",
                    (api.HcclReduceScatter)(send, recv, count, dtype, reduce_op_of(op), c, s),
                ),
                CollectiveOp::Broadcast { root } => {
                    // In place: the root sends its buffer, every rank receives into its own.
                    let buf = if comm.rank == root { send } else { recv };
                    (
                        "HcclBroadcast",
                        (api.HcclBroadcast)(buf, count, dtype, root, c, s),
                    )
                }
                CollectiveOp::Send { peer } => {
                    ("HcclSend", (api.HcclSend)(send, count, dtype, peer, c, s))
                }
                CollectiveOp::Recv { peer } => {
                    ("HcclRecv", (api.HcclRecv)(recv, count, dtype, peer, c, s))
                }
                CollectiveOp::AllToAll => {
                    let Some(all_to_all) = api.HcclAlltoAll else {
                        return Err(HalError::Unsupported(
                            "all-to-all: this libhccl.so has no HcclAlltoAll",
                        ));
                    };
                    (
                        "HcclAlltoAll",
                        all_to_all(send, count, dtype, recv, count, dtype, c, s),
                    )
                }
            }
        };
        api.check(name, code)?;
        self.shared.note_work(self.raw, 1);
        if let CollectiveOp::Broadcast { root } = call.op {
            if comm.rank == root && call.send != call.recv {
                // HCCL's broadcast leaves the root's buffer as it was: the root's own copy
                // into a separate receive buffer follows it on the stream.
                let len = call.recv_len(comm.ranks).ok_or_else(|| {
                    HalError::InvalidArgument(format!("{label}: broadcast length overflows"))
                })?;
                hal::Stream::memcpy_d2d(self, call.recv, call.send, len)?;
            }
        }
        Ok(())
    }
}
