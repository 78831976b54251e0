//! The front layer's locks, and the one order they are taken in.
//!
//! Host threads drive a device concurrently: launches, records and waits on *different* streams
//! never wait for each other's backend calls. What each lock guards, in the order a thread may
//! take them (a thread holding one only ever takes locks further down the list):
//!
//! 1. **The allocator's state** (`braid-allocator`, outside this crate). The allocator calls
//!    into the device while holding it; the device never calls the allocator while holding
//!    any lock of this crate (use notifications, [`crate::UseObserver`], are sent after every
//!    lock below is released).
//! 2. **The capture gate** of a device (a read-write lock over nothing). Taken *shared* for the
//!    whole of every submission (launch, copy, memset, [`crate::Stream::launch_op`],
//!    [`crate::Stream::note_foreign_work`], graph launch), record, wait, host-blocking call
//!    (synchronize, query) and raw free, and *exclusively* by
//!    [`crate::Stream::begin_capture`] and [`crate::Stream::end_capture`]. So a capture starts
//!    or ends between two whole calls, never inside one: the capture checks a call makes (work
//!    on the default stream during a global capture, a blocking call during a capture) hold
//!    until its backend call returns, and a stream's domain (eager or a capture) cannot change
//!    between the backend call and the position the model gives it. Shared holders never wait
//!    for each other; a thread never takes the gate twice (a waiting `begin_capture` would make
//!    the second, shared, request wait for the first).
//! 3. **A stream's submission lock**, held across the backend call that enqueues work on that
//!    stream *and* the position the model gives it, so positions follow the order in which the
//!    backend stream received the work. A thread holds at most one stream's.
//! 4. **An event's state** (its last record's snapshot and a count of records), held by a
//!    record across the backend record and the snapshot, and by a wait across reading the
//!    snapshot and the backend wait: a record and a wait on one event from two threads are
//!    ordered the same way in the model and in the backend. A thread holds at most one
//!    event's, except a graph launch, which holds those of the graph's external events
//!    ([`crate::EventFlags::EXTERNAL`]) across the backend launch, taken in address order.
//! 5. **The device's ordering state** ([`crate::ordering::Ordering`], tags, keep-alives):
//!    held only for a few vector-clock operations, never across a backend call.
//!
//! Leaves, after all of these: a graph's launch list, the device's observer list, the process's
//! device registry (`registry`: held only to read or update the map of devices by uid), and the
//! backend's own locks (the simulator's engine lock), which backend calls take under 2–4.
//!
//! **Several devices.** Locks of two devices are never nested except in one way: a thread
//! holding locks 2–4 of one device (its gate, a stream's turn, an event's state) may take
//! another device's lock 4 or 5 — a stream of device B waiting on an event of device A holds
//! B's gate and turn and A's event state across the backend wait, then takes B's ordering
//! state; a graph launch may hold external events of other devices. The ordering states (5)
//! of two devices are never held together: knowledge crossing devices (a host observation on
//! B that completes A's work, "is `u` on A ordered before the next work on B's stream") is
//! read or written one device's state at a time, after releasing the previous one; since
//! knowledge only grows, a `true` read that way stays true. No thread takes a device's gate or
//! a stream's turn while holding another device's event state or ordering state, so no cycle
//! forms. An allocator's lock (1) may be held while calling into any device (recording events
//! on a peer's stream, querying them); no device call takes an allocator's lock while holding
//! a device lock, and two allocators' locks are never nested.
//! None of these locks is reentrant: a backend call, and so a [`crate::CustomOp`]'s body, must
//! not call back into braid on the same device.
//!
//! With the `model-check` feature the locks come from `shuttle`, whose model checker explores
//! the interleavings of threads driving a device (`braid-conformance`'s `model_check` test).

#[cfg(not(feature = "model-check"))]
pub(crate) use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(feature = "model-check")]
pub(crate) use shuttle::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`. Every critical section of the front layer leaves its data consistent before
/// anything that can panic, so a lock poisoned by a caller's panic still guards good data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes `gate` shared (see the module docs; poisoning recovered as for [`lock`]).
pub(crate) fn read<T>(gate: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    gate.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Takes `gate` exclusively (see the module docs; poisoning recovered as for [`lock`]).
pub(crate) fn write<T>(gate: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    gate.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
