//! [`SimStream`]: the hal stream.

use crate::custom::SimCustom;
use crate::device::{lock, same_device, Shared};
use crate::event::SimEvent;
use crate::graph::SimGraph;
use crate::op::{CustomKind, OpKind};
use crate::SimBackend;
use braid_stream_core::custom::CustomOp;
use braid_stream_core::hal::{self, HalError};
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, CaptureStatus, DevicePtr, DeviceSlice};
use std::fmt;
use std::sync::Arc;

/// A handle to one stream of a [`crate::SimDevice`]. Cloning gives another handle to the same
/// stream.
#[derive(Clone)]
pub struct SimStream {
    pub(crate) shared: Shared,
    index: u32,
}

impl fmt::Debug for SimStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimStream")
            .field("index", &self.index)
            .finish()
    }
}

impl SimStream {
    pub(crate) fn new(shared: Shared, index: u32) -> Self {
        SimStream { shared, index }
    }

    /// Index of the stream within its device (0 is the default stream); the `stream` field of
    /// [`crate::OpRecord`].
    pub fn index(&self) -> u32 {
        self.index
    }

    fn submit(&self, kind: OpKind, label: &str) -> Result<(), HalError> {
        let (result, cost) = {
            let mut engine = lock(&self.shared);
            let result = engine.submit(self.index, kind, label);
            (result, engine.config().wall_launch_cost)
        };
        // After the engine lock: threads launching on other streams overlap this time.
        crate::config::burn_wall_time(cost);
        result
    }
}

impl hal::Stream for SimStream {
    type B = SimBackend;

    fn launch(&self, kernel: &TypedKernel, label: &str) -> Result<(), HalError> {
        self.submit(OpKind::Kernel(kernel.clone()), label)
    }

    fn launch_custom(&self, op: &CustomOp<SimBackend>) -> Result<(), HalError> {
        op.validate()
            .map_err(|e| HalError::InvalidArgument(e.to_string()))?;
        let kind = OpKind::Custom(CustomKind(Arc::new(SimCustom::new(op))));
        self.submit(kind, op.name())
    }

    unsafe fn memcpy_h2d(&self, dst: DevicePtr, src: *const u8, len: u64) -> Result<(), HalError> {
        self.submit(
            OpKind::H2d {
                dst: DeviceSlice::new(dst, len),
                src: src as usize,
            },
            "memcpy_h2d",
        )
    }

    unsafe fn memcpy_d2h(&self, dst: *mut u8, src: DevicePtr, len: u64) -> Result<(), HalError> {
        self.submit(
            OpKind::D2h {
                dst: dst as usize,
                src: DeviceSlice::new(src, len),
            },
            "memcpy_d2h",
        )
    }

    fn memcpy_d2d(&self, dst: DevicePtr, src: DevicePtr, len: u64) -> Result<(), HalError> {
        let kind = OpKind::D2d {
            dst: DeviceSlice::new(dst, len),
            src: DeviceSlice::new(src, len),
        };
        self.submit(kind, "memcpy_d2d")
    }

    fn memset(&self, dst: DevicePtr, value: u8, len: u64) -> Result<(), HalError> {
        self.submit(
            OpKind::Memset {
                dst: DeviceSlice::new(dst, len),
                value,
            },
            "memset",
        )
    }

    fn record(&self, event: &SimEvent) -> Result<(), HalError> {
        same_device(&self.shared, &event.shared)?;
        lock(&self.shared).record(self.index, event.index())
    }

    fn wait(&self, event: &SimEvent) -> Result<(), HalError> {
        same_device(&self.shared, &event.shared)?;
        lock(&self.shared).wait(self.index, event.index())
    }

    fn synchronize(&self) -> Result<(), HalError> {
        lock(&self.shared).sync_stream(self.index)
    }

    fn query(&self) -> Result<bool, HalError> {
        lock(&self.shared).query_stream(self.index)
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<(), HalError> {
        lock(&self.shared).begin_capture(self.index, mode)
    }

    fn end_capture(&self) -> Result<SimGraph, HalError> {
        let nodes = lock(&self.shared).end_capture(self.index)?;
        Ok(SimGraph::new(self.shared.clone(), nodes))
    }

    fn capture_status(&self) -> Result<CaptureStatus, HalError> {
        lock(&self.shared).capture_status(self.index)
    }
}
