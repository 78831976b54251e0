//! Host callbacks: a host function launched as a task of a stream (`aclrtLaunchCallback`),
//! run by the thread subscribed to that stream (`aclrtSubscribeReport`) when it calls
//! `aclrtProcessReport`, as CANN runs them.
//!
//! - A thread subscribes streams (one thread per stream; a stream subscribed twice is
//!   `ACL_ERROR_RT_STREAM_SUBSCRIBE`); a callback launched on a stream nobody subscribed is
//!   `ACL_ERROR_RT_STREAM_NO_CB_REG`.
//! - The callback is a task of the stream: a user operator of the simulator (no memory, a
//!   fixed tiny cost) whose body, run when the stream reaches it, *reports* the callback to
//!   its thread. Captured into a model, the operator is a node of the graph, so every replay
//!   reports the callback again, in stream order.
//! - `aclrtProcessReport(timeout)` runs the first callback reported to the calling thread, on
//!   that thread (outside every lock: a callback may call ACL), and returns once it has run;
//!   with none reported it first brings the simulated time of its streams up to their next
//!   eager callback (a host wait on a marker event recorded after it), then waits up to
//!   `timeout` ms (-1: without end) for another thread's host wait to bring one, else
//!   `ACL_ERROR_RT_REPORT_TIMEOUT`. A thread that subscribed nothing gets
//!   `ACL_ERROR_RT_THREAD_SUBSCRIBE`.
//! - A blocking callback (`ACL_CALLBACK_BLOCK`) launched eagerly puts a simulator host gate
//!   (`braid_backend_sim::HostGate`) in its stream right after it: the stream's later work
//!   waits until the callback has run and starts after it in simulated time; host waits on
//!   the stream wait for it (up to the collective timeout, then they fail naming the gate).
//!   A non-blocking one (`ACL_CALLBACK_NO_BLOCK`) holds nothing.
//! - A graph holds no gate: a blocking callback captured into a model holds what a host
//!   wait observes instead — a wait covering its stream (its synchronize, a device
//!   synchronize, an event synchronize on its device, a blocking copy on it) returns only
//!   once every blocking callback it reported has run, then waits again for the work those
//!   callbacks launched; a query of the stream answers "not ready" meanwhile. The wait is
//!   bounded by the collective timeout, then fails with `ACL_ERROR_RT_REPORT_TIMEOUT`. A
//!   callback behind another unfinished one of its stream is not waited for (the stream has
//!   not reached it), nor is one the waiting thread is running itself. **Departure:** the
//!   graph's later nodes do not wait for such a callback in simulated time.
//!
//! The state here is a leaf: its lock is never held while the registry or a simulator is
//! called, so an operator's body (run under the simulator's lock) may report.

use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_backend_sim::{HostGate, SimEvent};
use braid_stream_core::hal::Event as _;
use braid_stream_core::sync::{GlobalCondvar, GlobalMutex, GlobalMutexGuard};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A host function of `aclrtLaunchCallback`.
pub(crate) type Callback = unsafe extern "C" fn(*mut c_void);

/// A stream, as reports name it: its device and the simulator's index of it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) struct StreamKey {
    /// The device.
    pub device: usize,
    /// The simulator's index of the stream.
    pub index: u32,
}

/// What a host wait covers.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scope {
    /// One stream.
    Stream(StreamKey),
    /// Every stream of a device.
    Device(usize),
}

impl Scope {
    fn covers(self, s: StreamKey) -> bool {
        match self {
            Scope::Stream(k) => k == s,
            Scope::Device(d) => s.device == d,
        }
    }
}

/// A callback reported to its thread, not yet run.
struct Report {
    id: u64,
    func: Callback,
    data: usize,
    handle: usize,
    /// The launch, when a gate holds its stream until it has run.
    gated: Option<u64>,
}

/// A blocking callback reported and not yet finished.
struct Unfinished {
    stream: StreamKey,
    handle: usize,
    /// The thread running it, once it runs.
    running_on: Option<u64>,
}

#[derive(Default)]
struct State {
    /// Stream handle → (subscribed thread, the stream).
    subscriptions: HashMap<usize, (u64, StreamKey)>,
    /// Thread → its reported callbacks, in report order.
    queues: HashMap<u64, VecDeque<Report>>,
    /// Thread → markers recorded after its streams' eager callbacks, in launch order.
    markers: HashMap<u64, VecDeque<SimEvent>>,
    /// Blocking callbacks of graphs reported and not finished, by report number (report
    /// order).
    unfinished: BTreeMap<u64, Unfinished>,
    next: u64,
    /// Eager blocking launches whose callback has not run, by launch number: their stream
    /// and their gate once the launch has made it.
    gates: HashMap<u64, (usize, Option<HostGate>)>,
    next_launch: u64,
}

struct Shared {
    state: GlobalMutex<State>,
    changed: GlobalCondvar,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        state: GlobalMutex::new(State::default()),
        changed: GlobalCondvar::new(),
    })
}

fn state() -> GlobalMutexGuard<'static, State> {
    shared().state.lock()
}

/// The calling thread as `aclrtSubscribeReport` names threads (its `pthread_t`).
pub(crate) fn this_thread() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

/// Subscribes stream `handle` (`stream`) to `thread`.
pub(crate) fn subscribe(
    call: &str,
    thread: u64,
    handle: usize,
    stream: StreamKey,
) -> Result<(), Fail> {
    let mut s = state();
    if let Some((other, _)) = s.subscriptions.get(&handle) {
        return Err(fail(
            ACL_ERROR_RT_STREAM_SUBSCRIBE,
            format!("{call}: stream {handle:#x} is already subscribed by thread {other:#x}"),
        ));
    }
    s.subscriptions.insert(handle, (thread, stream));
    s.queues.entry(thread).or_default();
    Ok(())
}

/// Ends `thread`'s subscription of stream `handle`: its callbacks not yet run are dropped
/// (the host waits they held are released).
pub(crate) fn unsubscribe(call: &str, thread: u64, handle: usize) -> Result<(), Fail> {
    let mut s = state();
    match s.subscriptions.get(&handle) {
        Some((t, _)) if *t == thread => {}
        Some((t, _)) => {
            return Err(fail(
                ACL_ERROR_RT_STREAM_SUBSCRIBE,
                format!(
                    "{call}: stream {handle:#x} is subscribed by thread {t:#x}, not {thread:#x}"
                ),
            ))
        }
        None => {
            return Err(fail(
                ACL_ERROR_RT_STREAM_SUBSCRIBE,
                format!("{call}: stream {handle:#x} is not subscribed"),
            ))
        }
    }
    s.subscriptions.remove(&handle);
    if let Some(q) = s.queues.get_mut(&thread) {
        q.retain(|r| r.handle != handle);
    }
    s.unfinished
        .retain(|_, u| u.handle != handle || u.running_on.is_some());
    if !s.subscriptions.values().any(|(t, _)| *t == thread) {
        s.queues.remove(&thread);
        s.markers.remove(&thread);
    }
    // The stream's callbacks not yet run never will: their gates open.
    let dropped: Vec<u64> = s
        .gates
        .iter()
        .filter(|(_, (h, _))| *h == handle)
        .map(|(l, _)| *l)
        .collect();
    let gates: Vec<Option<HostGate>> = dropped.iter().map(|l| finish_launch(&mut s, *l)).collect();
    shared().changed.notify_all();
    drop(s);
    gates.into_iter().try_for_each(open)
}

/// The thread subscribed to stream `handle`, for a launch of `call` on it.
pub(crate) fn subscriber(call: &str, handle: usize) -> Result<u64, Fail> {
    state().subscriptions.get(&handle).map(|(t, _)| *t).ok_or_else(|| {
        fail(
            ACL_ERROR_RT_STREAM_NO_CB_REG,
            format!("{call}: stream {handle:#x} is subscribed by no thread (call aclrtSubscribeReport first)"),
        )
    })
}

/// A callback launched on stream `handle` (`stream`): what its task reports when the stream
/// reaches it, each time it does.
#[derive(Clone, Copy)]
pub(crate) struct Launched {
    /// The host function.
    pub func: Callback,
    /// Its argument, as an address.
    pub data: usize,
    /// `ACL_CALLBACK_BLOCK`.
    pub blocking: bool,
    /// The stream's handle.
    pub handle: usize,
    /// The stream.
    pub stream: StreamKey,
    /// The launch, when eager and blocking: a gate holds the stream until it has run.
    pub gated: Option<u64>,
}

impl Launched {
    /// Reports the callback to the thread subscribed to its stream now (dropped, with a
    /// warning, when the stream has been unsubscribed since).
    pub(crate) fn report(&self) {
        let mut s = state();
        let Some(&(thread, _)) = s.subscriptions.get(&self.handle) else {
            tracing::warn!(
                stream = self.handle,
                "a host callback reached a stream no thread subscribes any more; dropped"
            );
            return;
        };
        s.next += 1;
        let id = s.next;
        if self.blocking && self.gated.is_none() {
            s.unfinished.insert(
                id,
                Unfinished {
                    stream: self.stream,
                    handle: self.handle,
                    running_on: None,
                },
            );
        }
        s.queues.entry(thread).or_default().push_back(Report {
            id,
            func: self.func,
            data: self.data,
            handle: self.handle,
            gated: self.gated,
        });
        shared().changed.notify_all();
    }
}

/// A number for an eager blocking launch on stream `handle`, whose gate
/// ([`set_gate`]) opens once its callback has run or been dropped.
pub(crate) fn gated_launch(handle: usize) -> u64 {
    let mut s = state();
    s.next_launch += 1;
    let launch = s.next_launch;
    s.gates.insert(launch, (handle, None));
    launch
}

/// Keeps `gate`, the gate of `launch`; opens it at once if the callback already ran.
pub(crate) fn set_gate(launch: u64, gate: HostGate) -> Result<(), Fail> {
    let open_now = {
        let mut s = state();
        match s.gates.get_mut(&launch) {
            Some(slot) => {
                slot.1 = Some(gate);
                None
            }
            None => Some(gate),
        }
    };
    open(open_now)
}

/// The callback of `launch` ran (or was dropped): its gate opens (now, or when it is set).
fn finish_launch(s: &mut State, launch: u64) -> Option<HostGate> {
    s.gates.remove(&launch).and_then(|(_, gate)| gate)
}

/// Opens `gate`, if any (no lock of this module held).
fn open(gate: Option<HostGate>) -> Result<(), Fail> {
    match gate {
        Some(g) => {
            let id = g.id();
            g.open().map_err(|e| {
                fail(
                    ACL_ERROR_RT_INTERNAL_ERROR,
                    format!("the host gate {id} of a blocking callback did not open: {e}"),
                )
            })
        }
        None => Ok(()),
    }
}

/// Keeps `marker`, an event recorded after an eager callback subscribed to `thread`.
pub(crate) fn add_marker(thread: u64, marker: SimEvent) {
    state().markers.entry(thread).or_default().push_back(marker);
    shared().changed.notify_all();
}

/// Forgets `launch`, whose launch failed before its gate was made.
pub(crate) fn abandon_launch(launch: u64) {
    state().gates.remove(&launch);
}

/// `aclrtProcessReport(timeout)` on the calling thread (see the module docs).
pub(crate) fn process(call: &str, timeout_ms: i32) -> Result<(), Fail> {
    if timeout_ms == 0 || timeout_ms < -1 {
        return Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: timeout {timeout_ms} ms: -1 waits without end, a positive value that many ms"),
        ));
    }
    let me = this_thread();
    let deadline = u64::try_from(timeout_ms)
        .ok()
        .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)));
    let mut s = state();
    loop {
        if !s.subscriptions.values().any(|(t, _)| *t == me) {
            return Err(fail(
                ACL_ERROR_RT_THREAD_SUBSCRIBE,
                format!("{call}: thread {me:#x} subscribes no stream (aclrtSubscribeReport)"),
            ));
        }
        if let Some(r) = s.queues.get_mut(&me).and_then(VecDeque::pop_front) {
            if let Some(u) = s.unfinished.get_mut(&r.id) {
                u.running_on = Some(me);
            }
            drop(s);
            tracing::debug!(stream = r.handle, id = r.id, "running a host callback");
            // SAFETY: the function and its argument the client launched, called on a thread
            // it subscribed to the stream, as CANN calls them; no lock is held.
            unsafe { (r.func)(r.data as *mut c_void) };
            let mut s = state();
            s.unfinished.remove(&r.id);
            let gate = r.gated.and_then(|l| finish_launch(&mut s, l));
            shared().changed.notify_all();
            drop(s);
            return open(gate);
        }
        if let Some(marker) = s.markers.get_mut(&me).and_then(VecDeque::pop_front) {
            drop(s);
            // Brings simulated time to the callback: its task then reports it. A failure is
            // the stream's, reported by its own waits.
            let _ = marker.synchronize();
            s = state();
            continue;
        }
        match deadline {
            None => shared().changed.wait(&mut s),
            Some(d) => {
                if Instant::now() >= d || shared().changed.wait_until(&mut s, d).timed_out() {
                    if s.queues.get(&me).is_some_and(|q| !q.is_empty()) {
                        continue;
                    }
                    return Err(fail(
                        ACL_ERROR_RT_REPORT_TIMEOUT,
                        format!("{call}: no host callback was reported within {timeout_ms} ms"),
                    ));
                }
            }
        }
    }
}

/// Whether a blocking callback of a graph reported in `scope` holds it (not finished, not
/// behind another unfinished one of its stream, not run by `me`), and the first one that
/// does.
fn holder(s: &State, scope: Scope, me: u64) -> Option<(u64, usize)> {
    let mut seen = Vec::new();
    for (id, u) in &s.unfinished {
        if !scope.covers(u.stream) || seen.contains(&u.stream) {
            continue;
        }
        // Only a stream's first unfinished callback has been reached.
        seen.push(u.stream);
        if u.running_on != Some(me) {
            return Some((*id, u.handle));
        }
    }
    None
}

/// Whether a blocking callback of a graph holds `scope` now (a query answers "not ready").
pub(crate) fn holds(scope: Scope) -> bool {
    holder(&state(), scope, this_thread()).is_some()
}

/// Waits until no blocking callback of a graph holds `scope`, up to `timeout`; whether any
/// ran meanwhile (the wait then waits again for the work they launched).
pub(crate) fn drain(call: &str, scope: Scope, timeout: Duration) -> Result<bool, Fail> {
    let me = this_thread();
    let deadline = Instant::now().checked_add(timeout);
    let mut s = state();
    let mut waited = false;
    while let Some((id, handle)) = holder(&s, scope, me) {
        waited = true;
        let timed_out = match deadline {
            Some(d) => Instant::now() >= d || shared().changed.wait_until(&mut s, d).timed_out(),
            None => {
                shared().changed.wait(&mut s);
                false
            }
        };
        if timed_out && holder(&s, scope, me) == Some((id, handle)) {
            return Err(fail(
                ACL_ERROR_RT_REPORT_TIMEOUT,
                format!(
                    "{call}: the blocking host callback launched on stream {handle:#x} was not run within {} ms: the thread subscribed to the stream must call aclrtProcessReport",
                    timeout.as_millis()
                ),
            ));
        }
    }
    Ok(waited)
}
