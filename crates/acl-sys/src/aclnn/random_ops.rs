//! The aclnn random family torch_npu 2.14 looks up (the names are strings of
//! `libtorch_npu.so`): [`AclnnRandomOperators`], the operators braid's random operators
//! (`braid_stream_core::ops::Random`, `ApplyDropoutMask`) lower to. Every symbol is optional;
//! `braid-acl-sim` exports them all, checked against this list.
//!
//! The `...Tensor` members take the seed and the offset as device tensors (int64, one
//! element each) plus an offset added to the tensor's: torch_npu passes them while it
//! captures a graph, so that each replay draws with the seed and offset its generator holds
//! then (it refills the two tensors before every replay).
//!
//! Signatures: CANN's ops-math `random/*/op_api/aclnn_*.h` (`aclnn_uniform.h`,
//! `aclnn_normal.h`, `aclnn_normal_out.h`, `aclnn_bernoulli.h`, `aclnn_random.h`,
//! `aclnn_multinomial.h`, `aclnn_randperm.h`, `aclnn_dropout_gen_mask.h`,
//! `aclnn_dropout_do_mask.h`, `aclnn_dropout_v3.h`, `aclnn_dropout_v3_grad.h`).

use super::types::{aclDataType, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclnnStatus};
use crate::acl::aclrtStream;
use std::ffi::c_void;

/// Hands the list of random operators to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_random_operator_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The aclnn random operators.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnRandomOperators;

    /// `aclnnStatus aclnnInplaceUniformGetWorkspaceSize(const aclTensor *selfRef, double from, double to, uint64_t seed, uint64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceUniformGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: f64,
        to: f64,
        seed: u64,
        offset: u64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceUniform(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceUniform(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceUniformTensorGetWorkspaceSize(const aclTensor *selfRef, double from, double to, const aclTensor *seedTensor, const aclTensor *offsetTensor, uint64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceUniformTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: f64,
        to: f64,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: u64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceUniformTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceUniformTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceNormalGetWorkspaceSize(const aclTensor *selfRef, float mean, float std, int64_t seed, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceNormalGetWorkspaceSize(
        self_ref: *const aclTensor,
        mean: f32,
        std: f32,
        seed: i64,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceNormal(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceNormal(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceNormalTensorGetWorkspaceSize(const aclTensor *selfRef, float mean, float std, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceNormalTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        mean: f32,
        std: f32,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceNormalTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceNormalTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalTensorTensorGetWorkspaceSize(const aclTensor *mean, const aclTensor *std, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnNormalTensorTensorGetWorkspaceSize(
        mean: *const aclTensor,
        std: *const aclTensor,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalTensorTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnNormalTensorTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalTensorFloatGetWorkspaceSize(const aclTensor *mean, float std, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnNormalTensorFloatGetWorkspaceSize(
        mean: *const aclTensor,
        std: f32,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalTensorFloat(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnNormalTensorFloat(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalFloatTensorGetWorkspaceSize(float mean, const aclTensor *std, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnNormalFloatTensorGetWorkspaceSize(
        mean: f32,
        std: *const aclTensor,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalFloatTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnNormalFloatTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalFloatFloatGetWorkspaceSize(float mean, float std, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnNormalFloatFloatGetWorkspaceSize(
        mean: f32,
        std: f32,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnNormalFloatFloat(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnNormalFloatFloat(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceBernoulliGetWorkspaceSize(const aclTensor *selfRef, const aclScalar *prob, int64_t seed, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceBernoulliGetWorkspaceSize(
        self_ref: *const aclTensor,
        prob: *const aclScalar,
        seed: i64,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceBernoulli(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceBernoulli(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceBernoulliTensorGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *prob, int64_t seed, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceBernoulliTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        prob: *const aclTensor,
        seed: i64,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceBernoulliTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceBernoulliTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomGetWorkspaceSize(const aclTensor *selfRef, int64_t from, int64_t to, int64_t seed, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceRandomGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: i64,
        to: i64,
        seed: i64,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandom(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceRandom(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomTensorGetWorkspaceSize(const aclTensor *selfRef, int64_t from, int64_t to, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceRandomTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        from: i64,
        to: i64,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceRandomTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomWithoutFromToGetWorkspaceSize(const aclTensor *selfRef, int64_t seed, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceRandomWithoutFromToGetWorkspaceSize(
        self_ref: *const aclTensor,
        seed: i64,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomWithoutFromTo(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceRandomWithoutFromTo(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomWithoutFromToTensorGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnInplaceRandomWithoutFromToTensorGetWorkspaceSize(
        self_ref: *const aclTensor,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceRandomWithoutFromToTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnInplaceRandomWithoutFromToTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMultinomialGetWorkspaceSize(const aclTensor *self, int64_t numsamples, bool replacement, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnMultinomialGetWorkspaceSize(
        self_: *const aclTensor,
        numsamples: i64,
        replacement: bool,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMultinomial(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnMultinomial(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMultinomialTensorGetWorkspaceSize(const aclTensor *self, int64_t numsamples, bool replacement, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnMultinomialTensorGetWorkspaceSize(
        self_: *const aclTensor,
        numsamples: i64,
        replacement: bool,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMultinomialTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnMultinomialTensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnRandpermGetWorkspaceSize(int64_t n, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnRandpermGetWorkspaceSize(
        n: i64,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnRandperm(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnRandperm(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutGenMaskGetWorkspaceSize(const aclIntArray *shape, double prob, int64_t seed, int64_t offset, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnDropoutGenMaskGetWorkspaceSize(
        shape: *const aclIntArray,
        prob: f64,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutGenMask(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnDropoutGenMask(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutGenMaskV2GetWorkspaceSize(const aclIntArray *shape, double prob, int64_t seed, int64_t offset, aclDataType probDataType, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnDropoutGenMaskV2GetWorkspaceSize(
        shape: *const aclIntArray,
        prob: f64,
        seed: i64,
        offset: i64,
        prob_data_type: aclDataType,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutGenMaskV2(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnDropoutGenMaskV2(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutGenMaskV2TensorGetWorkspaceSize(const aclIntArray *shape, double prob, const aclTensor *seedTensor, const aclTensor *offsetTensor, int64_t offset, aclDataType probDataType, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnDropoutGenMaskV2TensorGetWorkspaceSize(
        shape: *const aclIntArray,
        prob: f64,
        seed_tensor: *const aclTensor,
        offset_tensor: *const aclTensor,
        offset: i64,
        prob_data_type: aclDataType,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutGenMaskV2Tensor(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnDropoutGenMaskV2Tensor(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor *self, const aclTensor *mask, double prob, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnDropoutDoMaskGetWorkspaceSize(
        self_: *const aclTensor,
        mask: *const aclTensor,
        prob: f64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutDoMask(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnDropoutDoMask(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutV3GetWorkspaceSize(const aclTensor *input, const aclTensor *optionalNoiseShape, double p, int64_t seed, int64_t offset, aclTensor *out, aclTensor *maskOut, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnDropoutV3GetWorkspaceSize(
        input: *const aclTensor,
        optional_noise_shape: *const aclTensor,
        p: f64,
        seed: i64,
        offset: i64,
        out: *mut aclTensor,
        mask_out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutV3(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnDropoutV3(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutV3GradGetWorkspaceSize(const aclTensor *gradY, const aclTensor *mask, double scale, aclTensor *gradX, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    optional fn aclnnDropoutV3GradGetWorkspaceSize(
        grad_y: *const aclTensor,
        mask: *const aclTensor,
        scale: f64,
        grad_x: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnDropoutV3Grad(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnDropoutV3Grad(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;

        }
    };
}

/// The random operator table's function-pointer types.
pub mod random_operator_fns {
    pub use super::table::fns::*;
}

mod table {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_random_operator_functions!(crate::c_api!());
}

pub use table::AclnnRandomOperators;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn every_random_operator_is_an_optional_pair() {
        let s = AclnnRandomOperators::SYMBOLS;
        assert!(s.iter().all(|s| !s.required));
        assert_eq!(s.len(), 46);
        for pair in s.chunks(2) {
            assert_eq!(pair[0].name, format!("{}GetWorkspaceSize", pair[1].name));
        }
    }
}
