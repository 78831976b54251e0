//! Grouped sends and receives on the simulated node: bad input refused before anything is
//! enqueued (the rank works afterwards), a send whose receive never comes named by the host
//! wait, and ranks that are threads exchanging in batches and groups.

use crate::common;

use braid_collective::{CollectiveError, CollectiveOp, ReduceOp, SendRecv};
use braid_stream_core::hal::HalError;
use braid_stream_core::{DType, StreamError};
use common::{values, Ranks};

const F32: DType = DType::F32;

/// Checks that rank 0 and 1 still exchange correctly.
fn still_works(rs: &Ranks) {
    let bufs: Vec<_> = (0..2)
        .map(|r| rs.upload(r, F32, &values(r, 0, 8)))
        .collect();
    let recvs: Vec<_> = (0..2).map(|r| rs.zeros(r, F32, 8)).collect();
    for r in 0..2 {
        let peer = 1 - r as u32;
        rs.comms[r]
            .batch_send_recv(
                &rs.streams[r],
                &[
                    SendRecv::recv(&recvs[r], F32, peer),
                    SendRecv::send(&bufs[r], F32, peer),
                ],
            )
            .unwrap();
    }
    for (r, recv) in recvs.iter().enumerate() {
        assert_eq!(rs.read(r, recv.slice(), F32), values(1 - r, 0, 8));
    }
}

#[test]
fn bad_batches_are_refused_before_anything_is_enqueued() {
    let rs = Ranks::new(2);
    let (comm, stream) = (&rs.comms[0], &rs.streams[0]);
    let buf = rs.zeros(0, F32, 8);
    assert_eq!(
        comm.batch_send_recv(stream, &[]).unwrap_err(),
        CollectiveError::EmptyBatch {
            rank: 0,
            what: "batch"
        }
    );
    // A good item and a bad one: nothing of the batch is enqueued.
    let good = SendRecv::send(&buf, F32, 1);
    for (bad, what) in [
        (SendRecv::send(&buf, F32, 0), "itself"),
        (SendRecv::recv(&buf, F32, 2), "no such rank"),
    ] {
        let err = comm.batch_send_recv(stream, &[good, bad]).unwrap_err();
        assert!(
            matches!(err, CollectiveError::BadPeer { rank: 0, .. }),
            "{what}: {err}"
        );
    }
    let partial = SendRecv::send(buf.range(0, 6).unwrap(), F32, 1);
    assert!(matches!(
        comm.batch_send_recv(stream, &[good, partial]).unwrap_err(),
        CollectiveError::PartialElement { len: 6, .. }
    ));
    let empty = SendRecv::send(buf.range(0, 0).unwrap(), F32, 1);
    assert!(matches!(
        comm.batch_send_recv(stream, &[empty]).unwrap_err(),
        CollectiveError::ZeroCount { .. }
    ));
    let other = rs.streams[1].clone();
    assert!(matches!(
        comm.batch_send_recv(&other, &[good]).unwrap_err(),
        CollectiveError::WrongDevice(_)
    ));
    let not_p2p = SendRecv {
        op: CollectiveOp::Barrier,
        buffer: buf.slice(),
        dtype: F32,
    };
    assert!(matches!(
        comm.batch_send_recv(stream, &[not_p2p]).unwrap_err(),
        CollectiveError::BadPeer { .. }
    ));
    // Memory that is not live is the front layer's refusal, and changes nothing.
    let freed = {
        let gone = rs.zeros(0, F32, 8);
        gone.slice()
    };
    rs.streams[0].synchronize().unwrap();
    assert!(matches!(
        comm.batch_send_recv(stream, &[SendRecv::send(freed, F32, 1)])
            .unwrap_err(),
        CollectiveError::Stream(_)
    ));
    still_works(&rs);
}

#[test]
fn groups_refuse_what_would_go_wrong_and_the_rank_works_afterwards() {
    let rs = Ranks::new(2);
    let (comm, stream) = (&rs.comms[0], &rs.streams[0]);
    let buf = rs.upload(0, F32, &values(0, 0, 8));
    // An empty group is refused at its end, and closes.
    assert_eq!(
        comm.group().unwrap().end().unwrap_err(),
        CollectiveError::EmptyBatch {
            rank: 0,
            what: "group"
        }
    );
    let group = comm.group().unwrap();
    assert_eq!(
        comm.group().unwrap_err(),
        CollectiveError::GroupAlreadyOpen { rank: 0 }
    );
    let err = comm
        .batch_send_recv(stream, &[SendRecv::send(&buf, F32, 1)])
        .unwrap_err();
    assert!(matches!(err, CollectiveError::GroupOpen { rank: 0, .. }));
    assert!(err.to_string().contains("end the group first"), "{err}");
    let err = comm.barrier(stream).unwrap_err();
    assert_eq!(
        err,
        CollectiveError::GroupOpen {
            op: CollectiveOp::Barrier,
            rank: 0
        }
    );
    // Another communicator over the same devices is not affected.
    let others = braid_collective::Communicator::init_all(&rs.devices).unwrap();
    let other_bufs: Vec<_> = (0..2).map(|r| rs.upload(r, F32, &[1.0; 4])).collect();
    for r in 0..2 {
        others[r]
            .all_reduce(
                &rs.streams[r],
                &other_bufs[r],
                &other_bufs[r],
                F32,
                ReduceOp::Sum,
            )
            .unwrap();
    }
    assert_eq!(rs.read(1, other_bufs[1].slice(), F32), [2.0; 4]);
    drop(group);
    let err = comm.barrier(stream).unwrap_err();
    assert_eq!(err, CollectiveError::GroupDropped { rank: 0, calls: 0 });
    assert!(err.to_string().contains("Group::end"), "{err}");
    // Reported once: the barrier now goes through (and its partner completes it).
    comm.barrier(stream).unwrap();
    rs.comms[1].barrier(&rs.streams[1]).unwrap();
    // A closure that fails closes its group without a dropped report.
    let failed = comm.grouped(|g| {
        g.send(stream, &buf, F32, 1)?;
        g.send(stream, &buf, F32, 7)
    });
    assert!(matches!(
        failed,
        Err(CollectiveError::BadPeer { peer: 7, .. })
    ));
    still_works(&rs);
    rs.devices[0].synchronize().unwrap();
}

#[test]
fn a_send_whose_receive_never_comes_is_named_by_the_host_wait() {
    let rs = Ranks::new(2);
    // This thread drives both ranks, so the wait fails at once instead of after the timeout
    // another thread's rank would get.
    for r in 0..2 {
        rs.comms[r].barrier(&rs.streams[r]).unwrap();
    }
    let buf = rs.upload(0, F32, &values(0, 0, 8));
    rs.comms[0]
        .batch_send_recv(&rs.streams[0], &[SendRecv::send(&buf, F32, 1)])
        .unwrap();
    match rs.streams[0].synchronize() {
        Err(StreamError::Backend(HalError::CollectiveIncomplete(inc))) => {
            assert_eq!(
                (inc.missing.as_slice(), inc.waited),
                (&[1][..], None),
                "{inc}"
            );
        }
        other => panic!("expected an incomplete collective, got {other:?}"),
    }
    // The receive completes it.
    let recv = rs.zeros(1, F32, 8);
    rs.comms[1]
        .batch_send_recv(&rs.streams[1], &[SendRecv::recv(&recv, F32, 0)])
        .unwrap();
    assert_eq!(rs.read(1, recv.slice(), F32), values(0, 0, 8));
}

#[test]
fn ranks_on_threads_exchange_in_batches_and_groups() {
    const RANKS: usize = 4;
    const ROUNDS: usize = 20;
    let rs = Ranks::new(RANKS as u32);
    std::thread::scope(|scope| {
        for r in 0..RANKS {
            let rs = &rs;
            scope.spawn(move || {
                let (comm, stream) = (&rs.comms[r], &rs.streams[r]);
                let mine = rs.upload(r, F32, &values(r, 0, 16));
                let recvs: Vec<_> = (0..RANKS).map(|_| rs.zeros(r, F32, 16)).collect();
                for round in 0..ROUNDS {
                    // Every rank lists its peers in its own order: sends first, from the
                    // rank after it.
                    let peers: Vec<usize> = (1..RANKS).map(|k| (r + k) % RANKS).collect();
                    if round % 2 == 0 {
                        let mut items: Vec<SendRecv> = peers
                            .iter()
                            .map(|&p| SendRecv::send(&mine, F32, p as u32))
                            .collect();
                        items.extend(
                            peers
                                .iter()
                                .map(|&p| SendRecv::recv(&recvs[p], F32, p as u32)),
                        );
                        comm.batch_send_recv(stream, &items).unwrap();
                    } else {
                        comm.grouped(|g| {
                            for &p in &peers {
                                g.send(stream, &mine, F32, p as u32)?;
                            }
                            for &p in &peers {
                                g.recv(stream, &recvs[p], F32, p as u32)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                    }
                }
                for p in (0..RANKS).filter(|p| *p != r) {
                    assert_eq!(
                        rs.read(r, recvs[p].slice(), F32),
                        values(p, 0, 16),
                        "rank {r} from {p}"
                    );
                }
            });
        }
    });
}
