//! Workspace the simulator's kernels ask for: none by default (the simulator's kernels need
//! none), or what a [`WorkspaceSizes`] model says, so that a dry run on the simulator asks
//! the caching allocator for the same workspace another backend's kernels would (aclnn's
//! `GetWorkspaceSize` answers without launching).

use braid_stream_core::hal::{HalError, PreparedLaunch};
use braid_stream_core::kernel::TypedKernel;
use std::fmt;
use std::sync::Arc;

/// The function a [`WorkspaceSizes`] model calls.
type SizeFn = dyn Fn(&TypedKernel) -> Result<u64, HalError> + Send + Sync;

/// How many bytes of workspace each built-in kernel launch asks for
/// ([`crate::SimConfig::workspace_sizes`]). The front layer takes that much from the device's
/// workspace provider (the caching allocator: inside a capture, from the graph's pool) for
/// each launch, as it does on ACL. An error from the model fails the launch with it.
///
/// ```
/// use braid_backend_sim::{SimConfig, WorkspaceSizes};
/// use braid_stream_core::Kernel;
/// // 1 KiB for reductions, nothing for the rest (braid-acl-sim's aclnnReduceSum asks this).
/// let sizes = WorkspaceSizes::new(|k| {
///     Ok(if matches!(k.kernel, Kernel::ReduceSum { .. }) { 1024 } else { 0 })
/// });
/// let config = SimConfig::new().workspace_sizes(sizes);
/// assert!(config.workspace_sizes.is_some());
/// ```
#[derive(Clone)]
pub struct WorkspaceSizes(Arc<SizeFn>);

impl WorkspaceSizes {
    /// A model answering with `f`.
    pub fn new(f: impl Fn(&TypedKernel) -> Result<u64, HalError> + Send + Sync + 'static) -> Self {
        WorkspaceSizes(Arc::new(f))
    }

    /// The workspace `kernel` asks for.
    pub fn size(&self, kernel: &TypedKernel) -> Result<u64, HalError> {
        (self.0)(kernel)
    }
}

impl fmt::Debug for WorkspaceSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WorkspaceSizes(..)")
    }
}

impl PartialEq for WorkspaceSizes {
    /// The same model (one function shared by clones).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A built-in kernel prepared for the simulator, with the workspace it asks for.
#[derive(Clone, Debug)]
pub struct SimPrepared {
    /// The kernel.
    pub kernel: TypedKernel,
    /// Bytes of workspace it asks for (0 without a [`WorkspaceSizes`] model).
    pub workspace: u64,
}

impl PreparedLaunch for SimPrepared {
    fn workspace_size(&self) -> u64 {
        self.workspace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SimConfig, SimDevice};
    use braid_stream_core::hal::{Device as _, Stream as _};
    use braid_stream_core::types::{DevicePtr, DeviceSlice};
    use braid_stream_core::Kernel;

    #[test]
    fn prepared_kernels_ask_for_the_model_s_workspace() {
        let reduce = Kernel::ReduceSum {
            src: DeviceSlice::new(DevicePtr(0x1000), 64),
            dst: DeviceSlice::new(DevicePtr(0x2000), 4),
        }
        .typed(braid_stream_core::DType::F32);
        let plain = SimDevice::new(SimConfig::new()).create_stream(0).unwrap();
        assert_eq!(plain.prepare(&reduce).unwrap().workspace_size(), 0);
        let sizes = WorkspaceSizes::new(|k| match k.kernel {
            Kernel::ReduceSum { .. } => Ok(1024),
            _ => Err(HalError::Unsupported("no such kernel here")),
        });
        let modelled = SimDevice::new(SimConfig::new().workspace_sizes(sizes))
            .create_stream(0)
            .unwrap();
        assert_eq!(modelled.prepare(&reduce).unwrap().workspace_size(), 1024);
        let fill = Kernel::Fill {
            dst: DeviceSlice::new(DevicePtr(0x1000), 64),
            value: 1.0,
        }
        .typed(braid_stream_core::DType::F32);
        assert_eq!(
            modelled.prepare(&fill).unwrap_err(),
            HalError::Unsupported("no such kernel here")
        );
    }
}
