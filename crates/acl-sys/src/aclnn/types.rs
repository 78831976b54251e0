//! aclnn's C types: opaque handles, `aclDataType`, `aclFormat` (values from CANN's
//! `acl_base.h`, as published in CANN's `aclDataType` API page).
#![allow(non_camel_case_types)]

/// `aclnnStatus`: 0 is success (the `ACLNN_*` codes of this module).
pub type aclnnStatus = i32;

/// `aclTensor`: an opaque tensor descriptor (shape, strides, data type, device address).
#[repr(C)]
pub struct aclTensor {
    _opaque: [u8; 0],
}

/// `aclScalar`: an opaque host scalar with its data type.
#[repr(C)]
pub struct aclScalar {
    _opaque: [u8; 0],
}

/// `aclIntArray`: an opaque array of `int64_t` (dimensions, for example).
#[repr(C)]
pub struct aclIntArray {
    _opaque: [u8; 0],
}

/// `aclTensorList`: an opaque list of tensor descriptors (`aclCreateTensorList`); destroying
/// it destroys the tensors it holds.
#[repr(C)]
pub struct aclTensorList {
    _opaque: [u8; 0],
}

/// `aclOpExecutor`: what `aclnnXxxGetWorkspaceSize` creates and `aclnnXxx` runs (and
/// consumes).
#[repr(C)]
pub struct aclOpExecutor {
    _opaque: [u8; 0],
}

/// `aclDataType` (a C enum, passed as `int`).
pub type aclDataType = i32;
/// `ACL_DT_UNDEFINED`.
pub const ACL_DT_UNDEFINED: aclDataType = -1;
/// `ACL_FLOAT`: fp32.
pub const ACL_FLOAT: aclDataType = 0;
/// `ACL_FLOAT16`.
pub const ACL_FLOAT16: aclDataType = 1;
/// `ACL_INT8`.
pub const ACL_INT8: aclDataType = 2;
/// `ACL_INT32`.
pub const ACL_INT32: aclDataType = 3;
/// `ACL_UINT8`.
pub const ACL_UINT8: aclDataType = 4;
/// `ACL_INT16`.
pub const ACL_INT16: aclDataType = 6;
/// `ACL_UINT16`.
pub const ACL_UINT16: aclDataType = 7;
/// `ACL_UINT32`.
pub const ACL_UINT32: aclDataType = 8;
/// `ACL_INT64`.
pub const ACL_INT64: aclDataType = 9;
/// `ACL_UINT64`.
pub const ACL_UINT64: aclDataType = 10;
/// `ACL_DOUBLE`.
pub const ACL_DOUBLE: aclDataType = 11;
/// `ACL_BOOL`: one byte, 0 or 1.
pub const ACL_BOOL: aclDataType = 12;
/// `ACL_BF16`.
pub const ACL_BF16: aclDataType = 27;

/// `aclFormat` (a C enum, passed as `int`).
pub type aclFormat = i32;
/// `ACL_FORMAT_UNDEFINED`.
pub const ACL_FORMAT_UNDEFINED: aclFormat = -1;
/// `ACL_FORMAT_NCHW`.
pub const ACL_FORMAT_NCHW: aclFormat = 0;
/// `ACL_FORMAT_NHWC`.
pub const ACL_FORMAT_NHWC: aclFormat = 1;
/// `ACL_FORMAT_ND`: a plain N-dimensional row-major layout.
pub const ACL_FORMAT_ND: aclFormat = 2;
/// `ACL_FORMAT_NC1HWC0`: the 5-D blocked layout of the cube unit (C cut into blocks of C0).
pub const ACL_FORMAT_NC1HWC0: aclFormat = 3;
/// `ACL_FORMAT_FRACTAL_Z`: the blocked layout of convolution weights.
pub const ACL_FORMAT_FRACTAL_Z: aclFormat = 4;
/// `ACL_FORMAT_NC1HWC0_C04`: `NC1HWC0` with blocks of 4 channels.
pub const ACL_FORMAT_NC1HWC0_C04: aclFormat = 12;
/// `ACL_FORMAT_HWCN`.
pub const ACL_FORMAT_HWCN: aclFormat = 16;
/// `ACL_FORMAT_NDHWC`.
pub const ACL_FORMAT_NDHWC: aclFormat = 27;
/// `ACL_FORMAT_FRACTAL_NZ`: the fractal layout of matrix operands (16 × C0 blocks).
pub const ACL_FORMAT_FRACTAL_NZ: aclFormat = 29;
/// `ACL_FORMAT_NCDHW`.
pub const ACL_FORMAT_NCDHW: aclFormat = 30;
/// `ACL_FORMAT_DHWCN`.
pub const ACL_FORMAT_DHWCN: aclFormat = 31;
/// `ACL_FORMAT_NDC1HWC0`: the 6-D blocked layout of 3-D activations.
pub const ACL_FORMAT_NDC1HWC0: aclFormat = 32;
/// `ACL_FRACTAL_Z_3D`: the blocked layout of 3-D convolution weights.
pub const ACL_FORMAT_FRACTAL_Z_3D: aclFormat = 33;
/// `ACL_FORMAT_NC`.
pub const ACL_FORMAT_NC: aclFormat = 35;
/// `ACL_FORMAT_NCL`.
pub const ACL_FORMAT_NCL: aclFormat = 47;
/// `ACL_FORMAT_FRACTAL_NZ_C0_16` (`_C0_32`, `_C0_2`, `_C0_4`, `_C0_8` follow): `FRACTAL_NZ`
/// with the block width named.
pub const ACL_FORMAT_FRACTAL_NZ_C0_16: aclFormat = 50;
/// The device-private formats of `acl_base.h` (`NC1HWC0`, `FRACTAL_Z`, `NC1HWC0_C04`,
/// `FRACTAL_NZ`, `NDC1HWC0`, `FRACTAL_Z_3D`, the `FRACTAL_NZ_C0_*` variants): a tensor in
/// one of them is stored in blocks, not row-major in its view's shape. The others (`NCHW`,
/// `NHWC`, `ND`, `HWCN`, `NDHWC`, `NCDHW`, `NC`, `NCL`) name how a row-major tensor's
/// dimensions are read.
pub const PRIVATE_FORMATS: [aclFormat; 11] = [3, 4, 12, 29, 32, 33, 50, 51, 52, 53, 54];

/// `aclnnMm`'s `cubeMathType`: compute in the tensors' data type.
pub const CUBE_MATH_KEEP_DTYPE: i8 = 0;
