//! Normalisations: [`RmsNorm`] and [`LayerNorm`].

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

/// `out = (x - mean) / √(var + eps) · weight + bias` over the trailing `normalized`
/// dimensions of `x` (`aclnnLayerNorm`, `nn.LayerNorm`): the mean and the biased variance of
/// each row are accumulated in float64 from float32 elements, the result computed in float32
/// and rounded once. `weight` and `bias` (optional) have the normalised dimensions' shape;
/// `mean` and `rstd` (optional, any float type) receive each row's mean and `1/√(var + eps)`:
/// `x`'s shape with the normalised dimensions kept as 1 (as CANN declares them), or that many
/// contiguous values.
#[derive(Clone, PartialEq, Debug)]
pub struct LayerNorm {
    /// The input (`input`).
    pub x: Tensor,
    /// How many trailing dimensions are normalised (the length of `normalizedShape`), at
    /// least 1.
    pub normalized: usize,
    /// The scale (`weightOptional`).
    pub weight: Option<Tensor>,
    /// The shift (`biasOptional`).
    pub bias: Option<Tensor>,
    /// Added to the variance.
    pub eps: f64,
    /// The output, `x`'s shape and data type.
    pub out: Tensor,
    /// Each row's mean (`meanOutOptional`).
    pub mean: Option<Tensor>,
    /// Each row's reciprocal standard deviation (`rstdOutOptional`).
    pub rstd: Option<Tensor>,
}

impl LayerNorm {
    /// `(rows, cols)`: how many rows are normalised and over how many elements each.
    pub fn rows_cols(&self) -> (usize, usize) {
        let lead = self.x.rank().saturating_sub(self.normalized);
        let rows = self.x.shape()[..lead].iter().product();
        (rows, self.x.shape()[lead..].iter().product())
    }

    /// The shape of `mean` and `rstd`: `x`'s with the normalised dimensions kept as 1.
    pub fn stat_shape(&self) -> Vec<usize> {
        let mut shape = self.x.shape().to_vec();
        let lead = shape.len().saturating_sub(self.normalized);
        shape[lead..].fill(1);
        shape
    }
}

impl OpSpec for LayerNorm {
    fn name(&self) -> &'static str {
        "layer_norm"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = vec![OperandUse::read("input", &self.x)];
        if let Some(w) = &self.weight {
            v.push(OperandUse::read("weightOptional", w));
        }
        if let Some(b) = &self.bias {
            v.push(OperandUse::read("biasOptional", b));
        }
        v.push(OperandUse::write("out", &self.out));
        if let Some(m) = &self.mean {
            v.push(OperandUse::write("meanOutOptional", m));
        }
        if let Some(r) = &self.rstd {
            v.push(OperandUse::write("rstdOutOptional", r));
        }
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "layer_norm";
        let floats = [DType::F32, DType::F16, DType::BF16, DType::F64];
        dtype_in(op, "input", &self.x, &floats)?;
        if self.normalized == 0 || self.normalized > self.x.rank() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "normalizedShape",
                reason: format!(
                    "has {} dimensions for input of shape {:?}; it needs 1 to {}",
                    self.normalized,
                    self.x.shape(),
                    self.x.rank()
                ),
            });
        }
        let norm_shape = &self.x.shape()[self.x.rank() - self.normalized..];
        for (role, t) in [
            ("weightOptional", &self.weight),
            ("biasOptional", &self.bias),
        ] {
            if let Some(t) = t {
                dtype_in(op, role, t, &floats)?;
                shape_is(op, role, t, norm_shape)?;
            }
        }
        same_dtype(op, "out", &self.out, self.x.dtype(), "input")?;
        shape_is(op, "out", &self.out, self.x.shape())?;
        let (rows, _) = self.rows_cols();
        for (role, t) in [
            ("meanOutOptional", &self.mean),
            ("rstdOutOptional", &self.rstd),
        ] {
            if let Some(t) = t {
                dtype_in(op, role, t, &floats)?;
                if t.shape() != self.stat_shape() && !(t.is_contiguous() && t.numel() == rows) {
                    return Err(OpCheckError::Shape {
                        op,
                        operand: role,
                        shape: t.shape().to_vec(),
                        rule: format!(
                            "it needs one value per normalised row: {:?}, or {rows} contiguous values",
                            self.stat_shape()
                        ),
                    });
                }
            }
        }
        if !(self.eps >= 0.0 && self.eps.is_finite()) {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "eps",
                reason: format!("is {}; it must be finite and not negative", self.eps),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        6 * self.x.numel() as u64
    }
}

/// The kernel of `out = layer_norm(x) · weight + bias` over the trailing `normalized`
/// dimensions ([`LayerNorm`], without the mean and rstd outputs).
pub fn layer_norm(
    x: &Tensor,
    normalized: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::LayerNorm(LayerNorm {
        x: x.clone(),
        normalized,
        weight: weight.cloned(),
        bias: bias.cloned(),
        eps,
        out: out.clone(),
        mean: None,
        rstd: None,
    })
    .kernel()
}
