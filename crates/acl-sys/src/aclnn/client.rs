//! The aclnn operators a foreign client (torch_npu's op-plugin) looks up beyond those braid
//! calls: [`AclnnClientOperators`]. op-plugin takes an operator family only when every
//! member of it resolves (otherwise it falls back to the old `aclopCompileAndExecute`
//! path), so the families are declared whole: add (`aclnnAdd`, braid's, with `aclnnAdds`,
//! `aclnnInplaceAdd`, `aclnnInplaceAdds`), sub (`aclnnSub`, `aclnnSubs`, `aclnnInplaceSub`,
//! `aclnnInplaceSubs`), mul (`aclnnMul`, `aclnnMuls`, braid's, with
//! `aclnnInplaceMul`, `aclnnInplaceMuls`), and the fills `aclnnInplaceOne`,
//! `aclnnInplaceZero`. Every symbol is optional; `braid-acl-sim` exports them, checked
//! against this list.
//!
//! Signatures: the ops-math headers (`aclnn_add.h`, `aclnn_sub.h`, `aclnn_mul.h`, `aclnn_one.h`,
//! `aclnn_zero.h`).

use super::types::{aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclnnStatus};
use crate::acl::aclrtStream;
use std::ffi::c_void;

/// Hands the list of client operators to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_client_operator_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The aclnn operators foreign clients look up beyond braid's
    /// ([`AclnnOperators`](crate::aclnn::AclnnOperators)).
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnClientOperators;

    /// `aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar
    /// *other, const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out = self + alpha * other`.
    optional fn aclnnAddsGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclScalar,
        alpha: *const aclScalar,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnAdds(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnAdds(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef, const
    /// aclTensor *other, const aclScalar *alpha, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: `selfRef += alpha * other`.
    optional fn aclnnInplaceAddGetWorkspaceSize(
        self_ref: *const aclTensor,
        other: *const aclTensor,
        alpha: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceAdd(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceAddsGetWorkspaceSize(const aclTensor *selfRef, const
    /// aclScalar *other, const aclScalar *alpha, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`.
    optional fn aclnnInplaceAddsGetWorkspaceSize(
        self_ref: *const aclTensor,
        other: *const aclScalar,
        alpha: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceAdds(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceAdds(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
    /// const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: `out = self - alpha * other`.
    optional fn aclnnSubGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclTensor,
        alpha: *const aclScalar,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnSub(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnSub(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor *self, const aclScalar
    /// *other, const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out = self - alpha * other`.
    optional fn aclnnSubsGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclScalar,
        alpha: *const aclScalar,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnSubs(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnSubs(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceSubGetWorkspaceSize(const aclTensor *selfRef, const
    /// aclTensor *other, const aclScalar *alpha, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: `selfRef -= alpha * other`.
    optional fn aclnnInplaceSubGetWorkspaceSize(
        self_ref: *const aclTensor,
        other: *const aclTensor,
        alpha: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceSub(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceSub(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceSubsGetWorkspaceSize(const aclTensor *selfRef, const
    /// aclScalar *other, const aclScalar *alpha, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`.
    optional fn aclnnInplaceSubsGetWorkspaceSize(
        self_ref: *const aclTensor,
        other: *const aclScalar,
        alpha: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceSubs(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceSubs(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
    /// aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    optional fn aclnnMulGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclTensor,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMul(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnMul(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMulGetWorkspaceSize(const aclTensor *selfRef, const
    /// aclTensor *other, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    optional fn aclnnInplaceMulGetWorkspaceSize(
        self_ref: *const aclTensor,
        other: *const aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMul(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceMul(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMulsGetWorkspaceSize(const aclTensor *selfRef, const
    /// aclScalar *other, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    optional fn aclnnInplaceMulsGetWorkspaceSize(
        self_ref: *const aclTensor,
        other: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMuls(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceMuls(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceOneGetWorkspaceSize(const aclTensor *selfRef, uint64_t
    /// *workspaceSize, aclOpExecutor **executor)`: fills with ones.
    optional fn aclnnInplaceOneGetWorkspaceSize(self_ref: *const aclTensor, workspace_size: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceOne(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceOne(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceFillTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor
    /// *value, uint64_t *workspaceSize, aclOpExecutor **executor)`: `selfRef[...] = value`, a
    /// one-element tensor (torch_npu's `fill_` with a device tensor takes this family only
    /// with `aclnnInplaceFillScalar`).
    optional fn aclnnInplaceFillTensorGetWorkspaceSize(self_ref: *mut aclTensor, value: *const aclTensor, workspace_size: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceFillTensor(void *workspace, uint64_t workspaceSize,
    /// aclOpExecutor *executor, aclrtStream stream)`.
    optional fn aclnnInplaceFillTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnConstantPadNdGetWorkspaceSize(const aclTensor *self, const
    /// aclIntArray *pad, const aclScalar *value, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out` is `self` padded with `value` (`pad` holds a before
    /// and an after count per dimension, the last dimension first; negative counts crop).
    optional fn aclnnConstantPadNdGetWorkspaceSize(self_: *const aclTensor, pad: *const aclIntArray, value: *const aclScalar, out: *mut aclTensor, workspace_size: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;
    /// `aclnnStatus aclnnConstantPadNd(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnConstantPadNd(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor *selfRef, uint64_t
    /// *workspaceSize, aclOpExecutor **executor)`: fills with zeros.
    optional fn aclnnInplaceZeroGetWorkspaceSize(self_ref: *mut aclTensor, workspace_size: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceZero(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceZero(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
        }
    };
}

/// The client operator table's function-pointer types.
pub mod client_operator_fns {
    pub use super::table::fns::*;
}

mod table {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_client_operator_functions!(crate::c_api!());
}

pub use table::AclnnClientOperators;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aclnn::AclnnOperators;
    use crate::SymbolTable;

    #[test]
    fn every_client_operator_comes_in_two_phases_apart_from_braids() {
        let client = AclnnClientOperators::SYMBOLS;
        assert_eq!(client.len(), 28);
        assert!(client.iter().all(|s| !s.required));
        for s in client
            .iter()
            .filter(|s| !s.name.ends_with("GetWorkspaceSize"))
        {
            let first = format!("{}GetWorkspaceSize", s.name);
            assert!(client.iter().any(|t| t.name == first), "{first}");
        }
        assert!(!client
            .iter()
            .any(|s| AclnnOperators::SYMBOLS.iter().any(|t| t.name == s.name)));
    }
}
