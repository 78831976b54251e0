//! HCCL's grouped calls on the simulated node: `HcclGroupStart` / `HcclGroupEnd` and
//! `HcclBatchSendRecv`, with HCCL's rules.
//!
//! A group is the calling thread's (HCCL keeps its depth per thread): `HcclGroupStart` opens
//! or nests one, every collective the thread issues until the outermost `HcclGroupEnd` is
//! checked and held, and that `HcclGroupEnd` issues them; an `HcclGroupEnd` without a group
//! open is `HCCL_E_NOT_SUPPORT`, as in HCCL. The held calls are issued per communicator in the
//! order every rank agrees on (`braid_stream_core::collective::batch_order`), so sends and
//! receives issued in any order inside a group cannot deadlock on the simulator, whose streams
//! run their parts one after the other. If a held call fails, the calls after it are not
//! issued and its result is `HcclGroupEnd`'s.
//!
//! A stream synchronize inside an open group does not wait for the held calls (they are not
//! enqueued yet), as on HCCL.

use super::comms;
use super::exports::{dtype, non_null};
use crate::errmsg::{fail, ret, Fail};
use crate::registry::{current_device, with_current_device};
use braid_acl_sys::acl::aclrtStream;
use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::*;
use braid_stream_core::collective::{batch_order, CollectiveCall, CollectiveOp};
use braid_stream_core::types::DevicePtr;
use std::cell::RefCell;

/// A call held by an open group, with the device current when it was made.
struct Held {
    name: &'static str,
    comm: usize,
    stream: usize,
    device: Option<usize>,
    call: CollectiveCall,
}

#[derive(Default)]
struct ThreadGroup {
    depth: u32,
    held: Vec<Held>,
}

thread_local! {
    static GROUP: RefCell<ThreadGroup> = RefCell::new(ThreadGroup::default());
}

/// Holds `call` if the calling thread has a group open (the communicator is checked now);
/// whether it was held.
pub(super) fn hold(
    name: &'static str,
    comm: usize,
    stream: usize,
    call: &CollectiveCall,
) -> Result<bool, Fail> {
    if GROUP.with(|g| g.borrow().depth) == 0 {
        return Ok(false);
    }
    comms::rank_and_size(name, comm)?;
    GROUP.with(|g| {
        g.borrow_mut().held.push(Held {
            name,
            comm,
            stream,
            device: current_device(),
            call: call.clone(),
        })
    });
    Ok(true)
}

/// Issues `calls` of communicator `comm` (rank `rank`) on `stream` in the agreed order.
fn issue(
    name: &'static str,
    comm: usize,
    stream: usize,
    rank: u32,
    mut calls: Vec<CollectiveCall>,
) -> Result<(), Fail> {
    batch_order(rank, &mut calls);
    calls
        .iter()
        .try_for_each(|call| comms::collective(name, comm, stream, call))
}

/// `HcclResult HcclGroupStart()`: opens, or nests, the calling thread's group.
#[no_mangle]
pub extern "C" fn HcclGroupStart() -> HcclResult {
    GROUP.with(|g| g.borrow_mut().depth += 1);
    HCCL_SUCCESS
}

/// `HcclResult HcclGroupEnd()`: closes a level of the calling thread's group; the outermost
/// one issues the held calls. Without a group open: `HCCL_E_NOT_SUPPORT`.
#[no_mangle]
pub extern "C" fn HcclGroupEnd() -> HcclResult {
    const CALL: &str = "HcclGroupEnd";
    ret((|| {
        let held = GROUP.with(|g| {
            let mut g = g.borrow_mut();
            match g.depth {
                0 => Err(fail(
                    HCCL_E_NOT_SUPPORT,
                    format!("{CALL}: no group is open on this thread: call HcclGroupStart first"),
                )),
                1 => {
                    g.depth = 0;
                    Ok(std::mem::take(&mut g.held))
                }
                _ => {
                    g.depth -= 1;
                    Ok(Vec::new())
                }
            }
        })?;
        // Per communicator and stream, in the order first seen, each one's calls sorted and
        // issued under the device that was current when they were made.
        let mut seen: Vec<&Held> = Vec::new();
        for h in &held {
            if !seen
                .iter()
                .any(|s| s.comm == h.comm && s.stream == h.stream)
            {
                seen.push(h);
            }
        }
        for first in seen {
            let (rank, _) = comms::rank_and_size(first.name, first.comm)?;
            let calls = held
                .iter()
                .filter(|h| h.comm == first.comm && h.stream == first.stream)
                .map(|h| h.call.clone())
                .collect();
            with_current_device(first.device, || {
                issue(first.name, first.comm, first.stream, rank, calls)
            })?;
        }
        Ok(())
    })())
}

/// `HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm
/// comm, aclrtStream stream)`: every item is checked (`HCCL_E_PTR` for a null pointer,
/// `HCCL_E_PARA` for a type that is not `HCCL_SEND` / `HCCL_RECV`, a peer that is not another
/// rank, or no item) before any is issued; the items are then issued in the agreed order (held
/// when a group is open).
///
/// # Safety
/// `send_recv_info` is null or valid for reads of `item_num` items.
#[no_mangle]
pub unsafe extern "C" fn HcclBatchSendRecv(
    send_recv_info: *mut HcclSendRecvItem,
    item_num: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    const CALL: &str = "HcclBatchSendRecv";
    ret((|| {
        non_null(CALL, "sendRecvInfo", send_recv_info)?;
        non_null(CALL, "comm", comm)?;
        non_null(CALL, "stream", stream)?;
        if item_num == 0 {
            return Err(fail(HCCL_E_PARA, format!("{CALL}: itemNum is 0")));
        }
        // SAFETY: non-null, and the caller guarantees `item_num` readable items.
        let items = unsafe { std::slice::from_raw_parts(send_recv_info, item_num as usize) };
        let (rank, ranks) = comms::rank_and_size(CALL, comm as usize)?;
        let calls = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                non_null(CALL, "an item's buf", item.buf)?;
                let peer = item.remote_rank;
                if peer >= ranks || peer == rank {
                    return Err(fail(
                        HCCL_E_PARA,
                        format!("{CALL}: item {i}: remoteRank {peer} is not another rank of the {ranks} (this is rank {rank})"),
                    ));
                }
                let buf = DevicePtr(item.buf as u64);
                let (op, send, recv) = match item.send_recv_type {
                    HCCL_SEND => (CollectiveOp::Send { peer }, buf, DevicePtr(0)),
                    HCCL_RECV => (CollectiveOp::Recv { peer }, DevicePtr(0), buf),
                    other => {
                        return Err(fail(
                            HCCL_E_PARA,
                            format!("{CALL}: item {i}: {other} is not an HcclSendRecvType"),
                        ))
                    }
                };
                Ok(CollectiveCall {
                    op,
                    send,
                    recv,
                    count: item.count,
                    dtype: dtype(CALL, item.data_type)?,
                    v: None,
                })
            })
            .collect::<Result<Vec<_>, Fail>>()?;
        let (comm, stream) = (comm as usize, stream as usize);
        let mut held = Vec::new();
        for call in &calls {
            if !hold(CALL, comm, stream, call)? {
                held.push(call.clone());
            }
        }
        if held.is_empty() {
            return Ok(());
        }
        issue(CALL, comm, stream, rank, held)
    })())
}
