//! Cross-stream pending frees: the blocks awaiting uses on other streams, the per-stream FIFOs
//! of events recorded for them, and the event pool.
//!
//! The decision to release a block is always made by the happens-before model
//! ([`braid_stream_core::Device::is_ordered_before`]); events only serve to learn, by a host
//! query or synchronize, that work on a using stream completed. Each using stream has its own
//! FIFO, polled front to back until the first event that is not ready, so a slow stream does
//! not delay blocks pending only on other streams.

use crate::block::BlockId;
use crate::stats::MemoryStats;
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Event, EventFlags, Stream, StreamId};
use std::collections::VecDeque;

pub(crate) struct EventEntry<B: Backend> {
    pub event: Event<B>,
    pub block: BlockId,
    pub generation: u32,
}

pub(crate) struct Pending<B: Backend> {
    /// Blocks in `Status::Pending`.
    pub blocks: Vec<BlockId>,
    /// Events per using stream (by stream index), oldest first.
    fifos: Vec<VecDeque<EventEntry<B>>>,
    /// Recycled events.
    pool: Vec<Event<B>>,
    /// Events in FIFOs.
    outstanding: usize,
}

impl<B: Backend> Default for Pending<B> {
    fn default() -> Self {
        Pending {
            blocks: Vec::new(),
            fifos: Vec::new(),
            pool: Vec::new(),
            outstanding: 0,
        }
    }
}

impl<B: Backend> Pending<B> {
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Records a pooled event on `stream` for `block` and queues it.
    pub(crate) fn record(
        &mut self,
        device: &Device<B>,
        stream: &Stream<B>,
        block: BlockId,
        generation: u32,
        stats: &mut MemoryStats,
    ) -> Result<(), braid_stream_core::Error> {
        let event = match self.pool.pop() {
            Some(e) => e,
            None => {
                stats.num_events_created += 1;
                device.create_event(EventFlags::ORDERING)?
            }
        };
        if let Err(err) = event.record(stream) {
            self.pool.push(event);
            return Err(err);
        }
        stats.num_events_recorded += 1;
        let i = stream.id().index();
        if self.fifos.len() <= i {
            self.fifos.resize_with(i + 1, VecDeque::new);
        }
        self.fifos[i].push_back(EventEntry {
            event,
            block,
            generation,
        });
        self.outstanding += 1;
        Ok(())
    }

    /// Queries the oldest events of each stream until the first that is not ready. Entries of
    /// blocks already released (`is_live` false) are recycled without a query.
    pub(crate) fn poll(&mut self, stats: &mut MemoryStats, is_live: impl Fn(BlockId, u32) -> bool) {
        for fifo in &mut self.fifos {
            while let Some(front) = fifo.front() {
                if is_live(front.block, front.generation) {
                    stats.num_event_queries += 1;
                    match front.event.query() {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(err) => {
                            tracing::warn!(%err, "event query failed while processing pending frees");
                            break;
                        }
                    }
                }
                if let Some(entry) = fifo.pop_front() {
                    self.pool.push(entry.event);
                    self.outstanding -= 1;
                }
            }
        }
    }

    /// Synchronizes every outstanding event of live blocks and recycles all entries.
    pub(crate) fn synchronize_all(&mut self, is_live: impl Fn(BlockId, u32) -> bool) {
        for fifo in &mut self.fifos {
            while let Some(entry) = fifo.pop_front() {
                if is_live(entry.block, entry.generation) {
                    if let Err(err) = entry.event.synchronize() {
                        tracing::warn!(%err, "event synchronize failed while freeing pending blocks");
                    }
                }
                self.pool.push(entry.event);
                self.outstanding -= 1;
            }
        }
    }

    /// The live event queued on `stream` for `block`, if any.
    pub(crate) fn event_for(
        &self,
        stream: StreamId,
        block: BlockId,
        generation: u32,
    ) -> Option<&Event<B>> {
        self.fifos
            .get(stream.index())?
            .iter()
            .find(|e| e.block == block && e.generation == generation)
            .map(|e| &e.event)
    }
}
