//! The average HCCL lacks (`HcclReduceOp` has sum, prod, max and min): HCCL's sum with an
//! `aclnnMuls` by `1 / ranks` on the same stream, where `ReduceOp::scales_before_sum` says.
//! In `float16` and `bfloat16` each rank scales a copy of its send buffer (in the workspace
//! the front layer takes in stream order) and HCCL sums the copies, as NCCL's average does,
//! so a mean that fits never overflows; in `float32` HCCL sums and the receive buffer is
//! scaled after. Every scale is planned before anything is enqueued, so a refusal leaves
//! nothing half done on the stream.

use crate::aclnn::{self, Executor, Scalar, Tensor};
use crate::calls::Handle;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DevicePtr;
use braid_stream_core::DType;

/// A planned `dst = src * factor` over `elements` values (in place when `src` is `dst`),
/// launched before or after the sum.
pub(super) struct Scale {
    api: &'static aclnn::AclnnApi,
    // The descriptors stay alive until the launch.
    _tensors: (Tensor, Option<Tensor>),
    _factor: Scalar,
    executor: Executor,
}

impl Scale {
    /// Plans `dst = src * factor` over `elements` values of `dtype`. Errors: the aclnn
    /// libraries do not load, aclnn refuses the plan, or it asks for workspace (a
    /// collective's scale takes none from the stream's pool).
    pub(super) fn plan(
        src: DevicePtr,
        dst: DevicePtr,
        elements: u64,
        dtype: DType,
        factor: f32,
    ) -> Result<Scale, HalError> {
        let api = aclnn::api().map_err(|e| HalError::from(crate::OpenError::Load(e)))?;
        let dims = [elements as i64];
        let input = Tensor::new(api, &dims, dtype, src)?;
        let output = (dst != src)
            .then(|| Tensor::new(api, &dims, dtype, dst))
            .transpose()?;
        let scalar = Scalar::new(api, factor)?;
        let ops = api.operators();
        let out = output.as_ref().unwrap_or(&input);
        let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors (in place, self and out are one tensor) and out pointers.
            unsafe {
                (ops.aclnnMulsGetWorkspaceSize)(
                    input.as_ptr(),
                    scalar.as_ptr(),
                    out.as_ptr(),
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
            _tensors: (input, output),
            _factor: scalar,
            executor,
        })
    }

    /// Enqueues the scale on `stream` (before or after the sum, in stream order).
    pub(super) fn launch(self, stream: Handle) -> Result<(), HalError> {
        let launch = self.api.operators().aclnnMuls;
        // SAFETY: aclnnMuls launches the executor planned for it, on the live stream of the
        // collective; the buffers are the collective's, or the workspace the front layer
        // reserved for it, in stream order; no workspace was asked for.
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
