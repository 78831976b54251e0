//! Normalisations: [`RmsNorm`].

use super::check::{dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::Kernel;
use crate::tensor::Tensor;

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// `y = x / √(mean(x²) + eps) · gamma` over the trailing dimensions `gamma` has
/// (`aclnnRmsNorm`); `rstd` (float32) receives `1/√(mean(x²) + eps)` per row, with the
/// normalised dimensions kept as 1 (as `aclnnRmsNorm`, which always writes it). Computed in
/// float32.
#[derive(Clone, PartialEq, Debug)]
pub struct RmsNorm {
    /// The input (`x`).
    pub x: Tensor,
    /// The scale (`gamma`): the trailing dimensions of `x`.
    pub gamma: Tensor,
    /// Added to the mean square.
    pub eps: f64,
    /// The output (`yOut`), `x`'s shape.
    pub y: Tensor,
    /// The reciprocal root mean square per row (`rstdOut`).
    pub rstd: Tensor,
}

impl RmsNorm {
    /// The shape `rstd` has: `x`'s with the normalised dimensions kept as 1.
    pub fn rstd_shape(&self) -> Vec<usize> {
        let mut shape = self.x.shape().to_vec();
        let keep = shape.len().saturating_sub(self.gamma.rank());
        shape[keep..].fill(1);
        shape
    }

    /// `(rows, cols)`: how many rows are normalised and over how many elements each.
    pub fn rows_cols(&self) -> (usize, usize) {
        let cols = self.gamma.numel().max(1);
        (self.x.numel() / cols, cols)
    }
}

impl OpSpec for RmsNorm {
    fn name(&self) -> &'static str {
        "rms_norm"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("x", &self.x),
            OperandUse::read("gamma", &self.gamma),
            OperandUse::write("yOut", &self.y),
            OperandUse::write("rstdOut", &self.rstd),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "rms_norm";
        dtype_in(op, "x", &self.x, &FLOATS)?;
        same_dtype(op, "gamma", &self.gamma, self.x.dtype(), "x")?;
        same_dtype(op, "yOut", &self.y, self.x.dtype(), "x")?;
        let (x, g) = (self.x.shape(), self.gamma.shape());
        if g.is_empty() || g.len() > x.len() || x[x.len() - g.len()..] != *g {
            return Err(OpCheckError::Shape {
                op,
                operand: "gamma",
                shape: g.to_vec(),
                rule: format!("it must be the trailing dimensions of x's {x:?}"),
            });
        }
        shape_is(op, "yOut", &self.y, x)?;
        dtype_in(op, "rstdOut", &self.rstd, &[DType::F32])?;
        shape_is(op, "rstdOut", &self.rstd, &self.rstd_shape())?;
        if !(self.eps >= 0.0 && self.eps.is_finite()) {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "epsilon",
                reason: format!("is {}; it must be finite and not negative", self.eps),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        4 * self.x.numel() as u64
    }
}

/// The kernel of `y = rms_norm(x) · gamma` with `rstd` per row ([`RmsNorm`]).
pub fn rms_norm(
    x: &Tensor,
    gamma: &Tensor,
    eps: f64,
    y: &Tensor,
    rstd: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::RmsNorm(RmsNorm {
        x: x.clone(),
        gamma: gamma.clone(),
        eps,
        y: y.clone(),
        rstd: rstd.clone(),
    })
    .kernel()
}
