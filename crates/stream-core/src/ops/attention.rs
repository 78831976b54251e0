//! Scaled dot-product attention ([`Attention`]): `softmax(q·kᵀ·scale + mask)·v` with grouped
//! key/value heads, a causal mode, an explicit mask and a valid key length, in one operator
//! (`aclnnFlashAttentionScore`'s forward).
//!
//! A decode step over a static KV cache keeps the cache's shape: `key` and `value` are the
//! whole cache (`[batch, kv_heads, max_len, head_dim]`) and [`KvLen`] says how many of its
//! positions hold keys. [`KvLen::Static`] is an attribute (a task-group update re-issues the
//! operator with the next step's value); [`KvLen::Tensor`] is read from device memory when
//! the operator runs (a captured graph replays with whatever length a previous operator
//! wrote there). Either way the operator declares the whole cache as read, so the ordering
//! model and the sanitizer see the positions past the valid length as read too: write the
//! next position in stream order with the attention (the same stream, or a wait).

use super::check::{broadcasts_to, dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::DType;
use crate::kernel::{ComputeUnit, Kernel};
use crate::tensor::Tensor;

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const MASK_TYPES: [DType; 3] = [DType::Bool, DType::U8, DType::I8];
const LEN_TYPES: [DType; 2] = [DType::I64, DType::I32];

/// An explicit mask, broadcast to the scores' `[batch, heads, q_len, kv_len]`.
#[derive(Clone, PartialEq, Debug)]
pub enum AttentionMask {
    /// Added to the scaled scores (a float type; `-inf` excludes a pair), as PyTorch's float
    /// `attn_mask`.
    Additive(Tensor),
    /// A non-zero element excludes the pair (bool, uint8 or int8), as CANN's `attenMask`.
    Exclude(Tensor),
    /// A non-zero element keeps the pair, zero excludes it (bool, uint8 or int8), as
    /// PyTorch's bool `attn_mask`.
    Keep(Tensor),
}

impl AttentionMask {
    /// The mask's tensor.
    pub fn tensor(&self) -> &Tensor {
        match self {
            AttentionMask::Additive(t) | AttentionMask::Exclude(t) | AttentionMask::Keep(t) => t,
        }
    }
}

/// Which keys a query position may see by position.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Causal {
    /// Every key.
    None,
    /// Query row `i` sees keys `0..=i` (PyTorch's `is_causal`; CANN's sparse mode 2,
    /// `leftUpCausal`).
    TopLeft,
    /// The queries are the last `q_len` positions of the valid keys: row `i` sees keys
    /// `0..=i + len - q_len`, `len` the valid key length (CANN's sparse mode 3,
    /// `rightDownCausal`). What a prefill or decode step over a KV cache needs; the same as
    /// [`Causal::TopLeft`] when `q_len == len`.
    BottomRight,
}

/// How many key positions are valid, from the first (the rest of a static cache is ignored).
#[derive(Clone, PartialEq, Debug)]
pub enum KvLen {
    /// The same length for every batch, fixed when the operator is made.
    Static(usize),
    /// Read from device memory when the operator runs: an int64 or int32 tensor of one
    /// element (every batch) or one per batch (`[batch]`). A value outside `0..=kv_len` is
    /// a device fault (`braid-kernels`' `ComputeError::IndexOutOfRange`, error 507015 on the simulator).
    Tensor(Tensor),
}

/// `out = softmax(q·kᵀ·scale + mask)·v` per batch and head, in float32 (float16 and bfloat16
/// widened), the row's maximum subtracted before the exponentials, deterministic.
///
/// - `q` is `[batch, heads, q_len, head_dim]`, `k` `[batch, kv_heads, kv_len, head_dim]`, `v`
///   `[batch, kv_heads, kv_len, v_dim]`, `out` `[batch, heads, q_len, v_dim]`, all strided
///   views (a `[batch, seq, heads, dim]` tensor is passed as its `transpose(1, 2)`);
///   `kv_heads` divides `heads` and query head `h` reads key/value head
///   `h / (heads / kv_heads)` (grouped-query and multi-query attention);
/// - keys past the valid length ([`KvLen`]), keys after the causal limit ([`Causal`]) and
///   keys the mask excludes ([`AttentionMask`]) get no weight; a row with no key left writes
///   zeros (and `-inf` / 0 statistics);
/// - `softmax_max` / `softmax_sum` (optional, float32, `[batch, heads, q_len, r]`) receive
///   each row's maximum scaled, masked score and `Σ exp(score - max)`, repeated `r` times
///   (CANN's `softmaxMaxOut` / `softmaxSumOut` are `[B, N, Sq, 8]`).
#[derive(Clone, PartialEq, Debug)]
pub struct Attention {
    /// The queries (`query`).
    pub q: Tensor,
    /// The keys (`key`).
    pub k: Tensor,
    /// The values (`value`).
    pub v: Tensor,
    /// An explicit mask.
    pub mask: Option<AttentionMask>,
    /// The causal mode.
    pub causal: Causal,
    /// The valid key length (every key when `None`).
    pub kv_len: Option<KvLen>,
    /// The scores' factor (usually `1/√head_dim`).
    pub scale: f64,
    /// The output (`attentionOut`).
    pub out: Tensor,
    /// Each row's maximum score (`softmaxMax`).
    pub softmax_max: Option<Tensor>,
    /// Each row's sum of exponentials (`softmaxSum`).
    pub softmax_sum: Option<Tensor>,
}

/// An attention's sizes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AttentionDims {
    /// Batches.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Query positions.
    pub q_len: usize,
    /// Key positions (the cache's length: valid or not).
    pub kv_len: usize,
    /// Query and key head dimension.
    pub head_dim: usize,
    /// Value head dimension.
    pub v_dim: usize,
}

impl Attention {
    /// An attention of `q`, `k`, `v` into `out` with `scale` and nothing else (no mask, not
    /// causal, every key valid, no statistics): set the other fields, then make its kernel
    /// with [`Attention::kernel`].
    pub fn new(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64, out: &Tensor) -> Attention {
        Attention {
            q: q.clone(),
            k: k.clone(),
            v: v.clone(),
            mask: None,
            causal: Causal::None,
            kv_len: None,
            scale,
            out: out.clone(),
            softmax_max: None,
            softmax_sum: None,
        }
    }

    /// With the causal mode `causal`.
    pub fn causal(mut self, causal: Causal) -> Attention {
        self.causal = causal;
        self
    }

    /// With the mask `mask`.
    pub fn mask(mut self, mask: AttentionMask) -> Attention {
        self.mask = Some(mask);
        self
    }

    /// With the valid key length `len`.
    pub fn kv_len(mut self, len: KvLen) -> Attention {
        self.kv_len = Some(len);
        self
    }

    /// Writing each row's softmax maximum and sum into `max` and `sum`.
    pub fn softmax_stats(mut self, max: &Tensor, sum: &Tensor) -> Attention {
        self.softmax_max = Some(max.clone());
        self.softmax_sum = Some(sum.clone());
        self
    }

    /// Checks it and makes the kernel a stream launches.
    pub fn kernel(self) -> Result<Kernel, OpCheckError> {
        TensorOp::Attention(Box::new(self)).kernel()
    }

    /// Its sizes (of operands of rank 4; zeros for a tensor of another rank).
    pub fn dims(&self) -> AttentionDims {
        let dim = |t: &Tensor, i: usize| t.shape().get(i).copied().unwrap_or(0);
        AttentionDims {
            batch: dim(&self.q, 0),
            heads: dim(&self.q, 1),
            kv_heads: dim(&self.k, 1),
            q_len: dim(&self.q, 2),
            kv_len: dim(&self.k, 2),
            head_dim: dim(&self.q, 3),
            v_dim: dim(&self.v, 3),
        }
    }

    /// The shape of the scores, which the mask broadcasts to.
    pub fn scores_shape(&self) -> [usize; 4] {
        let d = self.dims();
        [d.batch, d.heads, d.q_len, d.kv_len]
    }

    fn check_ranks(&self) -> Result<(), OpCheckError> {
        let op = "attention";
        for (role, t) in [
            ("query", &self.q),
            ("key", &self.k),
            ("value", &self.v),
            ("attentionOut", &self.out),
        ] {
            if t.rank() != 4 {
                return Err(OpCheckError::Shape {
                    op,
                    operand: role,
                    shape: t.shape().to_vec(),
                    rule: "it must have 4 dimensions, [batch, heads, seq, head_dim]".to_string(),
                });
            }
        }
        Ok(())
    }

    fn check_shapes(&self) -> Result<(), OpCheckError> {
        let op = "attention";
        let d = self.dims();
        let shape_err = |operand, t: &Tensor, rule: String| OpCheckError::Shape {
            op,
            operand,
            shape: t.shape().to_vec(),
            rule,
        };
        let (k, v) = (self.k.shape(), self.v.shape());
        if k[0] != d.batch || k[3] != d.head_dim {
            return Err(shape_err(
                "key",
                &self.k,
                format!(
                    "its batch and head dimension must be query's {} and {}",
                    d.batch, d.head_dim
                ),
            ));
        }
        if d.kv_heads == 0 || d.heads % d.kv_heads != 0 {
            return Err(shape_err(
                "key",
                &self.k,
                format!(
                    "its {} heads must divide query's {} (grouped-query attention)",
                    d.kv_heads, d.heads
                ),
            ));
        }
        if v[..3] != k[..3] {
            return Err(shape_err(
                "value",
                &self.v,
                format!("its first three dimensions must be key's {:?}", &k[..3]),
            ));
        }
        shape_is(
            op,
            "attentionOut",
            &self.out,
            &[d.batch, d.heads, d.q_len, d.v_dim],
        )?;
        if let Some(mask) = &self.mask {
            broadcasts_to(op, "attenMask", mask.tensor(), &self.scores_shape())?;
        }
        Ok(())
    }

    fn check_kv_len(&self) -> Result<(), OpCheckError> {
        let op = "attention";
        let d = self.dims();
        match &self.kv_len {
            None => Ok(()),
            Some(KvLen::Static(len)) if *len <= d.kv_len => Ok(()),
            Some(KvLen::Static(len)) => Err(OpCheckError::Attribute {
                op,
                attribute: "kv_len",
                reason: format!(
                    "is {len}; key has {} positions (its third dimension)",
                    d.kv_len
                ),
            }),
            Some(KvLen::Tensor(t)) => {
                dtype_in(op, "actualSeqKvLen", t, &LEN_TYPES)?;
                if t.numel() == 1 || t.shape() == [d.batch] {
                    Ok(())
                } else {
                    Err(OpCheckError::Shape {
                        op,
                        operand: "actualSeqKvLen",
                        shape: t.shape().to_vec(),
                        rule: format!("it must hold one length or one per batch ([{}])", d.batch),
                    })
                }
            }
        }
    }

    fn check_stats(&self) -> Result<(), OpCheckError> {
        let op = "attention";
        let d = self.dims();
        match (&self.softmax_max, &self.softmax_sum) {
            (None, None) => Ok(()),
            (Some(max), Some(sum)) => {
                for (role, t) in [("softmaxMax", max), ("softmaxSum", sum)] {
                    dtype_in(op, role, t, &[DType::F32])?;
                    let s = t.shape();
                    if s.len() != 4 || s[..3] != [d.batch, d.heads, d.q_len] || s[3] == 0 {
                        return Err(OpCheckError::Shape {
                            op,
                            operand: role,
                            shape: s.to_vec(),
                            rule: format!(
                                "it must be [{}, {}, {}, r] with r ≥ 1 (CANN's r is 8)",
                                d.batch, d.heads, d.q_len
                            ),
                        });
                    }
                }
                shape_is(op, "softmaxSum", sum, max.shape())
            }
            (Some(_), None) | (None, Some(_)) => Err(OpCheckError::Attribute {
                op,
                attribute: "softmax statistics",
                reason: "need both softmaxMax and softmaxSum, or neither".to_string(),
            }),
        }
    }
}

impl OpSpec for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = vec![
            OperandUse::read("query", &self.q),
            OperandUse::read("key", &self.k),
            OperandUse::read("value", &self.v),
        ];
        if let Some(mask) = &self.mask {
            v.push(OperandUse::read("attenMask", mask.tensor()));
        }
        if let Some(KvLen::Tensor(t)) = &self.kv_len {
            v.push(OperandUse::read("actualSeqKvLen", t));
        }
        v.push(OperandUse::write("attentionOut", &self.out));
        if let (Some(max), Some(sum)) = (&self.softmax_max, &self.softmax_sum) {
            v.push(OperandUse::write("softmaxMax", max));
            v.push(OperandUse::write("softmaxSum", sum));
        }
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "attention";
        dtype_in(op, "query", &self.q, &FLOATS)?;
        same_dtype(op, "key", &self.k, self.q.dtype(), "query")?;
        same_dtype(op, "value", &self.v, self.q.dtype(), "query")?;
        same_dtype(op, "attentionOut", &self.out, self.q.dtype(), "query")?;
        self.check_ranks()?;
        self.check_shapes()?;
        match &self.mask {
            Some(AttentionMask::Additive(m)) => dtype_in(op, "attenMask", m, &FLOATS)?,
            Some(AttentionMask::Exclude(m) | AttentionMask::Keep(m)) => {
                dtype_in(op, "attenMask", m, &MASK_TYPES)?
            }
            None => {}
        }
        self.check_kv_len()?;
        self.check_stats()?;
        if !self.scale.is_finite() {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "scale",
                reason: format!("is {}; it must be finite", self.scale),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        let d = self.dims();
        let rows = (d.batch as u64)
            .saturating_mul(d.heads as u64)
            .saturating_mul(d.q_len as u64)
            .saturating_mul(d.kv_len as u64);
        // Two products, and the scaling, masking, exponential and sum of each score.
        rows.saturating_mul(2 * (d.head_dim + d.v_dim) as u64 + 5)
    }

    fn unit(&self) -> ComputeUnit {
        ComputeUnit::Cube
    }
}

/// The kernel of `out = softmax(q·kᵀ·scale)·v` with a causal mode ([`Attention`]; for a mask,
/// a valid length or the softmax statistics, build an [`Attention`] and call
/// [`Attention::kernel`]).
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    causal: Causal,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    Attention::new(q, k, v, scale, out).causal(causal).kernel()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DevicePtr, DeviceSlice};

    fn t(addr: u64, dtype: DType, shape: &[usize]) -> Tensor {
        let bytes = shape.iter().product::<usize>() as u64 * dtype.size();
        Tensor::new(DeviceSlice::new(DevicePtr(addr), bytes), dtype, shape).unwrap()
    }

    struct Set {
        q: Tensor,
        k: Tensor,
        v: Tensor,
        out: Tensor,
    }

    fn set(dtype: DType) -> Set {
        Set {
            q: t(0x10_0000, dtype, &[2, 8, 3, 16]),
            k: t(0x20_0000, dtype, &[2, 2, 10, 16]),
            v: t(0x30_0000, dtype, &[2, 2, 10, 16]),
            out: t(0x40_0000, dtype, &[2, 8, 3, 16]),
        }
    }

    #[test]
    fn grouped_heads_masks_lengths_and_statistics_are_taken() {
        let s = set(DType::BF16);
        let mask = t(0x50_0000, DType::Bool, &[3, 10]);
        let len = t(0x60_0000, DType::I64, &[2]);
        let max = t(0x70_0000, DType::F32, &[2, 8, 3, 8]);
        let sum = t(0x80_0000, DType::F32, &[2, 8, 3, 8]);
        let op = Attention::new(&s.q, &s.k, &s.v, 0.25, &s.out)
            .causal(Causal::BottomRight)
            .mask(AttentionMask::Exclude(mask))
            .kv_len(KvLen::Tensor(len))
            .softmax_stats(&max, &sum);
        let roles: Vec<&str> = op.operands().iter().map(|o| o.role).collect();
        assert_eq!(
            roles,
            [
                "query",
                "key",
                "value",
                "attenMask",
                "actualSeqKvLen",
                "attentionOut",
                "softmaxMax",
                "softmaxSum"
            ]
        );
        assert_eq!(op.flops(), 2 * 8 * 3 * 10 * (2 * 32 + 5));
        let k = op.kernel().unwrap();
        assert_eq!(k.name(), "attention");
        // A `[batch, seq, heads, dim]` tensor goes in as its transpose.
        let bshd = t(0x10_0000, DType::F32, &[2, 3, 8, 16])
            .transpose(1, 2)
            .unwrap();
        let s = set(DType::F32);
        attention(&bshd, &s.k, &s.v, 0.25, Causal::TopLeft, &s.out).unwrap();
    }

    #[test]
    fn bad_heads_lengths_masks_and_statistics_are_refused_by_name() {
        let s = set(DType::F32);
        let k3 = t(0x20_0000, DType::F32, &[2, 3, 10, 16]);
        let v3 = t(0x30_0000, DType::F32, &[2, 3, 10, 16]);
        let err = attention(&s.q, &k3, &v3, 1.0, Causal::None, &s.out).unwrap_err();
        assert_eq!(err.operand(), "key");
        assert!(err.to_string().contains("divide"), "{err}");
        let short_v = t(0x30_0000, DType::F32, &[2, 2, 9, 16]);
        let err = attention(&s.q, &s.k, &short_v, 1.0, Causal::None, &s.out).unwrap_err();
        assert_eq!(err.operand(), "value");
        let err = Attention::new(&s.q, &s.k, &s.v, 1.0, &s.out)
            .kv_len(KvLen::Static(11))
            .kernel()
            .unwrap_err();
        assert_eq!(err.operand(), "kv_len");
        let err = Attention::new(&s.q, &s.k, &s.v, 1.0, &s.out)
            .kv_len(KvLen::Tensor(t(0x60_0000, DType::I64, &[3])))
            .kernel()
            .unwrap_err();
        assert_eq!(err.operand(), "actualSeqKvLen");
        let err = Attention::new(&s.q, &s.k, &s.v, 1.0, &s.out)
            .mask(AttentionMask::Exclude(t(0x50_0000, DType::F32, &[3, 10])))
            .kernel()
            .unwrap_err();
        assert_eq!(err.operand(), "attenMask");
        let err = Attention::new(&s.q, &s.k, &s.v, 1.0, &s.out)
            .mask(AttentionMask::Additive(t(0x50_0000, DType::F32, &[4, 10])))
            .kernel()
            .unwrap_err();
        assert_eq!(err.operand(), "attenMask");
        let max = t(0x70_0000, DType::F32, &[2, 8, 3, 8]);
        let err = Attention::new(&s.q, &s.k, &s.v, 1.0, &s.out)
            .softmax_stats(&max, &t(0x80_0000, DType::F32, &[2, 8, 2, 8]))
            .kernel()
            .unwrap_err();
        assert_eq!(err.operand(), "softmaxSum");
        let err = Attention::new(&s.q, &s.k, &s.v, f64::NAN, &s.out)
            .kernel()
            .unwrap_err();
        assert_eq!(err.operand(), "scale");
        let inside_k = t(0x20_0040, DType::F32, &[2, 8, 3, 16]);
        let err = attention(&s.q, &s.k, &s.v, 1.0, Causal::None, &inside_k).unwrap_err();
        assert!(matches!(err, OpCheckError::Overlap { .. }), "{err}");
        let q3 = t(0x10_0000, DType::F32, &[2, 8, 3]);
        let err = attention(&q3, &s.k, &s.v, 1.0, Causal::None, &s.out).unwrap_err();
        assert_eq!(err.operand(), "query");
    }
}
