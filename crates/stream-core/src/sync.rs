//! braid's locks, and the one order they are taken in.
//!
//! Every lock in braid comes from this module: [`Mutex`], [`RwLock`] and [`Condvar`] for the
//! locks of objects (a device, an allocator, a simulated node), [`GlobalMutex`] for
//! process-wide statics. None of them is poisoned by a panic: every critical section in braid
//! leaves its data consistent before anything that can panic, so a lock whose holder
//! panicked still guards good data and the next caller takes it as usual. In a normal build
//! they are `parking_lot`'s (no poisoning to check, inlined uncontended paths: the caching
//! allocator's hit path takes its lock twice). With the `model-check` feature, [`Mutex`],
//! [`RwLock`] and [`Condvar`] are built from `shuttle`'s primitives with the same API, as tokio
//! swaps in loom's, so a model checker explores the interleavings of threads driving the front
//! layer, the allocator and the backends (`braid-conformance`'s `model_check` test, and
//! `braid-backend-acl`'s), each program under one bounded search (`sync::explore`, with the feature); those
//! locks work only inside `shuttle::check_*`, so never enable the feature in a normal build.
//!
//! Host threads drive a device concurrently: launches, records and waits on *different*
//! streams never wait for each other's backend calls. What each lock guards, in the order a
//! thread may take them (a thread holding one only ever takes locks further down the list):
//!
//! 1. **A caller's turn above the allocator.** A graph pool's replay state
//!    (`braid-graph-capture`'s `GraphPool`), held across ordering a launch after the pool's
//!    last one and the graph launch itself; a communicator's call turn (`braid-collective`'s
//!    ledger of a single-process communicator, or a rank's next call number), held across
//!    the collective's submission. Both submit work, whose use notes reach the allocator (2).
//!    A thread holds at most one of them.
//! 2. **The allocator's locks** (`braid-allocator`): a caching allocator's state lock, the
//!    pinned host allocator's cache, and a pinned buffer's list of uses, each held across
//!    calls into the device (segment allocations and frees, event records and queries,
//!    happens-before questions). A thread holds at most one of them, except that a caching
//!    allocator's sleep lock (its offloaded data: sleeps and wakes take turns) is taken
//!    first and held across that allocator's state lock and pinned host allocator, never
//!    under them: two allocators' locks
//!    are never nested, and the device never calls the allocator while holding any lock of
//!    this crate (use notifications, [`crate::UseObserver`], and workspace requests,
//!    [`crate::WorkspaceProvider`], are made with every lock below released).
//! 3. **The capture gate** of a device (a read-write lock over nothing). Taken *shared* for
//!    the whole of every submission (launch, copy, memset, [`crate::Stream::launch_op`],
//!    [`crate::Stream::note_foreign_work`], graph launch), record, wait, host-blocking call
//!    (synchronize, query) and raw free, and *exclusively* by
//!    [`crate::Stream::begin_capture`] and [`crate::Stream::end_capture`]. So a capture starts
//!    or ends between two whole calls, never inside one: the capture checks a call makes (work
//!    on the default stream during a global capture, a blocking call during a capture) hold
//!    until its backend call returns, and a stream's domain (eager or a capture) cannot change
//!    between the backend call and the position the model gives it. Shared holders never wait
//!    for each other; a thread never takes the gate twice (a waiting `begin_capture` would
//!    make the second, shared, request wait for the first).
//! 4. **A stream's submission lock**, held across the backend call that enqueues work on that
//!    stream *and* the position the model gives it, so positions follow the order in which the
//!    backend stream received the work. A thread holds at most one stream's.
//! 5. **An event's state** (its last record's snapshot and a count of records), held by a
//!    record across the backend record and the snapshot, and by a wait across reading the
//!    snapshot and the backend wait: a record and a wait on one event from two threads are
//!    ordered the same way in the model and in the backend. A thread holds at most one
//!    event's, except a graph launch, which holds those of the graph's external events
//!    ([`crate::EventFlags::EXTERNAL`]) across the backend launch, taken in address order.
//! 6. **The device's ordering state** ([`crate::ordering::Ordering`], tags, keep-alives):
//!    held only for a few vector-clock operations, never across a backend call.
//! 7. **Leaves**, each held only to read or update what it guards, with no lock of this list
//!    above 7 taken under it: a graph's launch list, pending update event and holds
//!    ([`crate::graph_hold`], whose checks run with it released), a stream
//!    pool's idle streams, the device's observer lists (all uses and captured uses), its
//!    workspace provider, its fallback workspace segments (held across the backend allocation
//!    that grows one, with the list of retired segments taken under them), an async event
//!    wait's state, an allocator's out-of-memory observer list, a capture's access recorder
//!    (`braid-graph-capture`), the caching allocator's list of released graph captures,
//!    a root-info transport's published root info
//!    (`braid-collective`), and the process's device registry (`registry`, a
//!    [`GlobalMutex`]).
//! 8. **A simulated rank's call turn** (`braid-backend-sim`'s communicator over a
//!    `RemoteGroup`): one collective at a time per rank, held across preparing its part
//!    (under the engine lock, 10), the exchange with the other processes (9) and finishing
//!    it (10 again). Taken by the backend call, under 3–5, with the engine lock released.
//! 9. **A remote group's links** (the TCP connections of a `RemoteGroup`), held across one
//!    exchange; nothing is taken under them.
//! 10. **The backends' own locks**, taken by backend calls under 2–5 and 8: the simulator's
//!     engine lock (one per `SimNode`, every device of the node; a simulated graph's node
//!     list, rewritten by a task update under the engine lock, is a leaf under it; a host
//!     wait on work held back behind a collective releases it while it waits on the engine's
//!     condition variable), and the ACL backend's per-device lists (an error kept from a `Drop`, node
//!     counts of captures, physical memory handles, enabled peers) and per-stream capture
//!     model, and the noop backend's launch log (`hal::noop`). They are leaves: nothing of
//!     braid above them is locked under them, and a backend call, so a
//!     [`crate::CustomOp`]'s body, must not call back into braid on the same device. Among
//!     the ACL backend's, one nesting: a device's enabled peers are held across enabling one
//!     (so two threads ask ACL once), with that device's error slot (taken by every call's
//!     thread binding) under them; every other is taken alone. `braid-backend-acl`'s
//!     `model_check` unit tests explore them (its `model-check` feature), as
//!     `braid-conformance`'s explore the others.
//!
//! Process-wide statics ([`GlobalMutex`]: the device registry, the ACL backend's resolved
//! library tables and table of live ranges, a simulated root info's waiting listeners, the
//! process's IPC exports, the allocator's IPC buffers kept for importers) are
//! leaves too: held for one lookup or update (a library load at most), with no other lock
//! taken under them; so are `braid-acl-sim`'s tables of aclnn objects (and its client's)
//! and communicators, and its error log. Its
//! device registry is the exception: held across the simulator call it fronts, so the
//! simulator's locks (8–10) are taken under it, and never taken under any other lock.
//!
//! **Several devices.** Locks of two devices are never nested except in one way: a thread
//! holding locks 3–5 of one device (its gate, a stream's turn, an event's state) may take
//! another device's lock 5 or 6 — a stream of device B waiting on an event of device A holds
//! B's gate and turn and A's event state across the backend wait, then takes B's ordering
//! state; a graph launch may hold external events of other devices. The ordering states (6)
//! of two devices are never held together: knowledge crossing devices (a host observation on
//! B that completes A's work, "is `u` on A ordered before the next work on B's stream") is
//! read or written one device's state at a time, after releasing the previous one; since
//! knowledge only grows, a `true` read that way stays true. No thread takes a device's gate or
//! a stream's turn while holding another device's event state or ordering state, so no cycle
//! forms. An allocator's lock (2) may be held while calling into any device (recording events
//! on a peer's stream, querying them).
//! None of these locks is reentrant.

#[cfg(not(feature = "model-check"))]
pub use parking_lot::{
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, WaitTimeoutResult,
};

#[cfg(feature = "model-check")]
pub mod explore;
#[cfg(feature = "model-check")]
mod model;
#[cfg(feature = "model-check")]
pub use model::{
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, WaitTimeoutResult,
};

/// Threads as the model checker sees them: `std::thread`'s `spawn`, `current`, `ThreadId`
/// and `thread_local!` in a normal build, `shuttle`'s under `model-check` (whose threads are
/// coroutines on one operating-system thread, so `std::thread::current` cannot tell them
/// apart and `std`'s thread-locals would be shared). For the helper threads braid spawns (an
/// async event wait's host-blocking wait), the threads it tells apart (the simulator's
/// drivers of a collective) and its per-thread state (the current-stream stack).
pub mod thread {
    #[cfg(not(feature = "model-check"))]
    pub use std::thread::{current, spawn, ThreadId};
    #[cfg(not(feature = "model-check"))]
    pub use std::thread_local;

    #[cfg(feature = "model-check")]
    pub use shuttle::thread::{current, spawn, ThreadId};
    #[cfg(feature = "model-check")]
    pub use shuttle::thread_local;
}

/// A lock for a process-wide static: `parking_lot`'s in every build, the model checker's
/// never (a static outlives the model checker's executions, whose locks live in one). Hold it
/// only for one lookup or update of what it guards, with no other lock taken under it.
pub type GlobalMutex<T> = parking_lot::Mutex<T>;

/// The guard of a [`GlobalMutex`].
pub type GlobalMutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

/// A condition variable paired with a [`GlobalMutex`] (`parking_lot`'s in every build, for
/// the same reason): for a static whose waiters wait on other threads, such as
/// `braid-acl-sim`'s host-callback reports.
pub type GlobalCondvar = parking_lot::Condvar;
