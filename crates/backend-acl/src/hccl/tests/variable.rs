//! The variable-count collectives over mocked HCCL calls: forwarded with their arrays,
//! refused before HCCL when the arrays are not one entry per rank, unsupported without the
//! symbols.

use super::{call, hccl, rank0, COMM};
use crate::AclBackend;
use braid_acl_sys::hccl::codes::HCCL_E_PARA;
use braid_acl_sys::hccl::HCCL_REDUCE_MIN;
use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, ReduceOp, VCounts};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, HalError};
use braid_stream_core::types::DevicePtr;

fn v_call(op: CollectiveOp, v: VCounts) -> CollectiveCall {
    CollectiveCall::variable(op, DevicePtr(0x100), DevicePtr(0x200), 4, DType::F16, v)
}

#[test]
fn variable_count_calls_reach_hccl_with_their_arrays() {
    let mut h = hccl();
    h.expect_all_gather_v()
        .withf(|b, v, c, _| {
            (b.send, b.recv, b.count, *c) == (0x100, 0x200, 4, COMM)
                && v.recv == Blocks::packed(&[4])
        })
        .times(2)
        .returning({
            let mut first = true;
            move |_, _, _, _| {
                let code = if first { HCCL_E_PARA } else { 0 };
                first = false;
                Some(code)
            }
        });
    h.expect_reduce_scatter_v()
        .withf(|_, v, op, _, _| v.send.displs == [3] && *op == HCCL_REDUCE_MIN)
        .times(1)
        .returning(|_, _, _, _, _| Some(0));
    h.expect_all_to_all_v()
        .times(1)
        .returning(|_, _, _, _| None);
    let (dev, comm) = rank0(h, |_| {});
    let stream = dev.default_stream().unwrap();
    let gather = v_call(
        CollectiveOp::AllGatherV,
        VCounts {
            recv: Blocks::packed(&[4]),
            ..VCounts::default()
        },
    );
    let err = AclBackend::launch_collective(&stream, &comm, &gather, "agv").unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(
        err.to_string().contains("HcclAllGatherV: parameter error"),
        "{err}"
    );
    AclBackend::launch_collective(&stream, &comm, &gather, "agv").unwrap();
    let scatter = v_call(
        CollectiveOp::ReduceScatterV(ReduceOp::Min),
        VCounts {
            send: Blocks {
                counts: vec![4],
                displs: vec![3],
            },
            ..VCounts::default()
        },
    );
    AclBackend::launch_collective(&stream, &comm, &scatter, "rsv").unwrap();
    let a2a = v_call(
        CollectiveOp::AllToAllV,
        VCounts {
            send: Blocks::packed(&[4]),
            recv: Blocks::packed(&[4]),
        },
    );
    assert!(matches!(
        AclBackend::launch_collective(&stream, &comm, &a2a, "a2av"),
        Err(HalError::Unsupported(m)) if m.contains("HcclAlltoAllV")
    ));
}

#[test]
fn arrays_that_are_not_one_entry_per_rank_never_reach_hccl() {
    // No variable-count call is expected: the mock panics if one comes.
    let (dev, comm) = rank0(hccl(), |_| {});
    let stream = dev.default_stream().unwrap();
    let two = v_call(
        CollectiveOp::AllToAllV,
        VCounts {
            send: Blocks::packed(&[4]),
            recv: Blocks::packed(&[2, 2]),
        },
    );
    let err = AclBackend::launch_collective(&stream, &comm, &two, "a2av").unwrap_err();
    assert!(
        matches!(&err, HalError::InvalidArgument(m) if m.contains("2 receive counts and 2 displacements for 1 ranks")),
        "{err}"
    );
    let none = call(CollectiveOp::AllGatherV, 0x100, 0x200);
    let err = AclBackend::launch_collective(&stream, &comm, &none, "agv").unwrap_err();
    assert!(err.to_string().contains("no per-rank counts"), "{err}");
}
