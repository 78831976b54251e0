//! The aclnn functions braid calls, with their C signatures: descriptors ([`AclnnDescriptors`],
//! `libnnopbase.so`) and operators ([`AclnnOperators`], `libopapi*.so`). One list each
//! ([`aclnn_descriptor_functions!`](crate::aclnn_descriptor_functions),
//! [`aclnn_operator_functions!`](crate::aclnn_operator_functions)) makes the tables here and
//! checks `braid-acl-sim`'s exports.
//!
//! Signatures: `acl_meta.h` for the descriptors; the operator headers of CANN's `aclnnop/`
//! and the ops-math / ops-nn documentation for the operators.

use super::types::{
    aclDataType, aclFormat, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclTensorList,
    aclnnStatus,
};
use crate::acl::aclrtStream;
use std::ffi::c_void;

/// Hands the list of descriptor functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_descriptor_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// aclnn's descriptor functions (`libnnopbase.so`).
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnDescriptors;

    /// `aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType
    /// dataType, const int64_t *stride, int64_t offset, aclFormat format, const int64_t
    /// *storageDims, uint64_t storageDimsNum, void *tensorData)`: `stride` and `offset` in
    /// elements; null on bad arguments.
    required fn aclCreateTensor(
        view_dims: *const i64,
        view_dims_num: u64,
        data_type: aclDataType,
        stride: *const i64,
        offset: i64,
        format: aclFormat,
        storage_dims: *const i64,
        storage_dims_num: u64,
        tensor_data: *mut c_void,
    ) -> *mut aclTensor;
    /// `aclnnStatus aclDestroyTensor(const aclTensor *tensor)`.
    required fn aclDestroyTensor(tensor: *const aclTensor) -> aclnnStatus;
    /// `aclScalar *aclCreateScalar(void *value, aclDataType dataType)`: copies the value.
    required fn aclCreateScalar(value: *mut c_void, data_type: aclDataType) -> *mut aclScalar;
    /// `aclnnStatus aclDestroyScalar(const aclScalar *scalar)`.
    required fn aclDestroyScalar(scalar: *const aclScalar) -> aclnnStatus;
    /// `aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)`: copies the values.
    required fn aclCreateIntArray(value: *const i64, size: u64) -> *mut aclIntArray;
    /// `aclnnStatus aclDestroyIntArray(const aclIntArray *array)`.
    required fn aclDestroyIntArray(array: *const aclIntArray) -> aclnnStatus;
    /// `aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size)`: a
    /// list of the tensors `value` points to, which it then owns; null on bad arguments.
    optional fn aclCreateTensorList(value: *const *const aclTensor, size: u64) -> *mut aclTensorList;
    /// `aclnnStatus aclDestroyTensorList(const aclTensorList *array)`: destroys the list and
    /// the tensors it holds.
    optional fn aclDestroyTensorList(array: *const aclTensorList) -> aclnnStatus;
    /// `aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)`: the executor
    /// survives its launches until `aclDestroyAclOpExecutor`.
    optional fn aclSetAclOpExecutorRepeatable(executor: *mut aclOpExecutor) -> aclnnStatus;
    /// `aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)`: destroys a repeatable
    /// executor.
    optional fn aclDestroyAclOpExecutor(executor: *mut aclOpExecutor) -> aclnnStatus;
    /// braid's extension `aclnnStatus braidSimAclnnLiveObjects(uint64_t *counts)`: writes the
    /// numbers of live tensors, scalars, int arrays and executors (4 values). Only
    /// `braid-acl-sim` exports it, for tests that check every path destroys what it creates.
    optional fn braidSimAclnnLiveObjects(counts: *mut u64) -> aclnnStatus;
        }
    };
}

/// Hands the list of operator functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! aclnn_operator_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The aclnn operators braid calls (`libopapi.so`, or `libopapi_math.so` /
    /// `libopapi_nn.so`), each a `GetWorkspaceSize` / launch pair.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclnnOperators;

    /// `aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor *selfRef, const
    /// aclScalar *value, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    required fn aclnnInplaceFillScalarGetWorkspaceSize(
        self_ref: *mut aclTensor,
        value: *const aclScalar,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceFillScalar(void *workspace, uint64_t workspaceSize,
    /// aclOpExecutor *executor, aclrtStream stream)`.
    required fn aclnnInplaceFillScalar(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
    /// const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: `out = self + alpha * other`.
    required fn aclnnAddGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclTensor,
        alpha: *const aclScalar,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    required fn aclnnAdd(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor *self, const aclScalar *other,
    /// aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)`: `out = self *
    /// other`.
    required fn aclnnMulsGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclScalar,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMuls(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    required fn aclnnMuls(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnMmGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2,
    /// aclTensor *out, int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor
    /// **executor)`: 2-D matrix product.
    required fn aclnnMmGetWorkspaceSize(
        self_: *const aclTensor,
        mat2: *const aclTensor,
        out: *mut aclTensor,
        cube_math_type: i8,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnMm(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    required fn aclnnMm(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor
    /// *src, uint64_t *workspaceSize, aclOpExecutor **executor)`.
    required fn aclnnInplaceCopyGetWorkspaceSize(
        self_ref: *mut aclTensor,
        src: *const aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnInplaceCopy(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    required fn aclnnInplaceCopy(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray
    /// *dim, bool keepDim, aclDataType dtype, aclTensor *out, uint64_t *workspaceSize,
    /// aclOpExecutor **executor)`.
    required fn aclnnReduceSumGetWorkspaceSize(
        self_: *const aclTensor,
        dim: *const aclIntArray,
        keep_dim: bool,
        dtype: aclDataType,
        out: *mut aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnReduceSum(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    required fn aclnnReduceSum(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
    /// `aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor *x, const aclTensor *gamma,
    /// double epsilon, const aclTensor *yOut, const aclTensor *rstdOut, uint64_t
    /// *workspaceSize, aclOpExecutor **executor)`: `y = x / sqrt(mean(x²) + epsilon) * gamma`
    /// over the trailing dimensions `gamma` has; `rstdOut` (float32) receives the reciprocal
    /// root of each row.
    required fn aclnnRmsNormGetWorkspaceSize(
        x: *const aclTensor,
        gamma: *const aclTensor,
        epsilon: f64,
        y_out: *const aclTensor,
        rstd_out: *const aclTensor,
        workspace_size: *mut u64,
        executor: *mut *mut aclOpExecutor,
    ) -> aclnnStatus;
    /// `aclnnStatus aclnnRmsNorm(void *workspace, uint64_t workspaceSize, aclOpExecutor
    /// *executor, aclrtStream stream)`.
    required fn aclnnRmsNorm(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
        }
    };
}

/// The descriptor table's function-pointer types.
pub mod descriptor_fns {
    pub use super::descriptors::fns::*;
}

/// The operator table's function-pointer types.
pub mod operator_fns {
    pub use super::operators::fns::*;
}

mod descriptors {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_descriptor_functions!(crate::c_api!());
}

mod operators {
    #[allow(unused_imports)]
    use super::*;
    crate::aclnn_operator_functions!(crate::c_api!());
}

pub use descriptors::AclnnDescriptors;
pub use operators::AclnnOperators;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn both_tables_list_their_symbols_once() {
        let d = AclnnDescriptors::SYMBOLS;
        let o = AclnnOperators::SYMBOLS;
        assert_eq!(d.len(), 11);
        assert_eq!(o.len(), 14);
        let mut names: Vec<&str> = d.iter().chain(o).map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), d.len() + o.len());
        assert!(o.iter().all(|s| s.required));
        assert!(d
            .iter()
            .any(|s| s.name == "aclDestroyAclOpExecutor" && !s.required));
        assert!(d.iter().any(|s| s.name == "aclCreateTensor" && s.required));
    }
}
