//! The average HCCL lacks (`HcclReduceOp` has sum, prod, max and min): HCCL's sum, then
//! `aclnnMuls` by `1 / ranks` over the receive buffer on the same stream. The scale is planned
//! before the sum is enqueued, so a refusal leaves nothing half done on the stream.

use crate::aclnn::{self, Executor, Scalar, Tensor};
use crate::calls::Handle;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DevicePtr;
use braid_stream_core::DType;

/// A planned in-place `buf *= factor` over `elements` values, launched after the sum.
pub(super) struct Scale {
    api: &'static aclnn::AclnnApi,
    // The descriptors stay alive until the launch.
    _buf: Tensor,
    _factor: Scalar,
    executor: Executor,
}

impl Scale {
    /// Plans the scale of `elements` values of `dtype` at `buf` by `factor`. Errors: the aclnn
    /// libraries do not load, aclnn refuses the plan, or it asks for workspace (a
    /// collective's follow-up takes none from the stream's pool).
    pub(super) fn plan(
        buf: DevicePtr,
        elements: u64,
        dtype: DType,
        factor: f32,
    ) -> Result<Scale, HalError> {
        let api = aclnn::api().map_err(|e| HalError::from(crate::OpenError::Load(e)))?;
        let dims = [elements as i64];
        let tensor = Tensor::new(api, &dims, dtype, buf)?;
        let scalar = Scalar::new(api, factor)?;
        let ops = api.operators();
        let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors (in place: self and out are one tensor) and out pointers.
            unsafe {
                (ops.aclnnMulsGetWorkspaceSize)(
                    tensor.as_ptr(),
                    scalar.as_ptr(),
                    tensor.as_ptr(),
                    ws,
                    ex,
                )
            }
        })?;
        if executor.workspace_size() > 0 {
            return Err(HalError::Unsupported(
                "average: this aclnnMuls asks for workspace; average with a sum and a scale of your own",
            ));
        }
        Ok(Scale {
            api,
            _buf: tensor,
            _factor: scalar,
            executor,
        })
    }

    /// Enqueues the scale on `stream` (after the sum it follows).
    pub(super) fn launch(self, stream: Handle) -> Result<(), HalError> {
        let launch = self.api.operators().aclnnMuls;
        // SAFETY: aclnnMuls launches the executor planned for it, on the live stream of the
        // collective; the buffer is the collective's receive buffer, reserved in stream
        // order by its caller; no workspace was asked for.
        unsafe {
            self.executor.launch(
                launch,
                "aclnnMuls",
                std::ptr::null_mut(),
                0,
                stream as *mut std::ffi::c_void,
            )
        }?;
        Ok(())
    }
}
