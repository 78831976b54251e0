//! Grouped point-to-point calls ([`braid_collective::Communicator::batch_send_recv`],
//! [`braid_collective::Communicator::group`]): orders that hang as plain sends and receives
//! complete, parts that disagree are refused whole, and a group left open is a typed error
//! after which the communicator still works.

use super::{values, Ranks, N, SHAPES};
use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, CollectiveError, ReduceOp, SendRecv};
use braid_stream_core::DType;

/// Every rank sends its input to every other rank and receives every other rank's, in one
/// batch that lists its sends before its receives (as plain calls, every rank would wait in
/// its first send): rank `j`'s `k`-th block of received data is rank `k`'s input.
pub fn batch_send_recv_all_pairs<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "batch send/recv between all pairs")?;
        let n = rs.n();
        let mut out = Vec::new();
        for r in 0..n {
            let send = rs.upload(r, &values(r, 0, N))?;
            let recvs = (0..n)
                .map(|_| rs.zeros(r, N))
                .collect::<Result<Vec<_>, _>>()?;
            let peers = (0..n).filter(|p| *p != r);
            let mut items: Vec<SendRecv> = peers
                .clone()
                .map(|p| SendRecv::send(&send, dtype, p as u32))
                .collect();
            items.extend(peers.map(|p| SendRecv::recv(&recvs[p], dtype, p as u32)));
            rs.comms[r].batch_send_recv(&rs.streams[r], &items)?;
            out.push((send, recvs));
        }
        for (r, (_, recvs)) in out.iter().enumerate() {
            for (p, recv) in recvs.iter().enumerate().filter(|(p, _)| *p != r) {
                rs.expect(r, recv, &values(p, 0, N))?;
            }
        }
    }
    Ok(())
}

/// A group per rank around a ring, every rank sending first and on a second stream receiving
/// (as plain calls every rank would wait in its send); then an all-reduce on the same
/// communicator.
pub fn group_ring_sends_first<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "grouped ring")?;
        let n = rs.n();
        let mut out = Vec::new();
        for r in 0..n {
            let send = rs.upload(r, &values(r, 0, N))?;
            let recv = rs.zeros(r, N)?;
            let side = rs.device(r).create_stream(0)?;
            side.wait_stream(&rs.streams[r])?;
            let (next, prev) = (((r + 1) % n) as u32, ((r + n - 1) % n) as u32);
            let positions = rs.comms[r].grouped(|g| {
                g.send(&rs.streams[r], &send, dtype, next)?;
                g.recv(&side, &recv, dtype, prev)
            })?;
            if positions.len() != 2 {
                return Err(CaseError::new(format!(
                    "rank {r}: a group of 2 calls gave {} positions",
                    positions.len()
                )));
            }
            rs.streams[r].wait_stream(&side)?;
            out.push((send, recv));
        }
        for (r, (_, recv)) in out.iter().enumerate() {
            rs.expect(r, recv, &values((r + n - 1) % n, 0, N))?;
        }
        let sums = (0..n)
            .map(|r| rs.upload(r, &[r as f32; 4]))
            .collect::<Result<Vec<_>, _>>()?;
        for (r, sum) in sums.iter().enumerate() {
            rs.comms[r].all_reduce(&rs.streams[r], sum, sum, dtype, ReduceOp::Sum)?;
        }
        let total = (0..n).map(|r| r as f32).sum::<f32>();
        for (r, sum) in sums.iter().enumerate() {
            rs.expect(r, sum, &[total; 4])?;
        }
    }
    Ok(())
}

/// A batch whose receive disagrees with the peer's send (count, then data type) is refused
/// whole, naming the rank, the transfer and the difference, and enqueues nothing; the right
/// batch then completes.
pub fn batch_send_recv_mismatch_is_refused<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let rs = Ranks::new(h, 2, DType::F32, "batch send/recv mismatch")?;
    let send = rs.upload(0, &values(0, 0, N))?;
    let recv = rs.zeros(1, N)?;
    let half = rs.zeros(1, N / 2)?;
    rs.comms[0].batch_send_recv(&rs.streams[0], &[SendRecv::send(&send, DType::F32, 1)])?;
    let wrong = [
        SendRecv::recv(&recv, DType::F32, 0),
        SendRecv::recv(&half, DType::F32, 0),
    ];
    // The first receive pairs with rank 0's send; the second has nothing to pair with yet
    // and is not a mismatch. A receive of half the count is.
    match rs.comms[1].batch_send_recv(&rs.streams[1], &wrong[1..]) {
        Err(CollectiveError::PeerMismatch {
            rank: 1,
            peer: 0,
            sender: 0,
            receiver: 1,
            call: 0,
            difference,
            ..
        }) if difference == format!("count {N} vs {}", N / 2) => {}
        other => {
            return Err(CaseError::new(format!(
                "a receive of {} for a send of {N}: expected a peer mismatch, got {other:?}",
                N / 2
            )))
        }
    }
    let f16 = SendRecv::recv(recv.range(0, N as u64 * 2)?, DType::F16, 0);
    match rs.comms[1].batch_send_recv(&rs.streams[1], &[f16]) {
        Err(CollectiveError::PeerMismatch { difference, .. })
            if difference.contains("data type") => {}
        other => {
            return Err(CaseError::new(format!(
                "an f16 receive for an f32 send: expected a peer mismatch, got {other:?}"
            )))
        }
    }
    rs.comms[1].batch_send_recv(&rs.streams[1], &wrong[..1])?;
    rs.expect(1, &recv, &values(0, 0, N))
}

/// A group left open: a direct collective and a second group are refused while it is open, a
/// group dropped without `end` is reported once by the rank's next call, and afterwards the
/// communicator, its streams and devices work.
pub fn group_left_open_is_refused<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    let dtype = DType::F32;
    let rs = Ranks::new(h, 2, dtype, "group left open")?;
    let bufs = (0..2)
        .map(|r| rs.upload(r, &[r as f32 + 1.0; 4]))
        .collect::<Result<Vec<_>, _>>()?;
    let (comm, stream, buf) = (&rs.comms[0], &rs.streams[0], &bufs[0]);
    let mut group = comm.group()?;
    group.send(stream, buf, dtype, 1)?;
    let expect = |what: &str,
                  got: Result<(), CollectiveError>,
                  ok: fn(&CollectiveError) -> bool| {
        match got {
            Err(e) if ok(&e) => Ok(()),
            other => Err(CaseError::new(format!("{what}: got {other:?}"))),
        }
    };
    expect(
        "an all-reduce inside an open group",
        comm.all_reduce(stream, buf, buf, dtype, ReduceOp::Sum)
            .map(drop),
        |e| matches!(e, CollectiveError::GroupOpen { rank: 0, .. }),
    )?;
    expect("a second group", comm.group().map(drop), |e| {
        matches!(e, CollectiveError::GroupAlreadyOpen { rank: 0 })
    })?;
    // The other rank is not affected by rank 0's group.
    rs.comms[1].group()?.end().map(drop).or_else(|e| match e {
        CollectiveError::EmptyBatch { rank: 1, .. } => Ok(()),
        e => Err(e),
    })?;
    drop(group);
    expect(
        "the first call after a dropped group",
        comm.all_reduce(stream, buf, buf, dtype, ReduceOp::Sum)
            .map(drop),
        |e| matches!(e, CollectiveError::GroupDropped { rank: 0, calls: 1 }),
    )?;
    for (r, b) in bufs.iter().enumerate() {
        rs.comms[r].all_reduce(&rs.streams[r], b, b, dtype, ReduceOp::Sum)?;
    }
    for (r, b) in bufs.iter().enumerate() {
        rs.expect(r, b, &[3.0; 4])?;
    }
    rs.device(0).synchronize()?;
    Ok(())
}
