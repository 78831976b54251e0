//! Host callbacks: a host function launched as a task of a stream (`aclrtLaunchCallback`),
//! run by the thread subscribed to that stream (`aclrtSubscribeReport`) when it calls
//! `aclrtProcessReport`, as CANN runs them; and host functions (`aclrtLaunchHostFunc`), run
//! by a thread the runtime makes for their stream.
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
//!   `ACL_ERROR_RT_THREAD_SUBSCRIBE`. Both are the answers a report thread polls for (CANN
//!   logs them at info level): returned, but not written to the error log.
//! - A blocking callback (`ACL_CALLBACK_BLOCK`) launched eagerly puts a simulator host gate
//!   (`braid_backend_sim::HostGate`) in its stream right after it: the stream's later work
//!   waits until the callback has run and starts after it in simulated time; host waits on
//!   the stream wait for it (up to the collective timeout, then they fail naming the gate).
//!   A non-blocking one (`ACL_CALLBACK_NO_BLOCK`) holds nothing.
//! - A blocking callback captured into a model puts a gate captured into the graph right
//!   after it (`braid_backend_sim::GraphGate`): at every replay the graph's later nodes on
//!   the stream wait until that replay's callback has run and start after it in simulated
//!   time, and the launching stream's later work waits for them, as eagerly; host waits on it
//!   let simulated time reach the callback (so it is reported) and wait for it, with the same
//!   timeout and error as an eager gate.
//! - A callback reported on a stream no thread subscribes any more is dropped with a
//!   warning, and the gate behind it opens.
//! - `aclrtLaunchHostFunc` launches a blocking callback whose runner is its stream's own
//!   thread ([`host_func_thread`]), made at the stream's first host function and ended once
//!   the stream is destroyed and nothing of it is left to run: the thread runs the
//!   stream's functions in order with the stream's device current, bringing simulated time
//!   up to each eager one itself (its marker), so nobody has to process anything. It does not
//!   touch the stream's report subscription: CANN says the two kinds must not be mixed on
//!   one stream, and here each keeps its own thread.
//!
//! The state here is a leaf: its lock is never held while the registry or a simulator is
//! called, so an operator's body may report (the simulator runs bodies with its lock
//! released, or held where a call must see every effect at once). A host wait held at a
//! captured gate computes the bodies due by the time it has reached, so the replay's
//! callback is reported while it waits.

use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_backend_sim::{GraphGate, HostGate, SimEvent};
use braid_stream_core::hal::Event as _;
use braid_stream_core::sync::{GlobalCondvar, GlobalMutex, GlobalMutexGuard};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A host function of `aclrtLaunchCallback`.
pub(crate) type Callback = unsafe extern "C" fn(*mut c_void);

/// A callback reported to its thread, not yet run.
struct Report {
    id: u64,
    func: Callback,
    data: usize,
    handle: usize,
    /// The launch, when a gate holds its stream until it has run.
    gated: Option<u64>,
    /// The gate of a replay of its graph, which opens once it has run.
    graph_gate: Option<GraphGate>,
}

#[derive(Default)]
struct State {
    /// Stream handle → (subscribed thread, the stream).
    subscriptions: HashMap<usize, u64>,
    /// Thread → its reported callbacks, in report order.
    queues: HashMap<u64, VecDeque<Report>>,
    /// Thread → markers recorded after its streams' eager callbacks, in launch order.
    markers: HashMap<u64, VecDeque<SimEvent>>,
    /// Stream → the thread of its host functions ([`host_func_thread`]).
    workers: HashMap<StreamKey, u64>,
    next: u64,
    /// Eager blocking launches whose callback has not run, by launch number: the stream
    /// whose unsubscription drops them (none for host functions) and their gate once the
    /// launch has made it.
    gates: HashMap<u64, (Option<usize>, Option<HostGate>)>,
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

/// Subscribes stream `handle` to `thread`.
pub(crate) fn subscribe(call: &str, thread: u64, handle: usize) -> Result<(), Fail> {
    let mut s = state();
    if let Some(other) = s.subscriptions.get(&handle) {
        return Err(fail(
            ACL_ERROR_RT_STREAM_SUBSCRIBE,
            format!("{call}: stream {handle:#x} is already subscribed by thread {other:#x}"),
        ));
    }
    s.subscriptions.insert(handle, thread);
    s.queues.entry(thread).or_default();
    Ok(())
}

/// Ends `thread`'s subscription of stream `handle`: its callbacks not yet run are dropped
/// (the host waits they held are released).
pub(crate) fn unsubscribe(call: &str, thread: u64, handle: usize) -> Result<(), Fail> {
    let mut s = state();
    match s.subscriptions.get(&handle) {
        Some(t) if *t == thread => {}
        Some(t) => {
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
    // The stream's callbacks reported and not yet run never will: their graph gates open.
    let mut graph_gates = Vec::new();
    if let Some(q) = s.queues.get_mut(&thread) {
        q.retain_mut(|r| {
            if r.handle != handle {
                return true;
            }
            graph_gates.extend(r.graph_gate.take());
            false
        });
    }
    if !s.subscriptions.values().any(|t| *t == thread) {
        s.queues.remove(&thread);
        s.markers.remove(&thread);
    }
    // The stream's callbacks not yet run never will: their gates open.
    let dropped: Vec<u64> = s
        .gates
        .iter()
        .filter(|(_, (h, _))| *h == Some(handle))
        .map(|(l, _)| *l)
        .collect();
    let gates: Vec<Option<HostGate>> = dropped.iter().map(|l| finish_launch(&mut s, *l)).collect();
    shared().changed.notify_all();
    drop(s);
    gates.into_iter().try_for_each(open)?;
    graph_gates.iter().try_for_each(open_graph_gate)
}

/// A stream, as the threads of host functions are kept: its device and the simulator's
/// index of it.
pub(crate) type StreamKey = (usize, u32);

/// The thread that runs the host functions of stream `stream` (`aclrtLaunchHostFunc`),
/// made for it at its first one (for `call`): it runs them in report order with the
/// stream's device current, and ends once the stream is destroyed ([`stream_destroyed`])
/// and nothing of it is left to run.
pub(crate) fn host_func_thread(call: &str, stream: StreamKey) -> Result<u64, Fail> {
    let mut s = state();
    if let Some(t) = s.workers.get(&stream) {
        return Ok(*t);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let started = std::thread::Builder::new()
        .name("acl-sim-host-func".to_string())
        .spawn(move || {
            let me = this_thread();
            // The launching thread waits for this under the state's lock: send first.
            if tx.send(me).is_ok() {
                serve(me, stream);
            }
        })
        .map_err(|e| e.to_string())
        .and_then(|_| rx.recv().map_err(|e| e.to_string()));
    let me = started.map_err(|e| {
        fail(
            ACL_ERROR_RT_INTERNAL_ERROR,
            format!("{call}: the thread of the stream's host functions did not start: {e}"),
        )
    })?;
    s.workers.insert(stream, me);
    s.queues.entry(me).or_default();
    Ok(me)
}

/// The loop of stream `stream`'s host-function thread `me`: it ends once the stream is
/// destroyed and no function or marker of it is left.
fn serve(me: u64, stream: StreamKey) {
    let live = |s: &State| {
        s.workers.get(&stream) == Some(&me) || s.markers.get(&me).is_some_and(|m| !m.is_empty())
    };
    crate::registry::with_current_device(Some(stream.0), || loop {
        match run_next(me, None, &live) {
            Ok(Next::Ran | Next::TimedOut) => {}
            Ok(Next::Ended) => {
                let mut s = state();
                if !live(&s) && s.queues.get(&me).is_none_or(VecDeque::is_empty) {
                    // Reports find the thread by its queue: none come after this.
                    s.queues.remove(&me);
                    s.markers.remove(&me);
                    break;
                }
            }
            Err(e) => tracing::error!(error = ?e, "a host function's gate did not open"),
        }
    });
}

/// Stream `stream` was destroyed: its host-function thread ends once nothing of it is left.
pub(crate) fn stream_destroyed(stream: StreamKey) {
    let mut s = state();
    if s.workers.remove(&stream).is_some() {
        shared().changed.notify_all();
    }
}

/// The thread subscribed to stream `handle`, for a launch of `call` on it.
pub(crate) fn subscriber(call: &str, handle: usize) -> Result<u64, Fail> {
    state().subscriptions.get(&handle).copied().ok_or_else(|| {
        fail(
            ACL_ERROR_RT_STREAM_NO_CB_REG,
            format!("{call}: stream {handle:#x} is subscribed by no thread (call aclrtSubscribeReport first)"),
        )
    })
}

/// Who runs the callbacks of a launch.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Runner {
    /// The thread subscribed to the stream when the callback is reported
    /// (`aclrtLaunchCallback`).
    Subscriber,
    /// The stream's host-function thread ([`host_func_thread`], `aclrtLaunchHostFunc`).
    HostFuncs(u64),
}

/// A callback launched on stream `handle`: what its task reports when the stream reaches
/// it, each time it does.
#[derive(Clone)]
pub(crate) struct Launched {
    /// Who runs it.
    pub runner: Runner,
    /// The host function.
    pub func: Callback,
    /// Its argument, as an address.
    pub data: usize,
    /// The stream's handle.
    pub handle: usize,
    /// The launch, when eager and blocking: a gate holds the stream until it has run.
    pub gated: Option<u64>,
    /// When captured and blocking: the gate captured after it (set once captured), which
    /// holds each replay until that replay's callback has run.
    pub graph_gate: Option<Arc<OnceLock<GraphGate>>>,
}

impl Launched {
    /// Reports the callback to its runner: the thread subscribed to its stream now, or its
    /// stream's host-function thread (dropped, with a warning, when the stream has been
    /// unsubscribed or destroyed since: then its graph gate opens). Runs in the callback's
    /// task, the body of a simulator operator (with or without the simulator's lock held).
    pub(crate) fn report(&self) {
        let graph_gate = self.graph_gate.as_ref().and_then(|g| g.get()).cloned();
        let mut s = state();
        let runner = match self.runner {
            Runner::Subscriber => s.subscriptions.get(&self.handle).copied(),
            Runner::HostFuncs(t) => s.queues.contains_key(&t).then_some(t),
        };
        let Some(thread) = runner else {
            let gate = self.gated.and_then(|l| finish_launch(&mut s, l));
            drop(s);
            tracing::warn!(
                stream = self.handle,
                "a host callback reached a stream no thread runs callbacks of any more; dropped"
            );
            if gate.is_some() || graph_gate.is_some() {
                // The simulator's lock may be held here: the gates open once it is free.
                std::thread::spawn(move || {
                    let opened =
                        open(gate).and(graph_gate.as_ref().map_or(Ok(()), open_graph_gate));
                    if let Err(e) = opened {
                        tracing::error!(error = ?e, "the gate of a dropped host callback did not open");
                    }
                });
            }
            return;
        };
        s.next += 1;
        let id = s.next;
        s.queues.entry(thread).or_default().push_back(Report {
            id,
            func: self.func,
            data: self.data,
            handle: self.handle,
            gated: self.gated,
            graph_gate,
        });
        shared().changed.notify_all();
    }
}

/// A number for an eager blocking launch, whose gate ([`set_gate`]) opens once its callback
/// has run or been dropped; `subscribed`: the stream whose unsubscription drops it (none for
/// a host function).
pub(crate) fn gated_launch(subscribed: Option<usize>) -> u64 {
    let mut s = state();
    s.next_launch += 1;
    let launch = s.next_launch;
    s.gates.insert(launch, (subscribed, None));
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

/// Opens `gate` for the replay whose callback ran or was dropped (no lock of this module
/// held).
fn open_graph_gate(gate: &GraphGate) -> Result<(), Fail> {
    gate.open().map_err(|e| {
        fail(
            ACL_ERROR_RT_INTERNAL_ERROR,
            format!(
                "the graph gate {} of a blocking callback did not open: {e}",
                gate.id()
            ),
        )
    })
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
    let subscribed = |s: &State| s.subscriptions.values().any(|t| *t == me);
    // Nothing to run is the answer a report thread polls for, not a refusal (torch_npu's
    // polls before its stream is subscribed, then every `timeout` ms).
    match run_next(me, deadline, &subscribed)? {
        Next::Ran => Ok(()),
        Next::Ended => Err(fail(
            ACL_ERROR_RT_THREAD_SUBSCRIBE,
            format!("{call}: thread {me:#x} subscribes no stream (aclrtSubscribeReport)"),
        )
        .polled()),
        Next::TimedOut => Err(fail(
            ACL_ERROR_RT_REPORT_TIMEOUT,
            format!("{call}: no host callback was reported within {timeout_ms} ms"),
        )
        .polled()),
    }
}

/// What [`run_next`] did.
enum Next {
    /// It ran a callback.
    Ran,
    /// Nothing is left to run and the thread runs no stream's callbacks any more.
    Ended,
    /// Nothing was reported before the deadline.
    TimedOut,
}

/// Runs, on thread `me`, the first callback reported to it, waiting until `deadline` (none:
/// without end) for one while `live` says the thread still runs some stream's callbacks;
/// meanwhile brings simulated time up to its streams' next eager callback (a host wait on
/// its marker). Opens the gates the callback held once it has run.
fn run_next(
    me: u64,
    deadline: Option<Instant>,
    live: &dyn Fn(&State) -> bool,
) -> Result<Next, Fail> {
    let mut s = state();
    loop {
        if let Some(r) = s.queues.get_mut(&me).and_then(VecDeque::pop_front) {
            drop(s);
            tracing::debug!(stream = r.handle, id = r.id, "running a host callback");
            // SAFETY: the function and its argument the client launched, called on the
            // thread that runs its stream's callbacks, as CANN calls them; no lock is held.
            unsafe { (r.func)(r.data as *mut c_void) };
            let mut s = state();
            let gate = r.gated.and_then(|l| finish_launch(&mut s, l));
            drop(s);
            open(gate)?;
            r.graph_gate.as_ref().map_or(Ok(()), open_graph_gate)?;
            return Ok(Next::Ran);
        }
        if !live(&s) {
            return Ok(Next::Ended);
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
                    return Ok(Next::TimedOut);
                }
            }
        }
    }
}
