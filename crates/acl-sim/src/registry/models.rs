//! Captures into models (`aclmdlRICaptureBegin`, `aclmdlRICaptureGetInfo`,
//! `aclmdlRICaptureEnd`), the rules an active capture sets for other calls (no blocking
//! call, no work on the default stream, by the capture's mode and the calling thread's:
//! `aclmdlRICaptureThreadExchangeMode`), and models' execution and destruction
//! (`aclmdlRIExecuteAsync`, `aclmdlRIDestroy`).

use super::{sim_fail, ModelEntry, ModelState, Registry};
use crate::capture::CaptureState;
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_backend_sim::{SimGraph, SimStream};
use braid_stream_core::capture_mode::mode_refusal;
use braid_stream_core::hal::{Graph as _, HalError, Stream as _};
use braid_stream_core::types::CaptureMode;
use std::cell::Cell;

thread_local! {
    /// This thread's capture mode (`aclmdlRICaptureThreadExchangeMode`), global by default.
    static THREAD_MODE: Cell<u32> = const { Cell::new(CAPTURE_MODE_GLOBAL) };
}

/// braid's name of an `aclmdlRICaptureMode`.
fn braid_mode(mode: u32) -> Option<CaptureMode> {
    match mode {
        CAPTURE_MODE_GLOBAL => Some(CaptureMode::Global),
        CAPTURE_MODE_THREAD_LOCAL => Some(CaptureMode::ThreadLocal),
        CAPTURE_MODE_RELAXED => Some(CaptureMode::Relaxed),
        _ => None,
    }
}

/// CANN's name of a capture mode.
fn acl_mode_name(mode: CaptureMode) -> &'static str {
    match mode {
        CaptureMode::Global => "ACL_MODEL_RI_CAPTURE_MODE_GLOBAL",
        CaptureMode::ThreadLocal => "ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL",
        CaptureMode::Relaxed => "ACL_MODEL_RI_CAPTURE_MODE_RELAXED",
    }
}

/// `aclmdlRICaptureThreadExchangeMode`: sets this thread's mode to `mode` and returns the
/// previous one. CANN accepts it with or without an active capture; an unknown mode is
/// `ACL_ERROR_INVALID_PARAM` and changes nothing.
pub(crate) fn exchange_thread_mode(mode: u32) -> Result<u32, Fail> {
    if braid_mode(mode).is_none() {
        return Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("aclmdlRICaptureThreadExchangeMode: unknown capture mode {mode}"),
        ));
    }
    Ok(THREAD_MODE.with(|m| m.replace(mode)))
}

/// The mode that would let this thread make an unsafe call that capture `cap` forbids, by
/// braid's one rule (`braid_stream_core::capture_mode`); `None` when it is allowed.
fn refusal(cap: &CaptureState) -> Option<CaptureMode> {
    let thread = braid_mode(THREAD_MODE.with(Cell::get)).unwrap_or(CaptureMode::Global);
    let capture = braid_mode(cap.mode).unwrap_or(CaptureMode::Global);
    mode_refusal(capture, cap.thread == std::thread::current().id(), thread)
}

impl Registry {
    /// Refuses a host-blocking call during a capture that forbids it: always for the capture's
    /// own streams and events (107041), and where the capture's mode and this thread's forbid
    /// it (107030 `ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT`, naming both modes and the one that
    /// would allow the call, as CANN's EE1016 message does).
    pub(super) fn check_blocking(
        &self,
        call: &str,
        device: usize,
        own: Option<u64>,
    ) -> Result<(), Fail> {
        for (id, cap) in &self.captures {
            if cap.device != device {
                continue;
            }
            if Some(*id) == own {
                return Err(fail(
                    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC,
                    format!("{call}: synchronizing or querying a stream or event of an active capture is not permitted, ret=107041"),
                ));
            }
            if let Some(allowed_by) = refusal(cap) {
                let capture = braid_mode(cap.mode).unwrap_or(CaptureMode::Global);
                let thread = braid_mode(THREAD_MODE.with(Cell::get)).unwrap_or(CaptureMode::Global);
                return Err(fail(
                    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                    format!(
                        "{call} failed. Reason: a stream is capturing and the current operation cannot be performed. The mode set by aclmdlRICaptureBegin is {}, the capture mode of the current thread is {}; the operation is allowed in {} (aclmdlRICaptureThreadExchangeMode), ret=107030",
                        acl_mode_name(capture),
                        acl_mode_name(thread),
                        acl_mode_name(allowed_by),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Refuses synchronizing or querying a stream of an active capture (107041); another
    /// stream may be synchronized in any mode. CANN's capture modes restrict its "unsafe"
    /// calls (`aclrtMemset`, `aclrtMemcpy`, `aclrtMemcpy2d`, async copies of pageable host
    /// memory), and torch_npu relies on the rest: its generator synchronizes its default
    /// stream when the first random operator of a global-mode capture creates the capture's
    /// seed and offset tensors.
    pub(super) fn check_stream_blocking(
        &self,
        call: &str,
        device: usize,
        own: Option<u64>,
    ) -> Result<(), Fail> {
        match own {
            Some(id) if self.captures.get(&id).is_some_and(|c| c.device == device) => {
                self.check_blocking(call, device, own)
            }
            _ => Ok(()),
        }
    }

    /// Refuses work on the default stream during a capture that restricts this thread (107031).
    pub(super) fn check_default_stream(
        &self,
        call: &str,
        device: usize,
        handle: usize,
    ) -> Result<(), Fail> {
        if handle != 0 {
            return Ok(());
        }
        if self
            .captures
            .values()
            .any(|cap| cap.device == device && refusal(cap).is_some())
        {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                format!(
                    "{call}: disallowed implicit dependency from default stream during capture"
                ),
            ));
        }
        Ok(())
    }

    pub fn capture_begin(&mut self, stream: usize, mode: u32) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRICaptureBegin";
        let Some(braid_mode) = braid_mode(mode) else {
            return Err(fail(
                ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                format!("{CALL}: unknown capture mode {mode}"),
            ));
        };
        if stream == 0 {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                "aclmdlRICaptureBegin: capture on the default stream is not supported",
            ));
        }
        let s = self.stream(CALL, stream)?;
        if s.capture.is_some() {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURED,
                "aclmdlRICaptureBegin: the stream is already capturing",
            ));
        }
        s.sim
            .begin_capture(braid_mode)
            .map_err(|e| sim_fail(CALL, e))?;
        let model = self.handle();
        let id = self.next_capture;
        self.next_capture += 1;
        self.models.insert(
            model,
            ModelEntry {
                device: s.device,
                id: u32::try_from(id).unwrap_or(u32::MAX),
                state: ModelState::Capturing,
            },
        );
        self.captures
            .insert(id, CaptureState::new(s.device, stream, mode, model));
        if let Some(e) = self.streams.get_mut(&stream) {
            e.capture = Some(id);
        }
        Ok(())
    }

    pub fn capture_get_info(&self, stream: usize) -> Result<(u32, usize), Fail> {
        let s = self.stream("aclmdlRICaptureGetInfo", stream)?;
        Ok(match s.capture.and_then(|c| self.captures.get(&c)) {
            Some(cap) => (CAPTURE_STATUS_ACTIVE, cap.model),
            None => (CAPTURE_STATUS_NONE, 0),
        })
    }

    /// Ends capture `c` in the simulator and takes every member out of it; returns the state
    /// and the simulator's graph.
    pub(super) fn finish_capture(
        &mut self,
        c: u64,
        origin: &SimStream,
    ) -> Option<(CaptureState, Result<SimGraph, HalError>)> {
        let cap = self.captures.remove(&c)?;
        let graph = origin.end_capture();
        for m in cap.members.keys() {
            if let Some(e) = self.streams.get_mut(m) {
                e.capture = None;
            }
        }
        if graph.is_err() {
            self.models.remove(&cap.model);
        }
        Some((cap, graph))
    }

    pub fn capture_end(&mut self, stream: usize) -> Result<usize, Fail> {
        const CALL: &str = "aclmdlRICaptureEnd";
        let s = self.stream(CALL, stream)?;
        let Some((c, cap)) = s.capture.and_then(|c| Some((c, self.captures.get(&c)?))) else {
            return Err(fail(
                ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                "aclmdlRICaptureEnd: the stream is not capturing",
            ));
        };
        if cap.origin != stream {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
                "aclmdlRICaptureEnd: the capture must end on the stream that began it",
            ));
        }
        if cap.mode != CAPTURE_MODE_RELAXED && cap.thread != std::thread::current().id() {
            return Err(fail(
                ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                "aclmdlRICaptureEnd: a non-relaxed capture must end on the thread that began it",
            ));
        }
        let unjoined = cap.unjoined();
        let Some((cap, graph)) = self.finish_capture(c, &s.sim) else {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                "aclmdlRICaptureEnd: capture vanished",
            ));
        };
        let graph = graph.map_err(|e| sim_fail(CALL, e))?;
        if !unjoined.is_empty() {
            self.models.remove(&cap.model);
            return Err(fail(
                ACL_ERROR_RT_STREAM_UNJOINED,
                format!(
                    "rtStreamEndCapture execution failed, reason=capture model contains a stream that was not joined to the original stream ({} stream(s))",
                    unjoined.len()
                ),
            ));
        }
        if let Some(m) = self.models.get_mut(&cap.model) {
            m.state = ModelState::Ready(graph);
        }
        Ok(cap.model)
    }

    pub fn model_execute(&mut self, model: usize, stream: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRIExecuteAsync";
        let m = self.models.get(&model).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{CALL}: invalid model handle {model:#x}"),
            )
        })?;
        let ModelState::Ready(graph) = &m.state else {
            return Err(fail(
                ACL_ERROR_RT_MODEL_CAPTURED,
                "aclmdlRIExecuteAsync: the model is still being captured",
            ));
        };
        let (graph, device) = (graph.clone(), m.device);
        self.in_context(CALL, device)?;
        self.submit(CALL, stream, |sim| graph.launch(sim))
    }

    /// `aclmdlRIGetId`: the model's number, unique in the process (its capture's).
    pub fn model_id(&self, model: usize) -> Result<u32, Fail> {
        self.models.get(&model).map(|m| m.id).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("aclmdlRIGetId: invalid model handle {model:#x}"),
            )
        })
    }

    pub fn model_destroy(&mut self, model: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRIDestroy";
        let m = self.models.get(&model).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{CALL}: invalid model handle {model:#x}"),
            )
        })?;
        if matches!(m.state, ModelState::Capturing) {
            return Err(fail(
                ACL_ERROR_RT_MODEL_CAPTURED,
                "aclmdlRIDestroy: the model is still being captured",
            ));
        }
        self.models.remove(&model);
        Ok(())
    }
}
