//! The exported operators that build tensors by position: `aclnnCat` (its inputs an
//! `aclTensorList`), `aclnnSWhere`, the triangles (`aclnnTriu`, `aclnnTril` and their
//! in-place forms) and `aclnnArange`, each as braid's `Cat`, `Where`, `Triangle` or `Arange`.

use super::exports::{launch, launcher, plan, planner};
use super::ops::dims_of;
use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclOpExecutor, aclScalar, aclTensor, aclTensorList, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{Arange, Cat, Operand, TensorOp, Triangle, Where};
use std::ffi::c_void;

launcher!(
    aclnnCat,
    aclnnSWhere,
    aclnnInplaceMaskedFillScalar,
    aclnnInplaceMaskedFillTensor,
    aclnnTriu,
    aclnnInplaceTriu,
    aclnnTril,
    aclnnInplaceTril,
    aclnnArange
);

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

planner! {
    /// `aclnnCatGetWorkspaceSize(tensors, dim, out, workspaceSize, executor)`: the tensors one
    /// after another along `dim` (negative: from the end), converted to `out`'s type; a
    /// one-dimensional empty tensor in the list is skipped (as CANN and PyTorch do).
    fn aclnnCatGetWorkspaceSize(
        tensors: *const aclTensorList,
        dim: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let inputs: Vec<_> = o
            .tensor_list(CALL, "tensors", tensors as usize)?
            .into_iter()
            .filter(|t| !(t.rank() == 1 && t.numel() == 0))
            .collect();
        let out = tensor(o, CALL, "out", out as usize)?;
        let dim = dims_of(CALL, &[dim], out.rank())?[0];
        if inputs.is_empty() {
            return Err(invalid(
                CALL,
                "tensors holds no tensor but empty ones".to_string(),
            ));
        }
        op_work(CALL, TensorOp::Cat(Cat { inputs, dim, out }), 0)
    }

    /// `aclnnSWhereGetWorkspaceSize(condition, self, other, out, workspaceSize, executor)`:
    /// `out = condition ? self : other`, broadcast.
    fn aclnnSWhereGetWorkspaceSize(
        condition: *const aclTensor,
        self_: *const aclTensor,
        other: *const aclTensor,
        out: *mut aclTensor,
    ) |CALL, o| {
        let op = Where {
            condition: tensor(o, CALL, "condition", condition as usize)?,
            x: Operand::Tensor(tensor(o, CALL, "self", self_ as usize)?),
            y: Operand::Tensor(tensor(o, CALL, "other", other as usize)?),
            out: tensor(o, CALL, "out", out as usize)?,
        };
        op_work(CALL, TensorOp::Where(op), 0)
    }
}

/// `selfRef = mask ? value : selfRef`, `mask` broadcast to `selfRef`.
fn masked_fill(
    call: &str,
    o: &Objects,
    (self_ref, mask): (usize, usize),
    value: Operand,
) -> Result<(Work, u64), Fail> {
    let out = tensor(o, call, "selfRef", self_ref)?;
    let op = Where {
        condition: tensor(o, call, "mask", mask)?,
        x: value,
        y: Operand::Tensor(out.clone()),
        out,
    };
    op_work(call, TensorOp::Where(op), 0)
}

/// `aclnnInplaceMaskedFillScalarGetWorkspaceSize(selfRef, mask, value, workspaceSize,
/// executor)`: `selfRef = mask ? value : selfRef`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceMaskedFillScalarGetWorkspaceSize(
    self_ref: *mut aclTensor,
    mask: *const aclTensor,
    value: *const aclScalar,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceMaskedFillScalarGetWorkspaceSize";
    let tensors = (self_ref as usize, mask as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let value = Operand::Scalar(o.scalar(CALL, "value", value as usize)?);
            masked_fill(CALL, o, tensors, value)
        })
    }
}

/// `aclnnInplaceMaskedFillTensorGetWorkspaceSize(selfRef, mask, value, workspaceSize,
/// executor)`: `selfRef = mask ? value : selfRef` for a one-element tensor `value`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceMaskedFillTensorGetWorkspaceSize(
    self_ref: *mut aclTensor,
    mask: *const aclTensor,
    value: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceMaskedFillTensorGetWorkspaceSize";
    let tensors = (self_ref as usize, mask as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let value = tensor(o, CALL, "value", value as usize)?;
            if value.numel() != 1 {
                return Err(invalid(
                    CALL,
                    format!(
                        "value has shape {:?}; it must hold one element",
                        value.shape()
                    ),
                ));
            }
            // One element, seen with no dimensions: repeated over selfRef.
            let value = braid_stream_core::tensor::Tensor::scalar(value.ptr(), value.dtype());
            masked_fill(CALL, o, tensors, Operand::Tensor(value))
        })
    }
}

/// A triangle of `self` into `out` (the same handle in place).
fn triangle(
    call: &str,
    o: &Objects,
    (x, out): (usize, usize),
    diagonal: i64,
    upper: bool,
) -> Result<(Work, u64), Fail> {
    let role = if x == out { "selfRef" } else { "self" };
    let x = tensor(o, call, role, x)?;
    let out = if role == "selfRef" {
        x.clone()
    } else {
        tensor(o, call, "out", out)?
    };
    let op = Triangle {
        x,
        diagonal,
        upper,
        out,
    };
    op_work(call, TensorOp::Triangle(op), 0)
}

/// Exports `GetWorkspaceSize(self, diagonal, out, ...)` of a triangle.
macro_rules! triangle_exports {
    ($($name:ident => $upper:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, diagonal, out, workspaceSize, executor)`.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            diagonal: i64,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            let tensors = (self_ as usize, out as usize);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    triangle(CALL, o, tensors, diagonal, $upper)
                })
            }
        }
    )*};
}

/// Exports `GetWorkspaceSize(selfRef, diagonal, ...)` of a triangle in place.
macro_rules! inplace_triangle_exports {
    ($($name:ident => $upper:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(selfRef, diagonal, workspaceSize, executor)`.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_ref: *mut aclTensor,
            diagonal: i64,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            let tensors = (self_ref as usize, self_ref as usize);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    triangle(CALL, o, tensors, diagonal, $upper)
                })
            }
        }
    )*};
}

triangle_exports!(
    aclnnTriuGetWorkspaceSize => true,
    aclnnTrilGetWorkspaceSize => false,
);
inplace_triangle_exports!(
    aclnnInplaceTriuGetWorkspaceSize => true,
    aclnnInplaceTrilGetWorkspaceSize => false,
);

planner! {
    /// `aclnnArangeGetWorkspaceSize(start, end, step, out, workspaceSize, executor)`: `out[i] =
    /// start + i·step` for the `⌈(end - start) / step⌉` values in `[start, end)`, which must be
    /// `out`'s length.
    fn aclnnArangeGetWorkspaceSize(
        start: *const aclScalar,
        end: *const aclScalar,
        step: *const aclScalar,
        out: *mut aclTensor,
    ) |CALL, o| {
        let start = o.scalar(CALL, "start", start as usize)?;
        let end = o.scalar(CALL, "end", end as usize)?;
        let step = o.scalar(CALL, "step", step as usize)?;
        let out = tensor(o, CALL, "out", out as usize)?;
        let span = (end.as_f64() - start.as_f64()) / step.as_f64();
        let count = if span.is_finite() && span > 0.0 {
            span.ceil() as usize
        } else {
            0
        };
        if out.rank() == 1 && out.numel() != count {
            return Err(invalid(
                CALL,
                format!(
                    "out has shape {:?}; [{start}, {end}) in steps of {step} has {count} values",
                    out.shape()
                ),
            ));
        }
        op_work(CALL, TensorOp::Arange(Arange { start, step, out }), 0)
    }
}
