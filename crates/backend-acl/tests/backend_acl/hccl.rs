//! HCCL and several devices through `braid-acl-sim`, on the real loading path: the HCCL table
//! loads from it with every symbol, failures carry `HcclResult` names and
//! `HcclGetErrorString`'s text, peer access follows ACL's rules, and handles of two devices
//! are used in any order from one thread.

use crate::common;

use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::{self, HcclFunctions, HCCL_DATA_TYPE_FP32};
use braid_acl_sys::SymbolTable;
use braid_backend_acl::{codes, AclBackend, AclComm, AclStream, HcclApi};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::hal::{CollectiveBackend, Comm as _, Device as _, HalError, Stream as _};
use braid_stream_core::types::EventFlags;
use braid_stream_core::DType;
use common::download;
use std::ffi::{CStr, OsString};
use std::ptr;

fn env_of(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
    let pairs = pairs.to_vec();
    move |k| {
        pairs
            .iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn hccl_loads_from_the_simulator_with_every_symbol() {
    let api = HcclApi::load_for(common::api()).expect("HCCL from braid-acl-sim");
    assert_eq!(api.libraries(), vec![common::api().path().to_path_buf()]);
    assert!(
        api.missing_optional().is_empty(),
        "{:?}",
        api.missing_optional()
    );
    assert_eq!(HcclFunctions::SYMBOLS.len(), 25);
    // Loaded once per ACL library.
    assert!(std::ptr::eq(api, HcclApi::load_for(common::api()).unwrap()));
}

#[test]
fn a_configured_hccl_library_that_fails_is_an_error_naming_it() {
    let err = HcclApi::load_with(
        env_of(&[(hccl::LIB_ENV, "/nonexistent/libhccl.so")]),
        common::api(),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/libhccl.so (named by $BRAID_HCCL_LIB)"),
        "{text}"
    );
    assert!(text.starts_with("could not load HCCL"), "{text}");

    let err =
        HcclApi::load_with(env_of(&[(hccl::LIB_ENV, "libm.so.6")]), common::api()).unwrap_err();
    assert!(
        err.missing_symbols().contains(&"HcclGetRootInfo"),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("libm.so.6 (named by $BRAID_HCCL_LIB)"));
}

#[test]
fn an_hccl_variable_set_to_nothing_is_refused_by_name_never_the_simulator() {
    for value in ["", "  "] {
        let err = match HcclApi::load_with(env_of(&[(hccl::LIB_ENV, value)]), common::api()) {
            Ok(api) => panic!("loaded {:?} instead of refusing", api.libraries()),
            Err(err) => err,
        };
        let text = err.to_string();
        assert!(
            text.contains(&format!("$BRAID_HCCL_LIB={value:?}: set but empty")),
            "{text}"
        );
    }
}

#[test]
fn failures_carry_the_result_name_and_hccl_error_string() {
    let api = HcclApi::load_for(common::api()).unwrap();
    // SAFETY: a null communicator is refused before any use.
    let code = unsafe { (api.HcclCommDestroy)(ptr::null_mut()) };
    assert_eq!(code, HCCL_E_PTR);
    let err = api.check("HcclCommDestroy", code).unwrap_err();
    assert_eq!((err.name, err.call), ("HCCL_E_PTR", "HcclCommDestroy"));
    assert!(err.message.starts_with("empty pointer"), "{}", err.message);
    assert!(
        err.message.contains("comm is a null pointer"),
        "{}",
        err.message
    );
    match HalError::from(err) {
        HalError::Native { code, name, .. } => assert_eq!((code, name), (2, "HCCL_E_PTR")),
        other => panic!("unexpected {other:?}"),
    }

    let (buf, comm, stream) = (0x1000 as *mut _, 0x2000 as *mut _, 0x3000 as *mut _);
    // SAFETY: arguments are checked before any handle or buffer is used.
    let bad_type = unsafe { (api.HcclAllReduce)(buf, buf, 4, 99, 0, comm, stream) };
    assert_eq!(bad_type, HCCL_E_PARA);
    // SAFETY: as above.
    let bad_op = unsafe { (api.HcclAllReduce)(buf, buf, 4, HCCL_DATA_TYPE_FP32, 7, comm, stream) };
    assert_eq!(bad_op, HCCL_E_PARA);
    // SAFETY: as above. int128 (code 12) is in HCCL's table but not braid's.
    let int128 = unsafe { (api.HcclAllReduce)(buf, buf, 4, 12, 0, comm, stream) };
    assert_eq!(int128, HCCL_E_NOT_SUPPORT);
    // SAFETY: as above.
    let null_send = unsafe {
        (api.HcclAllReduce)(
            ptr::null_mut(),
            buf,
            4,
            HCCL_DATA_TYPE_FP32,
            0,
            comm,
            stream,
        )
    };
    assert_eq!(null_send, HCCL_E_PTR);
    // SAFETY: as above; the communicator is no live one.
    let stale = unsafe { (api.HcclAllReduce)(buf, buf, 4, HCCL_DATA_TYPE_FP32, 0, comm, stream) };
    assert_eq!(stale, HCCL_E_PARA);
    let mut rank = 0u32;
    // SAFETY: as above.
    assert_eq!(unsafe { (api.HcclGetRankId)(comm, &mut rank) }, HCCL_E_PARA);
    assert_eq!(api.error_string(99), "unknown error");
    assert_eq!(api.error_string(HCCL_E_TIMEOUT), "timeout");
}

#[test]
fn peer_access_between_two_devices_follows_acls_rules() {
    let (d0, d1) = (common::hal_device(0), common::hal_device(1));
    assert!(d0.can_access_peer(&d1).unwrap());
    assert!(d1.can_access_peer(&d0).unwrap());
    assert!(!d0.can_access_peer(&d0).unwrap());
    d0.enable_peer_access(&d1).unwrap();
    d0.enable_peer_access(&d1).unwrap();
    assert!(matches!(
        d1.enable_peer_access(&d1),
        Err(HalError::InvalidArgument(_))
    ));

    let api = common::api();
    let can = api.aclrtDeviceCanAccessPeer.expect("exported");
    let enable = api.aclrtDeviceEnablePeerAccess.expect("exported");
    let disable = api.aclrtDeviceDisablePeerAccess.expect("exported");
    let mut answer = -1;
    // SAFETY: `answer` is valid for a write (null is refused); the rest are plain values.
    let (itself, out_of_range, null_out) = unsafe {
        (
            can(&mut answer, 0, 0),
            can(&mut answer, 0, 99),
            can(ptr::null_mut(), 0, 1),
        )
    };
    assert_eq!(itself, codes::ACL_ERROR_INVALID_PARAM);
    assert_eq!(out_of_range, codes::ACL_ERROR_INVALID_PARAM);
    assert_eq!(null_out, codes::ACL_ERROR_INVALID_PARAM);
    // Binds device 0 on this thread: enabling is from the current device.
    d0.synchronize().unwrap();
    // SAFETY: plain values. The flags are reserved: CANN refuses a non-zero value as
    // unsupported; disabling twice finds it no longer enabled.
    let (flags, disabled, again) = unsafe { (enable(1, 1), disable(1), disable(1)) };
    assert_eq!(flags, codes::ACL_ERROR_FEATURE_UNSUPPORTED);
    assert_eq!(disabled, codes::ACL_SUCCESS);
    assert_eq!(again, codes::ACL_ERROR_INVALID_PARAM);
    // SAFETY: no arguments.
    let text = unsafe { CStr::from_ptr((api.aclGetRecentErrMsg)()) };
    assert!(
        text.to_string_lossy().contains("is not enabled"),
        "{text:?}"
    );
}

#[test]
fn handles_of_two_devices_are_used_in_any_order_from_one_thread() {
    let (d0, d1) = (common::hal_device(0), common::hal_device(1));
    let (s0, s1) = (d0.create_stream(0).unwrap(), d1.create_stream(0).unwrap());
    let (a, b) = (d0.alloc(256).unwrap(), d1.alloc(256).unwrap());
    // Interleaved: every call binds its own device first (braid-acl-sim refuses an object of
    // another device than the thread's current one with 107003).
    for round in 0..3u8 {
        s0.memset(a, round, 256).unwrap();
        s1.memset(b, round + 1, 256).unwrap();
        s0.synchronize().unwrap();
        s1.synchronize().unwrap();
    }
    let mut host = [0u8; 4];
    // SAFETY: `host` outlives the synchronize below.
    unsafe { s1.memcpy_d2h(host.as_mut_ptr(), b, 4) }.unwrap();
    s1.synchronize().unwrap();
    assert_eq!(host, [3; 4]);
    // SAFETY: allocated above, no work pending.
    unsafe {
        d0.free(a).unwrap();
        d1.free(b).unwrap();
    }
}

#[test]
fn a_peer_copy_needs_peer_access_and_a_stream_waits_on_another_devices_event() {
    let (d0, d1) = (common::hal_device(0), common::hal_device(1));
    let (s0, s1) = (d0.create_stream(0).unwrap(), d1.create_stream(0).unwrap());
    let (mine, theirs) = (d0.alloc(64).unwrap(), d1.alloc(64).unwrap());
    s1.memset(theirs, 7, 64).unwrap();
    let written = d1.create_event(EventFlags::default()).unwrap();
    s1.record(&written).unwrap();
    // Device 0's stream waits on device 1's event: a cross-device wait.
    s0.wait(&written).unwrap();
    // Without peer access the copy is refused, naming both devices.
    match s0.memcpy_d2d(mine, theirs, 64) {
        Err(HalError::Native {
            code,
            name,
            message,
        }) => {
            assert_eq!((code, name), (107_000, "ACL_ERROR_RT_PARAM_INVALID"));
            assert!(message.contains("memory of device 1"), "{message}");
            assert!(message.contains("device 0 has no peer access"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    d0.enable_peer_access(&d1).unwrap();
    s0.memcpy_d2d(mine, theirs, 64).unwrap();
    let mut host = [0u8; 64];
    // SAFETY: `host` outlives the synchronize below.
    unsafe { s0.memcpy_d2h(host.as_mut_ptr(), mine, 64) }.unwrap();
    s0.synchronize().unwrap();
    assert_eq!(host, [7; 64]);
    // The stream is still usable after the refusal; free both.
    // SAFETY: allocated above, no work pending.
    unsafe {
        d0.free(mine).unwrap();
        d1.free(theirs).unwrap();
    }
}

#[test]
fn an_all_reduce_across_two_devices_through_hccl_gives_the_sum() {
    let ranks = common::two_ranks();
    let (comms, streams) = (&ranks.comms, &ranks.streams);
    assert_eq!((comms[0].rank(), comms[1].rank()), (0, 1));
    assert_eq!(comms[1].query_rank_and_size().unwrap(), (1, 2));
    let sends = ranks.upload(|rank| {
        let base = (rank as f32 + 1.0) * 10.0;
        vec![base, base + 1.0, base + 2.0, base + 3.0]
    });
    let recvs = ranks.alloc(16);
    for (rank, stream) in streams.iter().enumerate() {
        let (send, recv) = (sends[rank], recvs[rank]);
        let call = CollectiveCall::new(
            CollectiveOp::AllReduce(ReduceOp::Sum),
            send,
            recv,
            4,
            DType::F32,
        );
        AclBackend::launch_collective(stream, &comms[rank], &call, "allreduce").unwrap();
    }
    for (rank, stream) in streams.iter().enumerate() {
        assert_eq!(
            download(stream, recvs[rank], 4),
            vec![30.0, 32.0, 34.0, 36.0],
            "rank {rank}"
        );
    }
    // A communicator of another device is refused before HCCL is called.
    let max = CollectiveOp::AllReduce(ReduceOp::Max);
    let call = CollectiveCall::new(max, sends[0], recvs[0], 4, DType::F32);
    assert!(matches!(
        AclBackend::launch_collective(&streams[0], &comms[1], &call, "wrong device"),
        Err(HalError::InvalidArgument(m)) if m.contains("ACL device 1")
    ));
    // A device listed twice is a typed error.
    assert!(matches!(
        AclComm::init_all(&[&ranks.devices[0], &ranks.devices[0]]),
        Err(HalError::InvalidArgument(m)) if m.contains("listed twice")
    ));
}

#[test]
fn a_root_info_communicator_is_joined_from_one_thread_per_rank() {
    let (d0, d1) = (common::hal_device(0), common::hal_device(1));
    let info = AclComm::root_info(&d0).expect("HcclGetRootInfo");
    let comms: Vec<AclComm> = std::thread::scope(|scope| {
        let joins: Vec<_> = [&d0, &d1]
            .into_iter()
            .zip(0..)
            .map(|(device, rank)| {
                let info = &info;
                scope.spawn(move || AclComm::init_root_info(device, 2, rank, info))
            })
            .collect();
        joins
            .into_iter()
            .map(|j| j.join().unwrap().expect("HcclCommInitRootInfo"))
            .collect()
    });
    assert_eq!(comms[0].query_rank_and_size().unwrap(), (0, 2));
    assert_eq!(comms[1].query_rank_and_size().unwrap(), (1, 2));
    // A rank out of range is refused before HCCL is called.
    assert!(matches!(
        AclComm::init_root_info(&d0, 2, 2, &info),
        Err(HalError::InvalidArgument(_))
    ));
}

/// Runs `calls[rank]` on every rank's stream and returns each rank's `recv` (`n` values).
fn run_on_ranks(
    streams: &[AclStream],
    comms: &[AclComm],
    calls: &[CollectiveCall],
    n: usize,
) -> Vec<Vec<f32>> {
    for ((stream, comm), call) in streams.iter().zip(comms).zip(calls) {
        AclBackend::launch_collective(stream, comm, call, "test").unwrap();
    }
    streams
        .iter()
        .zip(calls)
        .map(|(stream, call)| download(stream, call.recv, n))
        .collect()
}

#[test]
fn every_collective_through_hccl_moves_the_right_numbers_and_a_mismatch_is_typed() {
    let ranks = common::two_ranks();
    let (comms, streams) = (&ranks.comms, &ranks.streams);
    // Rank r sends [4r, 4r + 1, 4r + 2, 4r + 3].
    let sends = ranks.upload(|r| {
        let base = 4.0 * r as f32;
        vec![base, base + 1.0, base + 2.0, base + 3.0]
    });
    let recvs = ranks.alloc(32);
    let call = |r: usize, op, count| CollectiveCall::new(op, sends[r], recvs[r], count, DType::F32);

    let gathered = run_on_ranks(
        streams,
        comms,
        &[
            call(0, CollectiveOp::AllGather, 2),
            call(1, CollectiveOp::AllGather, 2),
        ],
        4,
    );
    assert_eq!(gathered, vec![vec![0.0, 1.0, 4.0, 5.0]; 2]);

    let scattered = run_on_ranks(
        streams,
        comms,
        &[
            call(0, CollectiveOp::ReduceScatter(ReduceOp::Max), 2),
            call(1, CollectiveOp::ReduceScatter(ReduceOp::Max), 2),
        ],
        2,
    );
    assert_eq!(scattered, vec![vec![4.0, 5.0], vec![6.0, 7.0]]);

    // Broadcast from rank 1 into separate receive buffers (the root's own copy included).
    let root = CollectiveOp::Broadcast { root: 1 };
    let broadcast = run_on_ranks(streams, comms, &[call(0, root, 4), call(1, root, 4)], 4);
    assert_eq!(broadcast, vec![vec![4.0, 5.0, 6.0, 7.0]; 2]);

    let swapped = run_on_ranks(
        streams,
        comms,
        &[
            call(0, CollectiveOp::AllToAll, 2),
            call(1, CollectiveOp::AllToAll, 2),
        ],
        4,
    );
    assert_eq!(
        swapped,
        vec![vec![0.0, 1.0, 4.0, 5.0], vec![2.0, 3.0, 6.0, 7.0]]
    );

    let sent = run_on_ranks(
        streams,
        comms,
        &[
            call(0, CollectiveOp::Send { peer: 1 }, 3),
            call(1, CollectiveOp::Recv { peer: 0 }, 3),
        ],
        3,
    );
    assert_eq!(sent[1], vec![0.0, 1.0, 2.0]);

    // Ranks that disagree on the count: a typed HCCL error instead of a hang.
    AclBackend::launch_collective(
        &streams[0],
        &comms[0],
        &call(0, CollectiveOp::AllReduce(ReduceOp::Sum), 4),
        "a",
    )
    .unwrap();
    match AclBackend::launch_collective(
        &streams[1],
        &comms[1],
        &call(1, CollectiveOp::AllReduce(ReduceOp::Sum), 2),
        "b",
    ) {
        Err(HalError::NativeInvalidArgument { name, message, .. }) => {
            assert_eq!(name, "HCCL_E_PARA", "{message}");
            // The call, HcclGetErrorString's text, then the simulator's explanation.
            assert!(
                message.starts_with("HcclAllReduce: parameter error; "),
                "{message}"
            );
            assert!(message.contains("count 4 vs 2"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Nothing is left broken: rank 1's matching part completes rank 0's, and both sum.
    AclBackend::launch_collective(
        &streams[1],
        &comms[1],
        &call(1, CollectiveOp::AllReduce(ReduceOp::Sum), 4),
        "b again",
    )
    .unwrap();
    let sums: Vec<Vec<f32>> = (0..2).map(|r| download(&streams[r], recvs[r], 4)).collect();
    assert_eq!(sums, vec![vec![4.0, 6.0, 8.0, 10.0]; 2]);
}
