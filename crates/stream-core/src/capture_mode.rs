//! Capture modes per thread: CUDA's `cudaThreadExchangeStreamCaptureMode`, ACL's
//! `aclmdlRICaptureThreadExchangeMode`.
//!
//! A capture is begun with a [`CaptureMode`], and every thread has a mode of its own, global
//! until the thread exchanges it. Calls that would break a capture if they ran while it
//! records work — a synchronize or query of an object outside the capture, work on the default
//! stream — are refused by the pair, with one rule ([`mode_refusal`]), shared by the front
//! layer and `braid-acl-sim` so the two cannot drift apart:
//!
//! | this thread's mode | a capture of this thread | another thread's capture |
//! |---|---|---|
//! | global (default) | refused unless the capture is relaxed | refused if the capture is global |
//! | thread-local | refused unless the capture is relaxed | allowed |
//! | relaxed | allowed | allowed |
//!
//! This is CUDA's documented rule and CANN's (`aclmdlRICaptureThreadExchangeMode`: "GLOBAL:
//! no thread may call unsafe functions; this thread switches to RELAXED to call one, other
//! threads to RELAXED or THREAD_LOCAL"). A refusal the rule makes is
//! [`StreamError::CaptureModeForbids`], naming the capturing stream and the mode that would allow
//! the call (ACL's 107030 `ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT`); calls no mode allows (a
//! synchronize of the capture's own stream or event) stay [`StreamError::ForbiddenDuringCapture`].
//!
//! A thread changes its mode for a scope with [`Device::capture_mode_guard`] (or
//! [`Device::exchange_capture_mode`], which returns the previous mode): a helper thread that
//! must synchronize while another thread captures in global mode switches to thread-local
//! mode around the call instead of breaking the capture. Exchanging is refused outside a
//! capture ([`StreamError::ModeExchangeOutsideCapture`]): outside one the mode restricts nothing,
//! and a mode left exchanged would silently change what the next capture allows. The
//! backend is told too ([`crate::hal::Device::set_thread_capture_mode`]), so a runtime that
//! enforces modes itself (ACL) agrees with the front layer.

use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::hal::{Backend, Device as _};
use crate::types::CaptureMode;
use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// This thread's capture mode.
    static THREAD_MODE: Cell<CaptureMode> = const { Cell::new(CaptureMode::Global) };
}

/// The calling thread's capture mode ([`CaptureMode::Global`] unless exchanged).
pub fn thread_capture_mode() -> CaptureMode {
    THREAD_MODE.with(Cell::get)
}

/// Sets this thread's mode; returns the previous one.
fn swap_thread_mode(mode: CaptureMode) -> CaptureMode {
    THREAD_MODE.with(|m| m.replace(mode))
}

/// The rule: does a capture begun in mode `capture` — by the calling thread when `own_thread`,
/// else by another — refuse a call that would break it, made by a thread whose mode is
/// `thread`? `Some(mode)` names the least permissive thread mode that would allow the call;
/// `None` allows it.
pub fn mode_refusal(
    capture: CaptureMode,
    own_thread: bool,
    thread: CaptureMode,
) -> Option<CaptureMode> {
    match (thread, own_thread, capture) {
        (CaptureMode::Relaxed, _, _) => None,
        (_, true, CaptureMode::Relaxed) => None,
        (_, true, _) => Some(CaptureMode::Relaxed),
        (CaptureMode::Global, false, CaptureMode::Global) => Some(CaptureMode::ThreadLocal),
        (_, false, _) => None,
    }
}

/// Keeps this thread's capture mode exchanged until dropped; the previous mode comes back
/// then (in the front layer and in the backend). Not `Send`: the mode is per thread.
#[must_use = "the mode is exchanged only while the guard lives"]
pub struct CaptureModeGuard {
    previous: CaptureMode,
    restore: Option<Box<dyn FnOnce(CaptureMode)>>,
    _not_send: PhantomData<*const ()>,
}

impl CaptureModeGuard {
    /// The mode this thread had before the guard, restored when it drops.
    pub fn previous(&self) -> CaptureMode {
        self.previous
    }
}

impl std::fmt::Debug for CaptureModeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureModeGuard")
            .field("previous", &self.previous)
            .field("now", &thread_capture_mode())
            .finish()
    }
}

impl Drop for CaptureModeGuard {
    fn drop(&mut self) {
        if let Some(restore) = self.restore.take() {
            restore(self.previous);
        }
    }
}

impl<B: Backend> Device<B> {
    /// Sets the calling thread's capture mode to `mode` and returns the previous one (CUDA's
    /// `cudaThreadExchangeStreamCaptureMode`, ACL's `aclmdlRICaptureThreadExchangeMode`); see
    /// [`crate::capture_mode`] for what the mode allows. Prefer
    /// [`Device::capture_mode_guard`], which restores the previous mode.
    ///
    /// Refused with [`StreamError::ModeExchangeOutsideCapture`] when no capture is active on this
    /// device; a backend that cannot set the mode (ACL without the symbol) refuses with its
    /// error and nothing changes.
    pub fn exchange_capture_mode(&self, mode: CaptureMode) -> Result<CaptureMode> {
        if self.inner.lock().ordering.captures().next().is_none() {
            return Err(StreamError::ModeExchangeOutsideCapture {
                device: self.id(),
                mode,
            });
        }
        self.inner.hal.set_thread_capture_mode(mode)?;
        let previous = swap_thread_mode(mode);
        tracing::debug!(%previous, %mode, "thread capture mode exchanged");
        Ok(previous)
    }

    /// Exchanges the calling thread's capture mode to `mode` until the guard drops, as
    /// [`Device::exchange_capture_mode`] does (and is refused when it is).
    ///
    /// ```
    /// use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
    /// use braid_stream_core::{CaptureMode, Device, StreamError};
    ///
    /// let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new())).unwrap();
    /// let (capturing, helper) = (device.create_stream(0).unwrap(), device.create_stream(0).unwrap());
    /// capturing.begin_capture(CaptureMode::Global).unwrap();
    /// std::thread::scope(|scope| {
    ///     scope.spawn(|| {
    ///         // Another thread's global capture forbids this thread's synchronize...
    ///         assert!(matches!(
    ///             helper.synchronize(),
    ///             Err(StreamError::CaptureModeForbids { allowed_by: CaptureMode::ThreadLocal, .. })
    ///         ));
    ///         // ...unless this thread steps out of global mode for it.
    ///         let _mode = device.capture_mode_guard(CaptureMode::ThreadLocal).unwrap();
    ///         helper.synchronize().unwrap();
    ///     });
    /// });
    /// capturing.end_capture().unwrap();
    /// ```
    pub fn capture_mode_guard(&self, mode: CaptureMode) -> Result<CaptureModeGuard> {
        let previous = self.exchange_capture_mode(mode)?;
        let device = self.clone();
        Ok(CaptureModeGuard {
            previous,
            restore: Some(Box::new(move |previous| {
                // Restoring is not a new exchange: it happens also after the capture ended.
                if let Err(err) = device.inner.hal.set_thread_capture_mode(previous) {
                    tracing::warn!(%err, %previous, "the backend refused to restore the thread's capture mode");
                }
                swap_thread_mode(previous);
            })),
            _not_send: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CaptureMode::{Global, Relaxed, ThreadLocal};

    #[test]
    fn the_table_holds() {
        // This thread's own capture: only a relaxed one allows the call, unless the thread
        // itself is relaxed.
        for capture in [Global, ThreadLocal] {
            assert_eq!(mode_refusal(capture, true, Global), Some(Relaxed));
            assert_eq!(mode_refusal(capture, true, ThreadLocal), Some(Relaxed));
            assert_eq!(mode_refusal(capture, true, Relaxed), None);
        }
        for thread in [Global, ThreadLocal, Relaxed] {
            assert_eq!(mode_refusal(Relaxed, true, thread), None);
            assert_eq!(mode_refusal(Relaxed, false, thread), None);
            assert_eq!(mode_refusal(ThreadLocal, false, thread), None);
        }
        // Another thread's global capture restricts only threads in global mode.
        assert_eq!(mode_refusal(Global, false, Global), Some(ThreadLocal));
        assert_eq!(mode_refusal(Global, false, ThreadLocal), None);
        assert_eq!(mode_refusal(Global, false, Relaxed), None);
    }

    #[test]
    fn the_thread_mode_is_per_thread() {
        assert_eq!(thread_capture_mode(), Global);
        assert_eq!(swap_thread_mode(Relaxed), Global);
        std::thread::spawn(|| assert_eq!(thread_capture_mode(), Global))
            .join()
            .unwrap();
        assert_eq!(swap_thread_mode(Global), Relaxed);
    }
}
