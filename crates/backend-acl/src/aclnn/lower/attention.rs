//! Rotary embedding and attention as CANN's ops-transformer operators.
//!
//! - [`Rope`] → `aclnnRotaryPositionEmbedding(x, cos, sin, mode, out)` (mode 0 half, 1
//!   interleave). CANN takes 4-D tensors: tensors of fewer dimensions get leading ones, and
//!   tables of different shapes are both broadcast to their common shape.
//! - [`Attention`] → `aclnnFlashAttentionScore` in layout `BNSD` (braid's view of any
//!   layout), `headNum` the query heads (CANN divides them among the key/value heads as
//!   braid does), keepProb 1, sparseMode 0 and pre/next tokens 2147483647 (the mask alone
//!   decides). CANN's operator has no valid length, no causal mode without a mask tensor on
//!   the device, no additive or keep-style mask and always writes the softmax statistics;
//!   so:
//!   - a [`KvLen::Static`] length narrows key, value (and the mask's key dimension) to the
//!     valid positions: a decode step re-issued per token (task-group update) plans the
//!     next length; a [`KvLen::Tensor`] length is refused (the operator's lengths are host
//!     arrays);
//!   - a causal mode is honoured where it excludes nothing (a single query row attending
//!     bottom-right, a single valid key), else refused: pass the causal triangle as an
//!     [`AttentionMask::Exclude`] mask;
//!   - an [`AttentionMask::Exclude`] bool or uint8 mask is CANN's `attenMask`, broadcast
//!     to `[B, N, Sq, Skv]`; additive and keep-style masks are refused;
//!   - the operator must carry `softmax_max` / `softmax_sum` of `[B, N, Sq, 8]`.

use super::{missing, prepared};
use crate::aclnn::kernels::{AclPrepared, Held};
use crate::aclnn::objects::{Executor, Tensor};
use crate::aclnn::AclnnApi;
use braid_stream_core::hal::HalError;
use braid_stream_core::ops::{Attention, AttentionMask, Causal, KvLen, Rope};
use braid_stream_core::tensor::{broadcast_shapes, Tensor as View};
use braid_stream_core::DType;
use std::ffi::{c_char, CString};

fn unsupported(why: impl Into<String>) -> HalError {
    HalError::UnsupportedOperator(why.into())
}

/// `t` with leading dimensions of 1 up to 4 dimensions.
fn four_d(t: &View, role: &str) -> Result<View, HalError> {
    if t.rank() > 4 {
        return Err(unsupported(format!(
            "aclnnRotaryPositionEmbedding takes 4-D tensors; {role} has shape {:?}",
            t.shape()
        )));
    }
    let mut v = t.clone();
    while v.rank() < 4 {
        v = v
            .unsqueeze(0)
            .map_err(|e| HalError::InvalidArgument(e.to_string()))?;
    }
    Ok(v)
}

/// [`Rope`] as `aclnnRotaryPositionEmbedding`.
pub(super) fn rope(api: &'static AclnnApi, r: &Rope) -> Result<AclPrepared, HalError> {
    let (x, out) = (four_d(&r.x, "x")?, four_d(&r.out, "out")?);
    let (mut cos, mut sin) = (four_d(&r.cos, "cos")?, four_d(&r.sin, "sin")?);
    if cos.shape() != sin.shape() {
        let common = broadcast_shapes(cos.shape(), sin.shape())
            .ok_or_else(|| HalError::InvalidArgument("cos and sin do not broadcast".into()))?;
        let to = |t: &View| {
            t.broadcast_to(&common)
                .map_err(|e| HalError::InvalidArgument(e.to_string()))
        };
        (cos, sin) = (to(&cos)?, to(&sin)?);
    }
    let view = |t: &View| Tensor::view(api, t).map_err(HalError::from);
    let (x, cos, sin, out) = (view(&x)?, view(&cos)?, view(&sin)?, view(&out)?);
    plan!(
        api,
        attention_operators,
        aclnnRotaryPositionEmbeddingGetWorkspaceSize,
        aclnnRotaryPositionEmbedding,
        (
            x.as_ptr(),
            cos.as_ptr(),
            sin.as_ptr(),
            r.mode.cann_mode(),
            out.as_ptr()
        ),
        [x, cos, sin, out]
    )
}

/// Whether `causal` excludes no valid key of any query row.
fn causal_excludes_nothing(causal: Causal, q_len: usize, len: usize) -> bool {
    match causal {
        Causal::None => true,
        Causal::TopLeft => len <= 1,
        Causal::BottomRight => q_len <= 1,
    }
}

/// What CANN's `aclnnFlashAttentionScore` takes of `a`: key, value and mask narrowed to the
/// valid length, the mask broadcast to the scores' shape.
struct FlashOperands {
    k: View,
    v: View,
    mask: Option<View>,
    max: View,
    sum: View,
}

fn flash_operands(a: &Attention) -> Result<FlashOperands, HalError> {
    const CALL: &str = "aclnnFlashAttentionScore";
    let d = a.dims();
    let len = match &a.kv_len {
        None => d.kv_len,
        Some(KvLen::Static(n)) => *n,
        Some(KvLen::Tensor(_)) => {
            return Err(unsupported(format!(
                "attention with a valid length read from device memory: {CALL} takes lengths only as host arrays; give a static length (KvLen::Static) and re-issue the operator per step (a task-group update)"
            )))
        }
    };
    if !causal_excludes_nothing(a.causal, d.q_len, len) {
        return Err(unsupported(format!(
            "attention with the causal mode {:?} over {} query rows and {len} keys: {CALL} applies a causal mode only through an attenMask tensor on the device; pass the triangle as an AttentionMask::Exclude mask",
            a.causal, d.q_len
        )));
    }
    let narrow = |t: &View, dim: usize| {
        t.narrow(dim, 0, len)
            .map_err(|e| HalError::InvalidArgument(e.to_string()))
    };
    let (k, v) = (narrow(&a.k, 2)?, narrow(&a.v, 2)?);
    let mask = match &a.mask {
        None => None,
        Some(AttentionMask::Exclude(m)) if matches!(m.dtype(), DType::Bool | DType::U8) => {
            let full = m
                .broadcast_to(&a.scores_shape())
                .map_err(|e| HalError::InvalidArgument(e.to_string()))?;
            Some(narrow(&full, 3)?)
        }
        Some(AttentionMask::Exclude(m)) => {
            return Err(unsupported(format!(
                "{CALL}'s attenMask is bool or uint8, the mask is {}",
                m.dtype()
            )))
        }
        Some(AttentionMask::Additive(_)) => {
            return Err(unsupported(format!(
                "attention with an additive mask: {CALL} adds its realShift before the scale, not after; pass a bool AttentionMask::Exclude mask"
            )))
        }
        Some(AttentionMask::Keep(_)) => {
            return Err(unsupported(format!(
                "attention with a keep-style mask: {CALL}'s attenMask excludes where it is set; pass its negation as an AttentionMask::Exclude mask"
            )))
        }
    };
    let (max, sum) = match (&a.softmax_max, &a.softmax_sum) {
        (Some(max), Some(sum)) if max.shape()[3] == 8 => (max.clone(), sum.clone()),
        _ => {
            return Err(unsupported(format!(
                "attention without softmax statistics of [B, N, Sq, 8]: {CALL} always writes softmaxMax and softmaxSum; give the operator both (Attention::softmax_stats)"
            )))
        }
    };
    Ok(FlashOperands {
        k,
        v,
        mask,
        max,
        sum,
    })
}

/// [`Attention`] as `aclnnFlashAttentionScore`.
pub(super) fn attention(api: &'static AclnnApi, a: &Attention) -> Result<AclPrepared, HalError> {
    let f = flash_operands(a)?;
    let view = |t: &View| Tensor::view(api, t).map_err(HalError::from);
    let (q, k, v, out) = (view(&a.q)?, view(&f.k)?, view(&f.v)?, view(&a.out)?);
    let (max, sum) = (view(&f.max)?, view(&f.sum)?);
    let mask = f.mask.as_ref().map(view).transpose()?;
    let mask_ptr = mask
        .as_ref()
        .map_or(std::ptr::null(), |m| m.as_ptr().cast_const());
    let layout = CString::new("BNSD").map_err(|e| HalError::InvalidArgument(e.to_string()))?;
    let heads = a.dims().heads as i64;
    // No band: the mask alone decides (sparse mode 0).
    const NO_BAND: i64 = 2_147_483_647;
    let null = std::ptr::null();
    plan!(
        api,
        attention_operators,
        aclnnFlashAttentionScoreGetWorkspaceSize,
        aclnnFlashAttentionScore,
        (
            q.as_ptr(),
            k.as_ptr(),
            v.as_ptr(),
            null,
            null,
            null,
            mask_ptr,
            std::ptr::null(),
            a.scale,
            1.0,
            NO_BAND,
            NO_BAND,
            heads,
            layout.as_ptr() as *mut c_char,
            0,
            0,
            max.as_ptr(),
            sum.as_ptr(),
            null,
            out.as_ptr()
        ),
        [q, k, v, out, max, sum, mask, layout]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_causal_mode_is_vacuous_only_where_every_row_sees_every_valid_key() {
        assert!(causal_excludes_nothing(Causal::BottomRight, 1, 7));
        assert!(!causal_excludes_nothing(Causal::BottomRight, 2, 7));
        assert!(causal_excludes_nothing(Causal::TopLeft, 5, 1));
        assert!(!causal_excludes_nothing(Causal::TopLeft, 1, 2));
        assert!(causal_excludes_nothing(Causal::None, 9, 9));
    }
}
