//! [`AclGraph`]: the hal graph over a captured `aclmdlRI`.

use crate::calls::Handle;
use crate::device::Shared;
use crate::stream::{AclStream, CAPTURE_UNSUPPORTED};
use crate::AclBackend;
use braid_stream_core::hal::{self, HalError};
use std::fmt;
use std::sync::Arc;

/// A captured model run instance (`aclmdlRI`), replayed with `aclmdlRIExecuteAsync` and
/// destroyed with `aclmdlRIDestroy` on drop.
///
/// ACL does not report a model's task count, so [`hal::Graph::node_count`] is the number of
/// tasks the backend itself submitted into the capture (kernels, copies, memsets, replays),
/// counted through `aclmdlRICaptureGetInfo`.
pub struct AclGraph {
    shared: Arc<Shared>,
    model: Handle,
    nodes: usize,
}

impl fmt::Debug for AclGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclGraph")
            .field("device", &self.shared.ordinal)
            .field("model", &format_args!("{:#x}", self.model))
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl AclGraph {
    pub(crate) fn new(shared: Arc<Shared>, model: Handle, nodes: usize) -> Self {
        AclGraph {
            shared,
            model,
            nodes,
        }
    }

    /// The raw `aclmdlRI`, for calls braid does not wrap.
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.model as *mut std::ffi::c_void
    }
}

impl Drop for AclGraph {
    fn drop(&mut self) {
        let model = self.model;
        self.shared.release("aclmdlRIDestroy", |c| {
            // Without the symbol no model could have been captured.
            c.model_destroy(model).unwrap_or(0)
        });
    }
}

impl hal::Graph for AclGraph {
    type B = AclBackend;

    fn launch(&self, stream: &AclStream) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .model_execute_async(self.model, stream.raw)
            .ok_or(HalError::Unsupported(CAPTURE_UNSUPPORTED))?;
        sh.check("aclmdlRIExecuteAsync", code)?;
        sh.note_work(stream.raw, self.nodes);
        Ok(())
    }

    fn node_count(&self) -> usize {
        self.nodes
    }
}
