//! `Identity` on CANN's old single-operator path: `y` = `x`, each described with its origin
//! (logical shape, the format naming its dimensions) and its storage (shape and format).
//! torch_npu 2.14's `npu_format_cast` makes it (on an Atlas A2/A3 it does not use
//! `aclnnNpuFormatCast`): from a plain tensor into one stored in a device-private format,
//! back again before a copy to the host or a collective, or between two plain formats (a
//! copy, what the cast is while `torch.npu.config.allow_internal_format` is off).
//!
//! The conversion is braid's [`FormatCast`] operator, as in `aclnnNpuFormatCast`: the
//! private side's layout is its storage format over its origin shape, its block width `C0`
//! its storage's last dimension (torch_npu uses 16 for float32 where CANN's aclnn uses 8;
//! both are read as given). Two plain tensors of as many elements are copied. Anything else
//! — two private formats that differ, a storage that is not its origin's blocked shape, a
//! buffer too small — is `ACL_ERROR_INVALID_PARAM` naming the tensor, and fails the device
//! as every refused launch does.

use super::op_path::OpOperand;
use crate::aclnn::exports::run_work;
use crate::aclnn::Work;
use crate::codes::ACL_ERROR_INVALID_PARAM;
use crate::errmsg::{fail, Fail};
use braid_acl_sys::formats::{plain_of_acl, private_of_acl};
use braid_stream_core::ops::{Blocked, Cast, CastDirection, FormatCast, TensorOp};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::{DType, DevicePtr, DeviceSlice};

fn invalid(call: &str, message: String) -> Fail {
    fail(
        ACL_ERROR_INVALID_PARAM,
        format!("{call}: Identity: {message}"),
    )
}

/// `dims` as sizes.
fn sizes(call: &str, role: &str, dims: &[i64]) -> Result<Vec<usize>, Fail> {
    dims.iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| invalid(call, format!("{role} has negative dimensions {dims:?}")))
}

/// A contiguous tensor of `shape` in `t`'s buffer, which must hold it.
fn contiguous(
    call: &str,
    role: &str,
    t: &OpOperand,
    dtype: DType,
    shape: &[usize],
) -> Result<Tensor, Fail> {
    let (data, size) = t.data;
    let tensor = Tensor::new(DeviceSlice::new(DevicePtr(data), size), dtype, shape)
        .map_err(|e| invalid(call, format!("{role}'s buffer: {e}")))?;
    Ok(tensor)
}

/// The layout of `t` (named `role`), stored in a private format.
fn layout(call: &str, role: &'static str, t: &OpOperand) -> Result<Blocked, Fail> {
    let format = private_of_acl(t.format).ok_or_else(|| {
        invalid(
            call,
            format!("{role} has storage format {}, not a private one", t.format),
        )
    })?;
    let plain = plain_of_acl(t.origin_format).ok_or_else(|| {
        invalid(
            call,
            format!(
                "{role}'s origin format {} does not name a plain tensor's dimensions",
                t.origin_format
            ),
        )
    })?;
    let shape = sizes(call, role, &t.origin_dims)?;
    let storage = sizes(call, role, &t.dims)?;
    let c0 = storage.last().copied().unwrap_or(0);
    let layout = Blocked::new("Identity", role, format, plain, &shape, c0)
        .map_err(|e| invalid(call, e.to_string()))?;
    if layout.storage_shape() != storage {
        return Err(invalid(
            call,
            format!(
                "{role}'s storage shape {storage:?} is not the {format} storage of its origin shape {shape:?} with C0 {c0}, {:?}",
                layout.storage_shape()
            ),
        ));
    }
    Ok(layout)
}

/// The plain tensor `t` (named `role`) as `shape`: its storage must hold as many elements.
fn plain(
    call: &str,
    role: &str,
    t: &OpOperand,
    dtype: DType,
    shape: &[usize],
) -> Result<Tensor, Fail> {
    let stored: usize = sizes(call, role, &t.dims)?.iter().product();
    let want: usize = shape.iter().product();
    if stored != want {
        return Err(invalid(
            call,
            format!(
                "{role} holds {stored} elements ({:?}); the other tensor has {want} ({shape:?})",
                t.dims
            ),
        ));
    }
    contiguous(call, role, t, dtype, shape)
}

/// The work of `y` = `x`.
fn work(call: &str, x: &OpOperand, y: &OpOperand) -> Result<Work, Fail> {
    if x.dtype != y.dtype {
        return Err(invalid(
            call,
            format!("x has data type {}, y {}", x.dtype, y.dtype),
        ));
    }
    let dtype = braid_acl_sys::dtypes::dtype_of_acl(x.dtype).ok_or_else(|| {
        invalid(
            call,
            format!(
                "x has data type {}, which braid-acl-sim does not copy",
                x.dtype
            ),
        )
    })?;
    let (x_private, y_private) = (
        private_of_acl(x.format).is_some(),
        private_of_acl(y.format).is_some(),
    );
    let op = match (x_private, y_private) {
        (false, false) => {
            let n = sizes(call, "x", &x.dims)?.iter().product::<usize>();
            TensorOp::Cast(Cast {
                x: plain(call, "x", x, dtype, &[n])?,
                out: plain(call, "y", y, dtype, &[n])?,
            })
        }
        (false, true) => {
            let layout = layout(call, "y", y)?;
            TensorOp::FormatCast(FormatCast {
                src: plain(call, "x", x, dtype, layout.shape())?,
                dst: contiguous(call, "y", y, dtype, &layout.storage_shape())?,
                layout,
                direction: CastDirection::ToPrivate,
            })
        }
        (true, false) => {
            let layout = layout(call, "x", x)?;
            TensorOp::FormatCast(FormatCast {
                src: contiguous(call, "x", x, dtype, &layout.storage_shape())?,
                dst: plain(call, "y", y, dtype, layout.shape())?,
                layout,
                direction: CastDirection::ToPlain,
            })
        }
        (true, true) => {
            let (lx, ly) = (layout(call, "x", x)?, layout(call, "y", y)?);
            if lx != ly {
                return Err(invalid(
                    call,
                    format!(
                        "from {} {:?} to {} {:?}: braid-acl-sim converts between a private format and a plain one only",
                        lx.format(),
                        lx.shape(),
                        ly.format(),
                        ly.shape()
                    ),
                ));
            }
            let n = lx.storage_numel();
            TensorOp::Cast(Cast {
                x: contiguous(call, "x", x, dtype, &[n])?,
                out: contiguous(call, "y", y, dtype, &[n])?,
            })
        }
    };
    let kernel = op.kernel().map_err(|e| invalid(call, e.to_string()))?;
    Ok(Work::Kernel(kernel.into()))
}

/// Runs `Identity` of `inputs` into `outputs` on `stream`.
pub(super) fn run(
    call: &str,
    stream: usize,
    inputs: &[OpOperand],
    outputs: &[OpOperand],
) -> Result<(), Fail> {
    let ([x], [y]) = (inputs, outputs) else {
        return Err(invalid(
            call,
            format!(
                "takes one input and one output, {} and {} were given",
                inputs.len(),
                outputs.len()
            ),
        ));
    };
    let work = work(call, x, y)?;
    run_work(call, stream, None, &work)
}
