//! The attention family of aclnn operators ([`AclnnAttentionOperators`]): rotary position
//! embedding and flash attention, from CANN's ops-transformer repository. Every symbol is
//! optional (a CANN release without one refuses that operator by name); `braid-acl-sim`
//! exports them all, checked against this list, so torch_npu (whose
//! `npu_fusion_attention` has no other path) finds them too.
//!
//! Signatures (ops-transformer, `attention/flash_attention_score/op_api/
//! aclnn_flash_attention_score.h` and `docs/aclnnFlashAttentionScore.md`,
//! `posembedding/rotary_position_embedding/docs/aclnnRotaryPositionEmbedding.md`):
//! - `aclnnRotaryPositionEmbedding(x, cos, sin, mode, out)`: mode 0 half, 1 interleave;
//! - `aclnnFlashAttentionScore(query, key, value, realShiftOptional, dropMaskOptional,
//!   paddingMaskOptional, attenMaskOptional, prefixOptional, scaleValue, keepProb, preTokens,
//!   nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxMaxOut,
//!   softmaxSumOut, softmaxOutOut, attentionOutOut)`: `inputLayout` one of `BSH`, `SBH`,
//!   `BSND`, `BNSD`; an attenMask element 1 excludes the pair; `softmaxMaxOut` and
//!   `softmaxSumOut` are float32 `[B, N, Sq, 8]`.

use super::types::{aclIntArray, aclOpExecutor, aclTensor, aclnnStatus};
use crate::acl::aclrtStream;
use std::ffi::{c_char, c_void};

/// Hands the list of attention operators to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_attention_operator_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// Rotary embedding and flash attention.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnAttentionOperators;

    /// `aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(const aclTensor *x, const
    /// aclTensor *cos, const aclTensor *sin, int64_t mode, aclTensor *out, uint64_t
    /// *workspaceSize, aclOpExecutor **executor)`.
    optional fn aclnnRotaryPositionEmbeddingGetWorkspaceSize(
        x: *const aclTensor,
        cos: *const aclTensor,
        sin: *const aclTensor,
        mode: i64,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnRotaryPositionEmbedding(void *workspace, uint64_t workspaceSize,
    /// aclOpExecutor *executor, aclrtStream stream)`.
    optional fn aclnnRotaryPositionEmbedding(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(const aclTensor *query, const
    /// aclTensor *key, const aclTensor *value, const aclTensor *realShiftOptional, const
    /// aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional, const aclTensor
    /// *attenMaskOptional, const aclIntArray *prefixOptional, double scaleValue, double
    /// keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char *inputLayout,
    /// int64_t innerPrecise, int64_t sparseMode, const aclTensor *softmaxMaxOut, const
    /// aclTensor *softmaxSumOut, const aclTensor *softmaxOutOut, const aclTensor
    /// *attentionOutOut, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    optional fn aclnnFlashAttentionScoreGetWorkspaceSize(
        query: *const aclTensor,
        key: *const aclTensor,
        value: *const aclTensor,
        real_shift: *const aclTensor,
        drop_mask: *const aclTensor,
        padding_mask: *const aclTensor,
        atten_mask: *const aclTensor,
        prefix: *const aclIntArray,
        scale_value: f64,
        keep_prob: f64,
        pre_tokens: i64,
        next_tokens: i64,
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
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnFlashAttentionScore(void *workspace, uint64_t workspaceSize,
    /// aclOpExecutor *executor, const aclrtStream stream)`.
    optional fn aclnnFlashAttentionScore(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
        }
    };
}

/// The attention table's function-pointer types.
pub mod attention_operator_fns {
    pub use super::table::fns::*;
}

mod table {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_attention_operator_functions!(crate::c_api!());
}

pub use table::AclnnAttentionOperators;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn every_attention_operator_is_an_optional_pair() {
        let s = AclnnAttentionOperators::SYMBOLS;
        assert!(s.iter().all(|s| !s.required));
        assert_eq!(s.len(), 4);
        for pair in s.chunks(2) {
            assert_eq!(pair[0].name, format!("{}GetWorkspaceSize", pair[1].name));
        }
    }
}
