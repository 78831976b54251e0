//! What a collective does to the numbers, in data mode: every rank's receive bytes from every
//! rank's send bytes ([`receive`]), and a collective's effect as the engine queues it
//! ([`DataEffect`]): read every rank's send buffer at the start, write every rank's receive
//! buffer at the end (through the engine's effect queue).
//!
//! Reductions compute in the data type's own arithmetic. Floats compute in `f32` (`f64` for
//! `float64`) and round every stored result to the data type, as the rest of the simulator
//! does: the ranks' elements are combined in rank order (`((x0 ∘ x1) ∘ x2) ...`) and each
//! partial result is rounded, as the partial sums a ring leaves in device memory are.
//! Integers compute exactly, a sum or a product wrapping around in the type.
//! An average scales by `1 / ranks` where [`ReduceOp::scales_before_sum`] says: in `float16`
//! and `bfloat16` each rank's element first (rounded), then the sum; in `float32` the sum.
//! A short buffer reads as zeros past its end (the engine checks lengths before it gets here).

use super::variable;
use braid_stream_core::collective::{CollectiveOp, ReduceOp, VCounts};
use braid_stream_core::dtype::{DType, DTypeKind};
use braid_stream_core::types::DeviceSlice;
use std::sync::Arc;

use crate::compute::PendingWrite;
use crate::memory::DataView;

/// `count` elements of the elementwise reduction of `inputs`, starting at element `first` of
/// each, in `dtype`'s own arithmetic: floats as [`reduce_floats`] says, integers exactly
/// ([`reduce_integers`]: a sum or product wraps around in the type, as HCCL's integer
/// reductions do), bool as one byte of 0 or 1 (uint8).
pub(super) fn reduce(
    op: ReduceOp,
    dtype: DType,
    inputs: &[&[u8]],
    first: usize,
    count: usize,
) -> Vec<u8> {
    match dtype.kind() {
        DTypeKind::Float if dtype == DType::F64 => reduce_f64(op, inputs, first, count),
        DTypeKind::Float => reduce_floats(op, dtype, inputs, first, count),
        DTypeKind::Int | DTypeKind::Bool => reduce_integers(op, dtype, inputs, first, count),
    }
}

/// [`reduce`] in `float32`, `float16` and `bfloat16`: computed in `f32`. An average in
/// `float16` or `bfloat16` sums the ranks' elements each scaled by `1 / ranks` and rounded (as
/// NCCL's average does, so that a mean that fits never overflows); in `float32` it is the
/// rounded sum scaled by `1 / ranks` and rounded again, as HCCL's sum followed by a scale
/// leaves it.
fn reduce_floats(
    op: ReduceOp,
    dtype: DType,
    inputs: &[&[u8]],
    first: usize,
    count: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * dtype.size() as usize);
    let scale = op.scale(inputs.len() as u32);
    let (before, after) = if op.scales_before_sum(dtype) {
        (scale, None)
    } else {
        (None, scale)
    };
    for i in first..first + count {
        let mut values = inputs.iter().map(|b| {
            let x = dtype.get(b, i).unwrap_or(0.0);
            before.map_or(x, |factor| dtype.round(x * factor))
        });
        let start = values.next().unwrap_or(0.0);
        let mut value = values.fold(start, |acc, x| dtype.round(op.combine(acc, x)));
        if let Some(factor) = after {
            value = dtype.round(value * factor);
        }
        dtype.push(&mut out, value);
    }
    out
}

/// [`reduce`] in `float64`: computed in `f64`, an average being the sum divided by the ranks.
fn reduce_f64(op: ReduceOp, inputs: &[&[u8]], first: usize, count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count * 8);
    let ranks = inputs.len().max(1) as f64;
    for i in first..first + count {
        let mut values = inputs
            .iter()
            .map(|b| DType::F64.get_f64(b, i).unwrap_or(0.0));
        let start = values.next().unwrap_or(0.0);
        let mut value = values.fold(start, |acc, x| match op {
            ReduceOp::Sum | ReduceOp::Avg => acc + x,
            ReduceOp::Prod => acc * x,
            ReduceOp::Max => acc.max(x),
            ReduceOp::Min => acc.min(x),
        });
        if op == ReduceOp::Avg {
            value /= ranks;
        }
        out.extend_from_slice(&value.to_le_bytes());
    }
    out
}

/// Element `i` of an integer (or bool) `dtype` in `bytes` as its 64 bits: sign-extended for
/// a signed type, zero-extended otherwise; 0 past the end.
fn int_bits(dtype: DType, bytes: &[u8], i: usize) -> u64 {
    let size = dtype.size() as usize;
    let Some(raw) = bytes.get(i * size..(i + 1) * size) else {
        return 0;
    };
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(raw);
    let v = u64::from_le_bytes(b);
    let shift = 64 - 8 * size as u32;
    if is_signed(dtype) && shift > 0 {
        (((v << shift) as i64) >> shift) as u64
    } else {
        v
    }
}

fn is_signed(dtype: DType) -> bool {
    matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64)
}

/// [`reduce`] in an integer type (bool as uint8): exact, a sum or product wrapping around in
/// the type, max and min comparing as the type does (signed or unsigned), an average the
/// wrapped sum divided by the ranks (truncated toward zero).
fn reduce_integers(
    op: ReduceOp,
    dtype: DType,
    inputs: &[&[u8]],
    first: usize,
    count: usize,
) -> Vec<u8> {
    let size = dtype.size() as usize;
    let signed = is_signed(dtype);
    let mut out = Vec::with_capacity(count * size);
    let ranks = inputs.len().max(1) as u64;
    let pick = |a: u64, b: u64, greater: bool| {
        let a_first = if signed {
            (a as i64 > b as i64) == greater
        } else {
            (a > b) == greater
        };
        if a == b || a_first {
            a
        } else {
            b
        }
    };
    for i in first..first + count {
        let mut values = inputs.iter().map(|b| int_bits(dtype, b, i));
        let start = values.next().unwrap_or(0);
        let mut value = values.fold(start, |acc, x| match op {
            ReduceOp::Sum | ReduceOp::Avg => acc.wrapping_add(x),
            ReduceOp::Prod => acc.wrapping_mul(x),
            ReduceOp::Max => pick(acc, x, true),
            ReduceOp::Min => pick(acc, x, false),
        });
        if op == ReduceOp::Avg {
            // The sum wrapped in the type: read it back as the type before dividing.
            let wrapped = int_bits(dtype, &value.to_le_bytes()[..size], 0);
            value = if signed {
                ((wrapped as i64) / ranks as i64) as u64
            } else {
                wrapped / ranks
            };
        }
        if dtype == DType::Bool {
            value = u64::from(value & 0xff != 0);
        }
        out.extend_from_slice(&value.to_le_bytes()[..size]);
    }
    out
}

/// `len` bytes of `bytes` from `at`, zeros past its end.
pub(super) fn block(bytes: &[u8], at: usize, len: usize) -> Vec<u8> {
    let mut out = bytes.get(at..).unwrap_or(&[]).to_vec();
    out.resize(len, 0);
    out
}

/// Every rank's receive bytes for `op` on `count` elements of `dtype` (HCCL's meaning of the
/// count, see `CollectiveCall::send_len`), given every rank's send bytes (`sends[r]` is rank
/// `r`'s, empty where the rank sends nothing). A rank that receives nothing gets an empty
/// vector.
///
/// A send and its receive are two ranks: `sends` holds the sender's bytes, then the receiver's
/// (empty), and the result the receiver's bytes at index 1, whatever the peers' numbers in the
/// communicator.
pub(crate) fn receive(op: CollectiveOp, count: u64, dtype: DType, sends: &[&[u8]]) -> Vec<Vec<u8>> {
    let ranks = sends.len();
    let n = count as usize;
    let size = dtype.size() as usize;
    match op {
        CollectiveOp::AllReduce(reduction) => {
            let all = reduce(reduction, dtype, sends, 0, n);
            vec![all; ranks]
        }
        CollectiveOp::ReduceScatter(reduction) => (0..ranks)
            .map(|r| reduce(reduction, dtype, sends, r * n, n))
            .collect(),
        CollectiveOp::AllGather => {
            let gathered: Vec<u8> = sends.iter().flat_map(|s| block(s, 0, n * size)).collect();
            vec![gathered; ranks]
        }
        CollectiveOp::Broadcast { root } => {
            let data = block(
                sends.get(root as usize).copied().unwrap_or(&[]),
                0,
                n * size,
            );
            vec![data; ranks]
        }
        CollectiveOp::AllToAll => (0..ranks)
            .map(|j| {
                sends
                    .iter()
                    .flat_map(|s| block(s, j * n * size, n * size))
                    .collect()
            })
            .collect(),
        CollectiveOp::Send { .. } | CollectiveOp::Recv { .. } => {
            let data = block(sends.first().copied().unwrap_or(&[]), 0, n * size);
            vec![Vec::new(), data]
        }
        CollectiveOp::Barrier => vec![Vec::new(); ranks],
        CollectiveOp::Scatter { root } => {
            let data = sends.get(root as usize).copied().unwrap_or(&[]);
            (0..ranks)
                .map(|r| block(data, r * n * size, n * size))
                .collect()
        }
        CollectiveOp::Reduce { op, root } => {
            let mut out = vec![Vec::new(); ranks];
            if let Some(slot) = out.get_mut(root as usize) {
                *slot = reduce(op, dtype, sends, 0, n);
            }
            out
        }
        // Their blocks decide: `DataEffect::begin` hands them to `super::variable::receive`.
        CollectiveOp::AllGatherV | CollectiveOp::ReduceScatterV(_) | CollectiveOp::AllToAllV => {
            vec![Vec::new(); ranks]
        }
    }
}

/// Where a participant's send data comes from.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum Source {
    /// A range of the node's memory (empty where the participant sends nothing), read at
    /// the collective's start.
    Memory(DeviceSlice),
    /// Bytes received from another process.
    Bytes(Vec<u8>),
}

/// A collective's data effect: every participant's buffers of one run (in rank order; for a
/// send and its receive, the sender then the receiver), read at the start, written at the
/// end.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct DataEffect {
    /// The operation (the sender's, for a send and its receive).
    pub op: CollectiveOp,
    /// Element count, HCCL's meaning.
    pub count: u64,
    /// Element type.
    pub dtype: DType,
    /// Each participant's send data.
    pub sends: Vec<Source>,
    /// Each participant's receive range (empty where it receives nothing).
    pub recvs: Vec<DeviceSlice>,
    /// Each participant's blocks, for a variable-count operation (empty otherwise).
    pub layouts: Vec<Option<Arc<VCounts>>>,
}

impl DataEffect {
    /// Reads the send ranges and computes what every receive range gets (at the start).
    pub fn begin(&self, mem: &mut DataView<'_>) -> Vec<PendingWrite> {
        let inputs: Vec<Vec<u8>> = self
            .sends
            .iter()
            .map(|s| match s {
                Source::Memory(r) if r.len > 0 => mem.read(*r).unwrap_or_default(),
                Source::Memory(_) => Vec::new(),
                Source::Bytes(b) => b.clone(),
            })
            .collect();
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let outputs = if self.op.is_variable() {
            // The gaps between a receive span's blocks keep what they hold now.
            let before = (self.recvs.iter())
                .map(|r| mem.read(*r).unwrap_or_default())
                .collect();
            let layouts: Vec<Option<&VCounts>> =
                self.layouts.iter().map(|l| l.as_deref()).collect();
            variable::receive(self.op, self.dtype, &layouts, &refs, before)
        } else {
            receive(self.op, self.count, self.dtype, &refs)
        };
        self.recvs
            .iter()
            .zip(outputs)
            .filter(|(r, _)| r.len > 0)
            .map(|(r, mut bytes)| {
                bytes.resize(r.len as usize, 0);
                PendingWrite::Device {
                    ptr: r.ptr,
                    data: mem.is_valid(*r).then_some(bytes),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(dtype: DType, values: &[f32]) -> Vec<u8> {
        dtype.encode(values).to_vec()
    }

    fn run(op: CollectiveOp, count: u64, dtype: DType, sends: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let bytes: Vec<Vec<u8>> = sends.iter().map(|s| enc(dtype, s)).collect();
        let refs: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
        receive(op, count, dtype, &refs)
            .iter()
            .map(|b| dtype.decode(b))
            .collect()
    }

    #[test]
    fn all_reduce_each_reduction_in_each_type() {
        let sends = vec![
            vec![1.0, -2.0, 3.0],
            vec![4.0, 5.0, -6.0],
            vec![0.5, 2.0, 2.0],
        ];
        for dtype in DType::FLOATS {
            let sum = run(CollectiveOp::AllReduce(ReduceOp::Sum), 3, dtype, &sends);
            assert_eq!(sum, vec![vec![5.5, 5.0, -1.0]; 3], "{dtype}");
            let prod = run(CollectiveOp::AllReduce(ReduceOp::Prod), 3, dtype, &sends);
            assert_eq!(prod, vec![vec![2.0, -20.0, -36.0]; 3], "{dtype}");
            let max = run(CollectiveOp::AllReduce(ReduceOp::Max), 3, dtype, &sends);
            assert_eq!(max, vec![vec![4.0, 5.0, 3.0]; 3], "{dtype}");
            let min = run(CollectiveOp::AllReduce(ReduceOp::Min), 3, dtype, &sends);
            assert_eq!(min, vec![vec![0.5, -2.0, -6.0]; 3], "{dtype}");
        }
    }

    #[test]
    fn an_average_is_the_sum_divided_by_the_rank_count_in_each_type() {
        let sends = vec![
            vec![1.0, -2.0],
            vec![4.0, 6.0],
            vec![1.0, 2.0],
            vec![2.0, 2.0],
        ];
        for dtype in DType::FLOATS {
            let avg = run(CollectiveOp::AllReduce(ReduceOp::Avg), 2, dtype, &sends);
            assert_eq!(avg, vec![vec![2.0, 2.0]; 4], "{dtype}");
        }
        // Reduce-scatter averages each rank's block; 1/3 rounds as the data type does.
        let sends = vec![vec![1.0, 3.0], vec![0.0, 3.0], vec![0.0, 3.0]];
        let rs = CollectiveOp::ReduceScatter(ReduceOp::Avg);
        let f16 = run(rs, 1, DType::F16, &[sends[0].clone(), sends[1].clone()]);
        assert_eq!(f16, vec![vec![0.5], vec![3.0]]);
        let third = run(
            CollectiveOp::AllReduce(ReduceOp::Avg),
            1,
            DType::F16,
            &sends,
        );
        assert_eq!(third[0], vec![DType::F16.round(1.0 / 3.0)]);
    }

    #[test]
    fn an_average_in_half_precision_scales_before_it_sums() {
        // 3 × 30000 overflows float16 (65504 at most); each third, 10000, and the mean fit.
        let avg = CollectiveOp::AllReduce(ReduceOp::Avg);
        let sends = vec![vec![30000.0]; 3];
        assert_eq!(run(avg, 1, DType::F16, &sends)[0], vec![30000.0]);
        let big = 3.0 * 2f32.powi(125);
        assert_eq!(run(avg, 1, DType::BF16, &vec![vec![big]; 3])[0], vec![big]);
        // The order of rounding: in float16 each rank's value is scaled and rounded, then the
        // thirds are summed in rank order, each partial sum rounded: 1/3 + 2/3 + 2/3 gives
        // 1.666015625, where the sum scaled once would give 1.6669921875.
        let sends = vec![vec![1.0], vec![2.0], vec![2.0]];
        let f16 = |x: f32| DType::F16.round(x);
        let third = 1.0f32 / 3.0;
        let thirds = [1.0, 2.0, 2.0].map(|x: f32| f16(x * third));
        let scaled_first = f16(f16(thirds[0] + thirds[1]) + thirds[2]);
        assert_eq!(scaled_first, 1706.0 / 1024.0);
        assert_eq!(run(avg, 1, DType::F16, &sends)[0], vec![scaled_first]);
        // In float32 the sum is scaled once.
        assert_eq!(run(avg, 1, DType::F32, &sends)[0], vec![5.0 * third]);
    }

    #[test]
    fn a_scatter_gives_each_rank_its_block_of_the_root_s_buffer() {
        let sends = vec![vec![], vec![1.0, 2.0, 3.0, 4.0]];
        let out = run(CollectiveOp::Scatter { root: 1 }, 2, DType::F16, &sends);
        assert_eq!(out, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
    }

    #[test]
    fn a_reduce_gives_the_root_alone_the_reduction() {
        let sends = vec![vec![1.0, 8.0], vec![4.0, 2.0], vec![3.0, 3.0]];
        let op = CollectiveOp::Reduce {
            op: ReduceOp::Avg,
            root: 1,
        };
        let out = run(op, 2, DType::F32, &sends);
        assert_eq!(out, vec![vec![], vec![8.0 / 3.0, 13.0 / 3.0], vec![]]);
    }

    #[test]
    fn sums_round_every_partial_result_in_rank_order() {
        // f16 steps by 2 at 2048: 2048 + 1 rounds back to 2048 (to even), twice; rounding
        // only the final 2050 would keep it. In f32 the sum is exact.
        let sends = vec![vec![2048.0], vec![1.0], vec![1.0]];
        let sum = CollectiveOp::AllReduce(ReduceOp::Sum);
        assert_eq!(run(sum, 1, DType::F16, &sends)[0], vec![2048.0]);
        assert_eq!(run(sum, 1, DType::F32, &sends)[0], vec![2050.0]);
        // bf16 steps by 2 at 256 as well (8-bit mantissa).
        let sends = vec![vec![256.0], vec![1.0], vec![1.0]];
        assert_eq!(run(sum, 1, DType::BF16, &sends)[0], vec![256.0]);
    }

    #[test]
    fn reduce_scatter_gives_each_rank_its_block() {
        let sends = vec![vec![1.0, 2.0, 3.0, 4.0], vec![10.0, 20.0, 30.0, 40.0]];
        let out = run(
            CollectiveOp::ReduceScatter(ReduceOp::Sum),
            2,
            DType::BF16,
            &sends,
        );
        assert_eq!(out, vec![vec![11.0, 22.0], vec![33.0, 44.0]]);
    }

    #[test]
    fn all_gather_concatenates_in_rank_order() {
        let sends = vec![vec![1.0], vec![2.0], vec![3.0]];
        let out = run(CollectiveOp::AllGather, 1, DType::F16, &sends);
        assert_eq!(out, vec![vec![1.0, 2.0, 3.0]; 3]);
    }

    #[test]
    fn broadcast_copies_the_roots_data() {
        let sends = vec![vec![], vec![7.0, 8.0], vec![]];
        let out = run(CollectiveOp::Broadcast { root: 1 }, 2, DType::F32, &sends);
        assert_eq!(out, vec![vec![7.0, 8.0]; 3]);
    }

    #[test]
    fn all_to_all_transposes_blocks() {
        // Rank i's block j goes to block i of rank j.
        let sends = vec![
            vec![0.0, 1.0, 2.0],
            vec![10.0, 11.0, 12.0],
            vec![20.0, 21.0, 22.0],
        ];
        let out = run(CollectiveOp::AllToAll, 1, DType::F16, &sends);
        assert_eq!(
            out,
            vec![
                vec![0.0, 10.0, 20.0],
                vec![1.0, 11.0, 21.0],
                vec![2.0, 12.0, 22.0]
            ]
        );
    }

    #[test]
    fn send_delivers_to_the_receiver() {
        let sends = vec![vec![1.5, 2.5], vec![]];
        let out = run(CollectiveOp::Send { peer: 3 }, 2, DType::F32, &sends);
        assert_eq!(out, vec![vec![], vec![1.5, 2.5]]);
    }

    /// Bytes of `values` (each wrapped into `dtype`).
    fn ints(dtype: DType, values: &[i128]) -> Vec<u8> {
        let size = dtype.size() as usize;
        values
            .iter()
            .flat_map(|v| (*v as u64).to_le_bytes()[..size].to_vec())
            .collect()
    }

    fn int_run(op: ReduceOp, dtype: DType, sends: &[Vec<i128>]) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = sends.iter().map(|s| ints(dtype, s)).collect();
        let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
        let n = sends[0].len() as u64;
        receive(CollectiveOp::AllReduce(op), n, dtype, &refs).remove(0)
    }

    #[test]
    fn integer_reductions_are_exact_and_wrap_in_their_type() {
        // Sums wrap around: 100 + 100 in int8 is -56, 200 + 100 in uint8 is 44.
        let sum = ReduceOp::Sum;
        assert_eq!(
            int_run(sum, DType::I8, &[vec![100, -5], vec![100, 2]]),
            ints(DType::I8, &[-56, -3])
        );
        assert_eq!(
            int_run(sum, DType::U8, &[vec![200, 1], vec![100, 2]]),
            ints(DType::U8, &[44, 3])
        );
        // int64 beyond 2^53 stays exact (a float sum would round it).
        let big = (1i128 << 60) + 1;
        assert_eq!(
            int_run(sum, DType::I64, &[vec![big], vec![1]]),
            ints(DType::I64, &[big + 1])
        );
        // Max and min compare as the type does: unsigned 2^63 is the largest uint64.
        let top = 1i128 << 63;
        assert_eq!(
            int_run(ReduceOp::Max, DType::U64, &[vec![top, 3], vec![1, 4]]),
            ints(DType::U64, &[top, 4])
        );
        assert_eq!(
            int_run(ReduceOp::Min, DType::I64, &[vec![-top, 3], vec![1, 4]]),
            ints(DType::I64, &[-top, 3])
        );
        assert_eq!(
            int_run(ReduceOp::Max, DType::I16, &[vec![-7, 9], vec![-3, -9]]),
            ints(DType::I16, &[-3, 9])
        );
        assert_eq!(
            int_run(ReduceOp::Min, DType::U32, &[vec![4_000_000_000], vec![5]]),
            ints(DType::U32, &[5])
        );
        // Products wrap too: 300 · 300 in int16 is 90000 - 65536 · 1 = 24464.
        assert_eq!(
            int_run(ReduceOp::Prod, DType::I16, &[vec![300, -2], vec![300, 3]]),
            ints(DType::I16, &[24464, -6])
        );
        assert_eq!(
            int_run(ReduceOp::Prod, DType::I32, &[vec![-3], vec![5], vec![7]]),
            ints(DType::I32, &[-105])
        );
        assert_eq!(
            int_run(ReduceOp::Avg, DType::I32, &[vec![-7, 9], vec![0, 0]]),
            ints(DType::I32, &[-3, 4])
        );
        // uint16 and bool.
        assert_eq!(
            int_run(sum, DType::U16, &[vec![65535], vec![2]]),
            ints(DType::U16, &[1])
        );
        assert_eq!(
            int_run(ReduceOp::Max, DType::Bool, &[vec![0, 1], vec![0, 0]]),
            ints(DType::Bool, &[0, 1])
        );
    }

    #[test]
    fn float64_reduces_in_double_precision() {
        let bytes: Vec<Vec<u8>> = [[0.1f64, 1e300], [0.2, 1e300]]
            .iter()
            .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
            .collect();
        let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
        let sum = receive(CollectiveOp::AllReduce(ReduceOp::Sum), 2, DType::F64, &refs).remove(0);
        assert_eq!(DType::F64.get_f64(&sum, 0), Some(0.1 + 0.2));
        assert_eq!(DType::F64.get_f64(&sum, 1), Some(2e300));
        let max = receive(CollectiveOp::AllReduce(ReduceOp::Max), 2, DType::F64, &refs).remove(0);
        assert_eq!(DType::F64.get_f64(&max, 0), Some(0.2));
    }

    #[test]
    fn short_buffers_read_as_zeros() {
        let bytes = [enc(DType::F32, &[1.0]), Vec::new()];
        let refs: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
        let out = receive(CollectiveOp::AllReduce(ReduceOp::Sum), 2, DType::F32, &refs);
        assert_eq!(DType::F32.decode(&out[1]), vec![1.0, 0.0]);
    }
}
