//! The runtime's resource limits: how many streams and events may be alive on one device.
//!
//! ACL caps both per device (`reference/acl-runtime.md` §1.5 and §1.6, from CANN's
//! `aclrtCreateStream` and `aclrtCreateEvent` documentation):
//!
//! - streams: 1984 on Atlas A2/A3 training products (the 910B the default profile models),
//!   1024 on Atlas inference products (310P), 2048 on Atlas training (910), the default
//!   stream included;
//! - events: 65536 on Atlas A2/A3 (and 310B), 1023 on Atlas inference (310P), 65535 on Atlas
//!   training (910).
//!
//! A stream or event is alive while a handle to it is (the simulator frees its slot when the
//! last handle drops, as `aclrtDestroyStream` / `aclrtDestroyEvent` would). A captured graph
//! holds one stream for each stream captured into it, until its last handle drops, as ACL's
//! models hold the streams their capture put into capture state ("Stream resources are
//! consumed as more streams enter the capture state", CANN's aclgraph design notes). Creating
//! one past the limit fails with ACL's 207008 `ACL_ERROR_RT_NO_STREAM_RESOURCE` or 207007
//! `ACL_ERROR_RT_NO_EVENT_RESOURCE`, as [`HalError::Native`]; a capture whose graph cannot hold
//! its streams fails at its end with 207008 and is discarded.

use braid_stream_core::hal::HalError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Streams alive at once on an Atlas A2/A3 device, the default stream included.
pub const ASCEND_910B_MAX_STREAMS: u32 = 1984;
/// Events alive at once on an Atlas A2/A3 device.
pub const ASCEND_910B_MAX_EVENTS: u32 = 65_536;

/// A [`HalError::Native`] with ACL's `code` and `name`.
pub(crate) fn native(code: i32, name: &'static str, message: String) -> HalError {
    HalError::Native {
        code,
        name,
        message,
    }
}

/// What is limited.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Resource {
    Stream,
    Event,
}

/// The live streams and events of one device, counted outside the engine's lock so that a
/// handle dropping never takes it.
#[derive(Debug)]
pub(crate) struct Limits {
    counts: Arc<[AtomicU32; 2]>,
    max_streams: u32,
    max_events: u32,
}

/// One live stream or event: its slot is given back when the last handle drops.
#[derive(Debug)]
pub(crate) struct LiveSlot {
    counts: Arc<[AtomicU32; 2]>,
    resource: Resource,
}

impl Drop for LiveSlot {
    fn drop(&mut self) {
        self.counts[self.resource as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Limits {
    /// Limits of `max_streams` streams (the default stream included) and `max_events` events.
    pub(crate) fn new(max_streams: u32, max_events: u32) -> Self {
        Limits {
            // The default stream is always alive.
            counts: Arc::new([AtomicU32::new(1), AtomicU32::new(0)]),
            max_streams,
            max_events,
        }
    }

    /// A slot for a new stream, or ACL's error when `max_streams` are alive.
    pub(crate) fn take_stream(&self) -> Result<Arc<LiveSlot>, HalError> {
        self.take(Resource::Stream, self.max_streams)
            .ok_or_else(|| {
                native(
                    207_008,
                    "ACL_ERROR_RT_NO_STREAM_RESOURCE",
                    format!(
                    "{} streams are alive on the device, its limit (the default stream included)",
                    self.max_streams
                ),
                )
            })
    }

    /// `n` slots for the streams a captured graph holds, all or none; ACL's error when fewer
    /// than `n` are left.
    pub(crate) fn take_graph_streams(&self, n: usize) -> Result<Vec<Arc<LiveSlot>>, HalError> {
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            match self.take(Resource::Stream, self.max_streams) {
                Some(slot) => slots.push(slot),
                None => {
                    let live = self.live().0;
                    return Err(native(
                        207_008,
                        "ACL_ERROR_RT_NO_STREAM_RESOURCE",
                        format!(
                            "the captured graph needs {n} streams (one per stream captured into it) but {live} of the device's {} streams are alive (captured graphs' included)",
                            self.max_streams
                        ),
                    ));
                }
            }
        }
        Ok(slots)
    }

    /// The stream limit.
    pub(crate) fn max_streams(&self) -> u32 {
        self.max_streams
    }

    /// A slot for a new event, or ACL's error when `max_events` are alive.
    pub(crate) fn take_event(&self) -> Result<Arc<LiveSlot>, HalError> {
        self.take(Resource::Event, self.max_events).ok_or_else(|| {
            native(
                207_007,
                "ACL_ERROR_RT_NO_EVENT_RESOURCE",
                format!(
                    "{} events are alive on the device, its limit",
                    self.max_events
                ),
            )
        })
    }

    /// Live streams (the default stream included) and events.
    pub(crate) fn live(&self) -> (u32, u32) {
        (
            self.counts[0].load(Ordering::Relaxed),
            self.counts[1].load(Ordering::Relaxed),
        )
    }

    fn take(&self, resource: Resource, max: u32) -> Option<Arc<LiveSlot>> {
        let count = &self.counts[resource as usize];
        // Takers hold the engine's lock, so the check and the increment do not race with
        // another taker; a concurrent drop only lowers the count.
        if count.load(Ordering::Relaxed) >= max {
            return None;
        }
        count.fetch_add(1, Ordering::Relaxed);
        Some(Arc::new(LiveSlot {
            counts: self.counts.clone(),
            resource,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_come_back_when_dropped() {
        let limits = Limits::new(2, 1);
        let s = limits.take_stream().unwrap();
        let err = limits.take_stream().unwrap_err();
        assert!(
            matches!(err, HalError::Native { code: 207_008, .. }),
            "{err}"
        );
        let e = limits.take_event().unwrap();
        assert!(matches!(
            limits.take_event(),
            Err(HalError::Native { code: 207_007, .. })
        ));
        assert_eq!(limits.live(), (2, 1));
        drop((s, e));
        assert_eq!(limits.live(), (1, 0));
        assert!(limits.take_stream().is_ok());
    }
}
