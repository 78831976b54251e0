//! braid's conversion to and from a device-private storage format
//! (`braid_stream_core::ops::FormatCast`) as `aclnnNpuFormatCast`: the plain side described
//! with the format naming its dimensions, the private side as torch_npu describes a tensor
//! stored in a private format (its logical shape, the private format, the blocked storage's
//! dimensions).

use super::kernels::AclPrepared;
use super::lower::{missing, prepared};
use super::objects::{Executor, Tensor};
use super::AclnnApi;
use braid_acl_sys::formats::acl_of_plain;
use braid_stream_core::hal::HalError;
use braid_stream_core::ops::{CastDirection, FormatCast};

/// Plans `f` as `aclnnNpuFormatCast`.
pub(super) fn format_cast(api: &'static AclnnApi, f: &FormatCast) -> Result<AclPrepared, HalError> {
    let named = acl_of_plain(f.layout.plain());
    let (src, dst) = match f.direction {
        CastDirection::ToPrivate => (
            Tensor::view_named(api, &f.src, named)?,
            Tensor::stored(api, &f.dst, &f.layout)?,
        ),
        CastDirection::ToPlain => (
            Tensor::stored(api, &f.src, &f.layout)?,
            Tensor::view_named(api, &f.dst, named)?,
        ),
    };
    let table = api.format_operators();
    match (
        table.aclnnNpuFormatCastGetWorkspaceSize,
        table.aclnnNpuFormatCast,
    ) {
        (Some(get), Some(launch)) => {
            let executor = Executor::plan(api, "aclnnNpuFormatCastGetWorkspaceSize", |ws, ex| {
                // SAFETY: live descriptors and out pointers; the descriptors stay alive
                // (held) until the launch has been enqueued.
                unsafe { get(src.as_ptr(), dst.as_ptr(), ws, ex) }
            });
            prepared(
                executor,
                launch,
                "aclnnNpuFormatCast",
                vec![Box::new(src), Box::new(dst)],
            )
        }
        _ => Err(missing("aclnnNpuFormatCast")),
    }
}
