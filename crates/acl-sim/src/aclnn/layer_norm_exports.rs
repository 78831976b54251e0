//! The exported `aclnnLayerNorm`, as braid's `LayerNorm` operator.

use super::exports::{launch, launcher, plan};
use super::{op_work, tensor, Objects};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclIntArray, aclOpExecutor, aclTensor, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{LayerNorm, TensorOp};
use braid_stream_core::tensor::Tensor;
use std::ffi::c_void;

launcher!(aclnnLayerNorm);

/// The optional tensor `h` (null: none).
fn optional(o: &Objects, call: &str, role: &str, h: usize) -> Result<Option<Tensor>, Fail> {
    (h != 0).then(|| tensor(o, call, role, h)).transpose()
}

/// `aclnnLayerNormGetWorkspaceSize(input, normalizedShape, weightOptional, biasOptional, eps,
/// out, meanOutOptional, rstdOutOptional, workspaceSize, executor)`: LayerNorm over the
/// trailing dimensions `normalizedShape` names (which must be `input`'s); the weight, the
/// bias and the statistics outputs may be null.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn aclnnLayerNormGetWorkspaceSize(
    input: *const aclTensor,
    normalized_shape: *const aclIntArray,
    weight: *const aclTensor,
    bias: *const aclTensor,
    eps: f64,
    out: *mut aclTensor,
    mean_out: *mut aclTensor,
    rstd_out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnLayerNormGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let x = tensor(o, CALL, "input", input as usize)?;
            let shape = o
                .int_array(CALL, "normalizedShape", normalized_shape as usize)?
                .clone();
            let trailing = x
                .shape()
                .len()
                .checked_sub(shape.len())
                .map(|lead| &x.shape()[lead..]);
            let names_trailing = trailing.is_some_and(|t| {
                !shape.is_empty() && t.iter().zip(&shape).all(|(&d, &s)| d as i64 == s)
            });
            if !names_trailing {
                return Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!(
                        "{CALL}: normalizedShape {shape:?} is not the trailing dimensions of input's {:?}",
                        x.shape()
                    ),
                ));
            }
            let op = LayerNorm {
                normalized: shape.len(),
                weight: optional(o, CALL, "weightOptional", weight as usize)?,
                bias: optional(o, CALL, "biasOptional", bias as usize)?,
                eps,
                out: tensor(o, CALL, "out", out as usize)?,
                mean: optional(o, CALL, "meanOutOptional", mean_out as usize)?,
                rstd: optional(o, CALL, "rstdOutOptional", rstd_out as usize)?,
                x,
            };
            op_work(CALL, TensorOp::LayerNorm(op), 0)
        })
    }
}
