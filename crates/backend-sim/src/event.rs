//! [`SimEvent`]: the hal event.

use crate::collective::HostWait;
use crate::device::{checked, host_wait, same_node, Shared};
use crate::fault::CallKind;
use crate::limits::LiveSlot;
use crate::SimBackend;
use braid_stream_core::hal::{self, HalError};
use std::fmt;
use std::sync::Arc;

/// A handle to one event of a [`crate::SimDevice`]. Cloning gives another handle to the same
/// event.
#[derive(Clone)]
pub struct SimEvent {
    pub(crate) shared: Shared,
    index: usize,
    /// Its place among the device's live events.
    _slot: Arc<LiveSlot>,
}

impl fmt::Debug for SimEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimEvent")
            .field("index", &self.index)
            .finish()
    }
}

impl SimEvent {
    pub(crate) fn new(shared: Shared, index: usize, slot: Arc<LiveSlot>) -> Self {
        SimEvent {
            shared,
            index,
            _slot: slot,
        }
    }

    /// Index of the event among the events of its node (for a device made with
    /// `SimDevice::new`, of the device).
    pub fn index(&self) -> usize {
        self.index
    }
}

impl hal::Event for SimEvent {
    type B = SimBackend;

    fn query(&self) -> Result<bool, HalError> {
        let mut engine = checked(&self.shared, CallKind::Query)?;
        if let Some(file) = engine.ipc_opened(self.index) {
            // Another process's event: complete once its last record is published.
            engine.host_call("query_event");
            return crate::ipc::opened_event_done(&file);
        }
        let done = engine.query_event(self.index)?;
        engine.faults().take_event(self.index)?;
        Ok(done)
    }

    fn synchronize(&self) -> Result<(), HalError> {
        if let Some(wait) = crate::ipc::IpcWait::of(&self.shared, self.index)? {
            return wait.block();
        }
        let (i, what) = (self.index, HostWait::Event(self.index));
        host_wait(&self.shared, Some(CallKind::Synchronize), what, |e| {
            e.sync_event(i)?;
            e.faults().take_event(i)
        })
    }

    fn elapsed_ms(&self, end: &SimEvent) -> Result<f32, HalError> {
        // Events of devices of one node share the virtual time axis.
        same_node(&self.shared, &end.shared)?;
        let (a, b) = (self.index, end.index);
        host_wait(&self.shared, None, HostWait::Events(a, b), |e| {
            e.elapsed_ms(a, b)
        })
    }
}
