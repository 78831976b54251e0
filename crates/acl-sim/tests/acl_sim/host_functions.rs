//! Host functions through the C ABI (`aclrtLaunchHostFunc`): each runs, in stream order and
//! after the work before it, on a thread the runtime makes for its stream (with the stream's
//! device current), and the stream's later work waits for it; captured into a model, it runs
//! again at every replay, holding the replay's later nodes the same way; a null function or
//! an unknown stream is refused.
//!
//! Each test uses its own streams of device 2.

use crate::common;

use braid_acl_sim::client::runtime::*;
use braid_acl_sim::exports::*;
use common::{message, ok};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

const DEVICE: i32 = 2;
const ACL_ERROR_INVALID_PARAM: i32 = 100_000;

fn on_device() {
    let code = aclInit(std::ptr::null());
    assert!(code == 0 || code == 100_002, "aclInit: {code}");
    ok(aclrtSetDevice(DEVICE));
}

fn new_stream() -> *mut c_void {
    let mut s = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtCreateStream(&mut s) });
    s
}

/// Device memory of 4 bytes.
fn word() -> *mut c_void {
    let mut dev = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtMalloc(&mut dev, 4, 0) });
    dev
}

/// What a host function of these tests sees: the 4 bytes at `dev` (read with a blocking
/// copy, an ACL call on the runtime's thread) and the thread it runs on.
struct Probe {
    dev: usize,
    seen: Mutex<Vec<(u32, u64)>>,
}

unsafe extern "C" fn note(data: *mut c_void) {
    // SAFETY: a `Probe` the test keeps alive until its functions have run.
    let probe = unsafe { &*(data as *const Probe) };
    let mut word = 0u32;
    // SAFETY: 4 writable bytes; `dev` is device memory of the stream's device.
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
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    probe.seen.lock().unwrap().push((word, me));
}

fn this_thread() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

#[test]
fn host_functions_run_in_stream_order_on_a_thread_of_the_runtime() {
    on_device();
    let stream = new_stream();
    let dev = word();
    let probe = Probe {
        dev: dev as usize,
        seen: Mutex::new(Vec::new()),
    };
    let data = (&probe as *const Probe).cast_mut().cast();
    // fill 1, function, fill 2, function: each sees the fill before it, never the one after.
    ok(aclrtMemsetAsync(dev, 4, 1, 4, stream));
    ok(aclrtLaunchHostFunc(stream, Some(note), data));
    ok(aclrtMemsetAsync(dev, 4, 2, 4, stream));
    ok(aclrtLaunchHostFunc(stream, Some(note), data));
    // Nobody here processes anything: the runtime's thread runs them.
    ok(aclrtSynchronizeStream(stream));
    let seen = probe.seen.lock().unwrap().clone();
    let words: Vec<u32> = seen.iter().map(|(w, _)| *w).collect();
    assert_eq!(words, vec![0x0101_0101, 0x0202_0202]);
    assert_eq!(seen[0].1, seen[1].1, "one thread per stream");
    assert_ne!(seen[0].1, this_thread());
    ok(aclrtFree(dev));
    ok(aclrtDestroyStream(stream));
}

/// A host function that waits until the test lets it return.
struct Gate {
    entered: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
    runs: Mutex<u32>,
}

unsafe extern "C" fn hold(data: *mut c_void) {
    // SAFETY: a `Gate` the test keeps alive until its functions have run.
    let gate = unsafe { &*(data as *const Gate) };
    gate.entered.lock().unwrap().send(()).unwrap();
    gate.release.lock().unwrap().recv().unwrap();
    *gate.runs.lock().unwrap() += 1;
}

/// Whether `stream`'s work is done (`aclrtStreamQuery`).
fn done(stream: *mut c_void) -> bool {
    let mut status = 7;
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtStreamQuery(stream, &mut status) });
    status == 0
}

#[test]
fn a_host_function_holds_its_stream_until_it_returns_eagerly_and_at_every_replay() {
    on_device();
    let (entered_tx, entered) = channel();
    let (release, release_rx) = channel();
    let gate = Gate {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
        runs: Mutex::new(0),
    };
    let data = (&gate as *const Gate).cast_mut().cast();
    let stream = new_stream();
    let dev = word();
    let mut model = null_mut();
    ok(aclmdlRICaptureBegin(stream, 2));
    ok(aclrtLaunchHostFunc(stream, Some(hold), data));
    ok(aclrtMemsetAsync(dev, 4, 3, 4, stream));
    // SAFETY: a live out parameter.
    ok(unsafe { aclmdlRICaptureEnd(stream, &mut model) });
    // Capturing ran nothing.
    ok(aclrtSynchronizeStream(stream));
    assert_eq!(*gate.runs.lock().unwrap(), 0);
    let launches: [&dyn Fn(); 3] = [
        &|| {
            ok(aclrtLaunchHostFunc(stream, Some(hold), data));
            ok(aclrtMemsetAsync(dev, 4, 3, 4, stream));
        },
        &|| ok(aclmdlRIExecuteAsync(model, stream)),
        &|| ok(aclmdlRIExecuteAsync(model, stream)),
    ];
    for (i, launch) in launches.iter().enumerate() {
        ok(aclrtMemsetAsync(dev, 4, 0, 4, stream));
        launch();
        // A synchronize on another thread lets simulated time reach the function (a captured
        // one is reported when its replay gets there) and waits for it.
        let handle = stream as usize;
        let waiter = std::thread::spawn(move || {
            on_device();
            ok(aclrtSynchronizeStream(handle as *mut c_void));
        });
        entered
            .recv_timeout(Duration::from_secs(10))
            .expect("the host function runs");
        for _ in 0..5 {
            assert!(
                !done(stream),
                "launch {i}: the stream waits for the function"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        release.send(()).unwrap();
        waiter.join().unwrap();
        assert!(done(stream), "launch {i}");
        let mut back = 0u32;
        // SAFETY: 4 writable bytes.
        ok(unsafe { aclrtMemcpy((&mut back as *mut u32).cast(), 4, dev, 4, 2) });
        assert_eq!(
            back, 0x0303_0303,
            "launch {i}: the fill after the function ran"
        );
        assert_eq!(*gate.runs.lock().unwrap(), i as u32 + 1);
    }
    ok(aclmdlRIDestroy(model));
    ok(aclrtFree(dev));
    ok(aclrtDestroyStream(stream));
}

#[test]
fn a_null_function_or_an_unknown_stream_is_refused() {
    on_device();
    let stream = new_stream();
    assert_eq!(
        aclrtLaunchHostFunc(stream, None, null_mut()),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(message().contains("fn is null"), "{}", message());
    assert_ne!(
        aclrtLaunchHostFunc(0x1234 as *mut c_void, Some(note), null_mut()),
        0
    );
    ok(aclrtDestroyStream(stream));
}
