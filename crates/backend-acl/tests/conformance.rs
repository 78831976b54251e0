//! braid's conformance suite on the ACL backend, loading `braid-acl-sim` through the backend's
//! real loading path (the function table, error mapping, thread binding and `aclmdlRI*`
//! capture all run). Built-in kernels run as aclnn operators; the suite's user operator runs
//! `aclnnMuls` in a native-stream closure. The collective cases run through HCCL
//! (braid-collective's `acl` feature over `braid-acl-sim`'s HCCL).

mod common;

use braid_backend_acl::aclnn::{self, Executor, Scalar, Tensor};
use braid_backend_acl::ffi::aclrtStream;
use braid_backend_acl::{native_op, AclBackend, NativeOpFn};
use braid_conformance::ScaleOpArgs;
use braid_stream_core::hal::HalError;
use std::ffi::c_void;
use std::sync::Arc;

/// The suite's user operator `y = factor * x` on ACL: `aclnnMuls` enqueued on the native
/// stream, its descriptors made and destroyed in the closure, its workspace the one the
/// launching stream handed out (`Stream::workspace`) before the launch.
fn acl_scale_body(args: ScaleOpArgs) -> Result<Arc<NativeOpFn>, String> {
    let api = aclnn::api().map_err(|e| e.to_string())?;
    let body = move |stream: aclrtStream| -> Result<(), HalError> {
        let n = [args.elements as i64];
        let x = Tensor::new(api, &n, args.dtype, args.x.ptr)?;
        let y = Tensor::new(api, &n, args.dtype, args.y.ptr)?;
        let factor = Scalar::new(api, args.factor)?;
        let ops = api.operators();
        let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors and out pointers.
            unsafe {
                (ops.aclnnMulsGetWorkspaceSize)(x.as_ptr(), factor.as_ptr(), y.as_ptr(), ws, ex)
            }
        })?;
        if executor.workspace_size() > args.workspace.len {
            return Err(HalError::InvalidArgument(format!(
                "aclnnMuls needs {} bytes of workspace, {} were taken",
                executor.workspace_size(),
                args.workspace.len
            )));
        }
        // SAFETY: aclnnMuls launches the executor planned for it, on the live stream braid
        // hands the closure; the tensors and the workspace are declared or stream-ordered.
        unsafe {
            executor.launch(
                ops.aclnnMuls,
                "aclnnMuls",
                args.workspace.ptr.0 as *mut c_void,
                args.workspace.len,
                stream,
            )
        }?;
        Ok(())
    };
    // SAFETY: the closure enqueues only on the stream it is handed, touches only the declared
    // ranges and the workspace taken beforehand, and never synchronizes.
    Ok(unsafe { native_op(body) })
}

braid_conformance::conformance_tests!(
    AclBackend,
    common::device,
    scale_body = acl_scale_body,
    node = common::node,
);

braid_conformance::collective_conformance_tests!(AclBackend, common::device, node = common::node);
