//! braid's tensor operators: the operators real models need (embedding, norms, the matmul
//! family, rotary embedding, softmax, activations, attention, index-copy, argmax, cast...),
//! each declared once.
//!
//! An operator is a value of [`TensorOp`]: its [`Tensor`] operands (typed, shaped, strided
//! views of device memory), its scalars and its attributes. Its declaration ([`OpSpec`]) gives
//! its operands with their roles and accesses, its shape and data type rules ([`OpSpec::check`],
//! typed [`OpCheckError`]s naming the operand), and its work (floating-point operations and
//! the unit it occupies). [`TensorOp::kernel`] checks it and makes a [`Kernel::Op`] that a
//! stream launches like any built-in kernel: captured, updatable in task groups, seen by the
//! ordering model, the allocator's lifetime tracking and the simulator's sanitizer through
//! the byte ranges of its tensors.
//!
//! Every backend runs the same declaration: the simulator computes it (crate
//! `braid-kernels`, which `braid-acl-sim`'s aclnn exports use too) and costs it from
//! [`OpSpec::flops`] and the bytes of its tensors; the ACL backend lowers it to the CANN aclnn
//! operator of the same name. So the Rust API, the simulator and the CANN stand-in cannot
//! disagree about what an operator computes.
//!
//! ```
//! use braid_stream_core::ops::{self, UnaryOp};
//! use braid_stream_core::tensor::Tensor;
//! use braid_stream_core::{DType, DevicePtr, DeviceSlice};
//! let at = |addr, shape: &[usize]| {
//!     let bytes = shape.iter().product::<usize>() as u64 * 4;
//!     Tensor::new(DeviceSlice::new(DevicePtr(addr), bytes), DType::F32, shape)
//! };
//! let (x, w, y) = (at(0x1000, &[4, 64])?, at(0x2000, &[128, 64])?, at(0x20000, &[4, 128])?);
//! // y = x · wᵀ, as nn.Linear without bias.
//! let linear = ops::matmul(&x, &w.t()?, &y)?;
//! assert_eq!(linear.name(), "matmul");
//! let act = ops::unary(UnaryOp::Silu, &y, &y)?;
//! // A shape that does not fit is refused before any device sees it, naming the operand.
//! let err = ops::matmul(&x, &w, &y).unwrap_err();
//! assert!(err.to_string().contains("mat2"), "{err}");
//! # let _ = act;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod attention;
mod check;
mod elementwise;
mod format;
mod index;
mod matmul;
mod norm;
mod random;
mod reduce;
mod rope;
mod shape;

pub use attention::{attention, Attention, AttentionDims, AttentionMask, Causal, KvLen};
pub use check::OpCheckError;
pub use elementwise::{
    binary, cast, fill, unary, Binary, BinaryClass, BinaryOp, Cast, Domain, Fill, Operand, Scalar,
    Unary, UnaryOp,
};
pub use format::{
    format_cast, Blocked, CastDirection, FormatCast, PlainFormat, PrivateFormat, FRACTAL_ROWS,
};
pub use index::{embedding, index, index_copy, Index, IndexCopy, IndexLayout, INDEX_TYPES};
pub use matmul::{matmul, matmul_bias, Matmul};
pub use norm::{layer_norm, rms_norm, LayerNorm, RmsNorm};
pub use random::{
    apply_dropout_mask, mask_bytes, random, ApplyDropoutMask, Random, RandomKind, RngState,
};
pub use reduce::{argmax, cumsum, reduce, softmax, ArgReduce, Cumsum, Reduce, ReduceKind, Softmax};
pub use rope::{rope, Rope, RopeMode};
pub use shape::{arange, cat, triangle, where_, Arange, Cat, Triangle, Where};

use crate::dtype::DType;
use crate::kernel::{ComputeUnit, Kernel};
use crate::tensor::Tensor;
use crate::types::DeviceSlice;
use crate::uses::Access;
use std::fmt;
use std::sync::Arc;

/// One operand of an operator: its role (the name CANN's operator page gives it: `self`,
/// `other`, `mat2`, `out`...), the tensor and how the operator uses it.
#[derive(Clone, Copy, Debug)]
pub struct OperandUse<'a> {
    /// Its role, named in errors.
    pub role: &'static str,
    /// The tensor.
    pub tensor: &'a Tensor,
    /// Read or written.
    pub access: Access,
}

impl<'a> OperandUse<'a> {
    /// A tensor the operator reads.
    pub fn read(role: &'static str, tensor: &'a Tensor) -> Self {
        OperandUse {
            role,
            tensor,
            access: Access::Read,
        }
    }

    /// A tensor the operator writes.
    pub fn write(role: &'static str, tensor: &'a Tensor) -> Self {
        OperandUse {
            role,
            tensor,
            access: Access::Write,
        }
    }
}

/// An operator's declaration: what every backend and the front layer know of it.
pub trait OpSpec {
    /// Its short name (`matmul`, `silu`...): its label in timelines and reports, and what a
    /// task-group update must keep.
    fn name(&self) -> &'static str;

    /// Every tensor it reads, then every tensor it writes (a tensor updated in place is in
    /// both lists), in the order the backends' implementations take them.
    fn operands(&self) -> Vec<OperandUse<'_>>;

    /// Checks its shapes, data types and attributes; the first problem is a typed error
    /// naming the operand.
    fn check(&self) -> Result<(), OpCheckError>;

    /// Floating-point (or integer) operations it performs.
    fn flops(&self) -> u64;

    /// The unit it occupies (vector unless said otherwise).
    fn unit(&self) -> ComputeUnit {
        ComputeUnit::Vector
    }

    /// The data type whose throughput times it: its first output's.
    fn compute_dtype(&self) -> DType {
        self.operands()
            .iter()
            .find(|o| o.access == Access::Write)
            .map_or(DType::F32, |o| o.tensor.dtype())
    }

    /// Whether it writes only part of an output's elements (the rest keep their values), so
    /// a backend that computes into a fresh buffer must start from the output's bytes.
    fn writes_part(&self) -> bool {
        false
    }
}

/// Every tensor operator braid has (see the [module](self) docs).
#[derive(Clone, PartialEq, Debug)]
pub enum TensorOp {
    /// `out = f(self)` element by element ([`UnaryOp`]).
    Unary(Unary),
    /// `out = self ∘ other` element by element, broadcast ([`BinaryOp`]).
    Binary(Binary),
    /// `out[...] = value`.
    Fill(Fill),
    /// `out = self` converted to `out`'s data type, broadcast (a copy when the types match).
    Cast(Cast),
    /// A reduction over some dimensions ([`ReduceKind`]).
    Reduce(Reduce),
    /// Softmax (or log-softmax) along one dimension.
    Softmax(Softmax),
    /// RMSNorm over the last dimension.
    RmsNorm(RmsNorm),
    /// Matrix product, batched and broadcast, with an optional bias.
    Matmul(Matmul),
    /// Advanced indexing, `self[ids...]` (embedding lookups, `index_select`).
    Index(Index),
    /// `index_copy`: slices of a tensor replaced at indexed positions.
    IndexCopy(IndexCopy),
    /// Concatenation along one dimension.
    Cat(Cat),
    /// `condition ? self : other`, broadcast.
    Where(Where),
    /// `triu` / `tril`.
    Triangle(Triangle),
    /// `start + i·step`.
    Arange(Arange),
    /// LayerNorm over the trailing dimensions.
    LayerNorm(LayerNorm),
    /// The position (and value) of the largest or smallest element along one dimension.
    ArgReduce(ArgReduce),
    /// Cumulative sum along one dimension.
    Cumsum(Cumsum),
    /// Rotary position embedding over the last dimension.
    Rope(Rope),
    /// Scaled dot-product attention (grouped heads, causal, masked, over a valid length);
    /// boxed, being much larger than the other variants.
    Attention(Box<Attention>),
    /// Random numbers drawn with a seed and an offset ([`RandomKind`]).
    Random(Random),
    /// A dropout mask applied to a tensor.
    ApplyDropoutMask(ApplyDropoutMask),
    /// A conversion to or from a device-private storage format.
    FormatCast(FormatCast),
}

/// Calls `$body` with `$spec` bound to the variant's payload as `&dyn OpSpec`.
macro_rules! each_op {
    ($op:expr, $spec:ident => $body:expr) => {
        match $op {
            TensorOp::Unary($spec) => $body,
            TensorOp::Binary($spec) => $body,
            TensorOp::Fill($spec) => $body,
            TensorOp::Cast($spec) => $body,
            TensorOp::Reduce($spec) => $body,
            TensorOp::Softmax($spec) => $body,
            TensorOp::RmsNorm($spec) => $body,
            TensorOp::Matmul($spec) => $body,
            TensorOp::Index($spec) => $body,
            TensorOp::IndexCopy($spec) => $body,
            TensorOp::Cat($spec) => $body,
            TensorOp::Where($spec) => $body,
            TensorOp::Triangle($spec) => $body,
            TensorOp::Arange($spec) => $body,
            TensorOp::LayerNorm($spec) => $body,
            TensorOp::ArgReduce($spec) => $body,
            TensorOp::Cumsum($spec) => $body,
            TensorOp::Rope($spec) => $body,
            TensorOp::Attention(boxed) => {
                let $spec = &**boxed;
                $body
            }
            TensorOp::Random($spec) => $body,
            TensorOp::ApplyDropoutMask($spec) => $body,
            TensorOp::FormatCast($spec) => $body,
        }
    };
}

impl TensorOp {
    /// Its declaration.
    pub fn spec(&self) -> &dyn OpSpec {
        each_op!(self, spec => spec)
    }

    /// Checks it (shapes, data types, attributes, and no output overlapping another operand
    /// except exactly, in place) and makes the kernel a stream launches.
    pub fn kernel(self) -> Result<Kernel, OpCheckError> {
        Ok(Kernel::Op(OpKernel::new(self)?))
    }
}

impl OpSpec for TensorOp {
    fn name(&self) -> &'static str {
        self.spec().name()
    }
    fn operands(&self) -> Vec<OperandUse<'_>> {
        each_op!(self, spec => spec.operands())
    }
    fn check(&self) -> Result<(), OpCheckError> {
        self.spec().check()
    }
    fn flops(&self) -> u64 {
        self.spec().flops()
    }
    fn unit(&self) -> ComputeUnit {
        self.spec().unit()
    }
    fn compute_dtype(&self) -> DType {
        self.spec().compute_dtype()
    }
    fn writes_part(&self) -> bool {
        self.spec().writes_part()
    }
}

/// A checked tensor operator inside a [`Kernel::Op`]: the operator and the byte ranges its
/// operands span, reads first. Cheap to clone (shared); made only by [`TensorOp::kernel`], so
/// every one a stream sees has passed its checks.
#[derive(Clone, PartialEq)]
pub struct OpKernel(Arc<Checked>);

#[derive(PartialEq)]
struct Checked {
    op: TensorOp,
    uses: Vec<(DeviceSlice, Access)>,
    flops: u64,
}

impl OpKernel {
    fn new(op: TensorOp) -> Result<OpKernel, OpCheckError> {
        op.check()?;
        check::outputs_do_not_overlap(&op)?;
        let uses = op
            .operands()
            .iter()
            .map(|o| (o.tensor.range(), o.access))
            .collect();
        let flops = op.flops();
        Ok(OpKernel(Arc::new(Checked { op, uses, flops })))
    }

    /// The operator.
    pub fn op(&self) -> &TensorOp {
        &self.0.op
    }

    /// The byte ranges of its operands with their accesses, reads first.
    pub fn uses(&self) -> &[(DeviceSlice, Access)] {
        &self.0.uses
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.0.op.name()
    }

    /// Operations it performs.
    pub fn flops(&self) -> u64 {
        self.0.flops
    }
}

impl fmt::Debug for OpKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0.op, f)
    }
}

impl fmt::Display for OpKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        let ops = self.0.op.operands();
        for (i, o) in ops.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{} {}", o.role, o.tensor)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
