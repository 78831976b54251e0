//! The exported aclnn operators of [`AclnnAttentionOperators`]: rotary position embedding
//! and flash attention's forward, each read into braid's tensor operator ([`Rope`],
//! [`Attention`]) and computed by the same implementation braid's Rust API uses.
//!
//! `aclnnFlashAttentionScore` (what torch_npu's `npu_fusion_attention`, and so PyTorch's
//! `scaled_dot_product_attention`, calls):
//! - `inputLayout` `BNSD`, `BSND`, `BSH` or `SBH`: each tensor is seen as `[B, N, S, D]`
//!   without moving it (`H` splits into `headNum` heads of `D`; key/value have `H_kv / D`
//!   heads, which must divide `headNum`);
//! - `attenMaskOptional` (bool or uint8, an element 1 excludes the pair), by `sparseMode`:
//!   0 (`defaultMask`) and 1 (`allMask`): the mask as given (`preTokens` / `nextTokens` are
//!   taken as consistent with it, as CANN requires); 2 (`leftUpCausal`) and 3
//!   (`rightDownCausal`): the causal triangle from the top left or the bottom right, the
//!   mask tensor (CANN's compressed 2048 × 2048 triangle) only saying that the mode is on —
//!   without a mask, CANN computes every pair whatever the mode, and so does this; modes 4
//!   to 8 (band, prefix, varlen) are refused;
//! - `keepProb` below 1 (dropout), a `realShiftOptional` (pse), a `paddingMaskOptional` or
//!   a `dropMaskOptional` are refused by name;
//! - `softmaxMaxOut` / `softmaxSumOut` (float32 `[B, N, Sq, 8]`) receive each row's
//!   maximum and sum of exponentials; `softmaxOutOut` is reserved by CANN: null or empty.
//!
//! [`AclnnAttentionOperators`]: braid_acl_sys::aclnn::AclnnAttentionOperators

use super::exports::{launch, launcher, plan, planner};
use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclIntArray, aclOpExecutor, aclTensor, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
};
use braid_stream_core::ops::{Attention, AttentionMask, Causal, Rope, RopeMode, TensorOp};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::DType;
use std::ffi::{c_char, c_void, CStr};

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

launcher!(aclnnRotaryPositionEmbedding, aclnnFlashAttentionScore);

planner! {
    /// `aclnnRotaryPositionEmbeddingGetWorkspaceSize(x, cos, sin, mode, out, workspaceSize,
    /// executor)`: 4-D tensors of one float type, `cos` and `sin` of one shape broadcast to `x`,
    /// mode 0 (half) or 1 (interleave); CANN's modes 2 (quarter) and 3 (interleave-half) are
    /// refused.
    fn aclnnRotaryPositionEmbeddingGetWorkspaceSize(
        x: *const aclTensor,
        cos: *const aclTensor,
        sin: *const aclTensor,
        mode: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let mode = match mode {
            0 => RopeMode::Half,
            1 => RopeMode::Interleaved,
            other => {
                return Err(invalid(
                    CALL,
                    format!(
                        "mode is {other}; braid-acl-sim computes 0 (half) and 1 (interleave)"
                    ),
                ))
            }
        };
        let x = tensor(o, CALL, "x", x as usize)?;
        let cos = tensor(o, CALL, "cos", cos as usize)?;
        let sin = tensor(o, CALL, "sin", sin as usize)?;
        let out = tensor(o, CALL, "out", out as usize)?;
        if x.rank() != 4 {
            return Err(invalid(
                CALL,
                format!("x has shape {:?}; it must have 4 dimensions", x.shape()),
            ));
        }
        if cos.shape() != sin.shape() {
            return Err(invalid(
                CALL,
                format!(
                    "cos has shape {:?} and sin {:?}; they must be equal",
                    cos.shape(),
                    sin.shape()
                ),
            ));
        }
        let op = Rope {
            x,
            cos,
            sin,
            mode,
            out,
        };
        op_work(CALL, TensorOp::Rope(op), 0)
    }
}

/// Where B, N, S and D are in a layout's dimensions (`None` for `H`, which holds N·D).
struct Layout {
    name: &'static str,
    b: usize,
    s: usize,
    n: Option<usize>,
}

fn layout_of(call: &str, text: &str) -> Result<Layout, Fail> {
    let (b, s, n) = match text {
        "BNSD" => (0, 2, Some(1)),
        "BSND" => (0, 1, Some(2)),
        "BSH" => (0, 1, None),
        "SBH" => (1, 0, None),
        other => {
            return Err(invalid(
                call,
                format!("inputLayout is {other:?}; braid-acl-sim computes BNSD, BSND, BSH and SBH (not TND)"),
            ))
        }
    };
    let name = match text {
        "BNSD" => "BNSD",
        "BSND" => "BSND",
        "BSH" => "BSH",
        _ => "SBH",
    };
    Ok(Layout { name, b, s, n })
}

/// `t` (role `role`, in `layout`) seen as `[B, N, S, D]`, its head dimension `d` when the
/// layout merges heads (`H = N · d`).
fn bnsd(call: &str, role: &str, t: &Tensor, l: &Layout, d: usize) -> Result<Tensor, Fail> {
    let want = if l.n.is_some() { 4 } else { 3 };
    if t.rank() != want {
        return Err(invalid(
            call,
            format!(
                "{role} has shape {:?}; layout {} has {want} dimensions",
                t.shape(),
                l.name
            ),
        ));
    }
    let (shape, strides) = (t.shape(), t.strides());
    let (nd, ns, dd, ds) = match l.n {
        Some(n) => (shape[n], strides[n], shape[3], strides[3]),
        None => {
            let h = shape[2];
            if d == 0 || h % d != 0 {
                return Err(invalid(
                    call,
                    format!(
                        "{role} has shape {:?}: its H of {h} is not a whole number of heads of {d}",
                        shape
                    ),
                ));
            }
            (h / d, d * strides[2], d, strides[2])
        }
    };
    Tensor::strided(
        t.ptr(),
        t.dtype(),
        &[shape[l.b], nd, shape[l.s], dd],
        &[strides[l.b], ns, strides[l.s], ds],
    )
    .map_err(|e| invalid(call, format!("{role}: {e}")))
}

/// The optional tensor behind handle `p` (null: `None`).
fn optional(o: &Objects, call: &str, role: &str, p: usize) -> Result<Option<Tensor>, Fail> {
    (p != 0).then(|| tensor(o, call, role, p)).transpose()
}

/// The scalar attributes of a flash attention call.
struct FlashAttributes {
    scale: f64,
    keep_prob: f64,
    head_num: i64,
    inner_precise: i64,
    sparse_mode: i64,
}

/// The tensors of a flash attention call, as handles.
struct FlashHandles {
    query: usize,
    key: usize,
    value: usize,
    real_shift: usize,
    drop_mask: usize,
    padding_mask: usize,
    atten_mask: usize,
    softmax_max: usize,
    softmax_sum: usize,
    softmax_out: usize,
    attention_out: usize,
}

/// The attention a flash attention call describes.
fn flash_attention(
    call: &str,
    o: &Objects,
    h: &FlashHandles,
    layout: &str,
    a: &FlashAttributes,
) -> Result<(Work, u64), Fail> {
    let l = layout_of(call, layout)?;
    for (role, p) in [
        ("realShiftOptional", h.real_shift),
        ("paddingMaskOptional", h.padding_mask),
        ("dropMaskOptional", h.drop_mask),
    ] {
        if p != 0 {
            return Err(invalid(
                call,
                format!("{role} is given; braid-acl-sim computes flash attention without it"),
            ));
        }
    }
    if a.keep_prob != 1.0 {
        return Err(invalid(
            call,
            format!(
                "keepProb is {}; braid-acl-sim computes flash attention without dropout (keepProb 1), which needs random numbers it does not generate here",
                a.keep_prob
            ),
        ));
    }
    if !(0..=2).contains(&a.inner_precise) {
        return Err(invalid(
            call,
            format!("innerPrecise is {}; CANN takes 0, 1 or 2", a.inner_precise),
        ));
    }
    let (q_raw, out_raw) = (
        tensor(o, call, "query", h.query)?,
        tensor(o, call, "attentionOutOut", h.attention_out)?,
    );
    let (k_raw, v_raw) = (
        tensor(o, call, "key", h.key)?,
        tensor(o, call, "value", h.value)?,
    );
    let heads = usize::try_from(a.head_num)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(call, format!("headNum is {}", a.head_num)))?;
    // The head dimension, for the layouts that merge heads into H.
    let q_last = q_raw.shape().last().copied().unwrap_or(0);
    let d = match l.n {
        Some(_) => q_last,
        None if q_last % heads == 0 => q_last / heads,
        None => {
            return Err(invalid(
                call,
                format!("query's H of {q_last} is not a whole number of headNum {heads} heads"),
            ))
        }
    };
    let q = bnsd(call, "query", &q_raw, &l, d)?;
    if q.shape()[1] != heads {
        return Err(invalid(
            call,
            format!("headNum is {heads}; query has {} heads", q.shape()[1]),
        ));
    }
    let k = bnsd(call, "key", &k_raw, &l, d)?;
    // Value's head dimension: its H over key's heads in the merged layouts.
    let v_d = match l.n {
        Some(_) => 0,
        None => v_raw.shape()[2] / k.shape()[1].max(1),
    };
    let v = bnsd(call, "value", &v_raw, &l, v_d)?;
    let out = bnsd(call, "attentionOutOut", &out_raw, &l, v_d)?;
    let mask = optional(o, call, "attenMaskOptional", h.atten_mask)?;
    if let Some(m) = &mask {
        if !matches!(m.dtype(), DType::Bool | DType::U8) {
            return Err(invalid(
                call,
                format!(
                    "attenMaskOptional has data type {}; CANN takes bool and uint8",
                    m.dtype()
                ),
            ));
        }
    }
    let (mask, causal) = match (a.sparse_mode, mask) {
        (_, None) => (None, Causal::None),
        (0 | 1, Some(m)) => (Some(AttentionMask::Exclude(m)), Causal::None),
        (2, Some(_)) => (None, Causal::TopLeft),
        (3, Some(_)) => (None, Causal::BottomRight),
        (mode, Some(_)) => {
            return Err(invalid(
                call,
                format!(
                    "sparseMode is {mode}; braid-acl-sim computes 0 (defaultMask), 1 (allMask), 2 (leftUpCausal) and 3 (rightDownCausal)"
                ),
            ))
        }
    };
    if let Some(p) = optional(o, call, "softmaxOutOut", h.softmax_out)? {
        if p.numel() != 0 {
            return Err(invalid(
                call,
                format!(
                    "softmaxOutOut has shape {:?}; CANN reserves it: pass null or an empty tensor",
                    p.shape()
                ),
            ));
        }
    }
    let max = tensor(o, call, "softmaxMaxOut", h.softmax_max)?;
    let sum = tensor(o, call, "softmaxSumOut", h.softmax_sum)?;
    let mut op = Attention::new(&q, &k, &v, a.scale, &out)
        .causal(causal)
        .softmax_stats(&max, &sum);
    op.mask = mask;
    tracing::debug!(
        call,
        layout,
        sparse_mode = a.sparse_mode,
        causal = ?causal,
        "flash attention"
    );
    op_work(call, TensorOp::Attention(Box::new(op)), 0)
}

/// `aclnnFlashAttentionScoreGetWorkspaceSize(query, key, value, realShiftOptional,
/// dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, scaleValue,
/// keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode,
/// softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut, workspaceSize, executor)`:
/// the forward of flash attention (see the [module](self) for what braid-acl-sim takes).
///
/// # Safety
/// `input_layout` null or a NUL-terminated string; out pointers null or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn aclnnFlashAttentionScoreGetWorkspaceSize(
    query: *const aclTensor,
    key: *const aclTensor,
    value: *const aclTensor,
    real_shift: *const aclTensor,
    drop_mask: *const aclTensor,
    padding_mask: *const aclTensor,
    atten_mask: *const aclTensor,
    _prefix: *const aclIntArray,
    scale_value: f64,
    keep_prob: f64,
    _pre_tokens: i64,
    _next_tokens: i64,
    head_num: i64,
    input_layout: *mut c_char,
    inner_precise: i64,
    sparse_mode: i64,
    softmax_max_out: *const aclTensor,
    softmax_sum_out: *const aclTensor,
    softmax_out_out: *const aclTensor,
    attention_out_out: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnFlashAttentionScoreGetWorkspaceSize";
    let handles = FlashHandles {
        query: query as usize,
        key: key as usize,
        value: value as usize,
        real_shift: real_shift as usize,
        drop_mask: drop_mask as usize,
        padding_mask: padding_mask as usize,
        atten_mask: atten_mask as usize,
        softmax_max: softmax_max_out as usize,
        softmax_sum: softmax_sum_out as usize,
        softmax_out: softmax_out_out as usize,
        attention_out: attention_out_out as usize,
    };
    let attributes = FlashAttributes {
        scale: scale_value,
        keep_prob,
        head_num,
        inner_precise,
        sparse_mode,
    };
    let layout = (!input_layout.is_null()).then(|| {
        // SAFETY: a NUL-terminated string, per the caller.
        unsafe { CStr::from_ptr(input_layout) }
            .to_string_lossy()
            .into_owned()
    });
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let layout = layout.ok_or_else(|| {
                fail(
                    ACLNN_ERR_PARAM_NULLPTR,
                    format!("{CALL}: inputLayout is null"),
                )
            })?;
            flash_attention(CALL, o, &handles, &layout, &attributes)
        })
    }
}

braid_acl_sys::aclnn_attention_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::attention_operator_fns;)
);
