//! CANN's old single-operator path (`libascendcl.so`, `libacl_op_compiler.so`): tensor
//! descriptions, data buffers, operator attributes, `aclopCompileAndExecute` and the compile
//! options: [`AclOpFunctions`]. torch_npu links them at load time and takes this path for an
//! operator whose aclnn family it cannot find; braid does not call them.
//!
//! Every symbol is optional, as in [`AclClientFunctions`](super::AclClientFunctions).

use super::client_types::{aclDataBuffer, aclTensorDesc, aclopAttr};
use super::types::{aclError, aclrtStream};
use std::ffi::{c_char, c_void};

/// Hands the list of the old single-operator path's functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for braid's own.
#[macro_export]
macro_rules! acl_op_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The old single-operator path's functions.
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct AclOpFunctions;

    /// `aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t
    /// *dims, aclFormat format)`: null on bad arguments.
    optional fn aclCreateTensorDesc(data_type: i32, num_dims: i32, dims: *const i64, format: i32) -> *mut aclTensorDesc;
    /// `void aclDestroyTensorDesc(const aclTensorDesc *desc)`.
    optional fn aclDestroyTensorDesc(desc: *const aclTensorDesc);
    /// `void aclSetTensorDescName(aclTensorDesc *desc, const char *name)`.
    optional fn aclSetTensorDescName(desc: *mut aclTensorDesc, name: *const c_char);
    /// `aclError aclSetTensorFormat(aclTensorDesc *desc, aclFormat format)`.
    optional fn aclSetTensorFormat(desc: *mut aclTensorDesc, format: i32) -> aclError;
    /// `aclError aclSetTensorShape(aclTensorDesc *desc, int numDims, const int64_t *dims)`.
    optional fn aclSetTensorShape(desc: *mut aclTensorDesc, num_dims: i32, dims: *const i64) -> aclError;
    /// `aclError aclSetTensorPlaceMent(aclTensorDesc *desc, aclMemType memType)`.
    optional fn aclSetTensorPlaceMent(desc: *mut aclTensorDesc, mem_type: i32) -> aclError;
    /// `aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t
    /// *dimSize)`.
    optional fn aclGetTensorDescDimV2(desc: *const aclTensorDesc, index: usize, dim_size: *mut i64) -> aclError;
    /// `aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc)`: `ACL_FORMAT_UNDEFINED`
    /// for a null description.
    optional fn aclGetTensorDescFormat(desc: *const aclTensorDesc) -> i32;
    /// `size_t aclGetTensorDescNumDims(const aclTensorDesc *desc)`.
    optional fn aclGetTensorDescNumDims(desc: *const aclTensorDesc) -> usize;
    /// `aclDataType aclGetTensorDescType(const aclTensorDesc *desc)`: `ACL_DT_UNDEFINED` for
    /// a null description.
    optional fn aclGetTensorDescType(desc: *const aclTensorDesc) -> i32;
    /// `const char *aclGetTensorDescName(aclTensorDesc *desc)`.
    optional fn aclGetTensorDescName(desc: *mut aclTensorDesc) -> *const c_char;
    /// `aclDataBuffer *aclCreateDataBuffer(void *data, size_t size)`.
    optional fn aclCreateDataBuffer(data: *mut c_void, size: usize) -> *mut aclDataBuffer;
    /// `aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer)`.
    optional fn aclDestroyDataBuffer(data_buffer: *const aclDataBuffer) -> aclError;
    /// `aclopAttr *aclopCreateAttr()`.
    optional fn aclopCreateAttr() -> *mut aclopAttr;
    /// `void aclopDestroyAttr(const aclopAttr *attr)`.
    optional fn aclopDestroyAttr(attr: *const aclopAttr);
    /// `aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName, uint8_t attrValue)`.
    optional fn aclopSetAttrBool(attr: *mut aclopAttr, attr_name: *const c_char, attr_value: u8) -> aclError;
    /// `aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName, int64_t attrValue)`.
    optional fn aclopSetAttrInt(attr: *mut aclopAttr, attr_name: *const c_char, attr_value: i64) -> aclError;
    /// `aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName, float attrValue)`.
    optional fn aclopSetAttrFloat(attr: *mut aclopAttr, attr_name: *const c_char, attr_value: f32) -> aclError;
    /// `aclError aclopSetAttrString(aclopAttr *attr, const char *attrName, const char
    /// *attrValue)`.
    optional fn aclopSetAttrString(attr: *mut aclopAttr, attr_name: *const c_char, attr_value: *const c_char) -> aclError;
    /// `aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName, aclDataType
    /// attrValue)`.
    optional fn aclopSetAttrDataType(attr: *mut aclopAttr, attr_name: *const c_char, attr_value: i32) -> aclError;
    /// `aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName, int numValues,
    /// const uint8_t *values)`.
    optional fn aclopSetAttrListBool(attr: *mut aclopAttr, attr_name: *const c_char, num_values: i32, values: *const u8) -> aclError;
    /// `aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName, int numValues,
    /// const int64_t *values)`.
    optional fn aclopSetAttrListInt(attr: *mut aclopAttr, attr_name: *const c_char, num_values: i32, values: *const i64) -> aclError;
    /// `aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName, int numValues,
    /// const float *values)`.
    optional fn aclopSetAttrListFloat(attr: *mut aclopAttr, attr_name: *const c_char, num_values: i32, values: *const f32) -> aclError;
    /// `aclError aclopSetAttrListListInt(aclopAttr *attr, const char *attrName, int
    /// numLists, const int *numValues, const int64_t *const values[])`.
    optional fn aclopSetAttrListListInt(
        attr: *mut aclopAttr,
        attr_name: *const c_char,
        num_lists: i32,
        num_values: *const i32,
        values: *const *const i64,
    ) -> aclError;
    /// `aclError aclopCompileAndExecute(const char *opType, int numInputs, const
    /// aclTensorDesc *const inputDesc[], const aclDataBuffer *const inputs[], int
    /// numOutputs, const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
    /// const aclopAttr *attr, aclopEngineType engineType, aclopCompileType compileFlag,
    /// const char *opPath, aclrtStream stream)`: compiles operator `opType` for these
    /// tensors (once) and enqueues it.
    optional fn aclopCompileAndExecute(
        op_type: *const c_char,
        num_inputs: i32,
        input_desc: *const *const aclTensorDesc,
        inputs: *const *const aclDataBuffer,
        num_outputs: i32,
        output_desc: *const *const aclTensorDesc,
        outputs: *const *mut aclDataBuffer,
        attr: *const aclopAttr,
        engine_type: i32,
        compile_flag: i32,
        op_path: *const c_char,
        stream: aclrtStream,
    ) -> aclError;
    /// `aclError aclopCompileAndExecuteV2(const char *opType, int numInputs, aclTensorDesc
    /// *inputDesc[], aclDataBuffer *inputs[], int numOutputs, aclTensorDesc *outputDesc[],
    /// aclDataBuffer *outputs[], aclopAttr *attr, aclopEngineType engineType,
    /// aclopCompileType compileFlag, const char *opPath, aclrtStream stream)`: as
    /// `aclopCompileAndExecute`, for operators whose output shapes the call may update
    /// (torch_npu's path for those, such as `NonZero`).
    optional fn aclopCompileAndExecuteV2(
        op_type: *const c_char,
        num_inputs: i32,
        input_desc: *mut *mut aclTensorDesc,
        inputs: *mut *mut aclDataBuffer,
        num_outputs: i32,
        output_desc: *mut *mut aclTensorDesc,
        outputs: *mut *mut aclDataBuffer,
        attr: *mut aclopAttr,
        engine_type: i32,
        compile_flag: i32,
        op_path: *const c_char,
        stream: aclrtStream,
    ) -> aclError;
    /// `aclError aclSetCompileopt(aclCompileOpt opt, const char *value)`.
    optional fn aclSetCompileopt(opt: i32, value: *const c_char) -> aclError;
    /// `aclError aclGetCompileopt(aclCompileOpt opt, char *value, size_t length)`.
    optional fn aclGetCompileopt(opt: i32, value: *mut c_char, length: usize) -> aclError;
    /// `size_t aclGetCompileoptSize(aclCompileOpt opt)`: the bytes a value of `opt` takes
    /// (with its NUL).
    optional fn aclGetCompileoptSize(opt: i32) -> usize;
        }
    };
}

crate::acl_op_functions!(crate::c_api!());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_old_operator_path_is_listed_once_and_optional() {
        let symbols = AclOpFunctions::SYMBOLS;
        assert_eq!(symbols.len(), 29);
        assert!(symbols.iter().all(|s| !s.required));
        let mut names: Vec<&str> = symbols.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), symbols.len());
    }
}
