//! An average in `float16` or `bfloat16` whose sum overflows the type but whose mean fits:
//! every backend scales each rank's value by `1 / ranks` before summing, as NCCL's average
//! does, so the mean comes out finite (and here exact) where a sum followed by a scale gives
//! infinity.

use super::Ranks;
use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, ReduceOp};
use braid_stream_core::DType;

/// Elements each rank sends.
const N: usize = 8;

/// Three ranks each holding a value whose triple overflows the type: 30000 in `float16`
/// (largest finite 65504) and 3 × 2¹²⁵ in `bfloat16` (largest finite about 3.4 × 10³⁸). A
/// third of each is exact in its type, so is the mean: every rank reads the value back, by
/// all-reduce, reduce-scatter and reduce to every root.
pub fn average_in_half_precision_does_not_overflow<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    for (dtype, value) in [(DType::F16, 30000.0), (DType::BF16, 3.0 * 2f32.powi(125))] {
        let rs = Ranks::new(h, 3, dtype, "average of values whose sum overflows")?;
        let n = rs.n();
        let mut parts = Vec::new();
        for r in 0..n {
            let (comm, stream) = (&rs.comms[r], &rs.streams[r]);
            let send = rs.upload(r, &[value; N])?;
            let all_reduced = rs.zeros(r, N)?;
            comm.all_reduce(stream, &send, &all_reduced, dtype, ReduceOp::Avg)?;
            let scatter_send = rs.upload(r, &vec![value; n * N])?;
            let scattered = rs.zeros(r, N)?;
            comm.reduce_scatter(stream, &scatter_send, &scattered, dtype, ReduceOp::Avg)?;
            let mut reduced = Vec::new();
            for root in 0..n as u32 {
                let recv = rs.zeros(r, N)?;
                comm.reduce(stream, &send, &recv, dtype, ReduceOp::Avg, root)?;
                reduced.push(recv);
            }
            parts.push((send, scatter_send, all_reduced, scattered, reduced));
        }
        for (r, (_, _, all_reduced, scattered, reduced)) in parts.iter().enumerate() {
            rs.expect(r, all_reduced, &[value; N])?;
            rs.expect(r, scattered, &[value; N])?;
            rs.expect(r, &reduced[r], &[value; N])?;
        }
    }
    Ok(())
}
