//! braid's data types and CANN's codes for them, one table each, read both ways: the
//! importer (`braid-backend-acl`) describes braid's tensors and collectives with them and the
//! exporter (`braid-acl-sim`) reads CANN's codes back, so the two can never disagree.

use crate::aclnn::{
    aclDataType, ACL_BF16, ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT16, ACL_INT32,
    ACL_INT64, ACL_INT8, ACL_UINT16, ACL_UINT32, ACL_UINT64, ACL_UINT8,
};
use crate::hccl::{
    HcclDataType, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32,
    HCCL_DATA_TYPE_FP64, HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_INT64,
    HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_UINT8,
};
use braid_stream_core::DType;

/// Every braid data type with its `aclDataType` (`acl_base.h`).
const ACL_TYPES: [(DType, aclDataType); 13] = [
    (DType::F32, ACL_FLOAT),
    (DType::F16, ACL_FLOAT16),
    (DType::BF16, ACL_BF16),
    (DType::F64, ACL_DOUBLE),
    (DType::I8, ACL_INT8),
    (DType::I16, ACL_INT16),
    (DType::I32, ACL_INT32),
    (DType::I64, ACL_INT64),
    (DType::U8, ACL_UINT8),
    (DType::U16, ACL_UINT16),
    (DType::U32, ACL_UINT32),
    (DType::U64, ACL_UINT64),
    (DType::Bool, ACL_BOOL),
];

/// Every braid data type HCCL has a code for (`hccl_types.h`); HCCL has no bool.
const HCCL_TYPES: [(DType, HcclDataType); 12] = [
    (DType::F32, HCCL_DATA_TYPE_FP32),
    (DType::F16, HCCL_DATA_TYPE_FP16),
    (DType::BF16, HCCL_DATA_TYPE_BFP16),
    (DType::F64, HCCL_DATA_TYPE_FP64),
    (DType::I8, HCCL_DATA_TYPE_INT8),
    (DType::I16, HCCL_DATA_TYPE_INT16),
    (DType::I32, HCCL_DATA_TYPE_INT32),
    (DType::I64, HCCL_DATA_TYPE_INT64),
    (DType::U8, HCCL_DATA_TYPE_UINT8),
    (DType::U16, HCCL_DATA_TYPE_UINT16),
    (DType::U32, HCCL_DATA_TYPE_UINT32),
    (DType::U64, HCCL_DATA_TYPE_UINT64),
];

/// The `aclDataType` of `dtype`.
pub fn acl_data_type(dtype: DType) -> aclDataType {
    ACL_TYPES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map_or(ACL_FLOAT, |(_, code)| *code)
}

/// braid's data type of an `aclDataType`; `None` for a code braid has no type for
/// (complex, string, the 4-bit and 8-bit float formats...).
pub fn dtype_of_acl(code: aclDataType) -> Option<DType> {
    ACL_TYPES.iter().find(|(_, c)| *c == code).map(|(d, _)| *d)
}

/// The `HcclDataType` `dtype` travels as: its own code, or `HCCL_DATA_TYPE_UINT8` for bool
/// (one byte of 0 or 1, as torch_npu sends it).
pub fn hccl_data_type(dtype: DType) -> HcclDataType {
    let dtype = if dtype == DType::Bool {
        DType::U8
    } else {
        dtype
    };
    HCCL_TYPES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map_or(HCCL_DATA_TYPE_UINT8, |(_, code)| *code)
}

/// braid's data type of an `HcclDataType`; `None` for a code braid has no type for.
pub fn dtype_of_hccl(code: HcclDataType) -> Option<DType> {
    HCCL_TYPES.iter().find(|(_, c)| *c == code).map(|(d, _)| *d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_its_codes() {
        for dtype in DType::ALL {
            assert_eq!(dtype_of_acl(acl_data_type(dtype)), Some(dtype), "{dtype}");
            let back = dtype_of_hccl(hccl_data_type(dtype));
            let expected = if dtype == DType::Bool {
                DType::U8
            } else {
                dtype
            };
            assert_eq!(back, Some(expected), "{dtype}");
        }
        assert_eq!(acl_data_type(DType::BF16), 27);
        assert_eq!(dtype_of_acl(16), None);
        assert_eq!(dtype_of_hccl(HCCL_DATA_TYPE_BFP16), Some(DType::BF16));
    }
}
