//! Collectives through HCCL on `braid-acl-sim`, on the real loading path: the same front
//! layer (`braid-collective`), checks and mismatch detection as on the simulator.

use crate::common;

use braid_backend_acl::AclBackend;
use braid_collective::{
    CollectiveError, CommOptions, Communicator, ReduceOp, RootInfo, ROOT_INFO_BYTES,
};
use braid_stream_core::{DType, Device};

/// Devices `0..n`, for this test alone.
fn devices(n: u32) -> Vec<Device<AclBackend>> {
    common::node(n).expect("braid-acl-sim's devices")
}

#[test]
fn an_all_reduce_through_hccl_and_a_mismatch_refused_before_hccl_sees_it() {
    let devices = devices(2);
    let comms = Communicator::init_all(&devices).unwrap();
    assert!(comms[0].checks_mismatch());
    common::all_reduce_sums(&comms);
    let s: Vec<_> = devices
        .iter()
        .map(|d| d.create_stream(0).unwrap())
        .collect();
    let b: Vec<_> = devices.iter().map(|d| d.alloc(16).unwrap()).collect();
    comms[0]
        .all_gather(&s[0], b[0].range(0, 8).unwrap(), &b[0], DType::F32)
        .unwrap();
    let err = comms[1]
        .all_reduce(&s[1], &b[1], &b[1], DType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectiveError::Mismatch {
                rank: 1,
                call: 1,
                ..
            }
        ),
        "{err}"
    );
    // In place: rank 1 sends its own block of the receive buffer.
    comms[1]
        .all_gather(&s[1], b[1].range(8, 8).unwrap(), &b[1], DType::F32)
        .unwrap();
    for s in &s {
        s.synchronize().unwrap();
    }
    common::all_reduce_sums(&comms);
}

#[test]
fn on_acl_the_mismatch_check_is_an_option() {
    let devices = devices(2);
    let options = CommOptions {
        check_mismatch: false,
        ..CommOptions::default()
    };
    let comms = Communicator::init_all_with(&devices, options).unwrap();
    assert!(!comms[0].checks_mismatch());
    common::all_reduce_sums(&comms);
}

#[test]
fn bad_input_through_hccl_is_a_typed_error() {
    let devices = devices(2);
    let twice = [devices[1].clone(), devices[1].clone()];
    assert!(matches!(
        Communicator::init_all(&twice),
        Err(CollectiveError::DuplicateDevice {
            first: 0,
            second: 1,
            ..
        })
    ));
    let junk = RootInfo::from_bytes(&[3; ROOT_INFO_BYTES]).unwrap();
    let err = Communicator::init_root_info(&devices[0], 2, 1, &junk, CommOptions::default());
    assert!(
        matches!(err, Err(CollectiveError::BadRootInfo { rank: 1, .. })),
        "{err:?}"
    );
    let comms = Communicator::init_all(&devices).unwrap();
    common::all_reduce_sums(&comms);
}

#[test]
fn a_barrier_and_an_average_through_hccl() {
    let devices = devices(2);
    let comms = Communicator::init_all(&devices).unwrap();
    let parts: Vec<_> = comms
        .iter()
        .map(|c| {
            let s = c.device().create_stream(0).unwrap();
            let b = c.device().alloc(16).unwrap();
            s.copy_h2d(
                b.slice(),
                DType::F32.encode(&[c.rank() as f32 * 4.0 + 1.0; 4]),
            )
            .unwrap();
            (s, b)
        })
        .collect();
    for (c, (s, b)) in comms.iter().zip(&parts) {
        c.barrier(s).unwrap();
        c.all_reduce(s, b, b, DType::F32, ReduceOp::Avg).unwrap();
    }
    for (s, b) in &parts {
        // (1 + 5) / 2 on both ranks: HCCL's sum, then the scale on the same stream.
        assert_eq!(
            s.copy_d2h(b.slice()).unwrap().wait_f32().unwrap(),
            vec![3.0; 4]
        );
    }
    // A barrier against another rank's all-reduce is refused before HCCL sees it.
    let s0 = &parts[0].0;
    comms[0].barrier(s0).unwrap();
    let err = comms[1]
        .all_reduce(
            &parts[1].0,
            &parts[1].1,
            &parts[1].1,
            DType::F32,
            ReduceOp::Sum,
        )
        .unwrap_err();
    assert!(
        matches!(err, CollectiveError::Mismatch { rank: 1, .. }),
        "{err}"
    );
    comms[1].barrier(&parts[1].0).unwrap();
    s0.synchronize().unwrap();
}
