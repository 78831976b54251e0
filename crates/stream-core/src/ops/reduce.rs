//! Reductions: [`Reduce`] over any set of dimensions, [`Softmax`], [`ArgReduce`] (argmax,
//! `max(dim)`) and [`Cumsum`] along one.

use super::check::{dim_in, dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::Kernel;
use crate::tensor::Tensor;

/// What a [`Reduce`] computes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ReduceKind {
    /// The sum (floats accumulate in float64, integers and bools in int64).
    Sum,
    /// The mean (accumulated as the sum).
    Mean,
    /// The largest element (NaN if any is).
    Max,
    /// The smallest element (NaN if any is).
    Min,
    /// The product.
    Prod,
    /// 1 if any element is non-zero.
    Any,
    /// 1 if every element is non-zero.
    All,
}

impl ReduceKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Max => "reduce_max",
            ReduceKind::Min => "reduce_min",
            ReduceKind::Prod => "reduce_prod",
            ReduceKind::Any => "reduce_any",
            ReduceKind::All => "reduce_all",
        }
    }
}

/// `out = kind(self)` over the dimensions `dims` (every dimension when `dims` is empty).
/// `out` has `self`'s shape with those dimensions removed, or kept as 1 (`keepDim`).
#[derive(Clone, PartialEq, Debug)]
pub struct Reduce {
    /// What it computes.
    pub kind: ReduceKind,
    /// The input (`self`).
    pub x: Tensor,
    /// The reduced dimensions, each named once; empty reduces them all.
    pub dims: Vec<usize>,
    /// The output.
    pub out: Tensor,
}

impl Reduce {
    /// Per dimension of `self`: whether it is reduced.
    pub fn reduced(&self) -> Vec<bool> {
        let mut r = vec![self.dims.is_empty(); self.x.rank()];
        for &d in &self.dims {
            if let Some(slot) = r.get_mut(d) {
                *slot = true;
            }
        }
        r
    }
}

impl OpSpec for Reduce {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("self", &self.x),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = self.name();
        let rank = self.x.rank();
        let mut seen = vec![false; rank];
        for &d in &self.dims {
            dim_in(op, "dim", d, rank)?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(OpCheckError::Attribute {
                    op,
                    attribute: "dim",
                    reason: format!("names dimension {d} twice ({:?})", self.dims),
                });
            }
        }
        let reduced = self.reduced();
        let kept: Vec<usize> = self
            .x
            .shape()
            .iter()
            .zip(&reduced)
            .filter(|(_, &r)| !r)
            .map(|(&d, _)| d)
            .collect();
        let kept_dim: Vec<usize> = self
            .x
            .shape()
            .iter()
            .zip(&reduced)
            .map(|(&d, &r)| if r { 1 } else { d })
            .collect();
        if self.out.shape() != kept && self.out.shape() != kept_dim {
            return Err(OpCheckError::Shape {
                op,
                operand: "out",
                shape: self.out.shape().to_vec(),
                rule: format!("expected {kept:?}, or {kept_dim:?} keeping dimensions"),
            });
        }
        if matches!(self.kind, ReduceKind::Mean) {
            dtype_in(
                op,
                "out",
                &self.out,
                &[DType::F32, DType::F16, DType::BF16, DType::F64],
            )?;
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.x.numel() as u64
    }
}

/// `out = softmax(self)` along `dim` (`log`: log-softmax), computed in float32 (float64 for
/// float64) with the row's maximum subtracted first.
#[derive(Clone, PartialEq, Debug)]
pub struct Softmax {
    /// The input (`self`).
    pub x: Tensor,
    /// The dimension normalised.
    pub dim: usize,
    /// Log-softmax instead.
    pub log: bool,
    /// The output, `self`'s shape.
    pub out: Tensor,
}

impl OpSpec for Softmax {
    fn name(&self) -> &'static str {
        if self.log {
            "log_softmax"
        } else {
            "softmax"
        }
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("self", &self.x),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = self.name();
        let floats = [DType::F32, DType::F16, DType::BF16, DType::F64];
        dtype_in(op, "self", &self.x, &floats)?;
        dtype_in(op, "out", &self.out, &floats)?;
        if self.x.dtype() != DType::F64 {
            // CANN's softmax writes float32 or the input's type.
            if self.out.dtype() != DType::F32 {
                same_dtype(op, "out", &self.out, self.x.dtype(), "self")?;
            }
        }
        dim_in(op, "dim", self.dim, self.x.rank())?;
        shape_is(op, "out", &self.out, self.x.shape())
    }

    fn flops(&self) -> u64 {
        5 * self.x.numel() as u64
    }
}

/// The kernel of `out = kind(x)` over `dims` ([`Reduce`]).
pub fn reduce(
    kind: ReduceKind,
    x: &Tensor,
    dims: &[usize],
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Reduce(Reduce {
        kind,
        x: x.clone(),
        dims: dims.to_vec(),
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out = softmax(x)` along `dim` ([`Softmax`]).
pub fn softmax(x: &Tensor, dim: usize, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Softmax(Softmax {
        x: x.clone(),
        dim,
        log: false,
        out: out.clone(),
    })
    .kernel()
}

/// The position of the largest (`max`) or smallest element along `dim` (`aclnnArgMax`), and
/// with `values` the element too (`aclnnMaxDim`): the first such position, a NaN counting as
/// the largest and the smallest (as PyTorch). `indices` (int64 or int32) has `self`'s shape
/// without `dim`, or with it kept as 1 (`keepdim`); `values` the same shape in `self`'s type.
#[derive(Clone, PartialEq, Debug)]
pub struct ArgReduce {
    /// The largest (`true`) or the smallest.
    pub max: bool,
    /// The input (`self`).
    pub x: Tensor,
    /// The dimension searched.
    pub dim: usize,
    /// The elements found (`out` of `aclnnMaxDim`), if wanted.
    pub values: Option<Tensor>,
    /// Their positions (`out` of `aclnnArgMax`, `indices` of `aclnnMaxDim`).
    pub indices: Tensor,
}

impl ArgReduce {
    fn out_shapes(&self) -> (Vec<usize>, Vec<usize>) {
        let mut kept = self.x.shape().to_vec();
        let mut removed = kept.clone();
        if self.dim < kept.len() {
            kept[self.dim] = 1;
            removed.remove(self.dim);
        }
        (removed, kept)
    }
}

impl OpSpec for ArgReduce {
    fn name(&self) -> &'static str {
        match (self.max, self.values.is_some()) {
            (true, false) => "argmax",
            (false, false) => "argmin",
            (true, true) => "max_dim",
            (false, true) => "min_dim",
        }
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = vec![OperandUse::read("self", &self.x)];
        if let Some(values) = &self.values {
            v.push(OperandUse::write("out", values));
            v.push(OperandUse::write("indices", &self.indices));
        } else {
            v.push(OperandUse::write("out", &self.indices));
        }
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = self.name();
        let index_role = if self.values.is_some() {
            "indices"
        } else {
            "out"
        };
        dim_in(op, "dim", self.dim, self.x.rank().max(1))?;
        if self.x.rank() > 0 && self.x.shape()[self.dim] == 0 {
            return Err(OpCheckError::Shape {
                op,
                operand: "self",
                shape: self.x.shape().to_vec(),
                rule: format!("dimension {} is empty: it has no extreme element", self.dim),
            });
        }
        dtype_in(op, index_role, &self.indices, &[DType::I64, DType::I32])?;
        let (removed, kept) = self.out_shapes();
        if self.indices.shape() != removed && self.indices.shape() != kept {
            return Err(OpCheckError::Shape {
                op,
                operand: index_role,
                shape: self.indices.shape().to_vec(),
                rule: format!("expected {removed:?}, or {kept:?} keeping dimensions"),
            });
        }
        if let Some(values) = &self.values {
            same_dtype(op, "out", values, self.x.dtype(), "self")?;
            shape_is(op, "out", values, self.indices.shape())?;
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.x.numel() as u64
    }
}

/// `out[..., i, ...] = self[..., 0, ...] + ... + self[..., i, ...]` along `dim`
/// (`aclnnCumsum`): floats accumulate in float64, integers and bools in int64 (wrapping),
/// each partial sum converted to `out`'s data type as it is stored.
#[derive(Clone, PartialEq, Debug)]
pub struct Cumsum {
    /// The input (`self`).
    pub x: Tensor,
    /// The dimension summed along.
    pub dim: usize,
    /// The output, `self`'s shape.
    pub out: Tensor,
}

impl OpSpec for Cumsum {
    fn name(&self) -> &'static str {
        "cumsum"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("self", &self.x),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "cumsum";
        dim_in(op, "dim", self.dim, self.x.rank().max(1))?;
        if self.out.dtype() == DType::Bool {
            return Err(OpCheckError::DType {
                op,
                operand: "out",
                dtype: DType::Bool,
                expected: "a numeric type".to_string(),
            });
        }
        shape_is(op, "out", &self.out, self.x.shape())
    }

    fn flops(&self) -> u64 {
        self.x.numel() as u64
    }
}

/// The kernel of `indices = argmax(x, dim)` (`max`) or argmin ([`ArgReduce`]).
pub fn argmax(x: &Tensor, dim: usize, max: bool, indices: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::ArgReduce(ArgReduce {
        max,
        x: x.clone(),
        dim,
        values: None,
        indices: indices.clone(),
    })
    .kernel()
}

/// The kernel of `out = cumsum(x, dim)` ([`Cumsum`]).
pub fn cumsum(x: &Tensor, dim: usize, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Cumsum(Cumsum {
        x: x.clone(),
        dim,
        out: out.clone(),
    })
    .kernel()
}
