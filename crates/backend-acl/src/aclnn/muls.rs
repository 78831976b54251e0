//! A ready-made user operator: `y = factor * x` through `aclnnMuls`, as a native-stream body
//! ([`native_op`]). The conformance suite's user operator on ACL, and what `braid conformance`
//! runs it with.

use super::{api, Executor, Scalar, Tensor};
use crate::ffi::aclrtStream;
use crate::native::{native_op, NativeOpFn};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DeviceSlice;
use std::ffi::c_void;
use std::sync::Arc;

/// The body of an operator computing `y = factor * x` over `elements` values of `dtype` with
/// `aclnnMuls`, enqueued on the native stream it is launched on. Its descriptors are made and
/// destroyed inside the body; its workspace is `workspace` (taken stream-ordered by the caller
/// before the launch, as `Stream::workspace` hands it out), and a launch that needs more is
/// refused with [`HalError::InvalidArgument`] before anything is enqueued.
///
/// Errors: the aclnn library does not load.
pub fn muls_op(
    x: DeviceSlice,
    y: DeviceSlice,
    elements: u64,
    dtype: DType,
    factor: f32,
    workspace: DeviceSlice,
) -> Result<Arc<NativeOpFn>, HalError> {
    let api = api().map_err(|e| HalError::from(crate::OpenError::Load(e)))?;
    let body = move |stream: aclrtStream| -> Result<(), HalError> {
        let n = [elements as i64];
        let x = Tensor::new(api, &n, dtype, x.ptr)?;
        let y = Tensor::new(api, &n, dtype, y.ptr)?;
        let factor = Scalar::new(api, factor)?;
        let ops = api.operators();
        let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors and out pointers.
            unsafe {
                (ops.aclnnMulsGetWorkspaceSize)(x.as_ptr(), factor.as_ptr(), y.as_ptr(), ws, ex)
            }
        })?;
        if executor.workspace_size() > workspace.len {
            return Err(HalError::InvalidArgument(format!(
                "aclnnMuls needs {} bytes of workspace, {} were taken",
                executor.workspace_size(),
                workspace.len
            )));
        }
        // SAFETY: aclnnMuls launches the executor planned for it, on the live stream braid
        // hands the closure; the tensors and the workspace are declared or stream-ordered.
        unsafe {
            executor.launch(
                ops.aclnnMuls,
                "aclnnMuls",
                workspace.ptr.0 as *mut c_void,
                workspace.len,
                stream,
            )
        }?;
        Ok(())
    };
    // SAFETY: the closure enqueues only on the stream it is handed, touches only `x`, `y`
    // (which the operator declares) and the workspace taken beforehand, and never
    // synchronizes.
    Ok(unsafe { native_op(body) })
}
