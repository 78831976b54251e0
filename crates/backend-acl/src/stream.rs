//! [`AclStream`]: the hal stream over `aclrtStream`.

use crate::aclnn::kernels::Kind;
use crate::aclnn::{AclPrepared, BUSY_UNSUPPORTED};
use crate::calls::Handle;
use crate::device::Shared;
use crate::error::AclError;
use crate::event::AclEvent;
use crate::ffi::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_SYNC, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED,
    ACL_MODEL_RI_CAPTURE_STATUS_NONE, ACL_STREAM_STATUS_COMPLETE,
};
use crate::graph::AclGraph;
use crate::native::Ownership;
use crate::AclBackend;
use braid_stream_core::hal::{self, HalError, Operator, TaskGroupHandle};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::sync::Mutex;
use braid_stream_core::types::{CaptureMode, CaptureStatus, DevicePtr, DeviceSlice};
use std::fmt;
use std::sync::Arc;

/// What capture calls report on a library without the `aclmdlRI*` capture API.
pub const CAPTURE_UNSUPPORTED: &str =
    "graph capture needs the aclmdlRI* capture API (aclmdlRICaptureBegin/GetInfo/End, aclmdlRIExecuteAsync, aclmdlRIDestroy)";
/// Why task groups are unavailable.
const TASK_GROUPS_UNSUPPORTED: &str =
    "task groups need aclmdlRICaptureTaskGrpBegin/End and aclmdlRICaptureTaskUpdateBegin/End";

/// ACL's number for a braid capture mode.
pub fn capture_mode_number(mode: CaptureMode) -> u32 {
    match mode {
        CaptureMode::Global => ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
        CaptureMode::ThreadLocal => ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
        CaptureMode::Relaxed => ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
    }
}

/// One ACL stream (or the device's default stream, the null `aclrtStream`).
///
/// Streams created by the backend are destroyed (`aclrtDestroyStream`) on drop; a failure is
/// reported by the device's next call.
pub struct AclStream {
    pub(crate) shared: Arc<Shared>,
    pub(crate) raw: Handle,
    owned: bool,
    /// The model of the capture begun on this stream, while it lasts.
    capture_model: Mutex<Option<Handle>>,
}

impl fmt::Debug for AclStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclStream")
            .field("device", &self.shared.ordinal)
            .field("raw", &format_args!("{:#x}", self.raw))
            .field("default", &!self.owned)
            .finish()
    }
}

fn byte_count(len: u64, what: &str) -> Result<usize, HalError> {
    usize::try_from(len).map_err(|_| {
        HalError::InvalidArgument(format!(
            "{what} of {len} bytes exceeds the host address space"
        ))
    })
}

impl AclStream {
    pub(crate) fn default_of(shared: Arc<Shared>) -> Self {
        AclStream {
            shared,
            raw: 0,
            owned: false,
            capture_model: Mutex::new(None),
        }
    }

    pub(crate) fn owned(shared: Arc<Shared>, raw: Handle) -> Self {
        AclStream {
            shared,
            raw,
            owned: true,
            capture_model: Mutex::new(None),
        }
    }

    /// A stream another library created (see [`crate::AclDevice::wrap_stream`]).
    pub(crate) fn foreign(shared: Arc<Shared>, raw: Handle, ownership: Ownership) -> Self {
        AclStream {
            shared,
            raw,
            owned: ownership == Ownership::Owned,
            capture_model: Mutex::new(None),
        }
    }

    /// The raw `aclrtStream` (null for the default stream), for calls braid does not wrap.
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.raw as *mut std::ffi::c_void
    }

    fn enqueued(&self, call: &'static str, code: i32) -> Result<(), HalError> {
        self.shared.check(call, code)?;
        self.shared.note_work(self.raw, 1);
        Ok(())
    }

    /// Whether the stream is done, through a temporary event where `aclrtStreamQuery` is
    /// missing.
    fn query_through_event(&self) -> Result<bool, AclError> {
        let sh = &self.shared;
        let event = sh.create_event_raw(ACL_EVENT_SYNC)?;
        let status = sh
            .check("aclrtRecordEvent", sh.calls.record_event(event, self.raw))
            .and_then(|()| sh.result("aclrtQueryEventStatus", sh.calls.query_event_status(event)));
        sh.release("aclrtDestroyEvent", |c| c.destroy_event(event));
        Ok(status? == ACL_EVENT_RECORDED_STATUS_COMPLETE)
    }

    fn set_capture_model(&self, model: Option<Handle>) -> Option<Handle> {
        let mut slot = self.capture_model.lock();
        std::mem::replace(&mut *slot, model)
    }
}

impl Drop for AclStream {
    fn drop(&mut self) {
        if self.owned {
            let raw = self.raw;
            self.shared
                .release("aclrtDestroyStream", |c| c.destroy_stream(raw));
        }
    }
}

impl hal::Stream for AclStream {
    type B = AclBackend;

    fn prepare(&self, kernel: &TypedKernel) -> Result<AclPrepared, HalError> {
        if let Kernel::Busy { duration_ns } = kernel.kernel {
            return Ok(AclPrepared::busy(duration_ns));
        }
        let api = self.shared.aclnn()?;
        self.shared.bind()?;
        crate::aclnn::kernels::prepare(api, kernel)
    }

    fn launch_prepared(
        &self,
        prepared: AclPrepared,
        workspace: Option<DeviceSlice>,
        _label: &str,
    ) -> Result<(), HalError> {
        self.shared.bind()?;
        match prepared.kind {
            Kind::DeviceCopy { dst, src, len } => self.memcpy_d2d(dst, src, len),
            Kind::Busy { duration_ns } => match self.shared.calls.busy(self.raw, duration_ns) {
                None => Err(HalError::Unsupported(BUSY_UNSUPPORTED)),
                Some(code) => self.enqueued("braidSimBusy", code),
            },
            Kind::Operator(op) => {
                let needed = op.executor.workspace_size();
                let (ptr, len) = workspace.map_or((0, 0), |w| (w.ptr.0, w.len));
                if len < needed {
                    return Err(HalError::InvalidArgument(format!(
                        "{} needs {needed} bytes of workspace, {len} given",
                        op.call
                    )));
                }
                // SAFETY: the launch function is the one the executor was planned for; the
                // stream is this live stream of the bound device; the front layer reserves the
                // tensors' ranges and the workspace for this launch in stream order.
                unsafe {
                    op.executor.launch(
                        op.launch,
                        op.call,
                        ptr as *mut std::ffi::c_void,
                        len,
                        self.as_raw(),
                    )
                }?;
                self.shared.note_work(self.raw, 1);
                Ok(())
            }
        }
    }

    fn launch_operator(&self, op: &Operator<'_, AclBackend>) -> Result<(), HalError> {
        let Some(body) = op.body else {
            return Err(HalError::InvalidArgument(format!(
                "operator {} has no ACL body (give it one made with braid_backend_acl::native_op)",
                op.name
            )));
        };
        self.shared.bind()?;
        body(self.as_raw())?;
        self.shared.note_work(self.raw, 1);
        Ok(())
    }

    unsafe fn memcpy_h2d(&self, dst: DevicePtr, src: *const u8, len: u64) -> Result<(), HalError> {
        self.shared.bind()?;
        let n = byte_count(len, "host-to-device copy")?;
        // SAFETY: the hal contract: `src` is valid for `len` bytes until the copy has run.
        let code = unsafe {
            self.shared.calls.memcpy_async(
                dst.0,
                n,
                src as u64,
                n,
                ACL_MEMCPY_HOST_TO_DEVICE,
                self.raw,
            )
        };
        self.enqueued("aclrtMemcpyAsync", code)
    }

    unsafe fn memcpy_d2h(&self, dst: *mut u8, src: DevicePtr, len: u64) -> Result<(), HalError> {
        self.shared.bind()?;
        let n = byte_count(len, "device-to-host copy")?;
        // SAFETY: the hal contract: `dst` is valid for writes of `len` bytes until the host
        // observes the copy complete.
        let code = unsafe {
            self.shared.calls.memcpy_async(
                dst as u64,
                n,
                src.0,
                n,
                ACL_MEMCPY_DEVICE_TO_HOST,
                self.raw,
            )
        };
        self.enqueued("aclrtMemcpyAsync", code)
    }

    fn memcpy_d2d(&self, dst: DevicePtr, src: DevicePtr, len: u64) -> Result<(), HalError> {
        self.shared.bind()?;
        let n = byte_count(len, "device-to-device copy")?;
        // SAFETY: both addresses are device memory: no host memory is read or written.
        let code = unsafe {
            self.shared.calls.memcpy_async(
                dst.0,
                n,
                src.0,
                n,
                ACL_MEMCPY_DEVICE_TO_DEVICE,
                self.raw,
            )
        };
        self.enqueued("aclrtMemcpyAsync", code)
    }

    fn memset(&self, dst: DevicePtr, value: u8, len: u64) -> Result<(), HalError> {
        self.shared.bind()?;
        let n = byte_count(len, "memset")?;
        let code = self
            .shared
            .calls
            .memset_async(dst.0, n, i32::from(value), n, self.raw);
        self.enqueued("aclrtMemsetAsync", code)
    }

    fn record(&self, event: &AclEvent) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        sh.check(
            "aclrtRecordEvent",
            sh.calls.record_event(event.raw, self.raw),
        )?;
        event.mark_recorded();
        Ok(())
    }

    fn wait(&self, event: &AclEvent) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        Ok(sh.check(
            "aclrtStreamWaitEvent",
            sh.calls.stream_wait_event(self.raw, event.raw),
        )?)
    }

    fn synchronize(&self) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        match sh
            .calls
            .synchronize_stream_with_timeout(self.raw, sh.config.sync_timeout_ms)
        {
            Some(code) => Ok(sh.check("aclrtSynchronizeStreamWithTimeout", code)?),
            None => Ok(sh.check(
                "aclrtSynchronizeStream",
                sh.calls.synchronize_stream(self.raw),
            )?),
        }
    }

    fn query(&self) -> Result<bool, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        match sh.calls.stream_query(self.raw) {
            Some(r) => Ok(sh.result("aclrtStreamQuery", r)? == ACL_STREAM_STATUS_COMPLETE),
            None => Ok(self.query_through_event()?),
        }
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .capture_begin(self.raw, capture_mode_number(mode))
            .ok_or(HalError::Unsupported(CAPTURE_UNSUPPORTED))?;
        sh.check("aclmdlRICaptureBegin", code)?;
        let model = match sh.calls.capture_get_info(self.raw) {
            Some(Ok((ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, model))) => Some(model),
            _ => None,
        };
        self.set_capture_model(model);
        sh.capture_begun(model);
        Ok(())
    }

    fn end_capture(&self) -> Result<AclGraph, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let result = sh
            .calls
            .capture_end(self.raw)
            .ok_or(HalError::Unsupported(CAPTURE_UNSUPPORTED))?
            .map_err(|code| sh.error("aclmdlRICaptureEnd", code));
        let begun = self.set_capture_model(None);
        match result {
            Ok(model) => {
                let models: Vec<Handle> = begun.into_iter().chain([model]).collect();
                let nodes = sh.capture_ended(&models);
                Ok(AclGraph::new(sh.clone(), model, nodes))
            }
            Err(err) => {
                let models: Vec<Handle> = begun.into_iter().collect();
                sh.capture_ended(&models);
                Err(err.into())
            }
        }
    }

    fn begin_task_group(&self) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .task_grp_begin(self.raw)
            .ok_or(HalError::Unsupported(TASK_GROUPS_UNSUPPORTED))?;
        Ok(sh.check("aclmdlRICaptureTaskGrpBegin", code)?)
    }

    fn end_task_group(&self) -> Result<TaskGroupHandle, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let r = sh
            .calls
            .task_grp_end(self.raw)
            .ok_or(HalError::Unsupported(TASK_GROUPS_UNSUPPORTED))?;
        let group = sh.result("aclmdlRICaptureTaskGrpEnd", r)?;
        Ok(TaskGroupHandle(group as u64))
    }

    fn begin_task_update(&self, group: TaskGroupHandle) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .task_update_begin(self.raw, group.0 as Handle)
            .ok_or(HalError::Unsupported(TASK_GROUPS_UNSUPPORTED))?;
        Ok(sh.check("aclmdlRICaptureTaskUpdateBegin", code)?)
    }

    /// CANN has no way to discard an update: without `commit` the scope is ended all the
    /// same, and CANN refuses it when its task count differs from the group's (the only case
    /// the front layer does not commit), so nothing changes.
    fn end_task_update(&self, commit: bool) -> Result<(), HalError> {
        let _ = commit;
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .task_update_end(self.raw)
            .ok_or(HalError::Unsupported(TASK_GROUPS_UNSUPPORTED))?;
        Ok(sh.check("aclmdlRICaptureTaskUpdateEnd", code)?)
    }

    fn capture_status(&self) -> Result<CaptureStatus, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let Some(r) = sh.calls.capture_get_info(self.raw) else {
            // Without the capture API nothing can be capturing.
            return Ok(CaptureStatus::None);
        };
        match sh.result("aclmdlRICaptureGetInfo", r)?.0 {
            ACL_MODEL_RI_CAPTURE_STATUS_NONE => Ok(CaptureStatus::None),
            ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE => Ok(CaptureStatus::Active),
            ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED => Ok(CaptureStatus::Invalidated),
            other => Err(HalError::InvalidArgument(format!(
                "aclmdlRICaptureGetInfo returned unknown capture status {other}"
            ))),
        }
    }
}
