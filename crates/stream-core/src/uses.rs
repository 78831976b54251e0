//! Use observers: how the allocator's automatic mode learns about every use of device memory.
//!
//! Each piece of work submitted through the front layer declares the ranges it reads and writes
//! (kernels by their declaration, copies and memsets by their arguments). Observers registered
//! on the device receive each range with the position of the work, after the device lock is
//! released, so an observer may query the device.

use crate::graph_hold::GraphHold;
use crate::ordering::StreamPosition;
use crate::types::DeviceSlice;
use std::sync::Arc;

/// How work touches a range.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Access {
    /// The work reads the range.
    Read,
    /// The work writes the range.
    Write,
}

/// Receives every range used by work submitted through the front layer.
pub trait UseObserver: Send + Sync {
    /// `range` is accessed by the work at `position`.
    fn note_use(&self, position: StreamPosition, range: DeviceSlice, access: Access);

    /// For a capture use observer ([`crate::Device::add_capture_use_observer`]): an update of
    /// a graph's task group ([`crate::Graph::update`]) was applied, whose operators use
    /// `ranges` of this observer's device at every later replay. The hold returned, if any,
    /// is kept by the graph until it is dropped or a later update of the group replaces it
    /// ([`crate::graph_hold`]). The default holds nothing.
    fn note_graph_update(&self, ranges: &[(DeviceSlice, Access)]) -> Option<Arc<dyn GraphHold>> {
        let _ = ranges;
        None
    }
}
