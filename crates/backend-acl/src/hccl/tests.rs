//! Unit tests of the HCCL wrapper over mocked calls (`MockHcclCalls`, beside the ACL mock):
//! every error path of the communicators and collectives, without a library.

use super::calls::{Buffers, MockHcclCalls};
use crate::device::{AclConfig, AclDevice};
use crate::ffi::ACL_MEMCPY_DEVICE_TO_DEVICE;
use crate::tests::base;
use crate::{AclBackend, AclComm};
use braid_acl_sys::hccl::codes::{HCCL_E_INTERNAL, HCCL_E_PARA, HCCL_E_PTR};
use braid_acl_sys::hccl::{HCCL_DATA_TYPE_FP16, HCCL_REDUCE_MAX, HCCL_ROOT_INFO_BYTES};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp, RootInfo};
use braid_stream_core::hal::{CollectiveBackend, Comm as _, Device as _, HalError};
use braid_stream_core::types::DevicePtr;
use braid_stream_core::DType;
use std::sync::Arc;

const COMM: usize = 0xc0;

/// HCCL calls whose failures read "parameter error" (or "internal error", "empty pointer")
/// with the runtime's text "from the runtime".
fn hccl() -> MockHcclCalls {
    let mut h = MockHcclCalls::new();
    h.expect_error_string().returning(|code| {
        match code {
            HCCL_E_PARA => "parameter error",
            HCCL_E_PTR => "empty pointer",
            _ => "internal error",
        }
        .to_string()
    });
    h.expect_recent_error_message()
        .returning(|| "from the runtime".to_string());
    h
}

/// Device `ordinal` of a mocked ACL library, with `h` as its HCCL calls; `acl` adds
/// expectations to the ACL mock.
fn device(
    ordinal: u32,
    h: MockHcclCalls,
    acl: impl FnOnce(&mut crate::calls::MockAclCalls),
) -> AclDevice {
    let mut m = base(0, None);
    acl(&mut m);
    let dev = AclDevice::with_calls(Arc::new(m), ordinal, AclConfig::default()).expect("open");
    dev.shared.use_hccl_calls(Arc::new(h));
    dev
}

fn call(op: CollectiveOp, send: u64, recv: u64) -> CollectiveCall {
    CollectiveCall::new(op, DevicePtr(send), DevicePtr(recv), 4, DType::F16)
}

fn native(err: HalError) -> (i32, &'static str, String) {
    match err {
        HalError::Native {
            code,
            name,
            message,
        } => (code, name, message),
        other => panic!("expected a native error, got {other:?}"),
    }
}

#[test]
fn a_failed_init_all_carries_hcclresult_name_and_texts() {
    let mut h = hccl();
    h.expect_comm_init_all()
        .withf(|ids| ids == [0])
        .times(1)
        .returning(|_| Err(HCCL_E_INTERNAL));
    let dev = device(0, h, |_| {});
    let (code, name, message) = native(AclComm::init_all(&[&dev]).unwrap_err());
    assert_eq!((code, name), (HCCL_E_INTERNAL, "HCCL_E_INTERNAL"));
    assert_eq!(message, "HcclCommInitAll: internal error; from the runtime");
}

#[test]
fn init_all_refuses_a_device_twice_two_libraries_and_a_short_answer() {
    let mut h = hccl();
    h.expect_comm_init_all()
        .times(1)
        .returning(|_| Ok(Vec::new()));
    let (a, b) = (device(0, h, |_| {}), device(1, hccl(), |_| {}));
    let twice = AclComm::init_all(&[&a, &a]).unwrap_err();
    assert!(twice.to_string().contains("listed twice"), "{twice}");
    // Devices of two mocks are devices of two libraries.
    let mixed = AclComm::init_all(&[&a, &b]).unwrap_err();
    assert!(mixed.to_string().contains("another ACL library"), "{mixed}");
    let short = AclComm::init_all(&[&a]).unwrap_err();
    assert!(
        short
            .to_string()
            .contains("made 0 communicator(s) for 1 device(s)"),
        "{short}"
    );
}

#[test]
fn a_root_info_hccl_refuses_is_a_native_invalid_argument() {
    let mut h = hccl();
    h.expect_get_root_info()
        .times(1)
        .returning(|| Ok(Box::new([7; HCCL_ROOT_INFO_BYTES])));
    h.expect_comm_init_root_info()
        .withf(|ranks, root, rank| (*ranks, root[0], *rank) == (2, 7, 1))
        .times(1)
        .returning(|_, _, _| Err(HCCL_E_PARA));
    let dev = device(0, h, |_| {});
    let info = AclBackend::root_info(&dev).unwrap();
    assert_eq!(info, RootInfo(Box::new([7; HCCL_ROOT_INFO_BYTES])));
    let err = AclBackend::init_root_info(&dev, 2, 1, &info).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    match err {
        HalError::NativeInvalidArgument {
            code,
            name,
            message,
        } => {
            assert_eq!((code, name), (HCCL_E_PARA, "HCCL_E_PARA"));
            assert!(message.starts_with("HcclCommInitRootInfo: parameter error"));
        }
        other => panic!("unexpected {other:?}"),
    }
    // A rank outside the count is refused before HCCL is asked.
    let out = AclBackend::init_root_info(&dev, 2, 2, &info).unwrap_err();
    assert!(matches!(out, HalError::InvalidArgument(_)), "{out}");
}

/// A communicator of rank 0 of 2 on device 0, with `h` and `acl` as the device's calls.
fn rank0(
    h: MockHcclCalls,
    acl: impl FnOnce(&mut crate::calls::MockAclCalls),
) -> (AclDevice, AclComm) {
    let mut h = h;
    h.expect_comm_init_all()
        .returning(|ids| Ok(ids.iter().map(|_| COMM).collect()));
    h.expect_comm_destroy().returning(|_| 0);
    let dev = device(0, h, acl);
    let mut comms = AclComm::init_all(&[&dev]).unwrap();
    (dev, comms.remove(0))
}

#[test]
fn collectives_reach_their_hccl_call_and_refusals_are_typed() {
    let mut h = hccl();
    h.expect_all_reduce()
        .withf(|b, op, c, s| {
            *b == Buffers {
                send: 0x100,
                recv: 0x200,
                count: 4,
                dtype: HCCL_DATA_TYPE_FP16,
            } && (*op, *c, *s) == (HCCL_REDUCE_MAX, COMM, 0)
        })
        .times(2)
        .returning({
            let mut first = true;
            move |_, _, _, _| {
                let code = if first { HCCL_E_PARA } else { 0 };
                first = false;
                code
            }
        });
    h.expect_all_to_all().times(1).returning(|_, _, _| None);
    let (dev, comm) = rank0(h, |_| {});
    assert_eq!((comm.rank(), comm.ranks()), (0, 1));
    let stream = dev.default_stream().unwrap();
    let max = call(CollectiveOp::AllReduce(ReduceOp::Max), 0x100, 0x200);
    let err = AclBackend::launch_collective(&stream, &comm, &max, "ar").unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(
        err.to_string()
            .contains("HcclAllReduce: parameter error; from the runtime"),
        "{err}"
    );
    AclBackend::launch_collective(&stream, &comm, &max, "ar").unwrap();
    let a2a = call(CollectiveOp::AllToAll, 0x100, 0x200);
    assert!(matches!(
        AclBackend::launch_collective(&stream, &comm, &a2a, "a2a"),
        Err(HalError::Unsupported(m)) if m.contains("HcclAlltoAll")
    ));
}

#[test]
fn an_average_in_half_precision_asks_for_a_copy_of_its_send_buffer_and_refuses_less() {
    // No HCCL call is expected: the mock panics if one comes.
    let (dev, comm) = rank0(hccl(), |_| {});
    let stream = dev.default_stream().unwrap();
    let typed = |op: CollectiveOp, dtype: DType| {
        CollectiveCall::new(op, DevicePtr(0x100), DevicePtr(0x200), 4, dtype)
    };
    let avg = CollectiveOp::AllReduce(ReduceOp::Avg);
    let scatter = CollectiveOp::ReduceScatter(ReduceOp::Avg);
    let reduce = CollectiveOp::Reduce {
        op: ReduceOp::Avg,
        root: 0,
    };
    // Four elements per rank of one rank: a copy of the send buffer.
    for (op, dtype, bytes) in [
        (avg, DType::F16, 8),
        (avg, DType::BF16, 8),
        (scatter, DType::F16, 8),
        (reduce, DType::BF16, 8),
        (avg, DType::F32, 0),
        (CollectiveOp::AllReduce(ReduceOp::Sum), DType::F16, 0),
    ] {
        let call = typed(op, dtype);
        assert_eq!(
            AclBackend::collective_workspace(&comm, &call),
            bytes,
            "{op} {dtype}"
        );
    }
    // Without the workspace (the hal call the front layer does not use), refused naming it.
    let err =
        AclBackend::launch_collective(&stream, &comm, &typed(avg, DType::F16), "avg").unwrap_err();
    assert!(
        matches!(&err, HalError::InvalidArgument(m) if m.contains("8 bytes of workspace, 0 were given")),
        "{err:?}"
    );
}

#[test]
fn a_stream_of_another_device_is_refused_before_hccl() {
    // No collective call is expected: the mock panics if one comes.
    let (_dev, comm) = rank0(hccl(), |_| {});
    let other = device(1, hccl(), |_| {});
    let stream = other.default_stream().unwrap();
    let ar = call(CollectiveOp::AllReduce(ReduceOp::Sum), 0x100, 0x100);
    let err = AclBackend::launch_collective(&stream, &comm, &ar, "ar").unwrap_err();
    assert!(
        err.to_string()
            .contains("the communicator of rank 0 is on ACL device 0, the stream on ACL device 1"),
        "{err}"
    );
}

#[test]
fn a_root_broadcasting_into_another_buffer_copies_its_own() {
    let mut h = hccl();
    h.expect_broadcast()
        .withf(|buf, count, _, root, _, _| (*buf, *count, *root) == (0x100, 4, 0))
        .times(1)
        .returning(|_, _, _, _, _, _| 0);
    let (dev, comm) = rank0(h, |m| {
        m.expect_memcpy_async()
            .withf(|dst, _, src, n, kind, _| {
                (*dst, *src, *n, *kind) == (0x200, 0x100, 8, ACL_MEMCPY_DEVICE_TO_DEVICE)
            })
            .times(1)
            .returning(|_, _, _, _, _, _| 0);
    });
    let stream = dev.default_stream().unwrap();
    let bcast = call(CollectiveOp::Broadcast { root: 0 }, 0x100, 0x200);
    AclBackend::launch_collective(&stream, &comm, &bcast, "bcast").unwrap();
}

#[test]
fn a_barrier_is_hccl_barrier_on_the_communicator_and_stream() {
    let mut h = hccl();
    h.expect_barrier()
        .withf(|c, _| *c == COMM)
        .times(1)
        .returning(|_, _| 0);
    let (dev, comm) = rank0(h, |_| {});
    let stream = dev.default_stream().unwrap();
    let barrier = CollectiveCall {
        op: CollectiveOp::Barrier,
        send: DevicePtr(0),
        recv: DevicePtr(0),
        count: 0,
        dtype: DType::F32,
        v: None,
    };
    AclBackend::launch_collective(&stream, &comm, &barrier, "barrier").unwrap();
}

#[test]
fn a_reduce_passes_its_root_and_hccl_s_reduction_to_hccl_reduce() {
    let mut h = hccl();
    h.expect_reduce()
        .withf(|b, op, root, c, _| {
            (b.send, b.recv, b.count, *op, *root, *c) == (0x100, 0x200, 4, HCCL_REDUCE_MAX, 0, COMM)
        })
        .times(1)
        .returning(|_, _, _, _, _| 0);
    let (dev, comm) = rank0(h, |_| {});
    let stream = dev.default_stream().unwrap();
    let op = CollectiveOp::Reduce {
        op: ReduceOp::Max,
        root: 0,
    };
    AclBackend::launch_collective(&stream, &comm, &call(op, 0x100, 0x200), "reduce").unwrap();
}

#[test]
fn a_scatter_is_hccl_scatter_or_unsupported_without_the_symbol() {
    let mut h = hccl();
    h.expect_scatter()
        .withf(|b, root, c, _| (b.send, b.recv, b.count, *root, *c) == (0x100, 0x200, 4, 0, COMM))
        .times(2)
        .returning({
            // The library has the symbol once, then (another library) not.
            let calls = std::sync::atomic::AtomicUsize::new(0);
            move |_, _, _, _| {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (n == 0).then_some(0)
            }
        });
    let (dev, comm) = rank0(h, |_| {});
    let stream = dev.default_stream().unwrap();
    let sc = call(CollectiveOp::Scatter { root: 0 }, 0x100, 0x200);
    AclBackend::launch_collective(&stream, &comm, &sc, "scatter").unwrap();
    assert!(matches!(
        AclBackend::launch_collective(&stream, &comm, &sc, "scatter"),
        Err(HalError::Unsupported(m)) if m.contains("HcclScatter")
    ));
}

#[test]
fn rank_queries_and_a_failed_destroy_are_typed() {
    let mut h = hccl();
    h.expect_rank_id().times(1).returning(|_| Err(HCCL_E_PTR));
    h.expect_comm_init_all().returning(|_| Ok(vec![COMM]));
    h.expect_comm_destroy()
        .withf(|c| *c == COMM)
        .times(1)
        .returning(|_| HCCL_E_INTERNAL);
    let dev = device(0, h, |m| {
        m.expect_synchronize_device().times(1).returning(|| 0);
    });
    let comm = AclComm::init_all(&[&dev]).unwrap().remove(0);
    let (code, name, _) = native(comm.query_rank_and_size().unwrap_err());
    assert_eq!((code, name), (HCCL_E_PTR, "HCCL_E_PTR"));
    drop(comm);
    // The destroy's failure is the device's next answer, named as HCCL names it.
    let (code, name, message) = native(dev.synchronize().unwrap_err());
    assert_eq!((code, name), (HCCL_E_INTERNAL, "HCCL_E_INTERNAL"));
    assert!(
        message.starts_with("HcclCommDestroy: internal error"),
        "{message}"
    );
    dev.synchronize().unwrap();
}

mod variable;
#[test]
fn a_batch_reaches_hccl_batch_send_recv_and_refusals_are_typed() {
    use super::calls::BatchItem;
    use braid_acl_sys::hccl::{HCCL_RECV, HCCL_SEND};
    let item = |kind, buf| BatchItem {
        kind,
        buf,
        count: 4,
        dtype: HCCL_DATA_TYPE_FP16,
        peer: 1,
    };
    let mut h = hccl();
    h.expect_batch_send_recv()
        .withf(move |items, c, s| {
            items == [item(HCCL_SEND, 0x100), item(HCCL_RECV, 0x200)] && (*c, *s) == (COMM, 0)
        })
        .times(2)
        .returning({
            let mut n = 0;
            move |_, _, _| {
                n += 1;
                Some(if n == 1 { HCCL_E_PARA } else { 0 })
            }
        });
    let (dev, comm) = rank0(h, |_| {});
    let stream = dev.default_stream().unwrap();
    let batch = [
        call(CollectiveOp::Send { peer: 1 }, 0x100, 0),
        call(CollectiveOp::Recv { peer: 1 }, 0, 0x200),
    ];
    let err = AclBackend::launch_send_recv_batch(&stream, &comm, &batch, "batch").unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(
        err.to_string()
            .contains("HcclBatchSendRecv: parameter error"),
        "{err}"
    );
    AclBackend::launch_send_recv_batch(&stream, &comm, &batch, "batch").unwrap();
    // Anything but a send or a receive is refused before HCCL.
    let ar = [call(CollectiveOp::AllReduce(ReduceOp::Sum), 0x100, 0x100)];
    let refused = AclBackend::launch_send_recv_batch(&stream, &comm, &ar, "batch").unwrap_err();
    assert!(
        matches!(&refused, HalError::InvalidArgument(m) if m.contains("not a send or a receive")),
        "{refused}"
    );
}

#[test]
fn a_library_without_the_batch_call_issues_sends_and_receives_in_order() {
    let mut h = hccl();
    h.expect_batch_send_recv()
        .times(1)
        .returning(|_, _, _| None);
    let mut seq = mockall::Sequence::new();
    h.expect_send()
        .withf(|b, peer, _, _| (b.send, *peer) == (0x100, 1))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| 0);
    h.expect_recv()
        .withf(|b, peer, _, _| (b.recv, *peer) == (0x200, 1))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| 0);
    let (dev, comm) = rank0(h, |_| {});
    let stream = dev.default_stream().unwrap();
    let batch = [
        call(CollectiveOp::Send { peer: 1 }, 0x100, 0),
        call(CollectiveOp::Recv { peer: 1 }, 0, 0x200),
    ];
    AclBackend::launch_send_recv_batch(&stream, &comm, &batch, "batch").unwrap();
}

#[test]
fn group_start_and_end_reach_hccl_and_are_skipped_without_the_symbols() {
    let mut h = hccl();
    h.expect_group_start().times(1).returning(|| Some(0));
    h.expect_group_end()
        .times(1)
        .returning(|| Some(HCCL_E_INTERNAL));
    let (_dev, comm) = rank0(h, |_| {});
    AclBackend::group_start(&comm).unwrap();
    let (code, name, message) = native(AclBackend::group_end(&comm).unwrap_err());
    assert_eq!((code, name), (HCCL_E_INTERNAL, "HCCL_E_INTERNAL"));
    assert!(
        message.starts_with("HcclGroupEnd: internal error"),
        "{message}"
    );
    let mut old = hccl();
    old.expect_group_start().times(1).returning(|| None);
    old.expect_group_end().times(1).returning(|| None);
    let (_dev, comm) = rank0(old, |_| {});
    AclBackend::group_start(&comm).unwrap();
    AclBackend::group_end(&comm).unwrap();
}

#[test]
fn an_async_error_is_the_typed_hccl_result_and_its_absence_is_none() {
    use braid_acl_sys::hccl::codes::HCCL_E_TIMEOUT;
    let mut h = hccl();
    let mut answers = vec![
        None,
        Some(Err(HCCL_E_PARA)),
        Some(Ok(HCCL_E_TIMEOUT)),
        Some(Ok(0)),
    ];
    h.expect_comm_async_error()
        .withf(|c| *c == COMM)
        .times(4)
        .returning(move |_| answers.pop().unwrap());
    let (_dev, comm) = rank0(h, |_| {});
    assert_eq!(AclBackend::comm_async_error(&comm).unwrap(), None);
    let (code, name, message) = native(AclBackend::comm_async_error(&comm).unwrap().unwrap());
    assert_eq!((code, name), (HCCL_E_TIMEOUT, "HCCL_E_TIMEOUT"));
    assert!(message.starts_with("HcclGetCommAsyncError"), "{message}");
    let refused = AclBackend::comm_async_error(&comm).unwrap_err();
    assert!(refused.is_invalid_argument(), "{refused}");
    assert!(matches!(
        AclBackend::comm_async_error(&comm),
        Err(HalError::Unsupported(m)) if m.contains("HcclGetCommAsyncError")
    ));
}

#[test]
fn a_sub_communicator_is_hccls_handle_and_its_refusals_are_typed() {
    let mut h = hccl();
    let mut answers = vec![None, Some(Err(HCCL_E_PARA)), Some(Ok(0xd0))];
    h.expect_create_sub_comm()
        .withf(|c, ranks, id, sub_rank| (*c, ranks, *id, *sub_rank) == (COMM, &[0u32][..], 7, 0))
        .times(3)
        .returning(move |_, _, _, _| answers.pop().unwrap());
    let (_dev, comm) = rank0(h, |_| {});
    let sub = AclBackend::create_sub_comm(&comm, &[0], 7, 0).unwrap();
    assert_eq!((sub.raw, sub.rank(), sub.ranks()), (0xd0, 0, 1));
    match AclBackend::create_sub_comm(&comm, &[0], 7, 0) {
        Err(HalError::NativeInvalidArgument { code, message, .. }) => {
            assert_eq!(code, HCCL_E_PARA);
            assert!(message.starts_with("HcclCreateSubCommConfig"), "{message}");
        }
        other => panic!("expected HCCL_E_PARA, got {other:?}"),
    }
    assert!(matches!(
        AclBackend::create_sub_comm(&comm, &[0], 7, 0),
        Err(HalError::Unsupported(m)) if m.contains("HcclCreateSubCommConfig")
    ));
}
