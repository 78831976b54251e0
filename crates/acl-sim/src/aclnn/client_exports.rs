//! The exported aclnn operators of the client families ([`AclnnClientOperators`]): the rest of
//! the add family (`aclnnAdds`, `aclnnInplaceAdd`, `aclnnInplaceAdds`), the sub family
//! (`aclnnSub`, `aclnnSubs`, `aclnnInplaceSub`, `aclnnInplaceSubs`: add with `-alpha`), the mul family
//! (`aclnnMul`, `aclnnInplaceMul`, `aclnnInplaceMuls`) and the fills `aclnnInplaceOne`,
//! `aclnnInplaceZero`, `aclnnInplaceFillTensor`, each with CANN's semantics (computed in the `ops` module): broadcasting, strided
//! tensors, any alpha, in float32, float16 and bfloat16.
//!
//! [`AclnnClientOperators`]: braid_acl_sys::aclnn::AclnnClientOperators

use super::exports::{launch, launcher, plan, planner};
use super::ops::{self, Arith, FillValue, Other};
use super::{op_work, tensor};
// Declared in this table; planned in their own module (checked at the end of this file).
pub use super::pad_exports::{aclnnConstantPadNd, aclnnConstantPadNdGetWorkspaceSize};
use crate::errmsg::fail;
use braid_acl_sys::aclnn::{
    aclOpExecutor, aclScalar, aclTensor, aclnnStatus, ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{Cast, Scalar, TensorOp};
use std::ffi::c_void;

launcher!(
    aclnnAdds,
    aclnnInplaceAdd,
    aclnnInplaceAdds,
    aclnnSub,
    aclnnSubs,
    aclnnInplaceSub,
    aclnnInplaceSubs,
    aclnnMul,
    aclnnInplaceMul,
    aclnnInplaceMuls,
    aclnnInplaceOne,
    aclnnInplaceZero,
    aclnnInplaceFillTensor
);

/// The add or sub family's operator (`sign` 1 for add, -1 for sub) with `alpha`.
fn add_or_sub(sign: f64, alpha: *const aclScalar) -> Arith {
    if sign > 0.0 {
        Arith::Add(alpha as usize)
    } else {
        Arith::Sub(alpha as usize)
    }
}

/// `out = self ± alpha * other` for a tensor `other` (`out` is `self` for the in-place
/// forms).
///
/// # Safety
/// Out pointers null or valid for a write.
unsafe fn add_tensor(
    call: &str,
    (self_, other, out): (usize, usize, usize),
    alpha: *const aclScalar,
    sign: f64,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    // SAFETY: forwarded.
    unsafe {
        plan(call, workspace_size, executor, |o| {
            let tensors = (self_, Other::Tensor(other), out);
            ops::arith(call, o, tensors, add_or_sub(sign, alpha))
        })
    }
}

/// `out = self ± alpha * other` for a scalar `other`.
///
/// # Safety
/// Out pointers null or valid for a write.
unsafe fn add_scalar(
    call: &str,
    (self_, out): (usize, usize),
    (other, alpha): (*const aclScalar, *const aclScalar),
    sign: f64,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    // SAFETY: forwarded.
    unsafe {
        plan(call, workspace_size, executor, |o| {
            let tensors = (self_, Other::Scalar(other as usize), out);
            ops::arith(call, o, tensors, add_or_sub(sign, alpha))
        })
    }
}

/// Exports a `GetWorkspaceSize` of the add and sub families with a tensor `other`.
macro_rules! add_tensor_export {
    ($(#[$doc:meta])* $name:ident, out, $sign:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            other: *const aclTensor,
            alpha: *const aclScalar,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            let tensors = (self_ as usize, other as usize, out as usize);
            // SAFETY: forwarded.
            unsafe { add_tensor(stringify!($name), tensors, alpha, $sign, workspace_size, executor) }
        }
    };
    ($(#[$doc:meta])* $name:ident, in_place, $sign:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_ref: *const aclTensor,
            other: *const aclTensor,
            alpha: *const aclScalar,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            let s = self_ref as usize;
            // SAFETY: forwarded.
            unsafe { add_tensor(stringify!($name), (s, other as usize, s), alpha, $sign, workspace_size, executor) }
        }
    };
}

/// Exports a `GetWorkspaceSize` of the add and sub families with a scalar `other`.
macro_rules! add_scalar_export {
    ($(#[$doc:meta])* $name:ident, out, $sign:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            other: *const aclScalar,
            alpha: *const aclScalar,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            let tensors = (self_ as usize, out as usize);
            // SAFETY: forwarded.
            unsafe { add_scalar(stringify!($name), tensors, (other, alpha), $sign, workspace_size, executor) }
        }
    };
    ($(#[$doc:meta])* $name:ident, in_place, $sign:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_ref: *const aclTensor,
            other: *const aclScalar,
            alpha: *const aclScalar,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            let s = self_ref as usize;
            // SAFETY: forwarded.
            unsafe { add_scalar(stringify!($name), (s, s), (other, alpha), $sign, workspace_size, executor) }
        }
    };
}

add_scalar_export!(
    /// `aclnnAddsGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`: `out =
    /// self + alpha * other` for a scalar `other`.
    aclnnAddsGetWorkspaceSize, out, 1.0
);
add_tensor_export!(
    /// `aclnnInplaceAddGetWorkspaceSize(selfRef, other, alpha, workspaceSize, executor)`:
    /// `selfRef += alpha * other`, `other` broadcast to `selfRef`.
    aclnnInplaceAddGetWorkspaceSize, in_place, 1.0
);
add_scalar_export!(
    /// `aclnnInplaceAddsGetWorkspaceSize(selfRef, other, alpha, workspaceSize, executor)`:
    /// `selfRef += alpha * other` for a scalar `other`.
    aclnnInplaceAddsGetWorkspaceSize, in_place, 1.0
);
add_tensor_export!(
    /// `aclnnSubGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`: `out =
    /// self - alpha * other`, broadcasting.
    aclnnSubGetWorkspaceSize, out, -1.0
);
add_scalar_export!(
    /// `aclnnSubsGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`: `out =
    /// self - alpha * other` for a scalar `other`.
    aclnnSubsGetWorkspaceSize, out, -1.0
);
add_tensor_export!(
    /// `aclnnInplaceSubGetWorkspaceSize(selfRef, other, alpha, workspaceSize, executor)`:
    /// `selfRef -= alpha * other`.
    aclnnInplaceSubGetWorkspaceSize, in_place, -1.0
);
add_scalar_export!(
    /// `aclnnInplaceSubsGetWorkspaceSize(selfRef, other, alpha, workspaceSize, executor)`:
    /// `selfRef -= alpha * other` for a scalar `other`.
    aclnnInplaceSubsGetWorkspaceSize, in_place, -1.0
);

planner! {
    /// `aclnnMulGetWorkspaceSize(self, other, out, workspaceSize, executor)`: `out = self *
    /// other`, broadcasting.
    fn aclnnMulGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclTensor,
        out: *mut aclTensor,
    ) |CALL, o| {
        let tensors = (self_ as usize, Other::Tensor(other as usize), out as usize);
        ops::arith(CALL, o, tensors, Arith::Mul)
    }
}

/// `aclnnInplaceMulGetWorkspaceSize(selfRef, other, workspaceSize, executor)`: `selfRef *=
/// other`, `other` broadcast to `selfRef`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceMulGetWorkspaceSize(
    self_ref: *const aclTensor,
    other: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceMulGetWorkspaceSize";
    let s = self_ref as usize;
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            ops::arith(CALL, o, (s, Other::Tensor(other as usize), s), Arith::Mul)
        })
    }
}

/// `aclnnInplaceMulsGetWorkspaceSize(selfRef, other, workspaceSize, executor)`: `selfRef *=
/// other` for a scalar `other`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceMulsGetWorkspaceSize(
    self_ref: *const aclTensor,
    other: *const aclScalar,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceMulsGetWorkspaceSize";
    let s = self_ref as usize;
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            ops::arith(CALL, o, (s, Other::Scalar(other as usize), s), Arith::Mul)
        })
    }
}

planner! {
    /// `aclnnInplaceOneGetWorkspaceSize(selfRef, workspaceSize, executor)`: fills with 1.
    fn aclnnInplaceOneGetWorkspaceSize(
        self_ref: *const aclTensor,
    ) |CALL, o| {
        ops::fill(
            CALL,
            o,
            self_ref as usize,
            FillValue::Constant(Scalar::Int(1)),
        )
    }

    /// `aclnnInplaceFillTensorGetWorkspaceSize(selfRef, value, workspaceSize, executor)`:
    /// `selfRef[...] = value`, `value` a one-element tensor of any type converted to `selfRef`'s
    /// (a cast from the value broadcast to `selfRef`'s shape).
    fn aclnnInplaceFillTensorGetWorkspaceSize(
        self_ref: *mut aclTensor,
        value: *const aclTensor,
    ) |CALL, o| {
        let (out, x) = (
            tensor(o, CALL, "selfRef", self_ref as usize)?,
            tensor(o, CALL, "value", value as usize)?,
        );
        if x.numel() != 1 {
            return Err(fail(
                ACLNN_ERR_PARAM_INVALID,
                format!(
                    "{CALL}: value has shape {:?}; it must hold one element",
                    x.shape()
                ),
            ));
        }
        let x = x
            .reshape(&[])
            .map_err(|e| fail(ACLNN_ERR_PARAM_INVALID, format!("{CALL}: value: {e}")))?;
        op_work(CALL, TensorOp::Cast(Cast { x, out }), 0)
    }

    /// `aclnnInplaceZeroGetWorkspaceSize(selfRef, workspaceSize, executor)`: fills with 0.
    fn aclnnInplaceZeroGetWorkspaceSize(
        self_ref: *mut aclTensor,
    ) |CALL, o| {
        ops::fill(
            CALL,
            o,
            self_ref as usize,
            FillValue::Constant(Scalar::Int(0)),
        )
    }
}

braid_acl_sys::aclnn_client_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::client_operator_fns;)
);
