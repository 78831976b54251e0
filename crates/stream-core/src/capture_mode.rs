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
//! mode around the call instead of breaking the capture. Guards may be dropped in any order:
//! the thread's mode is always its innermost live guard's (a raw exchange changes that one's),
//! and once every guard is gone, the mode it had outside them. Exchanging is refused outside a
//! capture ([`StreamError::ModeExchangeOutsideCapture`]): outside one the mode restricts nothing,
//! and a mode left exchanged would silently change what the next capture allows. The
//! backend is told too ([`crate::hal::Device::set_thread_capture_mode`]), so a runtime that
//! enforces modes itself (ACL) agrees with the front layer.

use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::hal::{Backend, Device as _};
use crate::types::CaptureMode;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

thread_local! {
    /// This thread's capture mode: its innermost live guard's, else [`GuardStack::base`].
    static THREAD_MODE: Cell<CaptureMode> = const { Cell::new(CaptureMode::Global) };
    /// This thread's live guards.
    static GUARDS: RefCell<GuardStack> = const {
        RefCell::new(GuardStack {
            base: CaptureMode::Global,
            live: Vec::new(),
            last_id: 0,
        })
    };
}

/// The capture-mode guards alive on a thread, so that any drop order restores the right mode:
/// the mode is always the innermost (last made) live guard's, or the mode the thread had
/// outside every guard.
struct GuardStack {
    /// The thread's mode while no guard lives.
    base: CaptureMode,
    /// Live guards, oldest first: each one's number and the mode it set (or a later exchange
    /// set while it was the innermost).
    live: Vec<(u64, CaptureMode)>,
    /// The number of the last guard made.
    last_id: u64,
}

/// The calling thread's capture mode ([`CaptureMode::Global`] unless exchanged).
pub fn thread_capture_mode() -> CaptureMode {
    THREAD_MODE.with(Cell::get)
}

/// Sets this thread's mode (the innermost live guard's, or the mode outside guards); returns
/// the previous one.
fn swap_thread_mode(mode: CaptureMode) -> CaptureMode {
    GUARDS.with(|g| {
        let mut g = g.borrow_mut();
        match g.live.last_mut() {
            Some((_, top)) => *top = mode,
            None => g.base = mode,
        }
    });
    THREAD_MODE.with(|m| m.replace(mode))
}

/// Makes a guard that sets this thread's mode to `mode`; returns its number.
fn push_guard(mode: CaptureMode) -> u64 {
    let id = GUARDS.with(|g| {
        let mut g = g.borrow_mut();
        g.last_id += 1;
        let id = g.last_id;
        g.live.push((id, mode));
        id
    });
    THREAD_MODE.with(|m| m.set(mode));
    id
}

/// Guard `id` is gone: the thread's mode becomes its innermost remaining guard's, or the mode
/// outside guards. Returns the new mode when it changed.
fn pop_guard(id: u64) -> Option<CaptureMode> {
    let mode = GUARDS.with(|g| {
        let mut g = g.borrow_mut();
        g.live.retain(|(live, _)| *live != id);
        g.live.last().map_or(g.base, |(_, mode)| *mode)
    });
    (THREAD_MODE.with(|m| m.replace(mode)) != mode).then_some(mode)
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

/// Keeps this thread's capture mode exchanged until dropped (in the front layer and in the
/// backend). Guards may be dropped in any order: the thread's mode is always its innermost
/// live guard's, and the mode it had before its first guard once all are gone. Not `Send`:
/// the mode is per thread.
#[must_use = "the mode is exchanged only while the guard lives"]
pub struct CaptureModeGuard {
    previous: CaptureMode,
    id: u64,
    /// Tells the backend the thread's mode when a drop changes it.
    restore: Box<dyn Fn(CaptureMode)>,
    _not_send: PhantomData<*const ()>,
}

impl CaptureModeGuard {
    /// The mode this thread had before the guard (restored when it drops, if it is the
    /// innermost live guard then).
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
        if let Some(mode) = pop_guard(self.id) {
            (self.restore)(mode);
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
        self.check_mode_exchange(mode)?;
        let previous = swap_thread_mode(mode);
        tracing::debug!(%previous, %mode, "thread capture mode exchanged");
        Ok(previous)
    }

    /// Refuses an exchange outside a capture; tells the backend the new mode.
    fn check_mode_exchange(&self, mode: CaptureMode) -> Result<()> {
        if self.inner.lock().ordering.captures().next().is_none() {
            return Err(StreamError::ModeExchangeOutsideCapture {
                device: self.id(),
                mode,
            });
        }
        Ok(self.inner.hal.set_thread_capture_mode(mode)?)
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
        self.check_mode_exchange(mode)?;
        let previous = thread_capture_mode();
        let id = push_guard(mode);
        tracing::debug!(%previous, %mode, "thread capture mode exchanged for a scope");
        let device = self.clone();
        Ok(CaptureModeGuard {
            previous,
            id,
            restore: Box::new(move |mode| {
                // Restoring is not a new exchange: it happens also after the capture ended.
                if let Err(err) = device.inner.hal.set_thread_capture_mode(mode) {
                    tracing::warn!(%err, %mode, "the backend refused to restore the thread's capture mode");
                }
            }),
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

    #[test]
    fn guards_restore_the_innermost_live_mode_in_any_drop_order() {
        std::thread::spawn(|| {
            let a = push_guard(ThreadLocal);
            let b = push_guard(Relaxed);
            assert_eq!(pop_guard(a), None, "b is still the innermost");
            assert_eq!(thread_capture_mode(), Relaxed);
            assert_eq!(pop_guard(b), Some(Global));
            // An exchange inside a guard changes that guard's mode, not the one outside.
            let c = push_guard(ThreadLocal);
            assert_eq!(swap_thread_mode(Relaxed), ThreadLocal);
            assert_eq!(pop_guard(c), Some(Global));
            // An exchange outside guards is the mode the last guard restores.
            assert_eq!(swap_thread_mode(ThreadLocal), Global);
            let d = push_guard(Relaxed);
            assert_eq!(pop_guard(d), Some(ThreadLocal));
        })
        .join()
        .unwrap();
    }
}
