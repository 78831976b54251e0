//! The exported aclnn operators of the client families ([`AclnnClientOperators`]): the rest of
//! the add family (`aclnnAdds`, `aclnnInplaceAdd`, `aclnnInplaceAdds`), the mul family
//! (`aclnnMul`, `aclnnInplaceMul`, `aclnnInplaceMuls`) and the fills `aclnnInplaceOne`,
//! `aclnnInplaceZero`, each with CANN's semantics ([`super::ops`]): broadcasting, strided
//! tensors, any alpha, in float32, float16 and bfloat16.
//!
//! [`AclnnClientOperators`]: braid_acl_sys::aclnn::AclnnClientOperators

use super::exports::{launch, launcher, plan};
use super::ops;
use braid_acl_sys::aclnn::{aclOpExecutor, aclScalar, aclTensor, aclnnStatus};
use std::ffi::c_void;

launcher!(
    aclnnAdds,
    aclnnInplaceAdd,
    aclnnInplaceAdds,
    aclnnMul,
    aclnnInplaceMul,
    aclnnInplaceMuls,
    aclnnInplaceOne,
    aclnnInplaceZero
);

/// `aclnnAddsGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`: `out =
/// self + alpha * other` for a scalar `other`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnAddsGetWorkspaceSize(
    self_: *const aclTensor,
    other: *const aclScalar,
    alpha: *const aclScalar,
    out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnAddsGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let other = o.scalar(CALL, "other", other as usize)?;
            let alpha = o.scalar(CALL, "alpha", alpha as usize)?;
            ops::with_scalar(CALL, o, (self_ as usize, out as usize), other, Some(alpha))
        })
    }
}

/// `aclnnInplaceAddGetWorkspaceSize(selfRef, other, alpha, workspaceSize, executor)`:
/// `selfRef += alpha * other`, `other` broadcast to `selfRef`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceAddGetWorkspaceSize(
    self_ref: *const aclTensor,
    other: *const aclTensor,
    alpha: *const aclScalar,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceAddGetWorkspaceSize";
    let s = self_ref as usize;
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let alpha = o.scalar(CALL, "alpha", alpha as usize)?;
            ops::binary(CALL, o, (s, other as usize, s), Some(alpha))
        })
    }
}

/// `aclnnInplaceAddsGetWorkspaceSize(selfRef, other, alpha, workspaceSize, executor)`:
/// `selfRef += alpha * other` for a scalar `other`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceAddsGetWorkspaceSize(
    self_ref: *const aclTensor,
    other: *const aclScalar,
    alpha: *const aclScalar,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceAddsGetWorkspaceSize";
    let s = self_ref as usize;
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let other = o.scalar(CALL, "other", other as usize)?;
            let alpha = o.scalar(CALL, "alpha", alpha as usize)?;
            ops::with_scalar(CALL, o, (s, s), other, Some(alpha))
        })
    }
}

/// `aclnnMulGetWorkspaceSize(self, other, out, workspaceSize, executor)`: `out = self *
/// other`, broadcasting.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnMulGetWorkspaceSize(
    self_: *const aclTensor,
    other: *const aclTensor,
    out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnMulGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            ops::binary(CALL, o, (self_ as usize, other as usize, out as usize), None)
        })
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
            ops::binary(CALL, o, (s, other as usize, s), None)
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
            let factor = o.scalar(CALL, "other", other as usize)?;
            ops::with_scalar(CALL, o, (s, s), factor, None)
        })
    }
}

/// `aclnnInplaceOneGetWorkspaceSize(selfRef, workspaceSize, executor)`: fills with 1.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceOneGetWorkspaceSize(
    self_ref: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceOneGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            ops::fill(CALL, o, self_ref as usize, 1.0)
        })
    }
}

/// `aclnnInplaceZeroGetWorkspaceSize(selfRef, workspaceSize, executor)`: fills with 0.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceZeroGetWorkspaceSize(
    self_ref: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceZeroGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            ops::fill(CALL, o, self_ref as usize, 0.0)
        })
    }
}

braid_acl_sys::aclnn_client_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::client_operator_fns;)
);
