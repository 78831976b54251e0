//! Capture modes per thread (`braid_stream_core::capture_mode`): a thread exchanges its own
//! mode for a scope, so a helper thread's synchronous call neither breaks another thread's
//! global capture nor is refused without a way out; refusals name the capturing stream and the
//! mode that would allow the call (ACL's 107030), and the captured graph is unharmed.

use crate::support::{all_equal, alloc_f32, download, fill, still_works};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{thread_capture_mode, CaptureMode, Kernel, StreamError};

/// A helper thread's synchronize while another thread captures in global mode is
/// `StreamError::CaptureModeForbids` naming the capturing stream and thread-local mode; inside a
/// `capture_mode_guard(ThreadLocal)` the helper synchronizes, queries, uses the default
/// stream and computes, and the guard restores global mode when it drops. The capturing
/// stream itself stays `ForbiddenDuringCapture` in every mode. The capture ends and replays
/// as if nothing happened.
pub fn helper_thread_exchanges_its_mode<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, helper) = (device.create_stream(0)?, device.create_stream(0)?);
    let (mem, helper_mem) = (alloc_f32(&device, 64)?, alloc_f32(&device, 64)?);
    fill(&s, mem.slice(), 0.0)?;
    s.synchronize()?;
    s.begin_capture(CaptureMode::Global)?;
    fill(&s, mem.slice(), 3.0)?;
    let sid = s.id();
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(), CaseError> {
                ensure!(
                    thread_capture_mode() == CaptureMode::Global,
                    "a new thread starts in global mode"
                );
                fill(&helper, helper_mem.slice(), 7.0)?;
                expect_err!(
                    helper.synchronize(),
                    StreamError::CaptureModeForbids {
                        call: "Stream::synchronize",
                        stream,
                        capture_mode: CaptureMode::Global,
                        thread_mode: CaptureMode::Global,
                        allowed_by: CaptureMode::ThreadLocal,
                    } if stream == sid,
                    "a helper's synchronize during another thread's global capture"
                );
                expect_err!(
                    device.default_stream().launch(&Kernel::Fill {
                        dst: helper_mem.slice(),
                        value: 1.0,
                    }),
                    StreamError::DefaultStreamDuringCapture { capturing, .. } if capturing == sid,
                    "the helper's default-stream work in global mode"
                );
                {
                    let guard = device.capture_mode_guard(CaptureMode::ThreadLocal)?;
                    ensure!(
                        guard.previous() == CaptureMode::Global,
                        "the guard names the previous mode"
                    );
                    ensure!(
                        thread_capture_mode() == CaptureMode::ThreadLocal,
                        "the mode is exchanged inside the guard"
                    );
                    helper.synchronize()?;
                    ensure!(helper.query()?, "the helper's query");
                    all_equal(
                        &download(&helper, helper_mem.slice())?,
                        7.0,
                        "the helper's data",
                    )?;
                    let default = device.default_stream();
                    default.launch(&Kernel::Scale {
                        src: helper_mem.slice(),
                        dst: helper_mem.slice(),
                        factor: 2.0,
                    })?;
                    default.synchronize()?;
                    all_equal(
                        &download(&default, helper_mem.slice())?,
                        14.0,
                        "the helper's default-stream work",
                    )?;
                    expect_err!(
                        s.synchronize(),
                        StreamError::ForbiddenDuringCapture { stream, .. } if stream == sid,
                        "the capturing stream, from a thread-local helper"
                    );
                }
                ensure!(
                    thread_capture_mode() == CaptureMode::Global,
                    "the guard restored global mode"
                );
                expect_err!(
                    helper.query(),
                    StreamError::CaptureModeForbids {
                        allowed_by: CaptureMode::ThreadLocal,
                        ..
                    },
                    "the helper's query after the guard"
                );
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err(CaseError::new("the helper thread panicked")))
    })?;
    ensure!(
        s.is_capturing(),
        "the helper's calls did not end the capture"
    );
    let graph = s.end_capture()?;
    all_equal(
        &download(&s, mem.slice())?,
        0.0,
        "captured fill did not run",
    )?;
    graph.launch(&s)?;
    all_equal(&download(&s, mem.slice())?, 3.0, "replay")?;
    still_works(&device)
}

/// The capturing thread itself needs relaxed mode for an unsafe call: thread-local mode still
/// refuses it (`allowed_by: Relaxed`), relaxed mode allows it; a capture begun relaxed refuses
/// nothing of another thread's even in global mode.
pub fn capturing_thread_needs_relaxed_mode<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, unrelated) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 16)?;
    fill(&unrelated, mem.slice(), 2.0)?;
    for capture_mode in [CaptureMode::Global, CaptureMode::ThreadLocal] {
        s.begin_capture(capture_mode)?;
        let sid = s.id();
        expect_err!(
            unrelated.synchronize(),
            StreamError::CaptureModeForbids { stream, capture_mode: m, allowed_by: CaptureMode::Relaxed, .. }
                if stream == sid && m == capture_mode,
            "{capture_mode:?} capture: the capturing thread in global mode"
        );
        {
            let _mode = device.capture_mode_guard(CaptureMode::ThreadLocal)?;
            expect_err!(
                unrelated.synchronize(),
                StreamError::CaptureModeForbids {
                    thread_mode: CaptureMode::ThreadLocal,
                    allowed_by: CaptureMode::Relaxed,
                    ..
                },
                "{capture_mode:?} capture: the capturing thread in thread-local mode"
            );
        }
        {
            let _mode = device.capture_mode_guard(CaptureMode::Relaxed)?;
            unrelated.synchronize()?;
            device.synchronize()?;
            expect_err!(
                s.query(),
                StreamError::ForbiddenDuringCapture { stream, .. } if stream == sid,
                "{capture_mode:?} capture: its own stream, even relaxed"
            );
        }
        s.end_capture()?;
    }
    s.begin_capture(CaptureMode::Relaxed)?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(), CaseError> {
                unrelated.synchronize()?;
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err(CaseError::new("the other thread panicked")))
    })?;
    unrelated.synchronize()?;
    s.end_capture()?;
    all_equal(&download(&unrelated, mem.slice())?, 2.0, "data")?;
    still_works(&device)
}

/// Exchanging the mode with no capture active is `StreamError::ModeExchangeOutsideCapture` naming
/// the device and the mode; the thread's mode is unchanged and a later exchange (inside a
/// capture) works.
pub fn exchange_outside_a_capture_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let id = device.id();
    expect_err!(
        device.exchange_capture_mode(CaptureMode::Relaxed),
        StreamError::ModeExchangeOutsideCapture { device, mode: CaptureMode::Relaxed } if device == id,
        "an exchange with no capture"
    );
    expect_err!(
        device.capture_mode_guard(CaptureMode::ThreadLocal),
        StreamError::ModeExchangeOutsideCapture { .. },
        "a guard with no capture"
    );
    ensure!(
        thread_capture_mode() == CaptureMode::Global,
        "a refused exchange changes nothing"
    );
    s.begin_capture(CaptureMode::Global)?;
    let previous = device.exchange_capture_mode(CaptureMode::Relaxed)?;
    ensure!(previous == CaptureMode::Global, "the previous mode");
    ensure!(
        device.exchange_capture_mode(previous)? == CaptureMode::Relaxed,
        "exchanging back returns the exchanged mode"
    );
    s.end_capture()?;
    still_works(&device)
}

/// Capture-mode guards dropped out of order leave the thread in the mode of its innermost
/// live guard, or in its mode before the first guard once all are gone, in the front layer and
/// in the backend alike: a helper thread (another thread captures in global mode) takes a
/// thread-local guard, then a relaxed one, and drops the thread-local one first: it stays
/// relaxed (its synchronize goes through); dropping the relaxed one brings global mode back
/// (its synchronize is refused).
pub fn guards_dropped_out_of_order_restore_the_right_mode<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s, helper) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    s.begin_capture(CaptureMode::Global)?;
    fill(&s, mem.slice(), 3.0)?;
    let result = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(), CaseError> {
                let outer = device.capture_mode_guard(CaptureMode::ThreadLocal)?;
                let inner = device.capture_mode_guard(CaptureMode::Relaxed)?;
                drop(outer);
                ensure_eq!(
                    thread_capture_mode(),
                    CaptureMode::Relaxed,
                    "the mode once the outer guard dropped first"
                );
                helper.synchronize()?;
                drop(inner);
                ensure_eq!(
                    thread_capture_mode(),
                    CaptureMode::Global,
                    "the mode once both guards dropped"
                );
                expect_err!(
                    helper.synchronize(),
                    StreamError::CaptureModeForbids {
                        thread_mode: CaptureMode::Global,
                        ..
                    },
                    "a synchronize in global mode after the guards"
                );
                // Three guards, the middle one dropped first, then the first: the last one's
                // mode holds until it goes.
                let first = device.capture_mode_guard(CaptureMode::Relaxed)?;
                let second = device.capture_mode_guard(CaptureMode::ThreadLocal)?;
                let third = device.capture_mode_guard(CaptureMode::Relaxed)?;
                drop(second);
                drop(first);
                ensure_eq!(
                    thread_capture_mode(),
                    CaptureMode::Relaxed,
                    "the last guard's mode"
                );
                helper.synchronize()?;
                drop(third);
                ensure_eq!(
                    thread_capture_mode(),
                    CaptureMode::Global,
                    "the mode once all three dropped"
                );
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err(CaseError::new("the helper thread panicked")))
    });
    let graph = s.end_capture()?;
    result?;
    graph.launch(&s)?;
    all_equal(&download(&s, mem.slice())?, 3.0, "replay")?;
    still_works(&device)
}
