//! Host callbacks through the C ABI: a thread subscribed to a stream runs the callbacks
//! launched on it in its `aclrtProcessReport`, in stream order and after the work before
//! them; a blocking callback holds the stream's host waits until it has run, a non-blocking
//! one does not; captured into a model, a callback runs again at every replay; and the
//! errors CANN gives for an unsubscribed stream or thread, a second subscription, bad
//! arguments and a wait with nothing reported.
//!
//! Each test uses its own streams of device 1.

use crate::common;

use braid_acl_sim::client::runtime::*;
use braid_acl_sim::exports::*;
use common::{message, ok};
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const DEVICE: i32 = 1;
const ACL_ERROR_INVALID_PARAM: i32 = 100_000;
const ACL_ERROR_RT_STREAM_SUBSCRIBE: i32 = 107_011;
const ACL_ERROR_RT_THREAD_SUBSCRIBE: i32 = 107_012;
const ACL_ERROR_RT_STREAM_NO_CB_REG: i32 = 107_015;
const ACL_ERROR_RT_REPORT_TIMEOUT: i32 = 507_012;
const NO_BLOCK: i32 = 0;
const BLOCK: i32 = 1;

fn on_device() {
    let code = aclInit(null());
    assert!(code == 0 || code == 100_002, "aclInit: {code}");
    ok(aclrtSetDevice(DEVICE));
}

fn new_stream() -> *mut c_void {
    let mut s = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtCreateStream(&mut s) });
    s
}

/// What a callback of these tests does: reads 4 bytes of device memory (a real ACL call from
/// the report thread) and notes them with its tag.
struct Probe {
    tag: u32,
    dev: usize,
    seen: Arc<Mutex<Vec<(u32, u32)>>>,
}

unsafe extern "C" fn note(data: *mut c_void) {
    // SAFETY: a `Probe` the test keeps alive until its callbacks have run.
    let probe = unsafe { &*(data as *const Probe) };
    let mut word = 0u32;
    // SAFETY: 4 writable bytes; `dev` is device memory of the current device.
    let code = unsafe {
        aclrtMemcpy(
            (&mut word as *mut u32).cast(),
            4,
            probe.dev as *mut c_void,
            4,
            2,
        )
    };
    assert_eq!(code, 0);
    probe.seen.lock().unwrap().push((probe.tag, word));
}

/// A thread that processes reports (its `pthread_t` for the subscription) until dropped.
struct Reporter {
    id: u64,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reporter {
    fn start() -> Reporter {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            on_device();
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() } as u64).unwrap();
            while !flag.load(Ordering::SeqCst) {
                let code = aclrtProcessReport(50);
                assert!(
                    [
                        0,
                        ACL_ERROR_RT_REPORT_TIMEOUT,
                        ACL_ERROR_RT_THREAD_SUBSCRIBE
                    ]
                    .contains(&code),
                    "aclrtProcessReport: {code}"
                );
            }
        });
        Reporter {
            id: rx.recv().unwrap(),
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// Device memory of 4 bytes.
fn word() -> *mut c_void {
    let mut dev = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtMalloc(&mut dev, 4, 0) });
    dev
}

#[test]
fn callbacks_run_on_the_subscribed_thread_in_stream_order_after_the_work_before_them() {
    on_device();
    let reporter = Reporter::start();
    let stream = new_stream();
    ok(aclrtSubscribeReport(reporter.id, stream));
    let dev = word();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probes: Vec<Probe> = (0..3)
        .map(|tag| Probe {
            tag,
            dev: dev as usize,
            seen: seen.clone(),
        })
        .collect();
    // fill 1, callback 0, fill 2, callback 1, fill 3, callback 2: each blocking callback
    // sees the fill before it, never the one after (the stream waits for it).
    for (i, p) in probes.iter().enumerate() {
        ok(aclrtMemsetAsync(dev, 4, i as i32 + 1, 4, stream));
        let data = (p as *const Probe).cast_mut().cast();
        ok(aclrtLaunchCallback(Some(note), data, BLOCK, stream));
    }
    // The synchronize returns once the blocking callbacks have run.
    ok(aclrtSynchronizeStream(stream));
    let byte = |v: u32| v * 0x0101_0101;
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got, vec![(0, byte(1)), (1, byte(2)), (2, byte(3))]);
    ok(aclrtUnSubscribeReport(reporter.id, stream));
    drop(reporter);
    ok(aclrtFree(dev));
    ok(aclrtDestroyStream(stream));
}

unsafe extern "C" fn count(data: *mut c_void) {
    // SAFETY: a counter the test keeps alive until its callbacks have run.
    let n = unsafe { &*(data as *const Mutex<u32>) };
    *n.lock().unwrap() += 1;
}

#[test]
fn a_blocking_callback_holds_the_stream_until_run_a_non_blocking_one_does_not() {
    on_device();
    // This thread subscribes and processes: nothing runs a callback until it says so.
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    let stream = new_stream();
    ok(aclrtSubscribeReport(me, stream));
    let n = Mutex::new(0u32);
    let data = (&n as *const Mutex<u32>).cast_mut().cast();
    ok(aclrtLaunchCallback(Some(count), data, NO_BLOCK, stream));
    // Not run, and the stream does not wait for it.
    ok(aclrtSynchronizeStream(stream));
    assert_eq!(*n.lock().unwrap(), 0);
    ok(aclrtProcessReport(100));
    assert_eq!(*n.lock().unwrap(), 1);

    ok(aclrtLaunchCallback(Some(count), data, BLOCK, stream));
    // Reported once the stream reaches it; until it has run, the stream is not done.
    let mut status = 0;
    for _ in 0..100 {
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtStreamQuery(stream, &mut status) });
        if status != 0 {
            break;
        }
    }
    assert_eq!(
        status, 1,
        "ACL_STREAM_STATUS_NOT_READY while the callback waits"
    );
    ok(aclrtProcessReport(100));
    assert_eq!(*n.lock().unwrap(), 2);
    // SAFETY: as above.
    ok(unsafe { aclrtStreamQuery(stream, &mut status) });
    assert_eq!(status, 0, "ACL_STREAM_STATUS_COMPLETE");
    ok(aclrtSynchronizeStream(stream));
    // Nothing left: the wait ends with the report timeout.
    assert_eq!(aclrtProcessReport(20), ACL_ERROR_RT_REPORT_TIMEOUT);
    ok(aclrtUnSubscribeReport(me, stream));
    ok(aclrtDestroyStream(stream));
}

#[test]
fn a_captured_callback_runs_at_every_replay_in_stream_order() {
    on_device();
    let reporter = Reporter::start();
    let stream = new_stream();
    ok(aclrtSubscribeReport(reporter.id, stream));
    let dev = word();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = Probe {
        tag: 9,
        dev: dev as usize,
        seen: seen.clone(),
    };
    ok(aclmdlRICaptureBegin(stream, 2));
    ok(aclrtMemsetAsync(dev, 4, 7, 4, stream));
    let data = (&probe as *const Probe).cast_mut().cast();
    ok(aclrtLaunchCallback(Some(note), data, BLOCK, stream));
    let mut model = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclmdlRICaptureEnd(stream, &mut model) });
    // Capturing ran nothing.
    ok(aclrtSynchronizeStream(stream));
    assert!(seen.lock().unwrap().is_empty());
    for replay in 1..=3 {
        ok(aclrtMemsetAsync(dev, 4, 0, 4, stream));
        ok(aclmdlRIExecuteAsync(model, stream));
        ok(aclrtSynchronizeStream(stream));
        let got = seen.lock().unwrap().clone();
        assert_eq!(got, vec![(9, 0x0707_0707); replay]);
    }
    ok(aclmdlRIDestroy(model));
    ok(aclrtUnSubscribeReport(reporter.id, stream));
    drop(reporter);
    ok(aclrtFree(dev));
    ok(aclrtDestroyStream(stream));
}

#[test]
fn a_captured_blocking_callback_after_a_kernel_runs_at_every_replay_while_the_host_waits() {
    // Issue 26: the kernel keeps the replay's callback ahead of the host clock at the launch,
    // so only the synchronize's wait reaches it; the callback must then be reported (not
    // wait, unreported, until the collective timeout fails the synchronize).
    on_device();
    let reporter = Reporter::start();
    let stream = new_stream();
    ok(aclrtSubscribeReport(reporter.id, stream));
    let n = Mutex::new(0u32);
    let data = (&n as *const Mutex<u32>).cast_mut().cast();
    ok(aclmdlRICaptureBegin(stream, 2));
    ok(braidSimBusy(stream, 2_000_000));
    ok(aclrtLaunchCallback(Some(count), data, BLOCK, stream));
    let mut model = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclmdlRICaptureEnd(stream, &mut model) });
    for replay in 1..=3 {
        ok(aclmdlRIExecuteAsync(model, stream));
        ok(aclrtSynchronizeStream(stream));
        assert_eq!(*n.lock().unwrap(), replay);
    }
    ok(aclmdlRIDestroy(model));
    ok(aclrtUnSubscribeReport(reporter.id, stream));
    drop(reporter);
    ok(aclrtDestroyStream(stream));
}

#[test]
fn subscriptions_and_reports_refuse_what_cann_refuses_naming_it() {
    on_device();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    let stream = new_stream();
    let n = Mutex::new(0u32);
    let data = (&n as *const Mutex<u32>).cast_mut().cast();
    // Launched on a stream nobody subscribed.
    assert_eq!(
        aclrtLaunchCallback(Some(count), data, BLOCK, stream),
        ACL_ERROR_RT_STREAM_NO_CB_REG
    );
    assert!(message().contains("aclrtSubscribeReport first"));
    // A thread that subscribed nothing.
    assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    ok(aclrtSubscribeReport(me, stream));
    assert_eq!(
        aclrtSubscribeReport(me + 1, stream),
        ACL_ERROR_RT_STREAM_SUBSCRIBE
    );
    assert!(message().contains("already subscribed"));
    assert_eq!(
        aclrtUnSubscribeReport(me + 1, stream),
        ACL_ERROR_RT_STREAM_SUBSCRIBE
    );
    assert_eq!(aclrtProcessReport(0), ACL_ERROR_INVALID_PARAM);
    assert_eq!(aclrtProcessReport(-2), ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        aclrtLaunchCallback(None, data, BLOCK, stream),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        aclrtLaunchCallback(Some(count), data, 2, stream),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(message().contains("blockType 2"));
    // An unknown stream.
    assert_ne!(aclrtSubscribeReport(me, 0x1234 as *mut c_void), 0);
    // Unsubscribed, a callback not yet run is dropped: the stream no longer waits for it.
    ok(aclrtLaunchCallback(Some(count), data, BLOCK, stream));
    ok(aclrtUnSubscribeReport(me, stream));
    ok(aclrtSynchronizeStream(stream));
    assert_eq!(*n.lock().unwrap(), 0);
    assert_eq!(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    ok(aclrtDestroyStream(stream));
}

/// Set in the child of [`a_callback_nobody_runs_fails_the_wait_naming_it`].
const TIMEOUT_CHILD: &str = "BRAID_ACL_SIM_TEST_CALLBACK_TIMEOUT";

#[test]
fn a_callback_nobody_runs_fails_the_wait_naming_it() {
    if std::env::var_os(TIMEOUT_CHILD).is_some() {
        return;
    }
    // A process of its own: the wait lasts the collective timeout, set short there.
    let mut child = common::child("host_callbacks::timeout_child");
    child
        .env(braid_acl_sim::COLLECTIVE_TIMEOUT_ENV, "100")
        .env(TIMEOUT_CHILD, "1");
    common::passes(child);
}

/// Runs only in the child of [`a_callback_nobody_runs_fails_the_wait_naming_it`]: this thread
/// subscribes and never processes.
#[test]
fn timeout_child() {
    if std::env::var_os(TIMEOUT_CHILD).is_none() {
        return;
    }
    on_device();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    let n = Mutex::new(0u32);
    let data = (&n as *const Mutex<u32>).cast_mut().cast();
    // Eager: the stream's gate is never opened.
    let eager = new_stream();
    ok(aclrtSubscribeReport(me, eager));
    ok(aclrtLaunchCallback(Some(count), data, BLOCK, eager));
    assert_eq!(
        aclrtSynchronizeStream(eager),
        507_046,
        "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"
    );
    let m = message();
    assert!(
        m.contains("host gate") && m.contains("blocking host callback"),
        "{m}"
    );
    // Captured: a replay's callback holds its stream the same way.
    let captured = new_stream();
    ok(aclrtSubscribeReport(me, captured));
    ok(aclmdlRICaptureBegin(captured, 2));
    ok(aclrtLaunchCallback(Some(count), data, BLOCK, captured));
    let mut model = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclmdlRICaptureEnd(captured, &mut model) });
    ok(aclmdlRIExecuteAsync(model, captured));
    assert_eq!(aclrtSynchronizeStream(captured), 507_046);
    let m = message();
    assert!(
        m.contains("host gate") && m.contains("graph") && m.contains("blocking host callback"),
        "{m}"
    );
    // Run now, the waits end.
    ok(aclrtProcessReport(100));
    ok(aclrtProcessReport(100));
    ok(aclrtSynchronizeStream(captured));
    ok(aclrtSynchronizeStream(eager));
    assert_eq!(*n.lock().unwrap(), 2);
}

/// Simulated ms from an event recorded before `[blocking callback, fill]` on a fresh stream
/// (launched eagerly, or a replay of them captured) to one recorded after, when the host
/// first spends 5 ms on another stream and only then runs the callback (this thread
/// subscribes and processes).
fn span_behind_a_blocking_callback(captured: bool, dev: *mut c_void, n: &Mutex<u32>) -> f32 {
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    let data = (n as *const Mutex<u32>).cast_mut().cast();
    let stream = new_stream();
    ok(aclrtSubscribeReport(me, stream));
    let work = || {
        ok(aclrtLaunchCallback(Some(count), data, BLOCK, stream));
        ok(aclrtMemsetAsync(dev, 4, 5, 4, stream));
    };
    let mut model = null_mut();
    if captured {
        ok(aclmdlRICaptureBegin(stream, 2));
        work();
        // SAFETY: a live out parameter.
        ok(unsafe { aclmdlRICaptureEnd(stream, &mut model) });
    }
    let (mut start, mut end) = (null_mut(), null_mut());
    // SAFETY: live out parameters; ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE.
    unsafe {
        ok(aclrtCreateEventWithFlag(&mut start, 0x9));
        ok(aclrtCreateEventWithFlag(&mut end, 0x9));
    }
    ok(aclrtRecordEvent(start, stream));
    if captured {
        ok(aclmdlRIExecuteAsync(model, stream));
    } else {
        work();
    }
    ok(aclrtRecordEvent(end, stream));
    let other = new_stream();
    ok(braidSimBusy(other, 5_000_000));
    ok(aclrtSynchronizeStream(other));
    ok(aclrtProcessReport(100));
    ok(aclrtSynchronizeStream(stream));
    let mut ms = 0f32;
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtEventElapsedTime(&mut ms, start, end) });
    if captured {
        ok(aclmdlRIDestroy(model));
    }
    ok(aclrtDestroyEvent(start));
    ok(aclrtDestroyEvent(end));
    ok(aclrtUnSubscribeReport(me, stream));
    ok(aclrtDestroyStream(other));
    ok(aclrtDestroyStream(stream));
    ms
}

#[test]
fn the_work_after_a_blocking_callback_starts_once_it_has_run_in_a_replay_as_eagerly() {
    on_device();
    let dev = word();
    let n = Mutex::new(0u32);
    let eager = span_behind_a_blocking_callback(false, dev, &n);
    let replayed = span_behind_a_blocking_callback(true, dev, &n);
    assert_eq!(*n.lock().unwrap(), 2);
    assert!(
        eager >= 5.0,
        "eager: the fill waits for the callback ({eager} ms)"
    );
    assert!(
        replayed >= 5.0,
        "replayed: the fill waits for the callback ({replayed} ms)"
    );
    ok(aclrtFree(dev));
}

#[test]
fn a_replayed_callback_dropped_by_an_unsubscribe_holds_nothing() {
    on_device();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    let n = Mutex::new(0u32);
    let data = (&n as *const Mutex<u32>).cast_mut().cast();
    let stream = new_stream();
    let other = new_stream();
    ok(aclrtSubscribeReport(me, stream));
    ok(aclmdlRICaptureBegin(stream, 2));
    ok(aclrtLaunchCallback(Some(count), data, BLOCK, stream));
    let mut model = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclmdlRICaptureEnd(stream, &mut model) });
    // Reported (simulated time passes it), then dropped by the unsubscribe.
    ok(aclmdlRIExecuteAsync(model, stream));
    ok(braidSimBusy(other, 1_000_000));
    ok(aclrtSynchronizeStream(other));
    ok(aclrtUnSubscribeReport(me, stream));
    ok(aclrtSynchronizeStream(stream));
    // Reached only after the unsubscribe: dropped when reported.
    ok(aclrtSubscribeReport(me, stream));
    ok(aclmdlRIExecuteAsync(model, stream));
    ok(aclrtUnSubscribeReport(me, stream));
    ok(aclrtSynchronizeStream(stream));
    assert_eq!(*n.lock().unwrap(), 0);
    ok(aclmdlRIDestroy(model));
    ok(aclrtDestroyStream(other));
    ok(aclrtDestroyStream(stream));
}

/// Set in the child of [`polling_answers_are_not_logged_as_refusals`]: its error log.
const POLL_CHILD: &str = "BRAID_ACL_SIM_TEST_POLL_LOG";

#[test]
fn polling_answers_are_not_logged_as_refusals() {
    if std::env::var_os(POLL_CHILD).is_some() {
        return;
    }
    // A process of its own: the error log is read once per process.
    let log = std::env::temp_dir().join(format!("braid-acl-sim-poll-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut child = common::child("host_callbacks::poll_child");
    child
        .env(braid_acl_sim::ERROR_LOG_ENV, &log)
        .env(POLL_CHILD, "1");
    common::passes(child);
    // The polls' answers are not refusals (CANN logs them at info level); a real refusal is.
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{} lines, the first {:?}",
        lines.len(),
        &lines[..lines.len().min(3)]
    );
    assert!(
        lines[0].starts_with("100000 aclrtProcessReport: timeout 0 ms"),
        "{lines:?}"
    );
}

/// Runs only in the child of [`polling_answers_are_not_logged_as_refusals`]: a report thread
/// polling before its stream is subscribed (as torch_npu's does), then with nothing reported.
#[test]
fn poll_child() {
    if std::env::var_os(POLL_CHILD).is_none() {
        return;
    }
    on_device();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    for _ in 0..200 {
        assert_eq!(aclrtProcessReport(1), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    }
    // The code's text stays readable, as for every failure.
    assert!(message().contains("subscribes no stream"));
    let stream = new_stream();
    ok(aclrtSubscribeReport(me, stream));
    for _ in 0..5 {
        assert_eq!(aclrtProcessReport(1), ACL_ERROR_RT_REPORT_TIMEOUT);
    }
    assert_eq!(aclrtProcessReport(0), ACL_ERROR_INVALID_PARAM);
    ok(aclrtUnSubscribeReport(me, stream));
    ok(aclrtDestroyStream(stream));
}
