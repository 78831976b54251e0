//! Every HCCL function braid calls, with its C signature (`hccl.h`; `reference/aclnn-hccl.md`
//! B.2): the one list ([`hccl_functions!`](crate::hccl_functions)) that makes the
//! [`HcclFunctions`] table here and checks `braid-acl-sim`'s exports.
//!
//! Required: communicators (root info, init from it, init all, destroy, rank and size), the
//! collectives braid maps (all-reduce, broadcast, reduce-scatter, all-gather, send, receive,
//! barrier, reduce)
//! and `HcclGetErrorString`. Optional: `HcclAlltoAll` and `HcclScatter` (newer releases),
//! `HcclGetCommAsyncError`, the variable-count `HcclAllGatherV`, `HcclReduceScatterV`,
//! `HcclAlltoAllV` (Atlas A2 releases), and the grouped calls `HcclGroupStart`, `HcclGroupEnd`
//! and `HcclBatchSendRecv`.

use super::types::{
    HcclComm, HcclDataType, HcclReduceOp, HcclResult, HcclRootInfo, HcclSendRecvItem,
};
use crate::acl::aclrtStream;
use std::ffi::{c_char, c_void};

/// Hands the list of HCCL functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! hccl_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The function table of one HCCL library (`libhccl.so`, or `libbraid_acl_sim.so`).
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract (valid
    /// communicators and streams, device buffers valid for the counts given).
    pub struct HcclFunctions;

    /// `HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo)`: on rank 0, the bytes every rank
    /// passes to `HcclCommInitRootInfo`.
    required fn HcclGetRootInfo(root_info: *mut HcclRootInfo) -> HcclResult;
    /// `HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
    /// uint32_t rank, HcclComm *comm)`: on the calling thread's current device.
    required fn HcclCommInitRootInfo(
        n_ranks: u32,
        root_info: *const HcclRootInfo,
        rank: u32,
        comm: *mut HcclComm,
    ) -> HcclResult;
    /// `HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms)`: one
    /// communicator per device of this process (`comms` holds `ndev` handles; rank i is
    /// `devices[i]`).
    required fn HcclCommInitAll(ndev: u32, devices: *mut i32, comms: *mut HcclComm) -> HcclResult;
    /// `HcclResult HcclCommDestroy(HcclComm comm)`.
    required fn HcclCommDestroy(comm: HcclComm) -> HcclResult;
    /// `HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize)`.
    required fn HcclGetRankSize(comm: HcclComm, rank_size: *mut u32) -> HcclResult;
    /// `HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank)`.
    required fn HcclGetRankId(comm: HcclComm, rank: *mut u32) -> HcclResult;
    /// `HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType
    /// dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)`.
    required fn HcclAllReduce(
        send_buf: *mut c_void,
        recv_buf: *mut c_void,
        count: u64,
        data_type: HcclDataType,
        op: HcclReduceOp,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t
    /// root, HcclComm comm, aclrtStream stream)`.
    required fn HcclBroadcast(
        buf: *mut c_void,
        count: u64,
        data_type: HcclDataType,
        root: u32,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
    /// HcclDataType dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)`.
    required fn HcclReduceScatter(
        send_buf: *mut c_void,
        recv_buf: *mut c_void,
        recv_count: u64,
        data_type: HcclDataType,
        op: HcclReduceOp,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
    /// HcclDataType dataType, HcclComm comm, aclrtStream stream)`.
    required fn HcclAllGather(
        send_buf: *mut c_void,
        recv_buf: *mut c_void,
        send_count: u64,
        data_type: HcclDataType,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t
    /// destRank, HcclComm comm, aclrtStream stream)`.
    required fn HcclSend(
        send_buf: *mut c_void,
        count: u64,
        data_type: HcclDataType,
        dest_rank: u32,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t
    /// srcRank, HcclComm comm, aclrtStream stream)`.
    required fn HcclRecv(
        recv_buf: *mut c_void,
        count: u64,
        data_type: HcclDataType,
        src_rank: u32,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType
    /// dataType, HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)` (confirmed
    /// in `hccl/REFERENCE.md`).
    required fn HcclReduce(
        send_buf: *mut c_void,
        recv_buf: *mut c_void,
        count: u64,
        data_type: HcclDataType,
        op: HcclReduceOp,
        root: u32,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)` (confirmed in
    /// `hccl/REFERENCE.md`).
    required fn HcclBarrier(comm: HcclComm, stream: aclrtStream) -> HcclResult;
    /// `const char *HcclGetErrorString(HcclResult code)`: the library's text for a result.
    required fn HcclGetErrorString(code: HcclResult) -> *const c_char;

    /// `HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType
    /// sendType, const void *recvBuf, uint64_t recvCount, HcclDataType recvType, HcclComm
    /// comm, aclrtStream stream)`: counts per peer.
    optional fn HcclAlltoAll(
        send_buf: *const c_void,
        send_count: u64,
        send_type: HcclDataType,
        recv_buf: *const c_void,
        recv_count: u64,
        recv_type: HcclDataType,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType
    /// dataType, uint32_t root, HcclComm comm, aclrtStream stream)` (confirmed in
    /// `hccl/REFERENCE.md`; newer releases).
    optional fn HcclScatter(
        send_buf: *mut c_void,
        recv_buf: *mut c_void,
        recv_count: u64,
        data_type: HcclDataType,
        root: u32,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError)`.
    optional fn HcclGetCommAsyncError(comm: HcclComm, async_error: *mut HcclResult) -> HcclResult;
    /// `HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void
    /// *recvCounts, const void *recvDispls, HcclDataType dataType, HcclComm comm, aclrtStream
    /// stream)`: counts and displacements are `uint64_t` arrays of one entry per rank, in
    /// elements (confirmed in `hccl/REFERENCE.md`; Atlas A2 releases).
    optional fn HcclAllGatherV(
        send_buf: *mut c_void,
        send_count: u64,
        recv_buf: *mut c_void,
        recv_counts: *const c_void,
        recv_displs: *const c_void,
        data_type: HcclDataType,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void
    /// *sendDispls, void *recvBuf, uint64_t recvCount, HcclDataType dataType, HcclReduceOp op,
    /// HcclComm comm, aclrtStream stream)` (confirmed in `hccl/REFERENCE.md`).
    optional fn HcclReduceScatterV(
        send_buf: *mut c_void,
        send_counts: *const c_void,
        send_displs: *const c_void,
        recv_buf: *mut c_void,
        recv_count: u64,
        data_type: HcclDataType,
        op: HcclReduceOp,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
    /// `HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void
    /// *sdispls, HcclDataType sendType, const void *recvBuf, const void *recvCounts, const void
    /// *rdispls, HcclDataType recvType, HcclComm comm, aclrtStream stream)` (confirmed in
    /// `hccl/REFERENCE.md`).
    optional fn HcclAlltoAllV(
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
    ) -> HcclResult;
    /// `HcclResult HcclGroupStart()`: opens (or nests) the calling thread's group; calls
    /// until the outermost `HcclGroupEnd` are issued together (confirmed in
    /// `hccl/REFERENCE.md`; newer releases).
    optional fn HcclGroupStart() -> HcclResult;
    /// `HcclResult HcclGroupEnd()`: closes a level of the thread's group; the outermost one
    /// issues its calls. Without a group open it is `HCCL_E_NOT_SUPPORT`.
    optional fn HcclGroupEnd() -> HcclResult;
    /// `HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum,
    /// HcclComm comm, aclrtStream stream)`: `itemNum` sends and receives to several peers as
    /// one call (confirmed in `hccl/REFERENCE.md`).
    optional fn HcclBatchSendRecv(
        send_recv_info: *mut HcclSendRecvItem,
        item_num: u32,
        comm: HcclComm,
        stream: aclrtStream,
    ) -> HcclResult;
        }
    };
}

crate::hccl_functions!(crate::c_api!());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_symbol_list_names_every_function_once_with_its_kind() {
        let symbols = HcclFunctions::SYMBOLS;
        let mut names: Vec<&str> = symbols.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), symbols.len());
        assert_eq!(symbols.len(), 24);
        let optional: Vec<&str> = symbols
            .iter()
            .filter(|s| !s.required)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            optional,
            [
                "HcclAlltoAll",
                "HcclScatter",
                "HcclGetCommAsyncError",
                "HcclAllGatherV",
                "HcclReduceScatterV",
                "HcclAlltoAllV",
                "HcclGroupStart",
                "HcclGroupEnd",
                "HcclBatchSendRecv",
            ]
        );
        assert!(symbols
            .iter()
            .any(|s| s.name == "HcclCommInitAll" && s.required));
    }
}
