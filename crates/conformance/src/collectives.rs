//! Collectives through [`braid_collective::Communicator`] on the devices of one node
//! ([`Harness::node`]): each case runs on 2 and on 4 ranks, in `f32` and in `f16`, issues
//! every rank's part from one thread on a stream of the rank's device, and checks every
//! element every rank reads back against the reduction computed on the host.
//!
//! The values are exact in both data types whatever order a backend reduces in (multiples of
//! a half, products of at most four of {−2, −½, 1, 1½, 3}).

use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, Communicator, ReduceOp};
use braid_stream_core::{DType, Device, DeviceMemory, Stream};

mod variable;
pub use variable::{
    all_gather_v_uneven, all_to_all_v_uneven, reduce_scatter_v_uneven,
    variable_counts_refused_then_usable,
};
mod async_errors;
mod average;
mod group_calls;
mod integers;
mod overlap;
mod sub_comms;
pub use async_errors::*;
pub use average::*;
pub use group_calls::*;
pub use integers::*;
pub use overlap::*;
pub use sub_comms::*;

/// Elements each rank sends (a multiple of every rank count the cases use).
const N: usize = 64;

/// The rank counts and data types every case runs with.
const SHAPES: [(u32, DType); 4] = [
    (2, DType::F32),
    (2, DType::F16),
    (4, DType::F32),
    (4, DType::F16),
];

/// Rank `r`'s element `i`.
pub(crate) fn value(r: usize, i: usize) -> f32 {
    [-2.0, -0.5, 1.0, 1.5, 3.0][(2 * r + i) % 5]
}

/// Rank `r`'s `count` elements from element `from` on.
pub(crate) fn values(r: usize, from: usize, count: usize) -> Vec<f32> {
    (from..from + count).map(|i| value(r, i)).collect()
}

/// The reduction by `op` of element `i` over `ranks` ranks, in rank order.
pub(crate) fn reduced(op: ReduceOp, ranks: usize, i: usize) -> f32 {
    let all = (0..ranks).map(|r| value(r, i));
    match op {
        ReduceOp::Sum => all.sum(),
        ReduceOp::Prod => all.product(),
        ReduceOp::Max => all.fold(f32::NEG_INFINITY, f32::max),
        ReduceOp::Min => all.fold(f32::INFINITY, f32::min),
        ReduceOp::Avg => all.sum::<f32>() / ranks as f32,
    }
}

/// Every rank of a fresh node: its communicator and a stream of its device.
pub(crate) struct Ranks<B: CollectiveBackend> {
    pub(crate) comms: Vec<Communicator<B>>,
    pub(crate) streams: Vec<Stream<B>>,
    dtype: DType,
    what: String,
}

impl<B: CollectiveBackend> Ranks<B> {
    #[track_caller]
    pub(crate) fn new(
        h: &Harness<B>,
        ranks: u32,
        dtype: DType,
        op: &str,
    ) -> Result<Self, CaseError> {
        let devices = h.node(ranks)?;
        let comms = Communicator::init_all(&devices)?;
        let streams = devices
            .iter()
            .map(|d| d.create_stream(0))
            .collect::<braid_stream_core::Result<_>>()?;
        Ok(Ranks {
            comms,
            streams,
            dtype,
            what: format!("{op} over {ranks} ranks in {dtype:?}"),
        })
    }

    pub(crate) fn n(&self) -> usize {
        self.comms.len()
    }

    pub(crate) fn device(&self, r: usize) -> &Device<B> {
        self.comms[r].device()
    }

    /// Memory of rank `r` holding `values`, written on its stream.
    #[track_caller]
    pub(crate) fn upload(&self, r: usize, values: &[f32]) -> Result<DeviceMemory<B>, CaseError> {
        let bytes = self.dtype.encode(values);
        let mem = self.device(r).alloc(bytes.len() as u64)?;
        self.streams[r].copy_h2d(mem.slice(), bytes)?;
        Ok(mem)
    }

    /// Memory of rank `r` for `count` elements, zeroed on its stream.
    #[track_caller]
    pub(crate) fn zeros(&self, r: usize, count: usize) -> Result<DeviceMemory<B>, CaseError> {
        self.upload(r, &vec![0.0; count])
    }

    /// Checks what rank `r`'s `mem` holds once its stream has run.
    #[track_caller]
    pub(crate) fn expect(
        &self,
        r: usize,
        mem: &DeviceMemory<B>,
        want: &[f32],
    ) -> Result<(), CaseError> {
        let got = self.streams[r].copy_d2h(mem.slice())?.wait_as(self.dtype)?;
        if got.len() != want.len() {
            return Err(CaseError::new(format!(
                "{}: rank {r} read {} elements, expected {}",
                self.what,
                got.len(),
                want.len()
            )));
        }
        match got.iter().zip(want).position(|(g, w)| g != w) {
            Some(i) => Err(CaseError::new(format!(
                "{}: rank {r} element {i} is {}, expected {}",
                self.what, got[i], want[i]
            ))),
            None => Ok(()),
        }
    }
}

/// Every rank's buffer gets the reduction by `op`, out of place and in place.
fn all_reduce<B: CollectiveBackend>(h: &Harness<B>, op: ReduceOp) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, &format!("all-reduce {op:?}"))?;
        let want: Vec<f32> = (0..N).map(|i| reduced(op, rs.n(), i)).collect();
        let mut out = Vec::new();
        for r in 0..rs.n() {
            let send = rs.upload(r, &values(r, 0, N))?;
            let recv = rs.zeros(r, N)?;
            rs.comms[r].all_reduce(&rs.streams[r], &send, &recv, dtype, op)?;
            out.push((send, recv));
        }
        for (r, (send, recv)) in out.iter().enumerate() {
            rs.expect(r, recv, &want)?;
            rs.expect(r, send, &values(r, 0, N))?;
        }
        for (r, (send, _)) in out.iter().enumerate() {
            rs.comms[r].all_reduce(&rs.streams[r], send, send, dtype, op)?;
        }
        for (r, (send, _)) in out.iter().enumerate() {
            rs.expect(r, send, &want)?;
        }
    }
    Ok(())
}

/// `all_reduce` with `ReduceOp::Sum`: every rank gets the element-wise sum, out of place and in
/// place.
pub fn all_reduce_sum<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    all_reduce(h, ReduceOp::Sum)
}

/// `all_reduce` with `ReduceOp::Prod`: every rank gets the element-wise product.
pub fn all_reduce_prod<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    all_reduce(h, ReduceOp::Prod)
}

/// `all_reduce` with `ReduceOp::Max`: every rank gets the element-wise maximum.
pub fn all_reduce_max<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    all_reduce(h, ReduceOp::Max)
}

/// `all_reduce` with `ReduceOp::Min`: every rank gets the element-wise minimum.
pub fn all_reduce_min<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    all_reduce(h, ReduceOp::Min)
}

/// `all_reduce` with `ReduceOp::Avg`: every rank gets the element-wise mean (on HCCL a sum,
/// then a scale on the same stream).
pub fn all_reduce_avg<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    all_reduce(h, ReduceOp::Avg)
}

/// `all_gather`: every rank's output holds every rank's input, in rank order.
pub fn all_gather<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "all-gather")?;
        let n = rs.n();
        let want: Vec<f32> = (0..n).flat_map(|r| values(r, 0, N)).collect();
        let mut out = Vec::new();
        for r in 0..n {
            let send = rs.upload(r, &values(r, 0, N))?;
            let recv = rs.zeros(r, n * N)?;
            rs.comms[r].all_gather(&rs.streams[r], &send, &recv, dtype)?;
            out.push((send, recv));
        }
        for (r, (_, recv)) in out.iter().enumerate() {
            rs.expect(r, recv, &want)?;
        }
    }
    Ok(())
}

/// `reduce_scatter` with every reduction: rank `r` gets block `r` of the reduction of every
/// rank's input.
pub fn reduce_scatter<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for op in ReduceOp::ALL {
        for (ranks, dtype) in SHAPES {
            let rs = Ranks::new(h, ranks, dtype, &format!("reduce-scatter {op:?}"))?;
            let n = rs.n();
            let block = N / n;
            let mut out = Vec::new();
            for r in 0..n {
                let send = rs.upload(r, &values(r, 0, N))?;
                let recv = rs.zeros(r, block)?;
                rs.comms[r].reduce_scatter(&rs.streams[r], &send, &recv, dtype, op)?;
                out.push((send, recv));
            }
            for (r, (_, recv)) in out.iter().enumerate() {
                let want: Vec<f32> = (r * block..(r + 1) * block)
                    .map(|i| reduced(op, n, i))
                    .collect();
                rs.expect(r, recv, &want)?;
            }
        }
    }
    Ok(())
}

/// `scatter` from every root in turn: rank `r` gets block `r` of the root's buffer.
pub fn scatter_from_every_root<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "scatter")?;
        let n = rs.n();
        let block = N / n;
        for root in 0..n {
            let mut parts = Vec::new();
            for r in 0..n {
                let send = rs.upload(r, &values(r, 0, N))?;
                let recv = rs.zeros(r, block)?;
                rs.comms[r].scatter(&rs.streams[r], &send, &recv, dtype, root as u32)?;
                // The send buffers live until the collective has run on every rank.
                parts.push((send, recv));
            }
            for (r, (_, recv)) in parts.iter().enumerate() {
                rs.expect(r, recv, &values(root, r * block, block))?;
            }
        }
    }
    Ok(())
}

/// `reduce` with every reduction, to each root in turn: the root's `recv` gets the
/// reduction, the other ranks' `recv` keeps its zeros.
pub fn reduce_to_every_root<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "reduce")?;
        let n = rs.n();
        // Every reduction, the roots in turn.
        for (i, op) in ReduceOp::ALL.iter().enumerate() {
            let root = i % n;
            let mut parts = Vec::new();
            for r in 0..n {
                let send = rs.upload(r, &values(r, 0, N))?;
                let recv = rs.zeros(r, N)?;
                rs.comms[r].reduce(&rs.streams[r], &send, &recv, dtype, *op, root as u32)?;
                // The send buffers live until the collective has run on every rank.
                parts.push((send, recv));
            }
            let want: Vec<f32> = (0..N).map(|i| reduced(*op, n, i)).collect();
            for (r, (_, recv)) in parts.iter().enumerate() {
                let expected = if r == root {
                    want.clone()
                } else {
                    vec![0.0; N]
                };
                rs.expect(r, recv, &expected)?;
            }
        }
    }
    Ok(())
}

/// `broadcast` from every root in turn: every rank's buffer gets the root's.
pub fn broadcast_from_every_root<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "broadcast")?;
        let n = rs.n();
        for root in 0..n {
            let buffers = (0..n)
                .map(|r| rs.upload(r, &values(r, 0, N)))
                .collect::<Result<Vec<_>, _>>()?;
            for (r, buffer) in buffers.iter().enumerate() {
                rs.comms[r].broadcast(&rs.streams[r], buffer, dtype, root as u32)?;
            }
            for (r, buffer) in buffers.iter().enumerate() {
                rs.expect(r, buffer, &values(root, 0, N))?;
            }
        }
    }
    Ok(())
}

/// `send` / `recv` around a ring: rank `r` sends its input to rank `r + 1` and receives rank
/// `r − 1`'s (even ranks send first and odd ranks receive first, an order that cannot block
/// on hardware).
pub fn send_recv_ring<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "send/recv ring")?;
        let n = rs.n();
        let mut out = Vec::new();
        for r in 0..n {
            let send = rs.upload(r, &values(r, 0, N))?;
            let recv = rs.zeros(r, N)?;
            let (next, prev) = (((r + 1) % n) as u32, ((r + n - 1) % n) as u32);
            let (comm, stream) = (&rs.comms[r], &rs.streams[r]);
            if r % 2 == 0 {
                comm.send(stream, &send, dtype, next)?;
                comm.recv(stream, &recv, dtype, prev)?;
            } else {
                comm.recv(stream, &recv, dtype, prev)?;
                comm.send(stream, &send, dtype, next)?;
            }
            out.push((send, recv));
        }
        for (r, (_, recv)) in out.iter().enumerate() {
            rs.expect(r, recv, &values((r + n - 1) % n, 0, N))?;
        }
    }
    Ok(())
}

/// `all_to_all`: block `j` of rank `r`'s input lands in block `r` of rank `j`'s output.
pub fn all_to_all<B: CollectiveBackend>(h: &Harness<B>) -> Result<(), CaseError> {
    for (ranks, dtype) in SHAPES {
        let rs = Ranks::new(h, ranks, dtype, "all-to-all")?;
        let n = rs.n();
        let block = N / n;
        let mut out = Vec::new();
        for r in 0..n {
            let send = rs.upload(r, &values(r, 0, N))?;
            let recv = rs.zeros(r, N)?;
            rs.comms[r].all_to_all(&rs.streams[r], &send, &recv, dtype)?;
            out.push((send, recv));
        }
        for (j, (_, recv)) in out.iter().enumerate() {
            let want: Vec<f32> = (0..n).flat_map(|r| values(r, j * block, block)).collect();
            rs.expect(j, recv, &want)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_are_exact_in_f16() {
        for ranks in [2, 4] {
            for i in 0..N {
                for op in ReduceOp::ALL {
                    let v = reduced(op, ranks, i);
                    assert_eq!(DType::F16.decode(&DType::F16.encode(&[v])), vec![v]);
                }
            }
        }
    }
}
