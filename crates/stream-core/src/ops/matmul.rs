//! The matrix product family ([`Matmul`]): `aclnnMm`, `aclnnBatchMatMul`, `aclnnMatmul`,
//! `aclnnAddmm` and a linear layer's `x · Wᵀ + b`, in one declaration.

use super::check::{broadcasts_to, dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::{ComputeUnit, Kernel};
use crate::tensor::{broadcast_shapes, Tensor};

/// `out = beta·bias + alpha·(self × mat2)` over the last two dimensions, the leading (batch)
/// dimensions broadcast: `self` is `[..., m, k]`, `mat2` `[..., k, n]`, `out`
/// `[...broadcast batch, m, n]`, `bias` (optional) broadcasts to `out`. Any operand may be a
/// strided view: a transposed weight (`W.t()`, as `nn.Linear` passes it) is read in place.
///
/// Products accumulate in float32 whatever the operands' type (float64 in float64), as the
/// cube units do, and are rounded once to `out`'s type.
#[derive(Clone, PartialEq, Debug)]
pub struct Matmul {
    /// The left operand (`self`, `mat1`).
    pub a: Tensor,
    /// The right operand (`mat2`).
    pub b: Tensor,
    /// Added to the product, broadcast (`Addmm`'s `self`, a linear layer's bias).
    pub bias: Option<Tensor>,
    /// The output.
    pub out: Tensor,
    /// The product's factor.
    pub alpha: f64,
    /// The bias's factor.
    pub beta: f64,
}

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

impl Matmul {
    /// `(batch, m, k, n)`: the batch dimensions' shape and the matrix sizes.
    pub fn dims(&self) -> (Vec<usize>, usize, usize, usize) {
        let (a, b) = (self.a.shape(), self.b.shape());
        let (m, k) = (a[a.len() - 2], a[a.len() - 1]);
        let n = b[b.len() - 1];
        let batch = broadcast_shapes(&a[..a.len() - 2], &b[..b.len() - 2]).unwrap_or_default();
        (batch, m, k, n)
    }
}

impl OpSpec for Matmul {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = vec![
            OperandUse::read("self", &self.a),
            OperandUse::read("mat2", &self.b),
        ];
        if let Some(bias) = &self.bias {
            v.push(OperandUse::read("bias", bias));
        }
        v.push(OperandUse::write("out", &self.out));
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "matmul";
        let (a, b) = (self.a.shape(), self.b.shape());
        for (role, t) in [("self", &self.a), ("mat2", &self.b)] {
            if t.rank() < 2 {
                return Err(OpCheckError::Shape {
                    op,
                    operand: role,
                    shape: t.shape().to_vec(),
                    rule: "a matrix product needs at least two dimensions".to_string(),
                });
            }
        }
        dtype_in(op, "self", &self.a, &FLOATS)?;
        same_dtype(op, "mat2", &self.b, self.a.dtype(), "self")?;
        same_dtype(op, "out", &self.out, self.a.dtype(), "self")?;
        let k = a[a.len() - 1];
        if b[b.len() - 2] != k {
            return Err(OpCheckError::Shape {
                op,
                operand: "mat2",
                shape: b.to_vec(),
                rule: format!("its rows must be self's {k} columns (self has shape {a:?})"),
            });
        }
        let batch = broadcast_shapes(&a[..a.len() - 2], &b[..b.len() - 2]).ok_or_else(|| {
            OpCheckError::Shape {
                op,
                operand: "mat2",
                shape: b.to_vec(),
                rule: format!("its batch dimensions do not broadcast with self's {a:?}"),
            }
        })?;
        let mut shape = batch;
        shape.extend([a[a.len() - 2], b[b.len() - 1]]);
        shape_is(op, "out", &self.out, &shape)?;
        if let Some(bias) = &self.bias {
            same_dtype(op, "bias", bias, self.a.dtype(), "self")?;
            broadcasts_to(op, "bias", bias, &shape)?;
        }
        for (name, v) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !v.is_finite() {
                return Err(OpCheckError::Attribute {
                    op,
                    attribute: name,
                    reason: format!("is {v}; it must be finite"),
                });
            }
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        let (batch, m, k, n) = self.dims();
        let batches: u64 = batch.iter().map(|&d| d as u64).product();
        2u64.saturating_mul(batches)
            .saturating_mul(m as u64)
            .saturating_mul(k as u64)
            .saturating_mul(n as u64)
    }

    fn unit(&self) -> ComputeUnit {
        ComputeUnit::Cube
    }
}

/// The kernel of `out = a × b` ([`Matmul`], batched and broadcast).
pub fn matmul(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Matmul(Matmul {
        a: a.clone(),
        b: b.clone(),
        bias: None,
        out: out.clone(),
        alpha: 1.0,
        beta: 1.0,
    })
    .kernel()
}

/// The kernel of `out = a × b + bias` ([`Matmul`]; `bias` broadcast, as a linear layer's).
pub fn matmul_bias(
    a: &Tensor,
    b: &Tensor,
    bias: &Tensor,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Matmul(Matmul {
        a: a.clone(),
        b: b.clone(),
        bias: Some(bias.clone()),
        out: out.clone(),
        alpha: 1.0,
        beta: 1.0,
    })
    .kernel()
}
