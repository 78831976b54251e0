//! [`HostGate`]: a point of a stream its later work waits behind until the host opens it.

use crate::device::{lock_engine, Shared};
use crate::stream::SimStream;
use braid_stream_core::hal::HalError;
use std::fmt;

/// A gate in a stream: the work submitted to the stream after [`SimStream::hold_gate`] waits
/// until [`HostGate::open`], and starts no earlier than the host time of the opening. A host
/// synchronization waiting on the stream meanwhile waits for another thread to open it, up to
/// the node's collective timeout ([`crate::SimConfig::collective_timeout`]), then fails naming
/// the gate. What `braid-acl-sim` puts behind a blocking host callback.
pub struct HostGate {
    shared: Shared,
    id: u64,
}

impl fmt::Debug for HostGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostGate").field("id", &self.id).finish()
    }
}

impl HostGate {
    /// Its number in the node (in error messages).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Opens the gate: the stream's held-back work is placed from the host time now.
    pub fn open(self) -> Result<(), HalError> {
        lock_engine(&self.shared).open_gate(self.id)
    }
}

impl SimStream {
    /// Holds the stream's later work back behind a new [`HostGate`]. Refused on a capturing
    /// stream: a graph holds no gate.
    pub fn hold_gate(&self) -> Result<HostGate, HalError> {
        let id = lock_engine(&self.shared).hold_gate(self.global())?;
        Ok(HostGate {
            shared: self.shared.clone(),
            id,
        })
    }
}
