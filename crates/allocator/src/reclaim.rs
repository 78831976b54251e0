//! The reclaimer: frees that wait for uses on other streams.
//!
//! A block freed while other streams may still use it is *pending*: its uses (stream and
//! position of the last known use, or `None` for everything up to the free) are settled by
//! the happens-before model ([`braid_stream_core::Device::is_ordered_before`]) against the
//! owner stream's next work ([`released_for`], which the pinned host allocator asks too, with
//! the host as the reuser). Events only serve to learn, by a host query or
//! synchronize, that work on a using stream completed. Each using stream has its own FIFO,
//! polled front to back until the first event that is not ready, so a slow stream does not
//! delay blocks pending only on other streams.
//!
//! What lives here, owned by the [`Reclaimer`]: the pending blocks, the per-stream FIFOs of
//! events recorded for them, the [`EventPool`] the events come from, and the stream handles
//! the allocator needs to fill and settle positions. The reclaimer reads and writes the
//! blocks' uses through the block slab it is given and knows nothing else of the allocator:
//! the state decides what a settled block becomes (coalesced and cached). The pinned host
//! allocator ([`crate::PinnedHostAllocator`]) records its events through an [`EventPool`]
//! too.
//!
//! A using stream may belong to another device (a peer copy or a collective on that device's
//! stream reading or writing this device's buffer): its events are that device's, recorded
//! on its stream, and the cross-device happens-before model settles its uses like any other.

use crate::block::{BlockId, Blocks, Status, UseRec};
use crate::stats::MemoryStats;
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Domain, Event, EventFlags, Stream, StreamId, StreamPosition};
use std::collections::VecDeque;

/// Recycled ordering events: recording one pops a recycled event (or creates one) and
/// records it; a finished event comes back with [`EventPool::recycle`].
pub(crate) struct EventPool<B: Backend> {
    recycled: Vec<Event<B>>,
}

impl<B: Backend> Default for EventPool<B> {
    fn default() -> Self {
        EventPool {
            recycled: Vec::new(),
        }
    }
}

/// An event [`EventPool::record`] recorded.
pub(crate) struct Recorded<B: Backend> {
    pub event: Event<B>,
    /// Whether the event was created for this record (none was recycled).
    pub created: bool,
}

impl<B: Backend> EventPool<B> {
    /// Records an event on `stream`: a recycled one of the stream's device, else a new one.
    /// On failure nothing is lost (an event that could not be recorded is recycled).
    pub(crate) fn record(
        &mut self,
        stream: &Stream<B>,
    ) -> Result<Recorded<B>, braid_stream_core::StreamError> {
        let device = stream.device();
        let recycled = self
            .recycled
            .iter()
            .rposition(|e| e.device().same_as(device))
            .map(|i| self.recycled.swap_remove(i));
        let (event, created) = match recycled {
            Some(e) => (e, false),
            None => (device.create_event(EventFlags::ORDERING)?, true),
        };
        if let Err(err) = event.record(stream) {
            self.recycled.push(event);
            return Err(err);
        }
        Ok(Recorded { event, created })
    }

    /// Takes back an event that is no longer waited on.
    pub(crate) fn recycle(&mut self, event: Event<B>) {
        self.recycled.push(event);
    }
}

/// An event queued for a pending block.
struct EventEntry<B: Backend> {
    event: Event<B>,
    block: BlockId,
    generation: u32,
}

/// A stream of another device, with its events.
struct ForeignStream<B: Backend> {
    stream: Stream<B>,
    fifo: VecDeque<EventEntry<B>>,
}

/// Pending frees, their events, and the stream handles they need.
pub(crate) struct Reclaimer<B: Backend> {
    /// Uid of the allocator's device: uses by streams of other devices are foreign.
    device: u64,
    /// Blocks in `Status::Pending`.
    pub blocks: Vec<BlockId>,
    /// Events per using stream of this device (by stream index), oldest first.
    fifos: Vec<VecDeque<EventEntry<B>>>,
    /// Streams of other devices that used this device's blocks, with their events.
    foreign: Vec<ForeignStream<B>>,
    events: EventPool<B>,
    /// Events in FIFOs.
    outstanding: usize,
    /// Stream handles by stream index: a cache of `Device::stream` (streams seen by alloc and
    /// record_stream, or looked up for their uses).
    streams: Vec<Option<Stream<B>>>,
}

impl<B: Backend> Reclaimer<B> {
    /// A reclaimer for the device with uid `device`.
    pub(crate) fn new(device: u64) -> Self {
        Reclaimer {
            device,
            blocks: Vec::new(),
            fifos: Vec::new(),
            foreign: Vec::new(),
            events: EventPool::default(),
            outstanding: 0,
            streams: Vec::new(),
        }
    }

    /// Uid of the allocator's device.
    pub(crate) fn device(&self) -> u64 {
        self.device
    }

    /// Events queued and not yet known complete.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    // ----- stream handles -----

    /// Keeps a handle to `stream`.
    #[inline(always)]
    pub(crate) fn remember(&mut self, stream: &Stream<B>) {
        let i = stream.id().index();
        if self.streams.get(i).is_none_or(Option::is_none) {
            self.remember_new(stream);
        }
    }

    #[cold]
    #[inline(never)]
    fn remember_new(&mut self, stream: &Stream<B>) {
        let i = stream.id().index();
        if self.streams.len() <= i {
            self.streams.resize_with(i + 1, || None);
        }
        self.streams[i] = Some(stream.clone());
    }

    /// Whether a handle to stream `id` is kept.
    pub(crate) fn knows(&self, id: StreamId) -> bool {
        self.streams.get(id.index()).is_some_and(Option::is_some)
    }

    /// A handle to stream `id`: from the cache, else from the device (which knows every live
    /// stream, also ones this allocator never saw).
    pub(crate) fn stream(&mut self, dev: &Device<B>, id: StreamId) -> Option<Stream<B>> {
        if let Some(s) = self.streams.get(id.index()).and_then(Option::as_ref) {
            return Some(s.clone());
        }
        let s = dev.stream(id)?;
        self.remember(&s);
        Some(s)
    }

    /// A handle to stream `id` of the device with uid `device` (this one or another).
    pub(crate) fn stream_of(
        &mut self,
        dev: &Device<B>,
        device: u64,
        id: StreamId,
    ) -> Option<Stream<B>> {
        if device == self.device {
            return self.stream(dev, id);
        }
        self.foreign_slot(device, id)
            .map(|i| self.foreign[i].stream.clone())
    }

    /// The slot of stream `id` of another device, found (and kept) on first use.
    fn foreign_slot(&mut self, device: u64, id: StreamId) -> Option<usize> {
        let known = self
            .foreign
            .iter()
            .position(|f| f.stream.id() == id && f.stream.device().id().uid == device);
        if known.is_some() {
            return known;
        }
        let stream = Device::<B>::by_uid(device)?.stream(id)?;
        self.foreign.push(ForeignStream {
            stream,
            fifo: VecDeque::new(),
        });
        Some(self.foreign.len() - 1)
    }

    /// Keeps a handle to `stream`, of this device or another.
    pub(crate) fn remember_any(&mut self, stream: &Stream<B>) {
        if stream.device().id().uid == self.device {
            self.remember(stream);
        } else if !self.foreign.iter().any(|f| f.stream == *stream) {
            self.foreign.push(ForeignStream {
                stream: stream.clone(),
                fifo: VecDeque::new(),
            });
        }
    }

    /// The event FIFO of stream `id` of device `device`.
    fn fifo_mut(&mut self, device: u64, id: StreamId) -> Option<&mut VecDeque<EventEntry<B>>> {
        if device == self.device {
            let i = id.index();
            if self.fifos.len() <= i {
                self.fifos.resize_with(i + 1, VecDeque::new);
            }
            return Some(&mut self.fifos[i]);
        }
        let slot = self.foreign_slot(device, id)?;
        Some(&mut self.foreign[slot].fifo)
    }

    /// Every event FIFO, this device's streams' and other devices'.
    fn all_fifos(&mut self) -> impl Iterator<Item = &mut VecDeque<EventEntry<B>>> {
        self.fifos
            .iter_mut()
            .chain(self.foreign.iter_mut().map(|f| &mut f.fifo))
    }

    // ----- uses -----

    /// Fills `None` positions (record_stream) of block `b`'s uses with the using stream's
    /// current position: its eager position, or its position inside the capture the block was
    /// allocated for. A stream capturing something else is filled in once it is back to eager
    /// work.
    pub(crate) fn fill_positions(&mut self, dev: &Device<B>, blocks: &mut Blocks, b: BlockId) {
        let capture = blocks.get(b).capture;
        for i in 0..blocks.get(b).uses.len() {
            let u = blocks.get(b).uses[i];
            if u.pos.is_some() {
                continue;
            }
            let Some(s) = self.stream_of(dev, u.device, u.stream) else {
                continue;
            };
            let pos = s.position();
            // Captures belong to one device: another device's capture is never the block's.
            let fill = match pos.domain {
                Domain::Eager => true,
                Domain::Capture(c) => u.device == self.device && capture == Some(c),
            };
            if fill {
                blocks.get_mut(b).uses[i].pos = Some(pos);
            }
        }
    }

    /// Fills block `b`'s positions and forgets the uses already done ([`use_done`]); whether
    /// none is left.
    pub(crate) fn settle(&mut self, dev: &Device<B>, blocks: &mut Blocks, b: BlockId) -> bool {
        self.fill_positions(dev, blocks, b);
        if let Some(owner) = self.stream(dev, blocks.get(b).stream) {
            blocks.get_mut(b).uses.retain(|u| !use_done(dev, u, &owner));
        }
        blocks.get(b).uses.is_empty()
    }

    /// Records events on the using streams of pending block `b` for uses without one.
    pub(crate) fn record_events(
        &mut self,
        dev: &Device<B>,
        blocks: &mut Blocks,
        b: BlockId,
        stats: &mut MemoryStats,
    ) {
        let generation = blocks.get(b).generation;
        for i in 0..blocks.get(b).uses.len() {
            let u = blocks.get(b).uses[i];
            // Uses inside a capture run at replay: no event can cover them.
            if u.event || !u.pos.is_some_and(|p| p.domain == Domain::Eager) {
                continue;
            }
            let Some(s) = self.stream_of(dev, u.device, u.stream) else {
                continue;
            };
            match self.events.record(&s) {
                Ok(recorded) => {
                    stats.num_events_created += u64::from(recorded.created);
                    stats.num_events_recorded += 1;
                    let entry = EventEntry {
                        event: recorded.event,
                        block: b,
                        generation,
                    };
                    match self.fifo_mut(u.device, u.stream) {
                        Some(fifo) => fifo.push_back(entry),
                        None => {
                            self.events.recycle(entry.event);
                            continue;
                        }
                    }
                    self.outstanding += 1;
                    blocks.get_mut(b).uses[i].event = true;
                }
                Err(err) => {
                    tracing::warn!(%err, stream = u.stream.0, "could not record a cross-stream event")
                }
            }
        }
    }

    // ----- events -----

    /// Queries the oldest events of each stream until the first that is not ready. Entries of
    /// blocks no longer pending (released, or pending again under a new generation) are
    /// recycled without a query.
    pub(crate) fn poll(&mut self, blocks: &Blocks, stats: &mut MemoryStats) {
        let mut done = Vec::new();
        for fifo in self.all_fifos() {
            while let Some(front) = fifo.front() {
                if still_pending(blocks, front) {
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
                    done.push(entry.event);
                }
            }
        }
        self.outstanding -= done.len();
        for event in done {
            self.events.recycle(event);
        }
    }

    /// Synchronizes every outstanding event of pending blocks and recycles all entries.
    pub(crate) fn synchronize_all(&mut self, blocks: &Blocks) {
        let mut done = Vec::new();
        for fifo in self.all_fifos() {
            while let Some(entry) = fifo.pop_front() {
                if still_pending(blocks, &entry) {
                    if let Err(err) = entry.event.synchronize() {
                        tracing::warn!(%err, "event synchronize failed while freeing pending blocks");
                    }
                }
                done.push(entry.event);
            }
        }
        self.outstanding -= done.len();
        for event in done {
            self.events.recycle(event);
        }
    }

    /// The live event queued on stream `stream` of device `device` for `block`, if any.
    pub(crate) fn event_for(
        &self,
        device: u64,
        stream: StreamId,
        block: BlockId,
        generation: u32,
    ) -> Option<&Event<B>> {
        let fifo = if device == self.device {
            self.fifos.get(stream.index())?
        } else {
            &self
                .foreign
                .iter()
                .find(|f| f.stream.id() == stream && f.stream.device().id().uid == device)?
                .fifo
        };
        fifo.iter()
            .find(|e| e.block == block && e.generation == generation)
            .map(|e| &e.event)
    }
}

/// Whether the block an event was queued for is still the pending block it was queued for.
fn still_pending<B: Backend>(blocks: &Blocks, entry: &EventEntry<B>) -> bool {
    let b = blocks.get(entry.block);
    b.status == Status::Pending && b.generation == entry.generation
}

/// Who reuses freed memory: the owner stream's next work (device memory), or the host
/// (pinned host memory, which the host reads and writes itself).
#[derive(Clone, Copy)]
pub(crate) enum Reuser<'a, B: Backend> {
    /// Work submitted to this stream after the free.
    Stream(&'a Stream<B>),
    /// The host, now.
    Host,
}

/// The happens-before query both reclaimers ask: whether work at `p` no longer holds memory
/// back from `reuser`. For a stream's next work: `p` is ordered before it, or lies in a
/// capture that has ended (captured work runs at replay, and memory of a private pool is
/// reused only by later captures into the pool or once the pool is gone). For the host: the
/// host observed `p` complete (by a synchronize or a query).
pub(crate) fn released_for<B: Backend>(
    dev: &Device<B>,
    p: StreamPosition,
    reuser: Reuser<'_, B>,
) -> bool {
    match reuser {
        Reuser::Host => dev.is_complete(p),
        Reuser::Stream(owner) => {
            if dev.is_ordered_before(p, owner) {
                return true;
            }
            match p.domain {
                Domain::Eager => false,
                Domain::Capture(c) => owner.domain() != Domain::Capture(c),
            }
        }
    }
}

/// [`released_for`] of a recorded use of a device block owned by `owner`; a use up to the
/// free whose position is not known yet (`None`) holds the block back.
pub(crate) fn use_done<B: Backend>(dev: &Device<B>, u: &UseRec, owner: &Stream<B>) -> bool {
    u.pos
        .is_some_and(|p| released_for(dev, p, Reuser::Stream(owner)))
}

/// Adds a use by stream `stream` of device `device`, keeping one entry per stream: `None`
/// (everything up to the free) dominates, otherwise the latest position wins.
pub(crate) fn add_use(
    uses: &mut Vec<UseRec>,
    device: u64,
    stream: StreamId,
    pos: Option<StreamPosition>,
) {
    if let Some(u) = uses
        .iter_mut()
        .find(|u| u.stream == stream && u.device == device)
    {
        match (u.pos, pos) {
            (None, _) => {}
            (Some(_), None) => {
                u.pos = None;
                u.event = false;
            }
            (Some(old), Some(new)) => {
                if new.seq > old.seq {
                    u.pos = Some(new);
                    u.event = false;
                }
            }
        }
        return;
    }
    uses.push(UseRec {
        device,
        stream,
        pos,
        event: false,
    });
}
