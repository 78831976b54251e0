//! The exported variable-count collectives (`HcclAllGatherV`, `HcclReduceScatterV`,
//! `HcclAlltoAllV`). Each reads its `uint64_t` count and displacement arrays (one entry per
//! rank of the communicator; a null array is `HCCL_E_PTR`), then the simulator checks the
//! blocks as HCCL's rules ask (`HCCL_E_PARA` for an overflowing block, overlapping receive
//! blocks, a count that is not the rank's own block, or a rank whose blocks disagree with
//! the others').

use super::{collective, dtype, non_null, ptr, reduce_op};
use crate::errmsg::{fail, Fail};
use crate::hccl::comms;
use braid_acl_sys::acl::aclrtStream;
use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::*;
use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, VCounts};
use std::ffi::c_void;

/// One rank's blocks from HCCL's `counts` and `displs` arrays of `comm`'s rank count.
///
/// # Safety
/// Non-null arrays hold at least that many `uint64_t`s.
unsafe fn blocks(
    call: &'static str,
    comm: HcclComm,
    (counts_name, counts): (&str, *const c_void),
    (displs_name, displs): (&str, *const c_void),
) -> Result<Blocks, Fail> {
    non_null(call, "comm", comm)?;
    non_null(call, counts_name, counts)?;
    non_null(call, displs_name, displs)?;
    let (_, ranks) = comms::rank_and_size(call, comm as usize)?;
    let read = |p: *const c_void| {
        // SAFETY: non-null, and the caller guarantees `ranks` entries.
        unsafe { std::slice::from_raw_parts(p.cast::<u64>(), ranks as usize) }.to_vec()
    };
    Ok(Blocks {
        counts: read(counts),
        displs: read(displs),
    })
}

/// `HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void
/// *recvCounts, const void *recvDispls, HcclDataType dataType, HcclComm comm, aclrtStream
/// stream)`: every rank passes the same receive counts and displacements, and its
/// `sendCount` is its own receive count.
///
/// # Safety
/// `recvCounts` and `recvDispls` are null or hold one `uint64_t` per rank.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // HCCL's signature
pub unsafe extern "C" fn HcclAllGatherV(
    send_buf: *mut c_void,
    send_count: u64,
    recv_buf: *mut c_void,
    recv_counts: *const c_void,
    recv_displs: *const c_void,
    data_type: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclAllGatherV";
    collective(CALL, comm, stream, || {
        // SAFETY: the caller's guarantee.
        let recv = unsafe {
            blocks(
                CALL,
                comm,
                ("recvCounts", recv_counts),
                ("recvDispls", recv_displs),
            )?
        };
        Ok(CollectiveCall::variable(
            CollectiveOp::AllGatherV,
            ptr(send_buf),
            ptr(recv_buf),
            send_count,
            dtype(CALL, data_type)?,
            VCounts {
                recv,
                ..VCounts::default()
            },
        ))
    })
}

/// `HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void
/// *sendDispls, void *recvBuf, uint64_t recvCount, HcclDataType dataType, HcclReduceOp op,
/// HcclComm comm, aclrtStream stream)`: every rank passes the same send counts and
/// displacements, and its `recvCount` is its own send count.
///
/// # Safety
/// `sendCounts` and `sendDispls` are null or hold one `uint64_t` per rank.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // HCCL's signature
pub unsafe extern "C" fn HcclReduceScatterV(
    send_buf: *mut c_void,
    send_counts: *const c_void,
    send_displs: *const c_void,
    recv_buf: *mut c_void,
    recv_count: u64,
    data_type: HcclDataType,
    op: HcclReduceOp,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclReduceScatterV";
    collective(CALL, comm, stream, || {
        // SAFETY: the caller's guarantee.
        let send = unsafe {
            blocks(
                CALL,
                comm,
                ("sendCounts", send_counts),
                ("sendDispls", send_displs),
            )?
        };
        Ok(CollectiveCall::variable(
            CollectiveOp::ReduceScatterV(reduce_op(CALL, op)?),
            ptr(send_buf),
            ptr(recv_buf),
            recv_count,
            dtype(CALL, data_type)?,
            VCounts {
                send,
                ..VCounts::default()
            },
        ))
    })
}

/// `HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
/// HcclDataType sendType, const void *recvBuf, const void *recvCounts, const void *rdispls,
/// HcclDataType recvType, HcclComm comm, aclrtStream stream)`: rank `i`'s send count to `j`
/// is rank `j`'s receive count from `i`. The simulator moves blocks of one type: a
/// `recvType` other than `sendType` is `HCCL_E_NOT_SUPPORT`.
///
/// # Safety
/// The four arrays are null or hold one `uint64_t` per rank.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // HCCL's signature
pub unsafe extern "C" fn HcclAlltoAllV(
    send_buf: *const c_void,
    send_counts: *const c_void,
    sdispls: *const c_void,
    send_type: HcclDataType,
    recv_buf: *const c_void,
    recv_counts: *const c_void,
    rdispls: *const c_void,
    recv_type: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclAlltoAllV";
    collective(CALL, comm, stream, || {
        let dtype = dtype(CALL, send_type)?;
        if dtype != self::dtype(CALL, recv_type)? {
            return Err(fail(
                HCCL_E_NOT_SUPPORT,
                format!("{CALL}: send type {send_type} and receive type {recv_type} differ; the simulator moves blocks of one type"),
            ));
        }
        // SAFETY: the caller's guarantee.
        let (send, recv) = unsafe {
            (
                blocks(
                    CALL,
                    comm,
                    ("sendCounts", send_counts),
                    ("sdispls", sdispls),
                )?,
                blocks(
                    CALL,
                    comm,
                    ("recvCounts", recv_counts),
                    ("rdispls", rdispls),
                )?,
            )
        };
        let count = send.total();
        Ok(CollectiveCall::variable(
            CollectiveOp::AllToAllV,
            ptr(send_buf),
            ptr(recv_buf),
            count,
            dtype,
            VCounts { send, recv },
        ))
    })
}
