//! The variable-count collectives on the noop backend: what is enqueued, what is refused
//! before anything is, and mismatches in the blocks.

use super::{alloc, assert_refused, calls, ranks};
use crate::*;
use braid_stream_core::{DType, DeviceSlice, WrongDevice};

fn blocks(counts: &[u64], displs: &[u64]) -> Blocks {
    Blocks {
        counts: counts.to_vec(),
        displs: displs.to_vec(),
    }
}

#[test]
fn each_variable_count_operation_enqueues_one_call_with_its_blocks() {
    let r = ranks(2);
    let d = &r.devices[1];
    let (send, recv) = (alloc(d, 64), alloc(d, 64));
    let gather = blocks(&[3, 2], &[4, 0]);
    let one = send.range(0, 8).unwrap();
    r.comms[1]
        .all_gather_v(&r.streams[1], one, &recv, &gather, DType::F32)
        .unwrap();
    let scatter = blocks(&[1, 2], &[0, 5]);
    r.comms[1]
        .reduce_scatter_v(
            &r.streams[1],
            &send,
            &scatter,
            recv.range(0, 8).unwrap(),
            DType::F32,
            ReduceOp::Max,
        )
        .unwrap();
    let to = Blocks::packed(&[0, 4]);
    let from = blocks(&[1, 0], &[9, 0]);
    r.comms[1]
        .all_to_all_v(&r.streams[1], &send, &to, &recv, &from, DType::F32)
        .unwrap();
    let launched = calls(d);
    let summary: Vec<_> = launched
        .iter()
        .map(|(rank, call, label)| (*rank, call.op, call.count, label.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (1, CollectiveOp::AllGatherV, 2, "allgatherv"),
            (
                1,
                CollectiveOp::ReduceScatterV(ReduceOp::Max),
                2,
                "reducescatterv(max)"
            ),
            (1, CollectiveOp::AllToAllV, 4, "alltoallv"),
        ]
    );
    let v = launched[0].1.v.as_deref().unwrap();
    assert_eq!((&v.recv, v.send.is_empty()), (&gather, true));
    // Declared ranges: the span of the blocks, not the whole buffer.
    assert_eq!(launched[0].1.recv_len(1, 2), Some(28));
    let v = launched[2].1.v.as_deref().unwrap();
    assert_eq!((&v.send, &v.recv), (&to, &from));
}

#[test]
fn a_rank_may_contribute_nothing() {
    let r = ranks(2);
    let d = &r.devices[0];
    let recv = alloc(d, 16);
    let none = DeviceSlice::new(recv.slice().ptr, 0);
    r.comms[0]
        .all_gather_v(
            &r.streams[0],
            none,
            &recv,
            &Blocks::packed(&[0, 4]),
            DType::F32,
        )
        .unwrap();
    assert_eq!(calls(d)[0].1.count, 0);
}

#[test]
fn bad_blocks_are_typed_errors_and_the_communicator_still_works() {
    let r = ranks(2);
    let (c, s, d) = (&r.comms[1], &r.streams[1], &r.devices[1]);
    let (send, recv) = (alloc(d, 8), alloc(d, 16));
    let op = CollectiveOp::AllGatherV;
    let err = c
        .all_gather_v(s, &send, &recv, &Blocks::packed(&[2, 2, 0]), DType::F32)
        .unwrap_err();
    let length = BlocksError::Length {
        what: "counts",
        found: 3,
        ranks: 2,
    };
    let expected = CollectiveError::BadBlocks {
        op,
        rank: 1,
        buffer: "recv",
        source: length,
    };
    assert_refused(&r, 1, err, expected);
    let err = c
        .all_gather_v(s, &send, &recv, &blocks(&[2, 2], &[0]), DType::F32)
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CollectiveError::BadBlocks {
                source: BlocksError::Length { what: "displs", .. },
                ..
            }
        ),
        "{err}"
    );
    let err = c
        .all_gather_v(
            s,
            &send,
            &recv,
            &blocks(&[2, 2], &[0, u64::MAX - 1]),
            DType::F32,
        )
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CollectiveError::BadBlocks {
                source: BlocksError::Overflow { rank: 1, .. },
                ..
            }
        ),
        "{err}"
    );
    let err = c
        .all_gather_v(s, &send, &recv, &blocks(&[2, 2], &[1, 0]), DType::F32)
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CollectiveError::BadBlocks {
                source: BlocksError::Overlap {
                    first: 0,
                    second: 1
                },
                ..
            }
        ),
        "{err}"
    );
    let err = c
        .all_gather_v(s, &send, &recv, &blocks(&[2, 2], &[0, 3]), DType::F32)
        .unwrap_err();
    assert_refused(
        &r,
        1,
        err.clone(),
        CollectiveError::BlockOutOfBuffer {
            op,
            rank: 1,
            buffer: "recv",
            block: 1,
            end: 20,
            len: 16,
        },
    );
    assert!(err.to_string().contains("pass a larger buffer"), "{err}");
    // This rank's send must hold exactly its own count.
    let err = c
        .all_gather_v(s, &send, &recv, &Blocks::packed(&[2, 1]), DType::F32)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectiveError::BufferSize {
                buffer: "send",
                expected: 4,
                found: 8,
                ..
            }
        ),
        "{err}"
    );
    let odd = DeviceSlice::new(send.slice().ptr, 6);
    let err = c
        .reduce_scatter_v(
            s,
            &recv,
            &Blocks::packed(&[2, 2]),
            odd,
            DType::F32,
            ReduceOp::Sum,
        )
        .unwrap_err();
    assert!(
        matches!(err, CollectiveError::PartialElement { buffer: "recv", .. }),
        "{err}"
    );
    let err = c
        .all_to_all_v(
            &r.streams[0],
            &send,
            &Blocks::packed(&[1, 1]),
            &recv,
            &Blocks::packed(&[1, 1]),
            DType::F32,
        )
        .unwrap_err();
    assert!(
        matches!(err, CollectiveError::WrongDevice(ref w) if **w == WrongDevice {
            call: "alltoallv of rank 1".into(),
            what: "stream",
            expected: d.id(),
            found: r.devices[0].id(),
        }),
        "{err}"
    );
    assert!(calls(d).is_empty());
    // Still usable: the right call is enqueued.
    c.all_gather_v(s, &send, &recv, &Blocks::packed(&[2, 2]), DType::F32)
        .unwrap();
    assert_eq!(calls(d).len(), 1);
}

#[test]
fn blocks_that_differ_between_ranks_are_a_mismatch_naming_the_block() {
    let r = ranks(2);
    let bufs: Vec<_> = r
        .devices
        .iter()
        .map(|d| (alloc(d, 8), alloc(d, 32)))
        .collect();
    let gv = |i: usize, b: &Blocks| {
        r.comms[i].all_gather_v(&r.streams[i], &bufs[i].0, &bufs[i].1, b, DType::F32)
    };
    gv(0, &blocks(&[2, 2], &[0, 2])).unwrap();
    let err = gv(1, &blocks(&[2, 2], &[0, 4])).unwrap_err();
    match &err {
        CollectiveError::Mismatch {
            rank: 1,
            call: 0,
            expected_rank: 0,
            difference,
            ..
        } => assert_eq!(
            difference,
            "receive block of rank 1: 2 element(s) at offset 2 vs 2 element(s) at offset 4"
        ),
        other => panic!("expected a mismatch, got {other}"),
    }
    assert!(calls(&r.devices[1]).is_empty());
    gv(1, &blocks(&[2, 2], &[0, 2])).unwrap();

    // All-to-all-v: rank 0 sends 1 element to rank 1, which expects 2.
    let a2a = |i: usize, to: &[u64], from: &[u64]| {
        let (send, recv) = &bufs[i];
        r.comms[i].all_to_all_v(
            &r.streams[i],
            send,
            &Blocks::packed(to),
            recv,
            &Blocks::packed(from),
            DType::F32,
        )
    };
    a2a(0, &[1, 1], &[1, 1]).unwrap();
    let err = a2a(1, &[1, 1], &[2, 1]).unwrap_err();
    assert!(
        matches!(&err, CollectiveError::Mismatch { rank: 1, call: 1, difference, .. }
            if difference == "rank 1 expects 2 element(s) from rank 0, which sends 1"),
        "{err}"
    );
    a2a(1, &[1, 1], &[1, 1]).unwrap();
    // A reduce-scatter-v with another reduction.
    let rv = |i: usize, op| {
        let (send, recv) = &bufs[i];
        let own = recv.range(0, 4).unwrap();
        r.comms[i].reduce_scatter_v(
            &r.streams[i],
            send,
            &Blocks::packed(&[1, 1]),
            own,
            DType::F32,
            op,
        )
    };
    rv(0, ReduceOp::Sum).unwrap();
    let err = rv(1, ReduceOp::Min).unwrap_err();
    assert!(
        err.to_string()
            .contains("reducescatterv(sum) vs reducescatterv(min)"),
        "{err}"
    );
    rv(1, ReduceOp::Sum).unwrap();
}
