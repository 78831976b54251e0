//! `aclnnNpuFormatCast`: a tensor converted to or from a device-private storage format
//! (`NC1HWC0`, `FRACTAL_Z`, `FRACTAL_NZ`, `NDC1HWC0`, `FRACTAL_Z_3D`), as
//! `torch_npu.npu_format_cast` asks for it, by braid's [`FormatCast`] operator (the layouts
//! are `braid_stream_core::ops::Blocked`'s).
//!
//! - `aclnnNpuFormatCastCalculateSizeAndFormat` says the storage shape of the converted
//!   tensor (the blocked shape for a private format, the view's for a plain one) and its
//!   format, in an array allocated with `malloc` (what C++'s `delete[]`, torch_npu's way of
//!   freeing it, releases for an array of `int64_t`). The block width `C0` is 32 bytes of
//!   `additionalDtype` (the source's type when -1): 8 for float32 and int32, 16 for float16
//!   and bfloat16, 32 for int8 and uint8, as CANN computes it on the Atlas A2 and A3.
//! - `aclnnNpuFormatCastGetWorkspaceSize` takes one plain and one private descriptor: the
//!   private one's view dimensions are the logical shape, its storage dimensions the blocked
//!   shape (its last one `C0`), the plain one's format names the dimensions (`NCHW`, `NHWC`,
//!   ...; `ND`, `NC` and `NCL` by rank).
//! - A conversion between two plain or two private formats is CANN's "unsupported format
//!   transformation" (`ACLNN_ERR_RUNTIME_ERROR`); a type CANN does not convert (it takes
//!   int8, uint8, int32, uint32, float32, float16 and bfloat16) or a shape a format does not
//!   take is `ACLNN_ERR_PARAM_INVALID`, naming the operand.

use super::exports::{launch, launcher, plan, planner};
use super::{op_work, tensor_of, Objects, TensorDesc, Work};
use crate::errmsg::{fail, ret, Fail};
use braid_acl_sys::aclnn::{
    aclOpExecutor, aclTensor, aclnnStatus, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_ERR_RUNTIME_ERROR,
};
use braid_acl_sys::formats::{acl_of_plain, acl_of_private, plain_of_acl, private_of_acl};
use braid_stream_core::ops::{Blocked, CastDirection, FormatCast, PlainFormat, TensorOp};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::types::DevicePtr;
use braid_stream_core::DType;
use std::ffi::c_void;

launcher!(aclnnNpuFormatCast);

/// The data types CANN converts (int8, uint8, int32, uint32, float32, float16, bfloat16).
const CAST_TYPES: [DType; 7] = [
    DType::I8,
    DType::U8,
    DType::I32,
    DType::U32,
    DType::F32,
    DType::F16,
    DType::BF16,
];

/// The bytes of one block row (`C0` elements).
const BLOCK_BYTES: u64 = 32;

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// A conversion CANN does not make.
fn unsupported(call: &str, from: i32, to: i32) -> Fail {
    fail(
        ACLNN_ERR_RUNTIME_ERROR,
        format!("{call}: unsupported format transformation from format {from} to format {to}: one side must be a plain format (ND, NCHW, NHWC, HWCN, NCDHW, NDHWC, DHWCN), the other a private one (NC1HWC0, FRACTAL_Z, FRACTAL_NZ, NDC1HWC0, FRACTAL_Z_3D) that converts from it"),
    )
}

/// The data type of `desc` (named `role`), one CANN converts.
fn cast_dtype(call: &str, role: &str, desc: &TensorDesc) -> Result<DType, Fail> {
    braid_acl_sys::dtypes::dtype_of_acl(desc.dtype)
        .filter(|t| CAST_TYPES.contains(t))
        .ok_or_else(|| {
            invalid(
                call,
                format!(
                    "{role} has data type {}; the format cast takes int8, uint8, int32, uint32, float32, float16 and bfloat16",
                    desc.dtype
                ),
            )
        })
}

/// The dimensions of `desc` as sizes.
fn dims_of(call: &str, role: &str, dims: &[i64]) -> Result<Vec<usize>, Fail> {
    dims.iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| invalid(call, format!("{role} has negative dimensions {dims:?}")))
}

/// The private side of a conversion: `desc` (named `role`) in a private format, its logical
/// shape named by `plain`; its storage as a contiguous tensor and its layout.
fn private_side(
    call: &str,
    role: &'static str,
    desc: &TensorDesc,
    plain: PlainFormat,
) -> Result<(Tensor, Blocked), Fail> {
    let format = private_of_acl(desc.format).ok_or_else(|| {
        invalid(
            call,
            format!("{role} has format {}, not a private one", desc.format),
        )
    })?;
    let dtype = cast_dtype(call, role, desc)?;
    let shape = dims_of(call, role, &desc.dims)?;
    let storage = dims_of(call, role, &desc.storage)?;
    let c0 = storage.last().copied().unwrap_or(0);
    let layout = Blocked::new("aclnnNpuFormatCast", role, format, plain, &shape, c0)
        .map_err(|e| invalid(call, e.to_string()))?;
    if layout.storage_shape() != storage {
        return Err(invalid(
            call,
            format!(
                "{role}'s storage shape {storage:?} is not the {format} storage of its view {shape:?} with C0 {c0}, {:?}",
                layout.storage_shape()
            ),
        ));
    }
    if desc.offset != 0 {
        return Err(invalid(
            call,
            format!(
                "{role} starts {} elements into its {format} storage; a private storage is converted whole",
                desc.offset
            ),
        ));
    }
    let t = Tensor::new(
        braid_stream_core::DeviceSlice::new(
            DevicePtr(desc.data),
            layout.storage_numel() as u64 * dtype.size(),
        ),
        dtype,
        &storage,
    )
    .map_err(|e| invalid(call, format!("{role}: {e}")))?;
    Ok((t, layout))
}

/// The plain format of `desc` (named `role`).
fn plain_format(call: &str, role: &str, desc: &TensorDesc) -> Result<PlainFormat, Fail> {
    plain_of_acl(desc.format)
        .ok_or_else(|| invalid(call, format!("{role} has unknown format {}", desc.format)))
}

/// The conversion of `src` into `dst`.
fn format_cast(call: &str, o: &Objects, src: usize, dst: usize) -> Result<(Work, u64), Fail> {
    let (s, d) = (
        o.tensor(call, "srcTensor", src)?,
        o.tensor(call, "dstTensor", dst)?,
    );
    let (src_private, dst_private) = (
        private_of_acl(s.format).is_some(),
        private_of_acl(d.format).is_some(),
    );
    let op = match (src_private, dst_private) {
        (false, true) => {
            let plain = plain_format(call, "srcTensor", s)?;
            let (storage, layout) = private_side(call, "dstTensor", d, plain)?;
            FormatCast {
                src: tensor_of(call, "srcTensor", s)?,
                dst: storage,
                layout,
                direction: CastDirection::ToPrivate,
            }
        }
        (true, false) => {
            let plain = plain_format(call, "dstTensor", d)?;
            let (storage, layout) = private_side(call, "srcTensor", s, plain)?;
            FormatCast {
                src: storage,
                dst: tensor_of(call, "dstTensor", d)?,
                layout,
                direction: CastDirection::ToPlain,
            }
        }
        _ => return Err(unsupported(call, s.format, d.format)),
    };
    op_work(call, TensorOp::FormatCast(op), 0)
}

planner! {
    /// `aclnnNpuFormatCastGetWorkspaceSize(srcTensor, dstTensor, workspaceSize, executor)`:
    /// `dstTensor` = `srcTensor` converted to or from a private format.
    fn aclnnNpuFormatCastGetWorkspaceSize(
        src_tensor: *const aclTensor,
        dst_tensor: *mut aclTensor,
    ) |CALL, o| {
        format_cast(CALL, o, src_tensor as usize, dst_tensor as usize)
    }
}

/// The storage shape and format `src` converted to `dst_format` has.
fn converted(
    call: &str,
    src: usize,
    dst_format: i32,
    additional_dtype: i32,
) -> Result<(Vec<i64>, i32), Fail> {
    let o = super::objects();
    let s = o.tensor(call, "srcTensor", src)?;
    let dtype = cast_dtype(call, "srcTensor", s)?;
    let block_type = match additional_dtype {
        -1 => dtype,
        t => braid_acl_sys::dtypes::dtype_of_acl(t)
            .filter(|t| CAST_TYPES.contains(t))
            .ok_or_else(|| {
                invalid(
                    call,
                    format!("additionalDtype {t} is not -1 nor a type the format cast takes"),
                )
            })?,
    };
    let shape = dims_of(call, "srcTensor", &s.dims)?;
    match (private_of_acl(s.format), private_of_acl(dst_format)) {
        (None, Some(format)) => {
            let plain = plain_format(call, "srcTensor", s)?;
            let c0 = (BLOCK_BYTES / block_type.size()) as usize;
            let layout = Blocked::new("aclnnNpuFormatCast", "srcTensor", format, plain, &shape, c0)
                .map_err(|e| invalid(call, e.to_string()))?;
            let storage = layout.storage_shape().iter().map(|&d| d as i64).collect();
            Ok((storage, acl_of_private(format)))
        }
        (Some(_), None) => {
            let plain =
                plain_of_acl(dst_format).ok_or_else(|| unsupported(call, s.format, dst_format))?;
            // The source must be a storage this plain format converts to.
            private_side(call, "srcTensor", s, plain)?;
            Ok((s.dims.clone(), acl_of_plain(plain)))
        }
        _ => Err(unsupported(call, s.format, dst_format)),
    }
}

/// `aclnnStatus aclnnNpuFormatCastCalculateSizeAndFormat(const aclTensor *srcTensor, const
/// int dstFormat, const int additionalDtype, int64_t **dstShape, uint64_t *dstShapeSize, int
/// *actualFormat)`: the storage shape and format of `srcTensor` converted to `dstFormat`;
/// the shape in an array of `*dstShapeSize` values the caller frees.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnNpuFormatCastCalculateSizeAndFormat(
    src_tensor: *const aclTensor,
    dst_format: i32,
    additional_dtype: i32,
    dst_shape: *mut *mut i64,
    dst_shape_size: *mut u64,
    actual_format: *mut i32,
) -> aclnnStatus {
    const CALL: &str = "aclnnNpuFormatCastCalculateSizeAndFormat";
    if dst_shape.is_null() || dst_shape_size.is_null() || actual_format.is_null() {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{CALL}: dstShape, dstShapeSize or actualFormat is null"),
        )));
    }
    let (shape, format) = match converted(CALL, src_tensor as usize, dst_format, additional_dtype) {
        Ok(v) => v,
        Err(e) => return ret(Err(e)),
    };
    // SAFETY: a plain allocation of the shape's bytes (at least one byte, so a non-null
    // answer is never confused with failure); `malloc`'s memory is what libstdc++'s
    // `operator delete[]` frees for an array of a trivially destructible type.
    let array = unsafe { libc::malloc((shape.len() * 8).max(1)) }.cast::<i64>();
    if array.is_null() {
        return ret(Err(fail(
            ACLNN_ERR_RUNTIME_ERROR,
            format!("{CALL}: no host memory for the {} dimensions", shape.len()),
        )));
    }
    // SAFETY: `array` holds `shape.len()` values; the out pointers are valid for a write
    // (checked non-null, the caller's guarantee).
    unsafe {
        std::ptr::copy_nonoverlapping(shape.as_ptr(), array, shape.len());
        dst_shape.write(array);
        dst_shape_size.write(shape.len() as u64);
        actual_format.write(format);
    }
    0
}

braid_acl_sys::aclnn_format_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::format_operator_fns;)
);
