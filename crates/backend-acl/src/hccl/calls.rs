//! [`HcclCalls`]: the HCCL calls the backend makes, as a trait over plain Rust values (the
//! layer `crate::calls` is for ACL, cudarc's result layer).
//!
//! The real implementation ([`HcclRef`]) forwards to an [`HcclApi`] table (out parameters
//! become return values, an absent optional symbol becomes `None`); unit tests use the
//! generated `MockHcclCalls`, so every error path of the communicators and collectives is
//! tested without a library. Codes are raw `HcclResult`s: turning them into errors (with
//! `HcclGetErrorString` and `aclGetRecentErrMsg`) is the wrapper's job.

use super::HcclApi;
use crate::calls::Handle;
use braid_acl_sys::hccl::codes::HCCL_E_PARA;
use braid_acl_sys::hccl::{
    HcclComm, HcclCommConfig, HcclDataType, HcclReduceOp, HcclResult, HcclRootInfo,
    HcclSendRecvItem, HcclSendRecvType, HCCL_ROOT_INFO_BYTES,
};
use braid_stream_core::collective::VCounts;
use std::ffi::c_void;
use std::ptr;

/// A root info's bytes.
pub(crate) type RootBytes = [u8; HCCL_ROOT_INFO_BYTES];

/// Converts a return code into `Result`.
fn ok(code: HcclResult) -> Result<(), HcclResult> {
    if code == 0 {
        Ok(())
    } else {
        Err(code)
    }
}

/// The buffers, element count and type of one collective call, as HCCL takes them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Buffers {
    /// The send buffer's device address.
    pub send: u64,
    /// The receive buffer's device address.
    pub recv: u64,
    /// Elements (HCCL's meaning per operation).
    pub count: u64,
    /// HCCL's data type.
    pub dtype: HcclDataType,
}

#[cfg_attr(test, mockall::automock)]
pub(crate) trait HcclCalls: Send + Sync {
    /// `HcclGetErrorString`, copied ("" when the library gives none).
    fn error_string(&self, code: HcclResult) -> String;
    /// `aclGetRecentErrMsg` of the ACL library HCCL goes with, copied ("" when none).
    fn recent_error_message(&self) -> String;
    /// `HcclCommInitAll` over `devices`: one communicator per device.
    fn comm_init_all(&self, devices: &[i32]) -> Result<Vec<Handle>, HcclResult>;
    /// `HcclGetRootInfo`.
    fn get_root_info(&self) -> Result<Box<RootBytes>, HcclResult>;
    /// `HcclCommInitRootInfo`.
    fn comm_init_root_info(
        &self,
        ranks: u32,
        root: &RootBytes,
        rank: u32,
    ) -> Result<Handle, HcclResult>;
    /// `HcclCommDestroy`.
    fn comm_destroy(&self, comm: Handle) -> HcclResult;
    /// `HcclGetRankId`.
    fn rank_id(&self, comm: Handle) -> Result<u32, HcclResult>;
    /// `HcclGetRankSize`.
    fn rank_size(&self, comm: Handle) -> Result<u32, HcclResult>;
    /// `HcclAllReduce`.
    fn all_reduce(&self, b: Buffers, op: HcclReduceOp, comm: Handle, stream: Handle) -> HcclResult;
    /// `HcclAllGather` (`count` elements sent by each rank).
    fn all_gather(&self, b: Buffers, comm: Handle, stream: Handle) -> HcclResult;
    /// `HcclReduceScatter` (`count` elements received by each rank).
    fn reduce_scatter(
        &self,
        b: Buffers,
        op: HcclReduceOp,
        comm: Handle,
        stream: Handle,
    ) -> HcclResult;
    /// `HcclBroadcast` of the buffer at `buf`.
    fn broadcast(
        &self,
        buf: u64,
        count: u64,
        dtype: HcclDataType,
        root: u32,
        comm: Handle,
        stream: Handle,
    ) -> HcclResult;
    /// `HcclSend` of `b.send` to `peer`.
    fn send(&self, b: Buffers, peer: u32, comm: Handle, stream: Handle) -> HcclResult;
    /// `HcclRecv` into `b.recv` from `peer`.
    fn recv(&self, b: Buffers, peer: u32, comm: Handle, stream: Handle) -> HcclResult;
    /// `HcclAlltoAll` (`count` elements to and from each rank); `None` without the symbol.
    fn all_to_all(&self, b: Buffers, comm: Handle, stream: Handle) -> Option<HcclResult>;
    /// `HcclBarrier`.
    fn barrier(&self, comm: Handle, stream: Handle) -> HcclResult;
    /// `HcclScatter` from `root` (`count` elements to each rank); `None` without the symbol.
    fn scatter(&self, b: Buffers, root: u32, comm: Handle, stream: Handle) -> Option<HcclResult>;
    /// `HcclReduce` to `root`.
    fn reduce(
        &self,
        b: Buffers,
        op: HcclReduceOp,
        root: u32,
        comm: Handle,
        stream: Handle,
    ) -> HcclResult;
    /// `HcclAllGatherV`: `b.count` elements of `b.send`, every rank's block of `b.recv` at
    /// `v.recv` (one entry per rank: the caller checked); `None` without the symbol.
    fn all_gather_v(
        &self,
        b: Buffers,
        v: &VCounts,
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult>;
    /// `HcclReduceScatterV`: every rank's block of `b.send` at `v.send`, `b.count` elements
    /// into `b.recv`; `None` without the symbol.
    fn reduce_scatter_v(
        &self,
        b: Buffers,
        v: &VCounts,
        op: HcclReduceOp,
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult>;
    /// `HcclAlltoAllV` with `v.send` and `v.recv` (one type for both); `None` without the
    /// symbol.
    fn all_to_all_v(
        &self,
        b: Buffers,
        v: &VCounts,
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult>;
    /// `HcclGroupStart`; `None` without the symbol.
    fn group_start(&self) -> Option<HcclResult>;
    /// `HcclGroupEnd`; `None` without the symbol.
    fn group_end(&self) -> Option<HcclResult>;
    /// `HcclBatchSendRecv` of `items`; `None` without the symbol.
    fn batch_send_recv(
        &self,
        items: &[BatchItem],
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult>;
    /// `HcclGetCommAsyncError`: the communicator's asynchronous error (`Ok`), or the call's
    /// own failure (`Err`); `None` without the symbol.
    fn comm_async_error(&self, comm: Handle) -> Option<Result<HcclResult, HcclResult>>;
    /// `HcclCreateSubCommConfig` with the default config (what `HcclCommConfigInit` writes):
    /// the caller's handle of sub-communicator `sub_id` of `parent` made of its ranks
    /// `ranks`, as rank `sub_rank`; `None` without the symbol.
    fn create_sub_comm(
        &self,
        parent: Handle,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Option<Result<Handle, HcclResult>>;
}

/// One send or receive of `HcclBatchSendRecv`, as plain values (`HcclSendRecvItem`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct BatchItem {
    /// `HCCL_SEND` or `HCCL_RECV`.
    pub kind: HcclSendRecvType,
    /// The buffer's device address.
    pub buf: u64,
    /// Elements.
    pub count: u64,
    /// HCCL's data type.
    pub dtype: HcclDataType,
    /// The peer.
    pub peer: u32,
}

/// The real table, as the backend's HCCL calls.
pub(crate) struct HcclRef(pub(crate) &'static HcclApi);

fn handle(h: Handle) -> *mut c_void {
    h as *mut c_void
}

fn address(a: u64) -> *mut c_void {
    a as *mut c_void
}

/// Calls the table. Every `unsafe` call below passes communicators and streams the backend
/// obtained from these libraries, device addresses HCCL only interprets (the front layer
/// keeps them live until the collective has run), and out pointers to live locals.
impl HcclCalls for HcclRef {
    fn error_string(&self, code: HcclResult) -> String {
        self.0.error_string(code)
    }

    fn recent_error_message(&self) -> String {
        self.0.acl.recent_error_message()
    }

    fn comm_init_all(&self, devices: &[i32]) -> Result<Vec<Handle>, HcclResult> {
        let mut ids = devices.to_vec();
        let mut raw: Vec<HcclComm> = vec![ptr::null_mut(); ids.len()];
        // At most `u32::MAX` devices: the caller counted them.
        let n = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        // SAFETY: `ids` holds `n` device ids and `raw` room for `n` handles.
        ok(unsafe { (self.0.HcclCommInitAll)(n, ids.as_mut_ptr(), raw.as_mut_ptr()) })?;
        Ok(raw.into_iter().map(|c| c as Handle).collect())
    }

    fn get_root_info(&self) -> Result<Box<RootBytes>, HcclResult> {
        let mut info = Box::new(HcclRootInfo::default());
        // SAFETY: `info` is valid for a write of the whole struct.
        ok(unsafe { (self.0.HcclGetRootInfo)(&mut *info) })?;
        Ok(Box::new(info.internal))
    }

    fn comm_init_root_info(
        &self,
        ranks: u32,
        root: &RootBytes,
        rank: u32,
    ) -> Result<Handle, HcclResult> {
        let root = Box::new(HcclRootInfo { internal: *root });
        let mut raw: HcclComm = ptr::null_mut();
        // SAFETY: `root` is a whole root info; `raw` is valid for a write.
        ok(unsafe { (self.0.HcclCommInitRootInfo)(ranks, &*root, rank, &mut raw) })?;
        Ok(raw as Handle)
    }

    fn comm_destroy(&self, comm: Handle) -> HcclResult {
        // SAFETY: a live communicator, destroyed once (the caller's `Drop`).
        unsafe { (self.0.HcclCommDestroy)(handle(comm)) }
    }

    fn rank_id(&self, comm: Handle) -> Result<u32, HcclResult> {
        let mut rank = 0u32;
        // SAFETY: a live communicator; the out pointer is valid for a write.
        ok(unsafe { (self.0.HcclGetRankId)(handle(comm), &mut rank) })?;
        Ok(rank)
    }

    fn rank_size(&self, comm: Handle) -> Result<u32, HcclResult> {
        let mut size = 0u32;
        // SAFETY: as above.
        ok(unsafe { (self.0.HcclGetRankSize)(handle(comm), &mut size) })?;
        Ok(size)
    }

    fn all_reduce(&self, b: Buffers, op: HcclReduceOp, comm: Handle, stream: Handle) -> HcclResult {
        let (send, recv) = (address(b.send), address(b.recv));
        // SAFETY: see the impl's comment.
        unsafe {
            (self.0.HcclAllReduce)(
                send,
                recv,
                b.count,
                b.dtype,
                op,
                handle(comm),
                handle(stream),
            )
        }
    }

    fn all_gather(&self, b: Buffers, comm: Handle, stream: Handle) -> HcclResult {
        let (send, recv) = (address(b.send), address(b.recv));
        // SAFETY: see the impl's comment.
        unsafe {
            (self.0.HcclAllGather)(send, recv, b.count, b.dtype, handle(comm), handle(stream))
        }
    }

    fn reduce_scatter(
        &self,
        b: Buffers,
        op: HcclReduceOp,
        comm: Handle,
        stream: Handle,
    ) -> HcclResult {
        let (send, recv) = (address(b.send), address(b.recv));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: see the impl's comment.
        unsafe { (self.0.HcclReduceScatter)(send, recv, b.count, b.dtype, op, c, s) }
    }

    fn broadcast(
        &self,
        buf: u64,
        count: u64,
        dtype: HcclDataType,
        root: u32,
        comm: Handle,
        stream: Handle,
    ) -> HcclResult {
        // SAFETY: see the impl's comment.
        unsafe {
            (self.0.HcclBroadcast)(
                address(buf),
                count,
                dtype,
                root,
                handle(comm),
                handle(stream),
            )
        }
    }

    fn send(&self, b: Buffers, peer: u32, comm: Handle, stream: Handle) -> HcclResult {
        // SAFETY: see the impl's comment.
        unsafe {
            (self.0.HcclSend)(
                address(b.send),
                b.count,
                b.dtype,
                peer,
                handle(comm),
                handle(stream),
            )
        }
    }

    fn recv(&self, b: Buffers, peer: u32, comm: Handle, stream: Handle) -> HcclResult {
        // SAFETY: see the impl's comment.
        unsafe {
            (self.0.HcclRecv)(
                address(b.recv),
                b.count,
                b.dtype,
                peer,
                handle(comm),
                handle(stream),
            )
        }
    }

    fn all_to_all(&self, b: Buffers, comm: Handle, stream: Handle) -> Option<HcclResult> {
        let f = self.0.HcclAlltoAll?;
        let (send, recv) = (address(b.send), address(b.recv));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: see the impl's comment.
        Some(unsafe { f(send, b.count, b.dtype, recv, b.count, b.dtype, c, s) })
    }

    fn reduce(
        &self,
        b: Buffers,
        op: HcclReduceOp,
        root: u32,
        comm: Handle,
        stream: Handle,
    ) -> HcclResult {
        let (send, recv) = (address(b.send), address(b.recv));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: see the impl's comment.
        unsafe { (self.0.HcclReduce)(send, recv, b.count, b.dtype, op, root, c, s) }
    }

    fn scatter(&self, b: Buffers, root: u32, comm: Handle, stream: Handle) -> Option<HcclResult> {
        let f = self.0.HcclScatter?;
        let (send, recv) = (address(b.send), address(b.recv));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: see the impl's comment.
        Some(unsafe { f(send, recv, b.count, b.dtype, root, c, s) })
    }

    fn barrier(&self, comm: Handle, stream: Handle) -> HcclResult {
        // SAFETY: see the impl's comment.
        unsafe { (self.0.HcclBarrier)(handle(comm), handle(stream)) }
    }

    fn all_gather_v(
        &self,
        b: Buffers,
        v: &VCounts,
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult> {
        let f = self.0.HcclAllGatherV?;
        let (send, recv) = (address(b.send), address(b.recv));
        let (counts, displs) = (array(&v.recv.counts), array(&v.recv.displs));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: see the impl's comment; the arrays hold one entry per rank (the caller
        // checked) and outlive the call, which reads them before it returns.
        Some(unsafe { f(send, b.count, recv, counts, displs, b.dtype, c, s) })
    }

    fn reduce_scatter_v(
        &self,
        b: Buffers,
        v: &VCounts,
        op: HcclReduceOp,
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult> {
        let f = self.0.HcclReduceScatterV?;
        let (send, recv) = (address(b.send), address(b.recv));
        let (counts, displs) = (array(&v.send.counts), array(&v.send.displs));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: as `all_gather_v`.
        Some(unsafe { f(send, counts, displs, recv, b.count, b.dtype, op, c, s) })
    }

    fn all_to_all_v(
        &self,
        b: Buffers,
        v: &VCounts,
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult> {
        let f = self.0.HcclAlltoAllV?;
        let (send, recv) = (address(b.send), address(b.recv));
        let (sc, sd) = (array(&v.send.counts), array(&v.send.displs));
        let (rc, rd) = (array(&v.recv.counts), array(&v.recv.displs));
        let (c, s) = (handle(comm), handle(stream));
        // SAFETY: as `all_gather_v`.
        Some(unsafe { f(send, sc, sd, b.dtype, recv, rc, rd, b.dtype, c, s) })
    }

    fn group_start(&self) -> Option<HcclResult> {
        let f = self.0.HcclGroupStart?;
        // SAFETY: takes nothing; acts on the calling thread's group.
        Some(unsafe { f() })
    }

    fn group_end(&self) -> Option<HcclResult> {
        let f = self.0.HcclGroupEnd?;
        // SAFETY: as above.
        Some(unsafe { f() })
    }

    fn batch_send_recv(
        &self,
        items: &[BatchItem],
        comm: Handle,
        stream: Handle,
    ) -> Option<HcclResult> {
        let f = self.0.HcclBatchSendRecv?;
        let mut raw: Vec<HcclSendRecvItem> = items
            .iter()
            .map(|i| HcclSendRecvItem {
                send_recv_type: i.kind,
                buf: address(i.buf),
                count: i.count,
                data_type: i.dtype,
                remote_rank: i.peer,
            })
            .collect();
        // More than `u32::MAX` items cannot be passed: HCCL's count is 32 bits.
        let n = u32::try_from(raw.len()).ok()?;
        // SAFETY: see the impl's comment; `raw` holds `n` items and lives across the call.
        Some(unsafe { f(raw.as_mut_ptr(), n, handle(comm), handle(stream)) })
    }

    fn comm_async_error(&self, comm: Handle) -> Option<Result<HcclResult, HcclResult>> {
        let f = self.0.HcclGetCommAsyncError?;
        let mut found: HcclResult = 0;
        // SAFETY: a live communicator; the out pointer is valid for a write.
        Some(ok(unsafe { f(handle(comm), &mut found) }).map(|()| found))
    }

    fn create_sub_comm(
        &self,
        parent: Handle,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Option<Result<Handle, HcclResult>> {
        let f = self.0.HcclCreateSubCommConfig?;
        let mut parent = handle(parent);
        let mut ids = ranks.to_vec();
        // HCCL's count is 32 bits: a longer list is a bad parameter.
        let Ok(n) = u32::try_from(ids.len()) else {
            return Some(Err(HCCL_E_PARA));
        };
        let mut config = HcclCommConfig::default();
        let mut sub: HcclComm = ptr::null_mut();
        // SAFETY: `parent` is a live communicator's handle, `ids` holds `n` ranks, `config`
        // is initialized as `HcclCommConfigInit` does, and `sub` is valid for a write; all
        // live across the call.
        let code = unsafe {
            f(
                &mut parent,
                n,
                ids.as_mut_ptr(),
                sub_id,
                sub_rank,
                &mut config,
                &mut sub,
            )
        };
        Some(ok(code).map(|()| sub as Handle))
    }
}

/// A `uint64_t` array as HCCL's `const void *`.
fn array(values: &[u64]) -> *const c_void {
    values.as_ptr().cast()
}
