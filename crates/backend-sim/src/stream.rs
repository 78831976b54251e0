//! [`SimStream`]: the hal stream.

use crate::collective::HostWait;
use crate::custom::SimCustom;
use crate::device::{checked, host_wait, lock_engine, same_node, Shared};
use crate::event::SimEvent;
use crate::fault::{CallKind, Verdict};
use crate::graph::SimGraph;
use crate::limits::LiveSlot;
use crate::op::{CustomKind, OpKind};
use crate::workspace::{SimPrepared, WorkspaceSizes};
use crate::SimBackend;
use braid_stream_core::hal::{self, HalError, Operator, TaskGroupHandle};
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, CaptureStatus, DevicePtr, DeviceSlice};
use std::fmt;
use std::sync::Arc;

/// A handle to one stream of a [`crate::SimDevice`]. Cloning gives another handle to the same
/// stream.
#[derive(Clone)]
pub struct SimStream {
    pub(crate) shared: Shared,
    /// Node-wide index (the engine's).
    global: u32,
    /// Index within the device.
    index: u32,
    /// Its place among the device's live streams (`None` for the default stream).
    _slot: Option<Arc<LiveSlot>>,
    /// The device's workspace model, if any ([`crate::SimConfig::workspace_sizes`]).
    workspace: Option<WorkspaceSizes>,
}

impl fmt::Debug for SimStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimStream")
            .field("device", &self.shared.device)
            .field("index", &self.index)
            .finish()
    }
}

impl SimStream {
    pub(crate) fn new(
        shared: Shared,
        global: u32,
        index: u32,
        slot: Option<Arc<LiveSlot>>,
        workspace: Option<WorkspaceSizes>,
    ) -> Self {
        SimStream {
            shared,
            global,
            index,
            _slot: slot,
            workspace,
        }
    }

    /// Index of the stream within its device (0 is the default stream); the `stream` field of
    /// [`crate::OpRecord`].
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Index of the stream among all streams of its node (the engine's index).
    pub(crate) fn global(&self) -> u32 {
        self.global
    }

    /// Submits `kind`, a `call` the fault plan may make fail now or (a kernel) later, then
    /// burns the configured wall-clock launch cost outside the engine lock.
    fn submit(&self, call: CallKind, kind: OpKind, label: &str) -> Result<(), HalError> {
        let (result, cost) = {
            let mut engine = lock_engine(&self.shared);
            let cost = engine.config().wall_launch_cost;
            let mut verdict = Verdict::Pass;
            if engine.faults().armed() {
                let capturing = engine.is_capturing(self.global);
                verdict = engine.faults().decide(call, capturing);
                if verdict == Verdict::Fail {
                    return Err(engine.fault_error(call, 0));
                }
            }
            let result = engine.submit(self.global, kind, label);
            if result.is_ok() && verdict == Verdict::FailLater {
                engine.faults().fail_later(self.global);
            }
            (result, cost)
        };
        // After the engine lock: threads launching on other streams overlap this time.
        crate::config::burn_wall_time(cost);
        result
    }
}

impl hal::Stream for SimStream {
    type B = SimBackend;

    fn prepare(&self, kernel: &TypedKernel) -> Result<SimPrepared, HalError> {
        let workspace = match &self.workspace {
            Some(sizes) => sizes.size(kernel)?,
            None => 0,
        };
        Ok(SimPrepared {
            kernel: kernel.clone(),
            workspace,
        })
    }

    fn launch_prepared(
        &self,
        prepared: SimPrepared,
        _workspace: Option<DeviceSlice>,
        label: &str,
    ) -> Result<(), HalError> {
        self.submit(CallKind::Launch, OpKind::Kernel(prepared.kernel), label)
    }

    fn launch_operator(&self, op: &Operator<'_, SimBackend>) -> Result<(), HalError> {
        // The declaration was validated by the front layer (the hal contract); what the engine
        // needs to stay panic-free (ranges inside the address space) it checks itself.
        let kind = OpKind::Custom(CustomKind(Arc::new(SimCustom::new(op))));
        self.submit(CallKind::Launch, kind, op.name)
    }

    unsafe fn memcpy_h2d(&self, dst: DevicePtr, src: *const u8, len: u64) -> Result<(), HalError> {
        self.submit(
            CallKind::Copy,
            OpKind::H2d {
                dst: DeviceSlice::new(dst, len),
                src: src as usize,
            },
            "memcpy_h2d",
        )
    }

    unsafe fn memcpy_d2h(&self, dst: *mut u8, src: DevicePtr, len: u64) -> Result<(), HalError> {
        self.submit(
            CallKind::Copy,
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
        self.submit(CallKind::Copy, kind, "memcpy_d2d")
    }

    fn memset(&self, dst: DevicePtr, value: u8, len: u64) -> Result<(), HalError> {
        self.submit(
            CallKind::Copy,
            OpKind::Memset {
                dst: DeviceSlice::new(dst, len),
                value,
            },
            "memset",
        )
    }

    fn record(&self, event: &SimEvent) -> Result<(), HalError> {
        // Devices of one node: the engine names both if the event is another device's.
        same_node(&self.shared, &event.shared)?;
        let mut engine = checked(&self.shared, CallKind::Record)?;
        engine.record(self.global, event.index())?;
        engine.faults().recorded(self.global, event.index());
        Ok(())
    }

    fn wait(&self, event: &SimEvent) -> Result<(), HalError> {
        // A stream may wait on an event of any device of its node (one virtual time axis).
        same_node(&self.shared, &event.shared)?;
        if let Some(wait) = crate::ipc::IpcWait::of(&self.shared, event.index())? {
            // Another process's event: this process's later work runs after its record is
            // published, so the host waits for that here (see `crate::ipc`).
            lock_engine(&self.shared).ipc_check_wait(self.global)?;
            return wait.block();
        }
        checked(&self.shared, CallKind::Wait)?.wait(self.global, event.index())
    }

    fn synchronize(&self) -> Result<(), HalError> {
        let (s, what) = (self.global, HostWait::Stream(self.global));
        host_wait(&self.shared, Some(CallKind::Synchronize), what, |e| {
            e.sync_stream(s)?;
            e.faults().take_stream(s)
        })
    }

    fn query(&self) -> Result<bool, HalError> {
        let mut engine = checked(&self.shared, CallKind::Query)?;
        let done = engine.query_stream(self.global)?;
        engine.faults().take_stream(self.global)?;
        Ok(done)
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<(), HalError> {
        checked(&self.shared, CallKind::BeginCapture)?.begin_capture(self.global, mode)
    }

    fn end_capture(&self) -> Result<SimGraph, HalError> {
        let mut engine = lock_engine(&self.shared);
        // A failed end still ends the capture, discarding it (see `crate::fault`).
        let failed = engine.faults().armed()
            && engine.faults().decide(CallKind::EndCapture, false) == Verdict::Fail;
        let (nodes, external, members, groups) = engine.end_capture(self.global)?;
        if failed {
            return Err(engine.fault_error(CallKind::EndCapture, 0));
        }
        // The graph holds a stream for each stream captured into it, as ACL's models do.
        let held = engine.limits().take_graph_streams(members)?;
        let graph = SimGraph::new(self.shared.clone(), nodes, external, held);
        engine.bind_task_groups(&groups, graph.nodes_cell());
        Ok(graph)
    }

    fn begin_task_group(&self) -> Result<(), HalError> {
        lock_engine(&self.shared).begin_task_group(self.global)
    }

    fn end_task_group(&self) -> Result<TaskGroupHandle, HalError> {
        lock_engine(&self.shared).end_task_group(self.global)
    }

    fn begin_task_update(&self, group: TaskGroupHandle) -> Result<(), HalError> {
        lock_engine(&self.shared).begin_task_update(self.global, group)
    }

    fn end_task_update(&self, commit: bool) -> Result<(), HalError> {
        lock_engine(&self.shared).end_task_update(self.global, commit)
    }

    fn capture_status(&self) -> Result<CaptureStatus, HalError> {
        lock_engine(&self.shared).capture_status(self.global)
    }

    fn set_tag(&self, tag: &str) {
        lock_engine(&self.shared).set_stream_tag(self.global, tag);
    }
}
