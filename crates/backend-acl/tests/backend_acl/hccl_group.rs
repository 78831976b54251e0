//! HCCL's grouped calls on `braid-acl-sim`, through the raw table as a C client calls them:
//! `HcclGroupStart` / `HcclGroupEnd` with HCCL's per-thread, nested group and its refusal of an
//! end without a start, and `HcclBatchSendRecv` with HCCL's argument checks.

use crate::common;

use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::{HcclSendRecvItem, HCCL_DATA_TYPE_FP32, HCCL_RECV, HCCL_SEND};
use braid_backend_acl::HcclApi;
use braid_stream_core::hal::Stream as _;
use braid_stream_core::DevicePtr;
use common::download;
use std::ffi::c_void;
use std::ptr;

fn raw(p: DevicePtr) -> *mut c_void {
    p.0 as *mut c_void
}

#[test]
fn a_group_holds_its_calls_until_the_outermost_end_and_an_end_without_start_is_refused() {
    let api = HcclApi::load_for(common::api()).unwrap();
    let (start, end) = (api.HcclGroupStart.unwrap(), api.HcclGroupEnd.unwrap());
    // SAFETY: takes nothing.
    assert_eq!(unsafe { end() }, HCCL_E_NOT_SUPPORT);
    let text = api.check("HcclGroupEnd", HCCL_E_NOT_SUPPORT).unwrap_err();
    assert!(
        text.message.contains("call HcclGroupStart first"),
        "{text:?}"
    );

    let ranks = common::two_ranks();
    let (comms, streams) = (&ranks.comms, &ranks.streams);
    let sends = ranks.upload(|r| vec![r as f32 + 1.0; 4]);
    let recvs = ranks.alloc(16);
    // Both ranks send first, from one thread, in a nested group: as plain calls the streams
    // would wait for each other forever.
    // SAFETY: takes nothing.
    assert_eq!(unsafe { start() }, HCCL_SUCCESS);
    // SAFETY: as above.
    assert_eq!(unsafe { start() }, HCCL_SUCCESS);
    for rank in 0..2 {
        let (comm, stream) = (comms[rank].as_raw(), streams[rank].as_raw());
        let peer = 1 - rank as u32;
        // Makes the rank's device the thread's current one, as a C client's aclrtSetDevice.
        streams[rank].synchronize().unwrap();
        // SAFETY: live communicators, streams and device buffers of 4 f32 each.
        let sent =
            unsafe { (api.HcclSend)(raw(sends[rank]), 4, HCCL_DATA_TYPE_FP32, peer, comm, stream) };
        assert_eq!(sent, HCCL_SUCCESS);
        // SAFETY: as above.
        let received =
            unsafe { (api.HcclRecv)(raw(recvs[rank]), 4, HCCL_DATA_TYPE_FP32, peer, comm, stream) };
        assert_eq!(received, HCCL_SUCCESS);
    }
    // The inner end issues nothing; the outer one issues the held calls.
    // SAFETY: takes nothing.
    assert_eq!(unsafe { end() }, HCCL_SUCCESS);
    // SAFETY: as above.
    assert_eq!(unsafe { end() }, HCCL_SUCCESS);
    assert_eq!(download(&streams[0], recvs[0], 4), vec![2.0; 4]);
    assert_eq!(download(&streams[1], recvs[1], 4), vec![1.0; 4]);
    // SAFETY: takes nothing: the group is closed again.
    assert_eq!(unsafe { end() }, HCCL_E_NOT_SUPPORT);
}

#[test]
fn a_batch_is_checked_as_hccl_checks_it_then_moves_the_numbers() {
    let api = HcclApi::load_for(common::api()).unwrap();
    let batch = api.HcclBatchSendRecv.unwrap();
    let ranks = common::two_ranks();
    let (comms, streams) = (&ranks.comms, &ranks.streams);
    let sends = ranks.upload(|r| vec![r as f32 + 3.0; 4]);
    let recvs = ranks.alloc(16);
    let item = |kind, buf, peer| HcclSendRecvItem {
        send_recv_type: kind,
        buf: raw(buf),
        count: 4,
        data_type: HCCL_DATA_TYPE_FP32,
        remote_rank: peer,
    };
    let (c0, s0) = (comms[0].as_raw(), streams[0].as_raw());
    let mut bad = [item(HCCL_SEND, sends[0], 1)];
    // SAFETY: every argument below is checked before anything is used.
    unsafe {
        assert_eq!(batch(ptr::null_mut(), 1, c0, s0), HCCL_E_PTR);
        assert_eq!(batch(bad.as_mut_ptr(), 0, c0, s0), HCCL_E_PARA);
        assert_eq!(batch(bad.as_mut_ptr(), 1, ptr::null_mut(), s0), HCCL_E_PTR);
        bad[0].send_recv_type = 7;
        assert_eq!(batch(bad.as_mut_ptr(), 1, c0, s0), HCCL_E_PARA);
        bad[0] = item(HCCL_SEND, sends[0], 0); // itself
        assert_eq!(batch(bad.as_mut_ptr(), 1, c0, s0), HCCL_E_PARA);
        bad[0] = item(HCCL_SEND, sends[0], 2); // no such rank
        assert_eq!(batch(bad.as_mut_ptr(), 1, c0, s0), HCCL_E_PARA);
        bad[0].buf = ptr::null_mut();
        assert_eq!(batch(bad.as_mut_ptr(), 1, c0, s0), HCCL_E_PTR);
    }
    // Both ranks list their send first.
    for rank in 0..2 {
        let peer = 1 - rank as u32;
        let mut items = [
            item(HCCL_SEND, sends[rank], peer),
            item(HCCL_RECV, recvs[rank], peer),
        ];
        let (comm, stream) = (comms[rank].as_raw(), streams[rank].as_raw());
        // Makes the rank's device the thread's current one.
        streams[rank].synchronize().unwrap();
        // SAFETY: two valid items over live buffers, a live communicator and stream.
        let code = unsafe { batch(items.as_mut_ptr(), 2, comm, stream) };
        assert_eq!(code, HCCL_SUCCESS, "rank {rank}");
    }
    assert_eq!(download(&streams[0], recvs[0], 4), vec![4.0; 4]);
    assert_eq!(download(&streams[1], recvs[1], 4), vec![3.0; 4]);
}
