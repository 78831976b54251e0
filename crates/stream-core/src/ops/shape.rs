//! Operators that build tensors from others by position: [`Cat`] (concatenation),
//! [`Where`] (choice by a mask), [`Triangle`] (`triu` / `tril`) and [`Arange`] (a ramp).

use super::check::{broadcasts_to, dim_in, dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, Operand, OperandUse, Scalar, TensorOp};
use crate::dtype::{DType, DTypeKind};
use crate::kernel::Kernel;
use crate::tensor::Tensor;

/// `out = cat(tensors, dim)`: the inputs one after another along `dim`. Every input has
/// `out`'s rank and shape but along `dim`, where their sizes add up to `out`'s; each is
/// converted to `out`'s data type (as a copy converts).
#[derive(Clone, PartialEq, Debug)]
pub struct Cat {
    /// The inputs (`tensors`), in order.
    pub inputs: Vec<Tensor>,
    /// The dimension they are joined along.
    pub dim: usize,
    /// The output.
    pub out: Tensor,
}

impl OpSpec for Cat {
    fn name(&self) -> &'static str {
        "cat"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v: Vec<OperandUse<'_>> = self
            .inputs
            .iter()
            .map(|t| OperandUse::read("tensors", t))
            .collect();
        v.push(OperandUse::write("out", &self.out));
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "cat";
        if self.inputs.is_empty() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "tensors",
                reason: "is empty".to_string(),
            });
        }
        dim_in(op, "dim", self.dim, self.out.rank())?;
        let mut along = 0usize;
        for t in &self.inputs {
            let mut want = self.out.shape().to_vec();
            want[self.dim] = t.shape().get(self.dim).copied().unwrap_or(0);
            if t.shape() != want {
                return Err(OpCheckError::Shape {
                    op,
                    operand: "tensors",
                    shape: t.shape().to_vec(),
                    rule: format!(
                        "every input must be out's {:?} but along dimension {}",
                        self.out.shape(),
                        self.dim
                    ),
                });
            }
            along += want[self.dim];
        }
        if along != self.out.shape()[self.dim] {
            return Err(OpCheckError::Shape {
                op,
                operand: "out",
                shape: self.out.shape().to_vec(),
                rule: format!("the inputs add up to {along} along dimension {}", self.dim),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// `out = condition ? self : other` element by element, the tensors broadcast to `out`'s
/// shape (which must be their broadcast shape), a scalar repeated, the chosen value
/// converted to `out`'s data type: `torch.where`, and `masked_fill_(mask, value)` as `out =
/// mask ? value : out`, in place.
#[derive(Clone, PartialEq, Debug)]
pub struct Where {
    /// The mask (`condition`), bool or uint8.
    pub condition: Tensor,
    /// Taken where the mask is true (`self`).
    pub x: Operand,
    /// Taken where it is false (`other`).
    pub y: Operand,
    /// The output.
    pub out: Tensor,
}

impl OpSpec for Where {
    fn name(&self) -> &'static str {
        "where"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = vec![OperandUse::read("condition", &self.condition)];
        if let Some(x) = self.x.tensor() {
            v.push(OperandUse::read("self", x));
        }
        if let Some(y) = self.y.tensor() {
            v.push(OperandUse::read("other", y));
        }
        v.push(OperandUse::write("out", &self.out));
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "where";
        dtype_in(op, "condition", &self.condition, &[DType::Bool, DType::U8])?;
        let shape = self.out.shape();
        let mut full = self.condition.shape().to_vec();
        broadcasts_to(op, "condition", &self.condition, shape)?;
        for (role, o) in [("self", &self.x), ("other", &self.y)] {
            if let Some(t) = o.tensor() {
                broadcasts_to(op, role, t, shape)?;
                full = crate::tensor::broadcast_shapes(&full, t.shape()).unwrap_or_default();
            }
        }
        // `out` must be exactly the broadcast shape: no input broadcasts to more than it.
        shape_is(op, "out", &self.out, &full)
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// `out` = `self` with the elements below (`upper`, `triu`) or above (`tril`) diagonal
/// `diagonal` of its last two dimensions set to 0: element `[..., i, j]` is kept when `j - i
/// >= diagonal` (`triu`) or `j - i <= diagonal` (`tril`).
#[derive(Clone, PartialEq, Debug)]
pub struct Triangle {
    /// The input (`self`), at least two dimensions.
    pub x: Tensor,
    /// The diagonal: 0 the main one, positive above it, negative below.
    pub diagonal: i64,
    /// `triu` (keep the upper triangle) or `tril`.
    pub upper: bool,
    /// The output, `self`'s shape and data type (may be `self`: in place).
    pub out: Tensor,
}

impl OpSpec for Triangle {
    fn name(&self) -> &'static str {
        if self.upper {
            "triu"
        } else {
            "tril"
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
        if self.x.rank() < 2 {
            return Err(OpCheckError::Shape {
                op,
                operand: "self",
                shape: self.x.shape().to_vec(),
                rule: "it needs at least two dimensions".to_string(),
            });
        }
        same_dtype(op, "out", &self.out, self.x.dtype(), "self")?;
        shape_is(op, "out", &self.out, self.x.shape())
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// `out[i] = start + i·step` for each element of the one-dimensional `out`: in float64 when
/// `out` is a float (rounded once to it), else in int64 (a float `start` or `step` into an
/// integer `out` is refused).
#[derive(Clone, PartialEq, Debug)]
pub struct Arange {
    /// The first value.
    pub start: Scalar,
    /// The difference between neighbours, not 0.
    pub step: Scalar,
    /// The output, one dimension.
    pub out: Tensor,
}

impl OpSpec for Arange {
    fn name(&self) -> &'static str {
        "arange"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![OperandUse::write("out", &self.out)]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "arange";
        if self.out.rank() != 1 {
            return Err(OpCheckError::Shape {
                op,
                operand: "out",
                shape: self.out.shape().to_vec(),
                rule: "it must have one dimension".to_string(),
            });
        }
        if self.step.as_f64() == 0.0 || !self.step.as_f64().is_finite() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "step",
                reason: format!("is {}; it must be finite and not 0", self.step),
            });
        }
        if !self.start.as_f64().is_finite() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "start",
                reason: format!("is {}; it must be finite", self.start),
            });
        }
        if !self.out.dtype().is_float() {
            dtype_in(
                op,
                "out",
                &self.out,
                &[
                    DType::I8,
                    DType::I16,
                    DType::I32,
                    DType::I64,
                    DType::U8,
                    DType::U16,
                    DType::U32,
                    DType::U64,
                ],
            )?;
            for (name, s) in [("start", self.start), ("step", self.step)] {
                if s.kind() == DTypeKind::Float && s.as_f64().fract() != 0.0 {
                    return Err(OpCheckError::Attribute {
                        op,
                        attribute: name,
                        reason: format!(
                            "is {s}, not an integer; out has data type {}",
                            self.out.dtype()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// The kernel of `out = cat(inputs, dim)` ([`Cat`]).
pub fn cat(inputs: &[Tensor], dim: usize, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Cat(Cat {
        inputs: inputs.to_vec(),
        dim,
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out = condition ? x : y` ([`Where`]); `x` and `y` are tensors or scalars.
pub fn where_(
    condition: &Tensor,
    x: impl Into<Operand>,
    y: impl Into<Operand>,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Where(Where {
        condition: condition.clone(),
        x: x.into(),
        y: y.into(),
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out = triu(x, diagonal)` (`upper`) or `tril` ([`Triangle`]).
pub fn triangle(
    x: &Tensor,
    diagonal: i64,
    upper: bool,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Triangle(Triangle {
        x: x.clone(),
        diagonal,
        upper,
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out[i] = start + i·step` ([`Arange`]).
pub fn arange(
    start: impl Into<Scalar>,
    step: impl Into<Scalar>,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Arange(Arange {
        start: start.into(),
        step: step.into(),
        out: out.clone(),
    })
    .kernel()
}
