//! [`SimEvent`]: the hal event.

use crate::device::{lock, same_device, Shared};
use crate::SimBackend;
use braid_stream_core::hal::{self, HalError};
use std::fmt;

/// A handle to one event of a [`crate::SimDevice`]. Cloning gives another handle to the same
/// event.
#[derive(Clone)]
pub struct SimEvent {
    pub(crate) shared: Shared,
    index: usize,
}

impl fmt::Debug for SimEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimEvent")
            .field("index", &self.index)
            .finish()
    }
}

impl SimEvent {
    pub(crate) fn new(shared: Shared, index: usize) -> Self {
        SimEvent { shared, index }
    }

    /// Index of the event within its device.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl hal::Event for SimEvent {
    type B = SimBackend;

    fn query(&self) -> Result<bool, HalError> {
        lock(&self.shared).query_event(self.index)
    }

    fn synchronize(&self) -> Result<(), HalError> {
        lock(&self.shared).sync_event(self.index)
    }

    fn elapsed_ms(&self, end: &SimEvent) -> Result<f32, HalError> {
        same_device(&self.shared, &end.shared)?;
        lock(&self.shared).elapsed_ms(self.index, end.index)
    }
}
