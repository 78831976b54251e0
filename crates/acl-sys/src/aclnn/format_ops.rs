//! `aclnnNpuFormatCast`, the conversion of a tensor to and from a device-private storage
//! format, as torch_npu 2.14 looks it up for `torch_npu.npu_format_cast` (the names are
//! strings of `libtorch_npu.so`): [`AclnnFormatOperators`]. Every symbol is optional;
//! `braid-acl-sim` exports them, checked against this list.
//!
//! `aclnnNpuFormatCastCalculateSizeAndFormat` comes first: it says the storage shape and the
//! actual format a converted tensor has, in an array it allocates and the caller frees (C++
//! `delete[]`). Signatures: CANN ops-math `conversion/npu_format_cast/docs/aclnnNpuFormatCast.md`.

use super::types::{aclOpExecutor, aclTensor, aclnnStatus};
use crate::acl::aclrtStream;
use std::ffi::c_void;

/// Hands the list of format operators to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_format_operator_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The aclnn format conversion.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnFormatOperators;

    /// `aclnnStatus aclnnNpuFormatCastCalculateSizeAndFormat(const aclTensor *srcTensor,
    /// const int dstFormat, const int additionalDtype, int64_t **dstShape, uint64_t
    /// *dstShapeSize, int *actualFormat)`.
    optional fn aclnnNpuFormatCastCalculateSizeAndFormat(
        src_tensor: *const aclTensor,
        dst_format: i32,
        additional_dtype: i32,
        dst_shape: *mut *mut i64,
        dst_shape_size: *mut u64,
        actual_format: *mut i32,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnNpuFormatCastGetWorkspaceSize(const aclTensor *srcTensor, aclTensor
    /// *dstTensor, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    optional fn aclnnNpuFormatCastGetWorkspaceSize(
        src_tensor: *const aclTensor,
        dst_tensor: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnNpuFormatCast(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    optional fn aclnnNpuFormatCast(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
        }
    };
}

/// The format operator table's function-pointer types.
pub mod format_operator_fns {
    pub use super::table::fns::*;
}

mod table {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_format_operator_functions!(crate::c_api!());
}

pub use table::AclnnFormatOperators;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_format_cast_is_its_size_query_then_an_optional_pair() {
        let s = AclnnFormatOperators::SYMBOLS;
        assert!(s.iter().all(|s| !s.required));
        let names: Vec<&str> = s.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "aclnnNpuFormatCastCalculateSizeAndFormat",
                "aclnnNpuFormatCastGetWorkspaceSize",
                "aclnnNpuFormatCast"
            ]
        );
    }
}
