//! The aclnn operators of the families real transformer models need beyond element-wise
//! work, reductions and matrix products ([`AclnnModelOperators`]): indexing (`aclnnEmbedding`,
//! `aclnnIndex` with its `aclTensorList`, `aclnnIndexSelect`, `aclnnIndexCopy` and
//! `aclnnInplaceIndexCopy`), `aclnnCat`, `aclnnSWhere`, the masked fills (`aclnnInplaceMaskedFillScalar`,
//! `aclnnInplaceMaskedFillTensor`), the triangles (`aclnnTriu`,
//! `aclnnTril` and their in-place forms), `aclnnArange`, `aclnnLayerNorm`, the positions of
//! extremes (`aclnnArgMax`, `aclnnArgMin`, `aclnnMaxDim`, `aclnnMinDim`) and `aclnnCumsum`.
//! Whole families, as torch_npu's op-plugin looks them up. Every symbol is optional;
//! `braid-acl-sim` exports them, checked against this list.
//!
//! Signatures: CANN's ops-nn and ops-math operator pages (`aclnn_<name>.h`).

use super::types::{
    aclDataType, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclTensorList, aclnnStatus,
};
use crate::acl::aclrtStream;
use std::ffi::c_void;

/// Hands the list of model operators to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_model_operator_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The aclnn operators of indexing, concatenation, selection, triangles, ramps,
    /// LayerNorm, extremes' positions and cumulative sums.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnModelOperators;

    /// `aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor *weight, const aclTensor *indices, const aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: ops-nn `aclnn_embedding.h`: `out = weight[indices]`.
    optional fn aclnnEmbeddingGetWorkspaceSize(
        weight: *const aclTensor,
        indices: *const aclTensor,
        out: *const aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnEmbedding(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnEmbedding(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnIndexGetWorkspaceSize(const aclTensor *self, const aclTensorList *indices, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out = self[indices...]`, advanced indexing; an empty entry takes its dimension whole.
    optional fn aclnnIndexGetWorkspaceSize(
        self_: *const aclTensor,
        indices: *const aclTensorList,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnIndex(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnIndex(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out = self.index_select(dim, index)`.
    optional fn aclnnIndexSelectGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        index: *const aclTensor,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnIndexSelect(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnIndexSelect(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnIndexCopyGetWorkspaceSize(aclTensor *selfRef, int64_t dim, const aclTensor *index, const aclTensor *source, aclTensor *outRef, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `outRef = selfRef.index_copy(dim, index, source)`.
    optional fn aclnnIndexCopyGetWorkspaceSize(
        self_ref: *mut aclTensor,
        dim: i64,
        index: *const aclTensor,
        source: *const aclTensor,
        out_ref: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnIndexCopy(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnIndexCopy(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceIndexCopyGetWorkspaceSize(aclTensor *selfRef, int64_t dim, const aclTensor *index, const aclTensor *source, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `selfRef.index_copy_(dim, index, source)`.
    optional fn aclnnInplaceIndexCopyGetWorkspaceSize(
        self_ref: *mut aclTensor,
        dim: i64,
        index: *const aclTensor,
        source: *const aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceIndexCopy(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceIndexCopy(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: concatenation along `dim`.
    optional fn aclnnCatGetWorkspaceSize(
        tensors: *const aclTensorList,
        dim: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnCat(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnCat(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor *condition, const aclTensor *self, const aclTensor *other, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out = condition ? self : other`.
    optional fn aclnnSWhereGetWorkspaceSize(
        condition: *const aclTensor,
        self_: *const aclTensor,
        other: *const aclTensor,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnSWhere(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnSWhere(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(aclTensor *selfRef, const
    /// aclTensor *mask, const aclScalar *value, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: `selfRef = mask ? value : selfRef`, `mask` broadcast.
    optional fn aclnnInplaceMaskedFillScalarGetWorkspaceSize(
        self_ref: *mut aclTensor,
        mask: *const aclTensor,
        value: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMaskedFillScalar(void *workspace, uint64_t workspaceSize,
    /// aclOpExecutor *executor, aclrtStream stream)`.
    optional fn aclnnInplaceMaskedFillScalar(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMaskedFillTensorGetWorkspaceSize(aclTensor *selfRef, const
    /// aclTensor *mask, const aclTensor *value, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: `selfRef = mask ? value : selfRef` for a one-element `value`.
    optional fn aclnnInplaceMaskedFillTensorGetWorkspaceSize(
        self_ref: *mut aclTensor,
        mask: *const aclTensor,
        value: *const aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceMaskedFillTensor(void *workspace, uint64_t workspaceSize,
    /// aclOpExecutor *executor, aclrtStream stream)`.
    optional fn aclnnInplaceMaskedFillTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnTriuGetWorkspaceSize(const aclTensor *self, int64_t diagonal, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the upper triangle.
    optional fn aclnnTriuGetWorkspaceSize(
        self_: *const aclTensor,
        diagonal: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnTriu(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnTriu(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceTriuGetWorkspaceSize(aclTensor *selfRef, int64_t diagonal, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the upper triangle, in place.
    optional fn aclnnInplaceTriuGetWorkspaceSize(
        self_ref: *mut aclTensor,
        diagonal: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceTriu(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceTriu(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnTrilGetWorkspaceSize(const aclTensor *self, int64_t diagonal, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the lower triangle.
    optional fn aclnnTrilGetWorkspaceSize(
        self_: *const aclTensor,
        diagonal: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnTril(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnTril(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceTrilGetWorkspaceSize(aclTensor *selfRef, int64_t diagonal, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the lower triangle, in place.
    optional fn aclnnInplaceTrilGetWorkspaceSize(
        self_ref: *mut aclTensor,
        diagonal: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceTril(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceTril(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar *start, const aclScalar *end, const aclScalar *step, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: `out[i] = start + i * step`, `end` excluded.
    optional fn aclnnArangeGetWorkspaceSize(
        start: *const aclScalar,
        end: *const aclScalar,
        step: *const aclScalar,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnArange(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnArange(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor *input, const aclIntArray *normalizedShape, const aclTensor *weightOptional, const aclTensor *biasOptional, double eps, aclTensor *out, aclTensor *meanOutOptional, aclTensor *rstdOutOptional, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: LayerNorm over the trailing `normalizedShape` dimensions.
    optional fn aclnnLayerNormGetWorkspaceSize(
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
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnLayerNorm(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnLayerNorm(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnArgMaxGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the position of the largest element along `dim`.
    optional fn aclnnArgMaxGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        keepdim: bool,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnArgMax(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnArgMax(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnArgMinGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the position of the smallest element along `dim`.
    optional fn aclnnArgMinGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        keepdim: bool,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnArgMin(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnArgMin(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMaxDimGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, aclTensor *indices, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the largest element along `dim` and its position.
    optional fn aclnnMaxDimGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        keepdim: bool,
        out: *mut aclTensor,
        indices: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMaxDim(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnMaxDim(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMinDimGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, aclTensor *indices, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the smallest element along `dim` and its position.
    optional fn aclnnMinDimGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        keepdim: bool,
        out: *mut aclTensor,
        indices: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMinDim(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnMinDim(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnCumsumGetWorkspaceSize(const aclTensor *self, int64_t dim, aclDataType dtype, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`: the cumulative sum along `dim`, in `dtype` (`out`'s).
    optional fn aclnnCumsumGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        dtype: aclDataType,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnCumsum(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnCumsum(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
        }
    };
}

/// The model operator table's function-pointer types.
pub mod model_operator_fns {
    pub use super::table::fns::*;
}

mod table {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_model_operator_functions!(crate::c_api!());
}

pub use table::AclnnModelOperators;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn every_model_operator_is_an_optional_pair() {
        let s = AclnnModelOperators::SYMBOLS;
        assert!(s.iter().all(|s| !s.required));
        assert_eq!(s.len(), 40);
        for pair in s.chunks(2) {
            assert_eq!(pair[0].name, format!("{}GetWorkspaceSize", pair[1].name));
        }
    }
}
