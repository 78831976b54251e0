//! `braid-kernels`: braid's tensor operators ([`braid_stream_core::ops`]) computed on the
//! CPU, over the bytes of their tensors. The simulator computes every built-in kernel with
//! it in data mode, and `braid-acl-sim`'s aclnn exports run through the simulator, so the
//! Rust API, the simulator and the CANN stand-in compute each operator with one
//! implementation.
//!
//! [`compute`] takes an operator and the bytes of its operands' ranges, in the order of
//! [`OpSpec::operands`]: the read ranges, then the written ones. Each tensor's first element
//! is at the start of its bytes (strides are never negative), so a kernel finds element
//! `[i, j, ...]` at `(i·strides[0] + j·strides[1] + ...)·size`.
//!
//! How it computes:
//! - element-wise work walks the output in runs ([`layout`]) with each operand's strides
//!   broadcast, adjacent dimensions merged, so a contiguous tensor is one loop; each run is
//!   loaded into the operator's domain (`f32`, `f64` or `i64`, [`element`]), computed and
//!   stored converted to the output's type;
//! - reductions, softmax and RMSNorm walk the output's elements and, for each, the input
//!   elements they reduce;
//! - matrix products go to the `gemm` crate (multi-threaded above a size, see
//!   [`compute_with`]);
//! - rotary embedding rotates each row of the last dimension; attention packs each batch and
//!   key/value head's valid keys and values once, then computes every query row of its
//!   group (scores, mask, softmax with the maximum subtracted, values) in float32.
//!
//! # Determinism and threads
//!
//! The same operator on the same bytes gives the same bits on every run, and the thread
//! count ([`compute_with`]'s `threads`: the simulator's `SimConfig::compute_threads` or
//! `BRAID_SIM_THREADS`) never changes them:
//!
//! - matrix products use up to that many threads above a size: `gemm` splits a product's
//!   output between its threads, never the sum over `k`, so each output element is summed in
//!   the same order (blocks of `k` whose size comes from the CPU's cache sizes, then the
//!   microkernel's lanes) whatever the thread count. Widened half-precision products go tile
//!   by tile in a fixed tiling (`TILE` rows and columns per `gemm` call), which does not
//!   depend on the thread count either;
//! - element-wise operators, casts, softmax and RMSNorm over at least 64 Ki elements with a
//!   contiguous output cut the output into parts of whole elements (softmax, RMSNorm: rows),
//!   a few per thread, each computed by whichever thread is free next (the calling thread and
//!   rayon's pool): each element is computed exactly as on one thread;
//! - every other operator computes on the calling thread. All of them sum in a fixed order:
//!   sums, means, softmax and RMSNorm in 32 partial sums of `f64` (so that the loop
//!   vectorises), whose rounding depends only on the sequence of values, not on how a row is
//!   cut into runs nor on the vector width the CPU offers; layer norm and attention element
//!   after element;
//! - the vector instructions are chosen at run time (`pulp`: AVX2 or AVX-512 where present),
//!   but the compiler never reorders or fuses floating-point operations, so every version of
//!   a loop gives the same bits.
//!
//! What can differ between machines is a matrix product's last bits: `gemm` picks its
//! microkernel (with or without fused multiply-adds, its register tile) and its `k` blocks
//! from the CPU it runs on. So a product's numbers are the same on one machine for every
//! thread setting, and may differ in their last place on a CPU with other instruction sets
//! or cache sizes. Tests that compare products with reference values use tolerances;
//! `numbers_do_not_depend_on_the_thread_count` holds every operator family bit-exact
//! across thread counts.

mod attention;
pub mod element;
mod elementwise;
mod format;
mod index;
mod layer_norm;
pub mod layout;
mod matmul;
mod parallel;
mod position;
mod random;
mod reduce;
mod rope;
mod shape;
mod vector;

use braid_stream_core::ops::{OpSpec, OperandUse, TensorOp};
use braid_stream_core::Access;
use elementwise::{Dst, Src};

/// Why an operator could not be computed on the bytes it was given.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ComputeError {
    /// The bytes of an operand do not match its tensor's range (a backend bug, reported
    /// instead of reading out of bounds).
    #[error("{op}: {operand} was given {given} bytes, its tensor spans {expected}")]
    Bytes {
        /// The operator.
        op: &'static str,
        /// The operand's role.
        operand: &'static str,
        /// Bytes given.
        given: usize,
        /// Bytes its tensor spans.
        expected: usize,
    },
    /// The operands given are not the operator's.
    #[error(
        "{op}: {given} read and {written} written ranges were given, it has {reads} and {writes}"
    )]
    Count {
        /// The operator.
        op: &'static str,
        /// Read ranges given.
        given: usize,
        /// Written ranges given.
        written: usize,
        /// Read operands it has.
        reads: usize,
        /// Written operands it has.
        writes: usize,
    },
    /// An index read from device memory is out of range (a device fault on hardware).
    #[error("{op}: {operand} holds index {index}, out of range for a dimension of {bound}")]
    IndexOutOfRange {
        /// The operator.
        op: &'static str,
        /// The operand holding the index.
        operand: &'static str,
        /// The index.
        index: i64,
        /// The dimension's size.
        bound: usize,
    },
    /// The operator was not made by [`TensorOp::kernel`] and does not pass its checks.
    #[error(transparent)]
    Check(#[from] braid_stream_core::ops::OpCheckError),
    /// A value read from device memory is outside what the operator takes (a device
    /// fault on hardware): multinomial weights that are negative or all zero.
    #[error("{op}: {operand}: {reason}")]
    InvalidValue {
        /// The operator.
        op: &'static str,
        /// The operand holding the value.
        operand: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Every core of this machine: [`compute`]'s thread count.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Host bytes [`compute`] allocates for `op` besides its operands' bytes, at most: what a
/// caller checks against the host's memory before computing a huge operator (matrix products
/// widen tiles of their operands and sum into a tile of their own where they cannot work in
/// place; the other operators work in buffers of a row or less).
pub fn scratch_bytes(op: &TensorOp) -> u64 {
    match op {
        TensorOp::Matmul(m) => {
            let size = if m.a.dtype() == braid_stream_core::DType::F64 {
                8
            } else {
                4
            };
            matmul::scratch_bytes(m, size)
        }
        TensorOp::Softmax(s) => 8 * s.x.shape()[s.dim] as u64,
        TensorOp::RmsNorm(n) => 8 * n.gamma.numel() as u64,
        _ => 0,
    }
}

/// Whether computing `op` can fail because of the values it reads (an index out of range,
/// invalid weights: [`ComputeError::IndexOutOfRange`], [`ComputeError::InvalidValue`]), after
/// it may have written part of its outputs. Every other operator fails, if at all, before it
/// writes a byte (operands that do not match it), so a caller may let it write straight into
/// its outputs' final place; one that can fail midway is computed into buffers that a failure
/// leaves unused.
pub fn may_fail_on_values(op: &TensorOp) -> bool {
    matches!(
        op,
        TensorOp::Index(_) | TensorOp::IndexCopy(_) | TensorOp::Attention(_) | TensorOp::Random(_)
    )
}

/// Computes `op` over its operands' bytes: `inputs` are its read ranges and `outputs` its
/// written ranges, in [`OpSpec::operands`] order, each exactly its tensor's range. Outputs
/// hold their current bytes on entry (an operator that writes part of one keeps the rest).
/// Uses every core where the size pays ([`compute_with`]).
pub fn compute(
    op: &TensorOp,
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
) -> Result<(), ComputeError> {
    compute_with(op, inputs, outputs, all_cores())
}

/// [`compute`] on at most `threads` threads (at least one). The numbers do not depend on
/// it.
pub fn compute_with(
    op: &TensorOp,
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    threads: usize,
) -> Result<(), ComputeError> {
    let name = op.name();
    let operands = op.operands();
    let (reads, writes): (Vec<&OperandUse<'_>>, Vec<&OperandUse<'_>>) =
        operands.iter().partition(|o| o.access == Access::Read);
    if reads.len() != inputs.len() || writes.len() != outputs.len() {
        return Err(ComputeError::Count {
            op: name,
            given: inputs.len(),
            written: outputs.len(),
            reads: reads.len(),
            writes: writes.len(),
        });
    }
    let check = |role: &'static str, given: usize, t: &braid_stream_core::Tensor| {
        let expected = t.range().len as usize;
        if given == expected {
            Ok(())
        } else {
            Err(ComputeError::Bytes {
                op: name,
                operand: role,
                given,
                expected,
            })
        }
    };
    for (o, bytes) in reads.iter().zip(inputs) {
        check(o.role, bytes.len(), o.tensor)?;
    }
    for (o, bytes) in writes.iter().zip(outputs.iter()) {
        check(o.role, bytes.len(), o.tensor)?;
    }
    let srcs: Vec<Src<'_>> = reads
        .iter()
        .zip(inputs)
        .map(|(o, bytes)| Src {
            bytes,
            tensor: o.tensor,
        })
        .collect();
    let mut dsts: Vec<Dst<'_>> = writes
        .iter()
        .zip(outputs.iter_mut())
        .map(|(o, bytes)| Dst {
            bytes,
            tensor: o.tensor,
        })
        .collect();
    let (first, rest) = dsts.split_at_mut(1);
    let out = &mut first[0];
    match op {
        TensorOp::Unary(u) => elementwise::unary(u, &srcs[0], out, threads),
        TensorOp::Binary(b) => elementwise::binary(b, &srcs, out, threads),
        TensorOp::Fill(f) => elementwise::fill(f, out),
        TensorOp::Cast(c) => elementwise::cast(c, &srcs[0], out, threads),
        TensorOp::Reduce(r) => reduce::reduce(r, &srcs[0], out),
        TensorOp::Softmax(s) => reduce::softmax(s, &srcs[0], out, threads),
        TensorOp::RmsNorm(n) => reduce::rms_norm(n, &srcs[0], &srcs[1], out, &mut rest[0], threads),
        TensorOp::Matmul(m) => matmul::matmul(m, &srcs, out, threads.max(1)),
        TensorOp::Index(i) => index::index(i, &srcs, out)?,
        TensorOp::IndexCopy(c) => index::index_copy(c, &srcs, out)?,
        TensorOp::Cat(c) => shape::cat(c, &srcs, out),
        TensorOp::Where(w) => shape::where_(w, &srcs, out),
        TensorOp::Triangle(t) => shape::triangle(t, &srcs[0], out),
        TensorOp::Arange(a) => shape::arange(a, out),
        TensorOp::LayerNorm(n) => layer_norm::layer_norm(n, &srcs, out, rest),
        TensorOp::ArgReduce(a) => position::arg_reduce(a, &srcs[0], &mut dsts),
        TensorOp::Cumsum(c) => position::cumsum(c, &srcs[0], out),
        TensorOp::Rope(r) => rope::rope(r, &srcs[0], &srcs[1], &srcs[2], out),
        TensorOp::Attention(a) => attention::attention(a, &srcs, out, rest)?,
        TensorOp::Random(r) => random::random(r, &srcs, out, rest)?,
        TensorOp::ApplyDropoutMask(m) => random::apply_dropout_mask(m, &srcs, out),
        TensorOp::FormatCast(f) => format::format_cast(f, &srcs[0], out),
    }
    Ok(())
}

#[cfg(test)]
mod family_tests;
#[cfg(test)]
mod random_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod attention_tests;
