//! Send and receive buffers that overlap without being in place: HCCL and NCCL leave such
//! calls undefined, so every backend refuses them with a typed error before anything is
//! enqueued (a simulator that computed them would promise what hardware does not). The
//! in-place forms stay allowed: the same buffer for both, an all-gather's send buffer at
//! exactly the rank's block of its receive buffer, a reduce-scatter's receive buffer at
//! exactly the rank's block of its send buffer.

use super::{reduced, values, Ranks};
use crate::{check_device_works, CaseError, Harness};
use braid_collective::{Blocks, CollectiveBackend, CollectiveError, ReduceOp};
use braid_stream_core::{DType, DeviceSlice, StreamPosition};

/// Elements of each rank's block.
const N: usize = 32;

/// Partial overlaps are refused naming both buffers, on every rank, and change nothing; the
/// in-place forms then run and give the right numbers.
pub fn overlapping_buffers_are_refused<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let dtype = DType::F32;
    let rs = Ranks::new(h, 2, dtype, "overlapping send and receive buffers")?;
    let n = rs.n();
    let bytes = |elements: usize| elements as u64 * dtype.size();
    let refused = |what: &str,
                   result: Result<StreamPosition, CollectiveError>,
                   send: DeviceSlice,
                   recv: DeviceSlice|
     -> Result<(), CaseError> {
        match result {
            Err(CollectiveError::OverlappingBuffers {
                send: s, recv: r, ..
            }) if (s, r) == (send, recv) => Ok(()),
            other => Err(CaseError::new(format!(
                "{}: {what}: expected OverlappingBuffers naming {send} and {recv}, got {other:?}",
                rs.what
            ))),
        }
    };
    let mut buffers = Vec::new();
    for r in 0..n {
        let (comm, stream) = (&rs.comms[r], &rs.streams[r]);
        // An all-reduce from elements 0..32 into 16..48 of one buffer.
        let buf = rs.upload(r, &values(r, 0, 48))?;
        let (send, recv) = (buf.range(0, bytes(N))?, buf.range(bytes(16), bytes(N))?);
        let result = comm.all_reduce(stream, send, recv, dtype, ReduceOp::Sum);
        refused(
            "all-reduce of elements 0..32 into 16..48",
            result,
            send,
            recv,
        )?;
        // An all-gather whose send block is the other rank's block of its receive buffer.
        let gathered = rs.upload(r, &vec![0.0; n * N])?;
        let other = (r + 1) % n;
        let send = gathered.range(bytes(other * N), bytes(N))?;
        let result = comm.all_gather(stream, send, &gathered, dtype);
        refused(
            "all-gather from another rank's block",
            result,
            send,
            gathered.slice(),
        )?;
        // An all-gather whose send block straddles two blocks.
        let send = gathered.range(bytes(N / 2), bytes(N))?;
        let result = comm.all_gather(stream, send, &gathered, dtype);
        refused(
            "all-gather from a straddling block",
            result,
            send,
            gathered.slice(),
        )?;
        // A reduce-scatter into the other rank's block of its send buffer.
        let scattered = rs.upload(r, &values(r, 0, n * N))?;
        let recv = scattered.range(bytes(other * N), bytes(N))?;
        let result = comm.reduce_scatter(stream, &scattered, recv, dtype, ReduceOp::Sum);
        refused(
            "reduce-scatter into another rank's block",
            result,
            scattered.slice(),
            recv,
        )?;
        // An all-gather-v whose send is the other rank's block.
        let blocks = Blocks::packed(&[N as u64; 2]);
        let send = gathered.range(bytes(other * N), bytes(N))?;
        let result = comm.all_gather_v(stream, send, &gathered, &blocks, dtype);
        refused(
            "all-gather-v from another rank's block",
            result,
            send,
            gathered.slice(),
        )?;
        buffers.push((buf, gathered, scattered));
    }
    // Nothing was enqueued: the in-place forms now run as the communicators' first calls.
    for (r, (_, gathered, scattered)) in buffers.iter().enumerate() {
        let (comm, stream) = (&rs.comms[r], &rs.streams[r]);
        let own = gathered.range(bytes(r * N), bytes(N))?;
        stream.copy_h2d(own, dtype.encode(&values(r, 0, N)))?;
        comm.all_gather(stream, own, gathered, dtype)?;
        let own = scattered.range(bytes(r * N), bytes(N))?;
        comm.reduce_scatter(stream, scattered, own, dtype, ReduceOp::Sum)?;
    }
    let all: Vec<f32> = (0..n).flat_map(|j| values(j, 0, N)).collect();
    for (r, (buf, gathered, scattered)) in buffers.iter().enumerate() {
        rs.expect(r, gathered, &all)?;
        let own = scattered.range(bytes(r * N), bytes(N))?;
        let got = rs.streams[r].copy_d2h(own)?.wait_as(dtype)?;
        let want: Vec<f32> = (r * N..(r + 1) * N)
            .map(|i| reduced(ReduceOp::Sum, n, i))
            .collect();
        if got != want {
            return Err(CaseError::new(format!(
                "{}: rank {r}'s in-place reduce-scatter read {got:?}, expected {want:?}",
                rs.what
            )));
        }
        // The refused all-reduce left its buffer as it was.
        rs.expect(r, buf, &values(r, 0, 48))?;
        check_device_works(rs.device(r))?;
    }
    Ok(())
}
