//! Failures of a communicator's collectives reported after their calls returned, as HCCL
//! reports them to `HcclGetCommAsyncError` (torch_npu's watchdog polls it). On the simulator
//! there are two:
//! - a host wait (a synchronize or an event wait) on work held back behind a collective that
//!   cannot complete — some rank never issued its part, or its stream never reaches it within
//!   the collective timeout. The wait fails with [`HalError::CollectiveIncomplete`], and the
//!   communicator whose call held the work keeps that error;
//! - a rank's part that the fault plan made fail on the device
//!   ([`crate::FaultPlan::fail_collective_async_nth`]): when its call runs, the communicator
//!   keeps the error its stream reports (see [`crate::fault`]).
//!
//! The communicator keeps the first one ([`crate::SimComm::async_error`]), for its life, as
//! HCCL keeps a communicator's asynchronous error. The communicator still runs later
//! collectives, and a held call runs once its missing parts come.

use super::backlog::HostWait;
use super::{Held, Work};
use crate::engine::Engine;
use braid_stream_core::hal::HalError;

impl Engine {
    /// Keeps `error`, a host wait on `what` that could not complete, on the communicator
    /// whose call holds the work back (found along at most four held event waits).
    pub(crate) fn note_incomplete(&mut self, what: HostWait, error: &HalError) {
        if let Some(comm) = self.held_stream(what).and_then(|s| self.holding_comm(s, 0)) {
            self.keep_async_error(comm, error);
        }
    }

    /// Keeps `error` as communicator `comm`'s asynchronous error, unless it has one already
    /// (the first is kept for the communicator's life).
    pub(crate) fn keep_async_error(&mut self, comm: usize, error: &HalError) {
        if let Some(state) = self.coll.comms.get_mut(comm) {
            if state.async_error.is_none() {
                tracing::warn!(comm, %error, "collective failed: kept as the communicator's asynchronous error");
                state.async_error = Some(error.clone());
            }
        }
    }

    /// The communicator whose call holds stream `s`'s work back.
    fn holding_comm(&self, s: u32, depth: u32) -> Option<usize> {
        match self.coll.backlog_front(s).map(|d| &d.action)? {
            Held::Part { comm, .. } => Some(*comm),
            Held::Graph(id) => self.run_blocker(*id).map(|(comm, _)| comm),
            Held::Work(Work::Wait(e)) if depth < 4 => {
                let holder = self.record_holder(*e)?;
                self.holding_comm(holder, depth + 1)
            }
            Held::Gate(_) | Held::Work(_) => None,
        }
    }

    /// Communicator `comm`'s asynchronous error, if it has one.
    pub(crate) fn comm_async_error(&self, comm: usize) -> Option<HalError> {
        self.coll.comms.get(comm)?.async_error.clone()
    }
}
