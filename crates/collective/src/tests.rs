//! Unit tests of the front layer on the hal's noop backend, which notes what it is given.

use crate::*;
use braid_stream_core::hal::noop::{Launched, NoopBackend as TestBackend, NoopDevice};
use braid_stream_core::hal::Comm as _;
use braid_stream_core::{
    DType, Device, DeviceMemory, DevicePtr, DeviceSlice, SizeOverflow, Stream, WrongDevice,
};
use std::sync::Arc;

fn devices(n: u32) -> Vec<Device<TestBackend>> {
    (0..n)
        .map(|i| Device::new(NoopDevice::new(i)).expect("device"))
        .collect()
}

/// The collective parts launched on `device`: (rank, call, label).
fn calls(device: &Device<TestBackend>) -> Vec<(u32, CollectiveCall, String)> {
    device
        .hal()
        .launched()
        .into_iter()
        .filter_map(|l| match l {
            Launched::Collective { rank, call, label } => Some((rank, call, label)),
            _ => None,
        })
        .collect()
}

struct Ranks {
    devices: Vec<Device<TestBackend>>,
    comms: Vec<Communicator<TestBackend>>,
    streams: Vec<Stream<TestBackend>>,
}

fn ranks(n: u32) -> Ranks {
    let devices = devices(n);
    let comms = Communicator::init_all(&devices).expect("communicator");
    let streams = devices
        .iter()
        .map(|d| d.create_stream(0).unwrap())
        .collect();
    Ranks {
        devices,
        comms,
        streams,
    }
}

fn alloc(device: &Device<TestBackend>, len: u64) -> DeviceMemory<TestBackend> {
    device.alloc(len).expect("alloc")
}

#[test]
fn communicators_are_clone_send_and_sync_handles() {
    fn assert_send_sync<T: Clone + Send + Sync>() {}
    assert_send_sync::<Communicator<TestBackend>>();
    let r = ranks(4);
    for (i, comm) in r.comms.iter().enumerate() {
        assert_eq!((comm.rank(), comm.ranks()), (i as u32, 4));
        assert!(comm.device().same_as(&r.devices[i]));
        assert!(comm.checks_mismatch());
        assert_eq!(comm.native().rank(), i as u32);
    }
    let clone = r.comms[2].clone();
    assert_eq!(clone.rank(), 2);
    assert!(format!("{clone:?}").contains("rank 2 of 4"));
}

#[test]
fn init_all_refuses_no_device_and_a_device_twice() {
    assert_eq!(
        Communicator::<TestBackend>::init_all(&[]).unwrap_err(),
        CollectiveError::NoDevices
    );
    let d = devices(2);
    let list = [d[0].clone(), d[1].clone(), d[0].clone()];
    let err = Communicator::init_all(&list).unwrap_err();
    assert_eq!(
        err,
        CollectiveError::DuplicateDevice {
            device: d[0].id(),
            first: 0,
            second: 2
        }
    );
    assert!(err.to_string().contains(&d[0].id().to_string()));
    // The devices still make a communicator.
    assert_eq!(Communicator::init_all(&d).unwrap().len(), 2);
}

#[test]
fn root_info_communicators_refuse_a_bad_rank_and_bytes_that_are_no_root_info() {
    let d = devices(1);
    let info = Communicator::root_info(&d[0]).unwrap();
    let err = Communicator::init_root_info(&d[0], 2, 2, &info, CommOptions::default());
    assert_eq!(
        err.unwrap_err(),
        CollectiveError::RankOutOfRange { rank: 2, ranks: 2 }
    );
    let junk = RootInfo::from_bytes(&[0; ROOT_INFO_BYTES]).unwrap();
    let err = Communicator::init_root_info(&d[0], 2, 1, &junk, CommOptions::default());
    assert!(matches!(
        err.unwrap_err(),
        CollectiveError::BadRootInfo { rank: 1, .. }
    ));
    let comm = Communicator::init_root_info(&d[0], 2, 1, &info, CommOptions::default()).unwrap();
    assert_eq!((comm.rank(), comm.ranks()), (1, 2));
    assert!(!comm.checks_mismatch());
}

#[test]
fn each_operation_enqueues_one_call_with_hccl_counts() {
    let r = ranks(2);
    let (c, s, d) = (&r.comms[1], &r.streams[1], &r.devices[1]);
    let small = alloc(d, 16);
    let big = alloc(d, 32);
    c.all_reduce(s, &small, &small, DType::F32, ReduceOp::Max)
        .unwrap();
    c.all_gather(s, &small, &big, DType::F16).unwrap();
    c.reduce_scatter(s, &big, &small, DType::BF16, ReduceOp::Sum)
        .unwrap();
    c.broadcast(s, &big, DType::F32, 0).unwrap();
    c.send(s, &small, DType::F32, 0).unwrap();
    c.recv(s, &small, DType::F32, 0).unwrap();
    c.all_to_all(s, &big, &big, DType::F32).unwrap();
    let got: Vec<_> = calls(d)
        .iter()
        .map(|(rank, call, label)| {
            assert_eq!(*rank, 1);
            (call.op, call.count, call.dtype, label.clone())
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                CollectiveOp::AllReduce(ReduceOp::Max),
                4,
                DType::F32,
                "allreduce(max)".to_string()
            ),
            (CollectiveOp::AllGather, 8, DType::F16, "allgather".into()),
            (
                CollectiveOp::ReduceScatter(ReduceOp::Sum),
                8,
                DType::BF16,
                "reducescatter(sum)".into()
            ),
            (
                CollectiveOp::Broadcast { root: 0 },
                8,
                DType::F32,
                "broadcast(root 0)".into()
            ),
            (
                CollectiveOp::Send { peer: 0 },
                4,
                DType::F32,
                "send(to 0)".into()
            ),
            (
                CollectiveOp::Recv { peer: 0 },
                4,
                DType::F32,
                "recv(from 0)".into()
            ),
            (CollectiveOp::AllToAll, 4, DType::F32, "alltoall".into()),
        ]
    );
    let ag = calls(d)[1].1.clone();
    assert_eq!((ag.send, ag.recv), (small.ptr(), big.ptr()));
}

#[test]
fn collectives_are_ordered_operators_of_their_stream() {
    let r = ranks(2);
    let (c, d) = (&r.comms[0], &r.devices[0]);
    let buf = alloc(d, 64);
    let other = d.create_stream(0).unwrap();
    let pos = c
        .all_reduce(&r.streams[0], &buf, &buf, DType::F32, ReduceOp::Sum)
        .unwrap();
    assert_eq!(r.streams[0].position(), pos);
    assert!(!d.is_ordered_before(pos, &other));
    other.wait_stream(&r.streams[0]).unwrap();
    assert!(d.is_ordered_before(pos, &other));
}

/// Each refusal leaves nothing enqueued, and the rank, its stream and device work after it.
fn assert_refused(r: &Ranks, rank: usize, err: CollectiveError, expected: CollectiveError) {
    assert_eq!(err, expected);
    assert!(!err.to_string().is_empty());
    assert!(
        calls(&r.devices[rank]).is_empty(),
        "nothing enqueued after {err}"
    );
}

#[test]
fn bad_input_is_a_typed_error_and_nothing_is_enqueued() {
    let r = ranks(4);
    let (c, s, d) = (&r.comms[1], &r.streams[1], &r.devices[1]);
    let b16 = alloc(d, 16);
    let b6 = alloc(d, 6);
    let b48 = alloc(d, 48);
    let sum = ReduceOp::Sum;
    let ar = CollectiveOp::AllReduce(sum);

    let err = c
        .all_reduce(&r.streams[0], &b16, &b16, DType::F32, sum)
        .unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::WrongDevice(Box::new(WrongDevice {
            call: "allreduce(sum) of rank 1".into(),
            what: "stream",
            expected: d.id(),
            found: r.devices[0].id(),
        })),
    );
    // 2^60 f32 elements per rank: the recv buffer of 4 ranks would hold 2^64 bytes.
    let huge = DeviceSlice::new(DevicePtr(0x1000), 1 << 62);
    let err = c.all_gather(s, huge, huge, DType::F32).unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::SizeOverflow(SizeOverflow {
            call: "allgather",
            what: format!(
                "the recv buffer: {} float32 elements over 4 rank(s)",
                1u64 << 60
            ),
        }),
    );
    let err = c.all_reduce(s, &b6, &b6, DType::F32, sum).unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::PartialElement {
            op: ar,
            buffer: "send",
            len: 6,
            dtype: DType::F32,
        },
    );
    let err = c.all_reduce(s, &b16, &b48, DType::F32, sum).unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::BufferSize {
            op: ar,
            buffer: "recv",
            count: 4,
            dtype: DType::F32,
            ranks: 4,
            expected: 16,
            found: 48,
        },
    );
    let err = c.all_gather(s, &b16, &b48, DType::F16).unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::BufferSize {
            op: CollectiveOp::AllGather,
            buffer: "recv",
            count: 8,
            dtype: DType::F16,
            ranks: 4,
            expected: 64,
            found: 48,
        },
    );
    let err = c
        .reduce_scatter(s, &b16, &b16, DType::F32, sum)
        .unwrap_err();
    assert!(matches!(
        err,
        CollectiveError::BufferSize {
            buffer: "send",
            expected: 64,
            ..
        }
    ));
    let err = c.all_to_all(s, &b6, &b6, DType::F16).unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::UnevenBlocks {
            op: CollectiveOp::AllToAll,
            buffer: "send",
            elements: 3,
            ranks: 4,
        },
    );
    let err = c.broadcast(s, &b16, DType::F32, 4).unwrap_err();
    assert_refused(
        &r,
        1,
        err,
        CollectiveError::RootOutOfRange { root: 4, ranks: 4 },
    );
    for peer in [1, 4] {
        let err = c.send(s, &b16, DType::F32, peer).unwrap_err();
        assert_refused(
            &r,
            1,
            err,
            CollectiveError::BadPeer {
                op: CollectiveOp::Send { peer },
                rank: 1,
                peer,
                ranks: 4,
            },
        );
        assert!(matches!(
            c.recv(s, &b16, DType::F32, peer),
            Err(CollectiveError::BadPeer { .. })
        ));
    }
    let empty = b16.range(0, 0).unwrap();
    let err = c.all_reduce(s, empty, empty, DType::F32, sum).unwrap_err();
    assert_refused(&r, 1, err, CollectiveError::ZeroCount { op: ar });

    // Everything still works, the mismatch ledger included: every rank issues the same call.
    for (i, comm) in r.comms.iter().enumerate() {
        let buf = alloc(&r.devices[i], 16);
        comm.all_reduce(&r.streams[i], &buf, &buf, DType::F32, sum)
            .unwrap();
    }
    assert_eq!(calls(d).len(), 1);
}

#[test]
fn a_mismatched_collective_names_the_rank_the_call_and_the_difference() {
    let r = ranks(3);
    let bufs: Vec<_> = r.devices.iter().map(|d| alloc(d, 32)).collect();
    let ar =
        |i: usize, op, dtype| r.comms[i].all_reduce(&r.streams[i], &bufs[i], &bufs[i], dtype, op);
    ar(0, ReduceOp::Sum, DType::F32).unwrap();
    ar(1, ReduceOp::Sum, DType::F32).unwrap();
    let err = ar(2, ReduceOp::Max, DType::F16).unwrap_err();
    let CollectiveError::Mismatch {
        rank,
        call,
        expected_rank,
        expected,
        found,
        difference,
    } = &err
    else {
        panic!("not a mismatch: {err}");
    };
    assert_eq!((*rank, *call, *expected_rank), (2, 0, 0));
    assert_eq!(expected.op, CollectiveOp::AllReduce(ReduceOp::Sum));
    assert_eq!(
        (found.op, found.count, found.dtype),
        (CollectiveOp::AllReduce(ReduceOp::Max), 16, DType::F16)
    );
    assert_eq!(
        difference,
        "operation allreduce(sum) vs allreduce(max), count 8 vs 16, data type float32 vs float16"
    );
    assert!(err.to_string().contains("rank 2's collective #0"));
    assert!(calls(&r.devices[2]).is_empty());
    // The ledger is unchanged: rank 2 issues the right call, then all go on.
    ar(2, ReduceOp::Sum, DType::F32).unwrap();
    for i in 0..3 {
        ar(i, ReduceOp::Min, DType::F32).unwrap();
    }
    assert_eq!(calls(&r.devices[2]).len(), 2);
}

#[test]
fn a_barrier_is_one_bufferless_call_matched_like_any_collective() {
    let r = ranks(2);
    let bufs: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    r.comms[0].barrier(&r.streams[0]).unwrap();
    let err = r.comms[1]
        .all_reduce(&r.streams[1], &bufs[1], &bufs[1], DType::F32, ReduceOp::Sum)
        .unwrap_err();
    let CollectiveError::Mismatch { difference, .. } = &err else {
        panic!("not a mismatch: {err}");
    };
    assert!(
        difference.starts_with("operation barrier vs allreduce(sum)"),
        "{difference}"
    );
    assert!(calls(&r.devices[1]).is_empty());
    r.comms[1].barrier(&r.streams[1]).unwrap();
    let launched = calls(&r.devices[1]);
    assert_eq!(launched.len(), 1);
    let (rank, call, label) = &launched[0];
    assert_eq!((*rank, call.op, call.count), (1, CollectiveOp::Barrier, 0));
    assert_eq!(label, "barrier");
}

#[test]
fn a_reduce_to_a_bad_root_is_refused_before_anything_is_enqueued() {
    let r = ranks(2);
    let bufs: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    let red = |i: usize, root| {
        r.comms[i].reduce(
            &r.streams[i],
            &bufs[i],
            &bufs[i],
            DType::F32,
            ReduceOp::Sum,
            root,
        )
    };
    let err = red(0, 2).unwrap_err();
    assert!(
        matches!(err, CollectiveError::RootOutOfRange { root: 2, ranks: 2 }),
        "{err}"
    );
    assert!(calls(&r.devices[0]).is_empty());
    // The communicator works afterwards; another root on rank 1 is a mismatch.
    red(0, 0).unwrap();
    let err = red(1, 1).unwrap_err();
    let CollectiveError::Mismatch { difference, .. } = &err else {
        panic!("not a mismatch: {err}");
    };
    assert!(
        difference.contains("reduce(sum, root 0) vs reduce(sum, root 1)"),
        "{difference}"
    );
    red(1, 0).unwrap();
    let (_, call, _) = &calls(&r.devices[1])[0];
    assert_eq!(
        call.op,
        CollectiveOp::Reduce {
            op: ReduceOp::Sum,
            root: 0
        }
    );
}

#[test]
fn a_scatter_reads_the_root_s_whole_buffer_and_refuses_a_bad_root() {
    let r = ranks(2);
    let big: Vec<_> = r.devices.iter().map(|d| alloc(d, 32)).collect();
    let small: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    let sc =
        |i: usize, root| r.comms[i].scatter(&r.streams[i], &big[i], &small[i], DType::F32, root);
    let err = sc(1, 5).unwrap_err();
    assert!(
        matches!(err, CollectiveError::RootOutOfRange { root: 5, ranks: 2 }),
        "{err}"
    );
    assert!(calls(&r.devices[1]).is_empty());
    // The root's send must hold every rank's block.
    let err = r.comms[0]
        .scatter(&r.streams[0], &small[0], &small[0], DType::F32, 0)
        .unwrap_err();
    assert!(matches!(err, CollectiveError::BufferSize { .. }), "{err}");
    sc(0, 0).unwrap();
    sc(1, 0).unwrap();
    let (_, call, label) = &calls(&r.devices[1])[0];
    assert_eq!(
        (call.op, call.count),
        (CollectiveOp::Scatter { root: 0 }, 4)
    );
    assert_eq!(label, "scatter(root 0)");
}

#[test]
fn an_average_is_one_call_that_a_sum_does_not_match() {
    let r = ranks(2);
    let bufs: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    let ar =
        |i: usize, op| r.comms[i].all_reduce(&r.streams[i], &bufs[i], &bufs[i], DType::F32, op);
    ar(0, ReduceOp::Avg).unwrap();
    let err = ar(1, ReduceOp::Sum).unwrap_err();
    let CollectiveError::Mismatch { difference, .. } = &err else {
        panic!("not a mismatch: {err}");
    };
    assert_eq!(difference, "operation allreduce(avg) vs allreduce(sum)");
    assert!(calls(&r.devices[1]).is_empty());
    ar(1, ReduceOp::Avg).unwrap();
    let launched = calls(&r.devices[1]);
    assert_eq!(launched.len(), 1, "one call, not a sum and a scale");
    assert_eq!(launched[0].1.op, CollectiveOp::AllReduce(ReduceOp::Avg));
}

#[test]
fn collectives_in_a_different_order_or_with_another_root_are_refused() {
    let r = ranks(2);
    let small: Vec<_> = r.devices.iter().map(|d| alloc(d, 8)).collect();
    let big: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    r.comms[0]
        .all_gather(&r.streams[0], &small[0], &big[0], DType::F32)
        .unwrap();
    r.comms[0]
        .broadcast(&r.streams[0], &big[0], DType::F32, 0)
        .unwrap();
    // Rank 1 broadcasts first: its call #0 is not the all-gather rank 0 issued.
    let err = r.comms[1]
        .broadcast(&r.streams[1], &big[1], DType::F32, 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectiveError::Mismatch {
                rank: 1,
                call: 0,
                ..
            }
        ),
        "{err}"
    );
    r.comms[1]
        .all_gather(&r.streams[1], &small[1], &big[1], DType::F32)
        .unwrap();
    let err = r.comms[1]
        .broadcast(&r.streams[1], &big[1], DType::F32, 1)
        .unwrap_err();
    let CollectiveError::Mismatch {
        call: 1,
        difference,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(
        difference,
        "operation broadcast(root 0) vs broadcast(root 1)"
    );
    r.comms[1]
        .broadcast(&r.streams[1], &big[1], DType::F32, 0)
        .unwrap();
}

#[test]
fn sends_and_receives_match_per_pair() {
    let r = ranks(3);
    let bufs: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    let b8 = alloc(&r.devices[1], 8);
    // Rank 0 sends to 1 and 2; rank 2's receive and rank 1's receive come in any order.
    r.comms[0]
        .send(&r.streams[0], &bufs[0], DType::F32, 1)
        .unwrap();
    r.comms[0]
        .send(&r.streams[0], &bufs[0], DType::F32, 2)
        .unwrap();
    r.comms[2]
        .recv(&r.streams[2], &bufs[2], DType::F32, 0)
        .unwrap();
    let err = r.comms[1]
        .recv(&r.streams[1], &b8, DType::F32, 0)
        .unwrap_err();
    let CollectiveError::PeerMismatch {
        rank,
        peer,
        sender,
        receiver,
        call,
        difference,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!((*rank, *peer, *sender, *receiver, *call), (1, 0, 0, 1, 0));
    assert_eq!(difference, "count 4 vs 2");
    let err = r.comms[1]
        .recv(&r.streams[1], &bufs[1], DType::BF16, 0)
        .unwrap_err();
    assert!(matches!(err, CollectiveError::PeerMismatch { .. }), "{err}");
    r.comms[1]
        .recv(&r.streams[1], &bufs[1], DType::F32, 0)
        .unwrap();
    // Receive first, then the send.
    r.comms[1]
        .recv(&r.streams[1], &bufs[1], DType::F16, 2)
        .unwrap();
    let err = r.comms[2]
        .send(&r.streams[2], &bufs[2], DType::F32, 1)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectiveError::PeerMismatch {
                rank: 2,
                sender: 2,
                receiver: 1,
                ..
            }
        ),
        "{err}"
    );
    r.comms[2]
        .send(&r.streams[2], &bufs[2], DType::F16, 1)
        .unwrap();
    // Transfers do not take a place among the collectives.
    for (i, comm) in r.comms.iter().enumerate() {
        comm.all_reduce(&r.streams[i], &bufs[i], &bufs[i], DType::F32, ReduceOp::Sum)
            .unwrap();
    }
}

#[test]
fn a_failed_launch_leaves_the_ledger_as_it_was() {
    let r = ranks(2);
    let bufs: Vec<_> = r.devices.iter().map(|d| alloc(d, 16)).collect();
    r.comms[0].native().refuse_launches(true);
    let err = r.comms[0].all_reduce(&r.streams[0], &bufs[0], &bufs[0], DType::F32, ReduceOp::Sum);
    assert!(matches!(err, Err(CollectiveError::Stream(_))), "{err:?}");
    r.comms[0].native().refuse_launches(false);
    // Rank 0's failed call did not take place #0: rank 1's all-gather does.
    let big: Vec<_> = r.devices.iter().map(|d| alloc(d, 32)).collect();
    r.comms[1]
        .all_gather(&r.streams[1], &bufs[1], &big[1], DType::F32)
        .unwrap();
    r.comms[0]
        .all_gather(&r.streams[0], &bufs[0], &big[0], DType::F32)
        .unwrap();
}

#[test]
fn without_the_check_mismatched_calls_are_enqueued() {
    let d = devices(2);
    let options = CommOptions {
        check_mismatch: false,
        ..CommOptions::default()
    };
    let comms = Communicator::init_all_with(&d, options).unwrap();
    assert!(!comms[0].checks_mismatch());
    for (i, op) in [ReduceOp::Sum, ReduceOp::Max].into_iter().enumerate() {
        let buf = alloc(&d[i], 16);
        comms[i]
            .all_reduce(&d[i].default_stream(), &buf, &buf, DType::F32, op)
            .unwrap();
    }
}

/// A check of a root-info communicator, as a transport would provide: records what it sees.
struct Recording {
    seen: braid_stream_core::sync::Mutex<Vec<(u32, Signature)>>,
    run_launch: bool,
}

impl MismatchCheck for Recording {
    fn admit(
        &self,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        self.seen.lock().push((rank, signature.clone()));
        if self.run_launch {
            launch()
        } else {
            Ok(())
        }
    }
}

#[test]
fn a_root_info_communicator_passes_its_calls_to_the_given_check() {
    let d = devices(1);
    let info = Communicator::root_info(&d[0]).unwrap();
    for run_launch in [true, false] {
        let check = Arc::new(Recording {
            seen: Default::default(),
            run_launch,
        });
        let options = CommOptions {
            check: Some(check.clone()),
            ..CommOptions::default()
        };
        let comm = Communicator::init_root_info(&d[0], 4, 3, &info, options).unwrap();
        assert!(comm.checks_mismatch());
        let buf = alloc(&d[0], 8);
        let result = comm.broadcast(&d[0].default_stream(), &buf, DType::F16, 0);
        let sig = Signature {
            op: CollectiveOp::Broadcast { root: 0 },
            count: 4,
            dtype: DType::F16,
            v: None,
        };
        assert_eq!(*check.seen.lock(), [(3, sig.clone())]);
        if run_launch {
            result.unwrap();
        } else {
            assert_eq!(
                result.unwrap_err(),
                CollectiveError::NotLaunched {
                    op: sig.op,
                    rank: 3
                }
            );
        }
    }
    assert_eq!(calls(&d[0]).len(), 1);
}

#[test]
fn the_signature_exchange_lets_sends_and_receives_through_to_the_given_check() {
    let d = devices(1);
    let info = Communicator::root_info(&d[0]).unwrap();
    let check = Arc::new(Recording {
        seen: Default::default(),
        run_launch: true,
    });
    let options = CommOptions {
        check: Some(check.clone()),
        ..CommOptions::exchange_signatures()
    };
    assert!(format!("{options:?}").contains("exchange_signatures: true"));
    let comm = Communicator::init_root_info(&d[0], 2, 1, &info, options).unwrap();
    assert!(comm.checks_mismatch());
    let buf = alloc(&d[0], 8);
    let stream = d[0].default_stream();
    comm.send(&stream, &buf, DType::F16, 0).unwrap();
    comm.recv(&stream, &buf, DType::F16, 0).unwrap();
    let ops: Vec<_> = calls(&d[0]).into_iter().map(|(_, c, _)| c.op).collect();
    assert_eq!(
        ops,
        [
            CollectiveOp::Send { peer: 0 },
            CollectiveOp::Recv { peer: 0 }
        ]
    );
    assert_eq!(check.seen.lock().len(), 2);
}

#[test]
fn signatures_that_do_not_arrive_intact_refuse_the_call() {
    // The test backend's copies move nothing: the exchange reads back no signature.
    let d = devices(1);
    let info = Communicator::root_info(&d[0]).unwrap();
    let options = CommOptions::exchange_signatures();
    let comm = Communicator::init_root_info(&d[0], 2, 0, &info, options).unwrap();
    let buf = alloc(&d[0], 16);
    let err = comm
        .all_reduce(
            &d[0].default_stream(),
            &buf,
            &buf,
            DType::F32,
            ReduceOp::Sum,
        )
        .unwrap_err();
    match &err {
        CollectiveError::Backend { call, source } => {
            assert_eq!(*call, "signature exchange");
            assert!(
                source.to_string().contains("did not arrive intact"),
                "{err}"
            );
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
    // The exchange's all-gather of 8 f32s went out on its side stream; the all-reduce did not.
    let log = calls(&d[0]);
    assert_eq!(log.len(), 1);
    let (rank, call, label) = &log[0];
    assert_eq!(
        (*rank, call.op, call.count),
        (0, CollectiveOp::AllGather, 8)
    );
    assert_eq!(label, "signature exchange");
}

mod variable;
#[test]
fn a_batch_reaches_the_backend_in_the_agreed_order_and_a_refused_one_not_at_all() {
    let r = ranks(3);
    let (dev, comm, stream) = (&r.devices[1], &r.comms[1], &r.streams[1]);
    let buf = alloc(dev, 16);
    // Rank 1 lists: send to 2, receive from 0. The (0, 1) transfer goes first.
    comm.batch_send_recv(
        stream,
        &[
            SendRecv::send(&buf, DType::F32, 2),
            SendRecv::recv(&buf, DType::F32, 0),
        ],
    )
    .unwrap();
    let ops: Vec<CollectiveOp> = calls(dev).iter().map(|(_, c, _)| c.op).collect();
    assert_eq!(
        ops,
        [
            CollectiveOp::Recv { peer: 0 },
            CollectiveOp::Send { peer: 2 }
        ]
    );
    // Rank 2's receive of another count is refused with its whole batch.
    let (dev2, comm2, stream2) = (&r.devices[2], &r.comms[2], &r.streams[2]);
    let small = alloc(dev2, 8);
    let other = alloc(dev2, 16);
    let err = comm2
        .batch_send_recv(
            stream2,
            &[
                SendRecv::send(&other, DType::F32, 0),
                SendRecv::recv(&small, DType::F32, 1),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(&err, CollectiveError::PeerMismatch { rank: 2, sender: 1, receiver: 2, call: 0, difference, .. } if difference == "count 4 vs 2"),
        "{err}"
    );
    assert!(calls(dev2).is_empty());
}

#[test]
fn a_backend_without_asynchronous_errors_reports_none() {
    let r = ranks(2);
    assert_eq!(r.comms[0].async_error(), Ok(None));
}
