//! Kernels (and user operators' host bodies) computed outside the engine lock.
//!
//! A kernel's start (in the data queue's drain, under the engine lock) reads its inputs,
//! pinned in place ([`crate::memory::Pin`]), and leaves a [`JobCell`]: the computing, which
//! touches no engine state, runs later on a host thread of its device (the next call made on
//! that device computes it, with the engine lock released, before it returns), so one device
//! computing never holds up other devices' threads: their calls go on, and only a
//! synchronization that must see the kernel's results waits for them (computing the kernel
//! itself if no thread has taken it yet). The kernel's end action waits
//! in the queue until the cell holds the result; the drain stops there
//! ([`crate::queue::DataQueue::drain`]) until the result is in, and a call that needs every
//! effect applied (a synchronize, a free) sees them all (see `crate::device::EngineGuard`).
//!
//! Numbers do not depend on which thread computes a kernel or when: a kernel reads the
//! bytes its inputs had at its start and its outputs are stored at its end, as when it was
//! computed in the drain.
//!
//! A kernel that can write its outputs in place ([`Job::can_place`]) is best computed at its
//! end: when the drain reaches its end before any thread has taken it, the queue makes its
//! outputs ranges of device memory ([`JobCell::place`]) and applies nothing touching them
//! until it is computed, so it writes them where they belong instead of into buffers copied
//! at its end.
//! So a device's thread leaves such a kernel for then, and computes early only what cannot
//! be placed, or when the drain waits for another device's kernel anyway (its own kernels
//! then compute side by side with that one; see `crate::device::EngineGuard`).

use crate::buffers::BufferPool;
use crate::compute::{Failure, Job, PendingWrite};
use crate::memory::DataView;
use braid_stream_core::sync::{Condvar, Mutex};
use braid_stream_core::types::DeviceSlice;

/// Where a job stands.
enum State {
    /// Waiting for a thread to compute it.
    Ready(Job),
    /// A thread is computing it.
    Running,
    /// Computed: the outputs, or the message of its failure (taken once, by the drain).
    Done(Option<Result<Vec<PendingWrite>, Failure>>),
}

/// A kernel waiting to be computed, being computed, or computed.
pub(crate) struct JobCell {
    state: Mutex<State>,
    done: Condvar,
    name: &'static str,
    /// The index of the device whose kernel it is: its host threads compute it.
    pub device: usize,
    /// Whether it is best left until its end, to write its outputs in place
    /// ([`Job::can_place`]).
    pub deferred: bool,
}

impl std::fmt::Debug for JobCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobCell").field("op", &self.name).finish()
    }
}

impl JobCell {
    /// A cell for `job` of device `device`, ready to be computed.
    pub fn new(job: Job, device: usize) -> Self {
        JobCell {
            device,
            deferred: job.can_place(),
            name: job.name(),
            state: Mutex::new(State::Ready(job)),
            done: Condvar::new(),
        }
    }

    /// Whether no thread has taken it yet.
    pub fn is_ready(&self) -> bool {
        matches!(*self.state.lock(), State::Ready(_))
    }

    /// Makes the outputs of the job, if no thread has taken it yet, that it may write in place
    /// ranges of device memory ([`Job::place`]), and returns those ranges. The queue calls it
    /// when the job's end is the next effect to apply, and then applies nothing touching them
    /// until the job is computed.
    pub fn place(&self, mem: &mut DataView<'_>, pool: &mut BufferPool) -> Vec<DeviceSlice> {
        match &mut *self.state.lock() {
            State::Ready(job) => job.place(mem, pool),
            _ => Vec::new(),
        }
    }

    /// Computes it on this thread if no thread has taken it; else waits until the thread that
    /// did has finished. Call it with the engine lock released, except where a call must see
    /// every effect at once (then it holds the lock for as long as the kernel computes).
    pub fn run_or_wait(&self) {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, State::Running) {
            State::Ready(job) => {
                drop(state);
                // Should the kernel panic (a bug), the cell still ends, failed, and its
                // waiters wake.
                let mut publish = Publish(self, None);
                let result =
                    tracing::trace_span!("sim kernel", op = self.name).in_scope(|| job.run());
                publish.1 = Some(result);
            }
            State::Running => {
                while matches!(*state, State::Running) {
                    self.done.wait(&mut state);
                }
            }
            done @ State::Done(_) => *state = done,
        }
    }

    /// Computes it on this thread if no thread has taken it (`false`: one had).
    pub fn run_if_ready(&self) -> bool {
        if self.is_ready() {
            self.run_or_wait();
            true
        } else {
            false
        }
    }

    /// The result, once computed (`None` before, and after it was taken).
    pub fn take(&self) -> Option<Result<Vec<PendingWrite>, Failure>> {
        match &mut *self.state.lock() {
            State::Done(result) => result.take(),
            _ => None,
        }
    }
}

/// Stores a job's result in its cell when dropped (after the computing, or while a panic
/// unwinds out of it) and wakes the threads waiting for it.
struct Publish<'a>(&'a JobCell, Option<Result<Vec<PendingWrite>, Failure>>);

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        let result = self
            .1
            .take()
            .unwrap_or_else(|| Err(Failure::kernel("the simulator's kernel panicked")));
        *self.0.state.lock() = State::Done(Some(result));
        self.0.done.notify_all();
    }
}
