//! The pinned host allocator's cache: idle blocks per size class, blocks freed while copies may
//! still use them, the event pool, and the statistics.
//!
//! A freed block with uses the host has not seen complete gets one pooled event per such
//! stream and waits in `pending`; each allocation first polls the pending blocks (the ordering
//! model first, the happens-before query the device reclaimer asks with the host as the reuser,
//! `crate::reclaim::released_for`, then one query per event) and moves those whose uses
//! all completed to the idle lists. Nothing here blocks the host except the final release.

use super::stats::PinnedStats;
use crate::reclaim::{released_for, EventPool, Reuser};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Event, HostPtr, Stream, StreamPosition};
use std::collections::BTreeMap;

/// One use a freed block must outlive: work up to `position` on `stream`, and the event
/// recorded after it (`None` when no event could be recorded, e.g. the stream was capturing;
/// the block then waits for a host observation of the position itself).
struct Wait<B: Backend> {
    stream: Stream<B>,
    position: StreamPosition,
    event: Option<Event<B>>,
}

/// A freed block whose uses may still run.
struct PendingBlock<B: Backend> {
    ptr: HostPtr,
    size: u64,
    waits: Vec<Wait<B>>,
}

/// The locked state of a [`crate::PinnedHostAllocator`].
pub(crate) struct HostCache<B: Backend> {
    /// Idle blocks by size class, most recently freed last (reused first).
    idle: BTreeMap<u64, Vec<HostPtr>>,
    pending: Vec<PendingBlock<B>>,
    /// Recycled events (the device allocator's pool of them).
    events: EventPool<B>,
    pub(crate) stats: PinnedStats,
}

impl<B: Backend> Default for HostCache<B> {
    fn default() -> Self {
        HostCache {
            idle: BTreeMap::new(),
            pending: Vec::new(),
            events: EventPool::default(),
            stats: PinnedStats::default(),
        }
    }
}

impl<B: Backend> HostCache<B> {
    /// An idle block of exactly `size` bytes, after moving completed pending blocks to the idle
    /// lists.
    pub(crate) fn take_idle(&mut self, device: &Device<B>, size: u64) -> Option<HostPtr> {
        self.process_pending(device);
        let list = self.idle.get_mut(&size)?;
        let ptr = list.pop();
        if list.is_empty() {
            self.idle.remove(&size);
        }
        ptr
    }

    /// Moves pending blocks whose uses have all completed to the idle lists. During a capture
    /// only the ordering model is consulted (events cannot be queried then).
    pub(crate) fn process_pending(&mut self, device: &Device<B>) {
        if self.pending.is_empty() {
            return;
        }
        let may_query = !device.is_capturing();
        let mut still = Vec::with_capacity(self.pending.len());
        for mut block in std::mem::take(&mut self.pending) {
            let mut waits = Vec::with_capacity(block.waits.len());
            for wait in block.waits {
                if self.wait_completed(device, &wait, may_query) {
                    if let Some(event) = wait.event {
                        self.events.recycle(event);
                    }
                } else {
                    waits.push(wait);
                }
            }
            block.waits = waits;
            if block.waits.is_empty() {
                self.stats.pending_blocks -= 1;
                self.stats.pending_bytes -= block.size;
                self.push_idle(block.ptr, block.size);
            } else {
                still.push(block);
            }
        }
        self.pending = still;
    }

    fn wait_completed(&mut self, device: &Device<B>, wait: &Wait<B>, may_query: bool) -> bool {
        if released_for(device, wait.position, Reuser::Host) {
            return true;
        }
        let (Some(event), true) = (&wait.event, may_query) else {
            return false;
        };
        self.stats.num_event_queries += 1;
        match event.query() {
            Ok(done) => done,
            Err(err) => {
                tracing::debug!(%err, "pinned block event query failed; the block stays pending");
                false
            }
        }
    }

    /// Takes back a freed block whose last uses are `uses` (stream, position of its last
    /// work that may access the block). Uses the host has seen complete need nothing; for the
    /// others an event is recorded on the stream and the block waits.
    pub(crate) fn free(
        &mut self,
        device: &Device<B>,
        ptr: HostPtr,
        size: u64,
        uses: Vec<(Stream<B>, StreamPosition)>,
    ) {
        let waits: Vec<Wait<B>> = uses
            .into_iter()
            .filter(|(_, position)| !released_for(device, *position, Reuser::Host))
            .map(|(stream, position)| {
                let event = self.record_event(&stream);
                Wait {
                    stream,
                    position,
                    event,
                }
            })
            .collect();
        if waits.is_empty() {
            self.push_idle(ptr, size);
            return;
        }
        tracing::debug!(
            %ptr,
            size,
            streams = waits.len(),
            "pinned block freed while copies may use it: pending"
        );
        self.stats.pending_blocks += 1;
        self.stats.pending_bytes += size;
        self.stats.num_pending_frees += 1;
        self.pending.push(PendingBlock { ptr, size, waits });
    }

    /// A pooled event recorded on `stream`; `None` if the stream is capturing or recording
    /// failed (the block then waits for a host observation through the ordering model alone).
    fn record_event(&mut self, stream: &Stream<B>) -> Option<Event<B>> {
        if stream.is_capturing() {
            // A record there would mark captured work, not the eager copy.
            return None;
        }
        match self.events.record(stream) {
            Ok(recorded) => {
                self.stats.num_events_recorded += 1;
                Some(recorded.event)
            }
            Err(err) => {
                tracing::debug!(%err, "recording an event for a pinned block failed");
                None
            }
        }
    }

    /// Caches an idle block (one the device refused to take back).
    pub(crate) fn push_idle(&mut self, ptr: HostPtr, size: u64) {
        self.idle.entry(size).or_default().push(ptr);
    }

    /// Removes every idle block (to be returned to the device).
    pub(crate) fn take_all_idle(&mut self) -> Vec<(HostPtr, u64)> {
        std::mem::take(&mut self.idle)
            .into_iter()
            .flat_map(|(size, ptrs)| ptrs.into_iter().map(move |p| (p, size)))
            .collect()
    }

    /// Waits for every pending block's uses and removes every cached block (the allocator is
    /// going away). Blocks on the host: only the last handle's drop calls this.
    pub(crate) fn take_everything(&mut self) -> Vec<(HostPtr, u64)> {
        for block in std::mem::take(&mut self.pending) {
            let mut all_done = true;
            for wait in block.waits {
                let waited = match &wait.event {
                    Some(event) => event.synchronize(),
                    None => wait.stream.synchronize(),
                };
                if let Err(err) = waited {
                    tracing::warn!(%err, "waiting for a pinned block's copies failed");
                    all_done = false;
                }
            }
            if all_done {
                self.push_idle(block.ptr, block.size);
            } else {
                // Freeing memory a copy may still access would be a use after free; leaking
                // it is the safe failure.
                tracing::warn!(ptr = %block.ptr, size = block.size, "pinned block leaked");
            }
        }
        self.stats.pending_blocks = 0;
        self.stats.pending_bytes = 0;
        self.take_all_idle()
    }
}
