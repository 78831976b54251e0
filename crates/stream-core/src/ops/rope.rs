//! Rotary position embedding ([`Rope`]): `aclnnRotaryPositionEmbedding`.

use super::check::{broadcasts_to, dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::Kernel;
use crate::tensor::Tensor;

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Which elements of the head dimension rotate together (CANN's `mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RopeMode {
    /// The two halves pair up (Llama, Qwen2, GPT-NeoX; `rotate_half`): element `i` of the
    /// first half with element `i` of the second, `rot = cat(-x2, x1)`. CANN's mode 0.
    Half,
    /// Neighbours pair up (GPT-J): elements `2i` and `2i + 1`, `rot[2i] = -x[2i + 1]`,
    /// `rot[2i + 1] = x[2i]`. CANN's mode 1.
    Interleaved,
}

impl RopeMode {
    /// CANN's `mode` value of it (`aclnnRotaryPositionEmbedding`).
    pub fn cann_mode(self) -> i64 {
        match self {
            RopeMode::Half => 0,
            RopeMode::Interleaved => 1,
        }
    }
}

/// `out = x · cos + rot(x) · sin` over the last (head) dimension, `rot` pairing elements as
/// [`RopeMode`] says; `cos` and `sin` (the tables at each position, as long as the head
/// dimension) broadcast to `x`. `x` may be `[batch, seq, heads, head_dim]` or `[batch, heads,
/// seq, head_dim]`, or any strided view: the rotation only needs the last dimension, the
/// tables' broadcast places the positions. `out` may be `x` itself (in place). Computed in
/// float32, rounded once when stored.
///
/// CANN (`aclnnRotaryPositionEmbedding(x, cos, sin, mode, out)`, ops-transformer
/// `posembedding/rotary_position_embedding`): x, cos, sin and out 4-D, the same float type;
/// mode 0 half, 1 interleave; the head dimension even and below 896.
#[derive(Clone, PartialEq, Debug)]
pub struct Rope {
    /// The input (`x`).
    pub x: Tensor,
    /// The cosines, broadcast to `x`.
    pub cos: Tensor,
    /// The sines, broadcast to `x`.
    pub sin: Tensor,
    /// How elements pair up.
    pub mode: RopeMode,
    /// The output, `x`'s shape (`x` itself for an update in place).
    pub out: Tensor,
}

impl OpSpec for Rope {
    fn name(&self) -> &'static str {
        "rope"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("x", &self.x),
            OperandUse::read("cos", &self.cos),
            OperandUse::read("sin", &self.sin),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "rope";
        dtype_in(op, "x", &self.x, &FLOATS)?;
        same_dtype(op, "cos", &self.cos, self.x.dtype(), "x")?;
        same_dtype(op, "sin", &self.sin, self.x.dtype(), "x")?;
        same_dtype(op, "out", &self.out, self.x.dtype(), "x")?;
        let shape = self.x.shape();
        match shape.last() {
            Some(&d) if d % 2 == 0 => {}
            _ => {
                return Err(OpCheckError::Shape {
                    op,
                    operand: "x",
                    shape: shape.to_vec(),
                    rule: "its last (head) dimension must be even: elements rotate in pairs"
                        .to_string(),
                })
            }
        }
        broadcasts_to(op, "cos", &self.cos, shape)?;
        broadcasts_to(op, "sin", &self.sin, shape)?;
        shape_is(op, "out", &self.out, shape)
    }

    fn flops(&self) -> u64 {
        3 * self.x.numel() as u64
    }
}

/// The kernel of `out = x · cos + rot(x) · sin` ([`Rope`]).
pub fn rope(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    mode: RopeMode,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Rope(Rope {
        x: x.clone(),
        cos: cos.clone(),
        sin: sin.clone(),
        mode,
        out: out.clone(),
    })
    .kernel()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DevicePtr, DeviceSlice};

    fn t(addr: u64, dtype: DType, shape: &[usize]) -> Tensor {
        let bytes = shape.iter().product::<usize>() as u64 * dtype.size();
        Tensor::new(DeviceSlice::new(DevicePtr(addr), bytes), dtype, shape).unwrap()
    }

    #[test]
    fn rope_takes_broadcast_tables_and_runs_in_place() {
        let x = t(0x10000, DType::F16, &[2, 5, 4, 8]);
        let cos = t(0x20000, DType::F16, &[5, 1, 8]);
        let sin = t(0x30000, DType::F16, &[1, 5, 1, 8]);
        let k = rope(&x, &cos, &sin, RopeMode::Half, &x).unwrap();
        assert_eq!(k.name(), "rope");
        assert_eq!(RopeMode::Interleaved.cann_mode(), 1);
    }

    #[test]
    fn rope_refuses_odd_heads_tables_that_do_not_broadcast_and_mixed_types() {
        let x = t(0x10000, DType::F32, &[1, 3, 2, 7]);
        let tab = t(0x20000, DType::F32, &[3, 1, 7]);
        let err = rope(
            &x,
            &tab,
            &tab,
            RopeMode::Half,
            &t(0x40000, DType::F32, &[1, 3, 2, 7]),
        )
        .unwrap_err();
        assert_eq!(err.operand(), "x");
        assert!(err.to_string().contains("even"), "{err}");
        let x = t(0x10000, DType::F32, &[1, 3, 2, 8]);
        let out = t(0x40000, DType::F32, &[1, 3, 2, 8]);
        let bad = t(0x20000, DType::F32, &[4, 1, 8]);
        let ok = t(0x30000, DType::F32, &[3, 1, 8]);
        assert_eq!(
            rope(&x, &bad, &ok, RopeMode::Half, &out)
                .unwrap_err()
                .operand(),
            "cos"
        );
        let half = t(0x30000, DType::F16, &[3, 1, 8]);
        assert_eq!(
            rope(&x, &ok, &half, RopeMode::Half, &out)
                .unwrap_err()
                .operand(),
            "sin"
        );
        let short = t(0x40000, DType::F32, &[1, 3, 2, 4]);
        assert_eq!(
            rope(&x, &ok, &ok, RopeMode::Half, &short)
                .unwrap_err()
                .operand(),
            "out"
        );
    }
}
