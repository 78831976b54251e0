//! The exported HCCL symbols. Each checks its arguments as HCCL does, then calls the
//! communicator table; [`check_exports!`](braid_acl_sys::check_exports) at the end of this
//! file fails to compile when one of `braid_acl_sys::hccl::HcclFunctions` is missing or
//! drifts from its declaration.

use super::comms;
pub use super::group::{HcclBatchSendRecv, HcclGroupEnd, HcclGroupStart};
use super::results::error_string;
use crate::errmsg::{fail, ret, Fail};
use braid_acl_sys::acl::aclrtStream;
use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::*;
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::types::DevicePtr;
use braid_stream_core::DType;
use std::ffi::{c_char, c_void};

mod variable;
pub use variable::{HcclAllGatherV, HcclAlltoAllV, HcclReduceScatterV};

/// `HCCL_E_PTR` naming the null argument `what` of `call`.
fn null(call: &str, what: &str) -> Fail {
    fail(HCCL_E_PTR, format!("{call}: {what} is a null pointer"))
}

/// Refuses a null `p`.
pub(super) fn non_null<T>(call: &str, what: &str, p: *const T) -> Result<(), Fail> {
    if p.is_null() {
        Err(null(call, what))
    } else {
        Ok(())
    }
}

/// braid's data type for an `HcclDataType` (braid-acl-sys's one table of HCCL's codes):
/// every type of HCCL's table braid has (int8 to uint64, fp16, fp32, bf16, fp64);
/// `HCCL_E_NOT_SUPPORT` for HCCL's int128 and 8-bit float types, which braid has not;
/// `HCCL_E_PARA` for a value that is not an `HcclDataType`.
pub(super) fn dtype(call: &str, data_type: HcclDataType) -> Result<DType, Fail> {
    if let Some(t) = braid_acl_sys::dtypes::dtype_of_hccl(data_type) {
        return Ok(t);
    }
    match data_type {
        12..=17 => Err(fail(
            HCCL_E_NOT_SUPPORT,
            format!("{call}: data type {data_type} (int128 or an 8-bit float) is not simulated; every other type of HCCL's table is"),
        )),
        _ => Err(fail(
            HCCL_E_PARA,
            format!("{call}: {data_type} is not an HcclDataType"),
        )),
    }
}

/// braid's reduction for an `HcclReduceOp`: `HCCL_E_PARA` for a value that is not one.
fn reduce_op(call: &str, op: HcclReduceOp) -> Result<ReduceOp, Fail> {
    match op {
        HCCL_REDUCE_SUM => Ok(ReduceOp::Sum),
        HCCL_REDUCE_PROD => Ok(ReduceOp::Prod),
        HCCL_REDUCE_MAX => Ok(ReduceOp::Max),
        HCCL_REDUCE_MIN => Ok(ReduceOp::Min),
        _ => Err(fail(
            HCCL_E_PARA,
            format!("{call}: {op} is not an HcclReduceOp"),
        )),
    }
}

/// Checks the communicator and stream of a collective, then enqueues `call` on the stream.
fn collective(
    name: &'static str,
    comm: HcclComm,
    stream: aclrtStream,
    call: impl FnOnce() -> Result<CollectiveCall, Fail>,
) -> HcclResult {
    ret((|| {
        non_null(name, "comm", comm)?;
        non_null(name, "stream", stream)?;
        let call = call()?;
        if super::group::hold(name, comm as usize, stream as usize, &call)? {
            return Ok(());
        }
        comms::collective(name, comm as usize, stream as usize, &call)
    })())
}

fn ptr(p: *const c_void) -> DevicePtr {
    DevicePtr(p as u64)
}

/// `HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo)`: a fresh root info for a communicator
/// whose rank 0 is the calling thread's current device.
///
/// # Safety
/// `root_info` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRootInfo(root_info: *mut HcclRootInfo) -> HcclResult {
    const CALL: &str = "HcclGetRootInfo";
    ret((|| {
        non_null(CALL, "rootInfo", root_info)?;
        let info = comms::root_info(CALL)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a write.
        unsafe { root_info.write(info) };
        Ok(())
    })())
}

/// `HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t
/// rank, HcclComm *comm)`: joins the communicator as `rank` on the calling thread's current
/// device. HCCL waits for every rank here; the simulator does not (a collective runs once
/// every rank has joined and issued its part).
///
/// # Safety
/// `root_info` is null or valid for a read; `comm` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitRootInfo(
    n_ranks: u32,
    root_info: *const HcclRootInfo,
    rank: u32,
    comm: *mut HcclComm,
) -> HcclResult {
    const CALL: &str = "HcclCommInitRootInfo";
    ret((|| {
        non_null(CALL, "rootInfo", root_info)?;
        non_null(CALL, "comm", comm)?;
        if n_ranks == 0 || rank >= n_ranks {
            return Err(fail(
                HCCL_E_PARA,
                format!("{CALL}: rank {rank} is not below nRanks {n_ranks}"),
            ));
        }
        // SAFETY: non-null, and the caller guarantees it is valid for a read.
        let info = unsafe { root_info.read() };
        let handle = comms::init_root_info(CALL, n_ranks, rank, &info)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a write.
        unsafe { comm.write(handle as HcclComm) };
        Ok(())
    })())
}

/// `HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms)`: one
/// communicator per listed device (rank i on `devices[i]`).
///
/// # Safety
/// `devices` is null or valid for reads of `ndev` values; `comms` is null or valid for writes
/// of `ndev` handles.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitAll(
    ndev: u32,
    devices: *mut i32,
    comms: *mut HcclComm,
) -> HcclResult {
    const CALL: &str = "HcclCommInitAll";
    ret((|| {
        non_null(CALL, "devices", devices)?;
        non_null(CALL, "comms", comms)?;
        if ndev == 0 {
            return Err(fail(HCCL_E_PARA, format!("{CALL}: ndev is 0")));
        }
        // SAFETY: non-null, and the caller guarantees `ndev` readable values.
        let ids = unsafe { std::slice::from_raw_parts(devices, ndev as usize) }.to_vec();
        let handles = comms::init_all(CALL, &ids)?;
        // SAFETY: non-null, and the caller guarantees room for `ndev` handles.
        let out = unsafe { std::slice::from_raw_parts_mut(comms, ndev as usize) };
        for (slot, handle) in out.iter_mut().zip(handles) {
            *slot = handle as HcclComm;
        }
        Ok(())
    })())
}

/// `HcclResult HcclCommDestroy(HcclComm comm)`.
#[no_mangle]
pub extern "C" fn HcclCommDestroy(comm: HcclComm) -> HcclResult {
    const CALL: &str = "HcclCommDestroy";
    ret(non_null(CALL, "comm", comm).and_then(|()| comms::destroy(CALL, comm as usize)))
}

/// `HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize)`.
///
/// # Safety
/// `rank_size` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRankSize(comm: HcclComm, rank_size: *mut u32) -> HcclResult {
    const CALL: &str = "HcclGetRankSize";
    ret((|| {
        non_null(CALL, "comm", comm)?;
        non_null(CALL, "rankSize", rank_size)?;
        let (_, ranks) = comms::rank_and_size(CALL, comm as usize)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a write.
        unsafe { rank_size.write(ranks) };
        Ok(())
    })())
}

/// `HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank)`.
///
/// # Safety
/// `rank` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRankId(comm: HcclComm, rank: *mut u32) -> HcclResult {
    const CALL: &str = "HcclGetRankId";
    ret((|| {
        non_null(CALL, "comm", comm)?;
        non_null(CALL, "rank", rank)?;
        let (id, _) = comms::rank_and_size(CALL, comm as usize)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a write.
        unsafe { rank.write(id) };
        Ok(())
    })())
}

/// `HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType
/// dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn HcclAllReduce(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    count: u64,
    data_type: HcclDataType,
    op: HcclReduceOp,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclAllReduce";
    collective(CALL, comm, stream, || {
        non_null(CALL, "sendBuf", send_buf)?;
        non_null(CALL, "recvBuf", recv_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::AllReduce(reduce_op(CALL, op)?),
            send: ptr(send_buf),
            recv: ptr(recv_buf),
            count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
/// HcclComm comm, aclrtStream stream)`: in place, the root's `buf` to every rank's.
#[no_mangle]
pub extern "C" fn HcclBroadcast(
    buf: *mut c_void,
    count: u64,
    data_type: HcclDataType,
    root: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclBroadcast";
    collective(CALL, comm, stream, || {
        non_null(CALL, "buf", buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::Broadcast { root },
            send: ptr(buf),
            recv: ptr(buf),
            count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
/// HcclDataType dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn HcclReduceScatter(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    recv_count: u64,
    data_type: HcclDataType,
    op: HcclReduceOp,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclReduceScatter";
    collective(CALL, comm, stream, || {
        non_null(CALL, "sendBuf", send_buf)?;
        non_null(CALL, "recvBuf", recv_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::ReduceScatter(reduce_op(CALL, op)?),
            send: ptr(send_buf),
            recv: ptr(recv_buf),
            count: recv_count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType
/// dataType, HcclComm comm, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn HcclAllGather(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    send_count: u64,
    data_type: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclAllGather";
    collective(CALL, comm, stream, || {
        non_null(CALL, "sendBuf", send_buf)?;
        non_null(CALL, "recvBuf", recv_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::AllGather,
            send: ptr(send_buf),
            recv: ptr(recv_buf),
            count: send_count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t
/// destRank, HcclComm comm, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn HcclSend(
    send_buf: *mut c_void,
    count: u64,
    data_type: HcclDataType,
    dest_rank: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclSend";
    collective(CALL, comm, stream, || {
        non_null(CALL, "sendBuf", send_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::Send { peer: dest_rank },
            send: ptr(send_buf),
            recv: DevicePtr(0),
            count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t
/// srcRank, HcclComm comm, aclrtStream stream)`.
#[no_mangle]
pub extern "C" fn HcclRecv(
    recv_buf: *mut c_void,
    count: u64,
    data_type: HcclDataType,
    src_rank: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclRecv";
    collective(CALL, comm, stream, || {
        non_null(CALL, "recvBuf", recv_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::Recv { peer: src_rank },
            send: DevicePtr(0),
            recv: ptr(recv_buf),
            count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
/// const void *recvBuf, uint64_t recvCount, HcclDataType recvType, HcclComm comm,
/// aclrtStream stream)`: the simulator moves equal blocks of one type (different counts or
/// types are `HCCL_E_NOT_SUPPORT`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn HcclAlltoAll(
    send_buf: *const c_void,
    send_count: u64,
    send_type: HcclDataType,
    recv_buf: *const c_void,
    recv_count: u64,
    recv_type: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclAlltoAll";
    collective(CALL, comm, stream, || {
        non_null(CALL, "sendBuf", send_buf)?;
        non_null(CALL, "recvBuf", recv_buf)?;
        let dtype = dtype(CALL, send_type)?;
        if dtype != self::dtype(CALL, recv_type)? || send_count != recv_count {
            return Err(fail(
                HCCL_E_NOT_SUPPORT,
                format!("{CALL}: send and receive blocks differ ({send_count} of type {send_type}, {recv_count} of type {recv_type}); the simulator moves equal blocks"),
            ));
        }
        Ok(CollectiveCall {
            op: CollectiveOp::AllToAll,
            send: ptr(send_buf),
            recv: ptr(recv_buf),
            count: send_count,
            dtype,
            v: None,
        })
    })
}

/// `HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType
/// dataType, HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)`: `recvBuf`
/// is written on the root only.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // HCCL's signature
pub extern "C" fn HcclReduce(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    count: u64,
    data_type: HcclDataType,
    op: HcclReduceOp,
    root: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclReduce";
    collective(CALL, comm, stream, || {
        non_null(CALL, "sendBuf", send_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::Reduce {
                op: reduce_op(CALL, op)?,
                root,
            },
            send: ptr(send_buf),
            recv: ptr(recv_buf),
            count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType
/// dataType, uint32_t root, HcclComm comm, aclrtStream stream)`: `sendBuf` is read on the
/// root only.
#[no_mangle]
pub extern "C" fn HcclScatter(
    send_buf: *mut c_void,
    recv_buf: *mut c_void,
    recv_count: u64,
    data_type: HcclDataType,
    root: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclScatter";
    collective(CALL, comm, stream, || {
        non_null(CALL, "recvBuf", recv_buf)?;
        Ok(CollectiveCall {
            op: CollectiveOp::Scatter { root },
            send: ptr(send_buf),
            recv: ptr(recv_buf),
            count: recv_count,
            dtype: dtype(CALL, data_type)?,
            v: None,
        })
    })
}

/// `HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)`: no rank's stream goes past it
/// before every rank's has reached it.
#[no_mangle]
pub extern "C" fn HcclBarrier(comm: HcclComm, stream: aclrtStream) -> HcclResult {
    const CALL: &str = "HcclBarrier";
    collective(CALL, comm, stream, || {
        Ok(CollectiveCall {
            op: CollectiveOp::Barrier,
            send: DevicePtr(0),
            recv: DevicePtr(0),
            count: 0,
            dtype: DType::F32,
            v: None,
        })
    })
}

/// `HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError)`: the
/// communicator's failure that came after its calls returned — on the simulator a host wait on
/// one of its collectives that could not complete (`HCCL_E_TIMEOUT`, the result HCCL gives a
/// collective that times out), or a part that the simulator's fault plan made fail on the
/// device (`HCCL_E_RUNTIME`; see `braid_backend_sim::fault`); `HCCL_SUCCESS` while there is
/// none. The first is kept for the communicator's life, as HCCL keeps it.
///
/// # Safety
/// `async_error` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclGetCommAsyncError(
    comm: HcclComm,
    async_error: *mut HcclResult,
) -> HcclResult {
    const CALL: &str = "HcclGetCommAsyncError";
    ret((|| {
        non_null(CALL, "comm", comm)?;
        non_null(CALL, "asyncError", async_error)?;
        let found = comms::async_error(CALL, comm as usize)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a write.
        unsafe { async_error.write(found) };
        Ok(())
    })())
}

/// `HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
/// uint64_t subCommId, uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm)`:
/// writes to `*subComm` the caller's handle of sub-communicator `subCommId` of `*comm`, made
/// of its ranks `rankIds[..rankNum]`, as rank `subCommRankId`; the first member's call makes
/// it, the others join it. Null pointers are `HCCL_E_PTR`; a config `HcclCommConfigInit` did
/// not initialize, an empty list, a rank out of range or listed twice, a `subCommRankId`
/// whose entry is not the caller's rank, or a list other than the first member's are
/// `HCCL_E_PARA`.
///
/// # Safety
/// Each pointer is null or valid: `comm` for a read, `rankIds` for `rankNum` reads, `config`
/// for a read of an `HcclCommConfig`, `subComm` for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclCreateSubCommConfig(
    comm: *mut HcclComm,
    rank_num: u32,
    rank_ids: *mut u32,
    sub_comm_id: u64,
    sub_comm_rank_id: u32,
    config: *mut HcclCommConfig,
    sub_comm: *mut HcclComm,
) -> HcclResult {
    const CALL: &str = "HcclCreateSubCommConfig";
    ret((|| {
        non_null(CALL, "comm", comm)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a read.
        let parent = unsafe { comm.read() };
        non_null(CALL, "*comm", parent)?;
        non_null(CALL, "rankIds", rank_ids)?;
        non_null(CALL, "config", config)?;
        non_null(CALL, "subComm", sub_comm)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a read.
        if !unsafe { config.read() }.is_initialized() {
            return Err(fail(
                HCCL_E_PARA,
                format!("{CALL}: config was not initialized by HcclCommConfigInit"),
            ));
        }
        // SAFETY: non-null, and the caller guarantees `rankNum` readable entries.
        let ranks = unsafe { std::slice::from_raw_parts(rank_ids, rank_num as usize) };
        let handle =
            comms::create_sub_comm(CALL, parent as usize, ranks, sub_comm_id, sub_comm_rank_id)?;
        // SAFETY: non-null, and the caller guarantees it is valid for a write.
        unsafe { sub_comm.write(handle as HcclComm) };
        Ok(())
    })())
}

/// `const char *HcclGetErrorString(HcclResult code)`: what `code` means (a static string;
/// "unknown error" for a number that is no `HcclResult`).
#[no_mangle]
pub extern "C" fn HcclGetErrorString(code: HcclResult) -> *const c_char {
    error_string(code).as_ptr()
}

braid_acl_sys::hccl_functions!(braid_acl_sys::check_exports!(braid_acl_sys::hccl::fns;));
