//! The per-device state shared by the front types: ordering, capture rules, tags, keep-alives.

use crate::capture_mode::{mode_refusal, thread_capture_mode};
use crate::error::{Result, StreamError};
use crate::event::EventInner;
use crate::graph::ExternalNodes;
use crate::hal::Backend;
use crate::ordering::{CaptureId, CaptureState, Domain, Ordering, StreamPosition};
use crate::stream::StreamInner;
use crate::types::{CaptureMode, DevicePtr, StreamId};
use std::any::Any;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Something the device must keep alive until the work that uses it has run (host buffers of
/// asynchronous copies, the bytes a captured copy reads at every replay).
pub(crate) type KeepAlive = Box<dyn Any + Send + Sync>;

/// What a blocking call targets, for the capture rules.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BlockingTarget {
    /// A stream.
    Stream(StreamId),
    /// An event last recorded in this domain (`None`: never recorded).
    Event(Option<Domain>),
    /// The whole device.
    Device,
}

pub(crate) struct DeviceState<B: Backend> {
    pub(crate) ordering: Ordering,
    pub(crate) next_stream_id: u32,
    /// Per stream, host-side resources to keep until the host has observed a position.
    keep_alive: BTreeMap<StreamId, VecDeque<(u64, KeepAlive)>>,
    /// Resources captured work refers to; moved into the graph at the end of the capture.
    pub(crate) capture_keep_alive: BTreeMap<CaptureId, Vec<KeepAlive>>,
    /// Holds on memory captured work uses ([`crate::graph_hold`]); moved into the graph at
    /// the end of the capture.
    pub(crate) capture_holds: BTreeMap<CaptureId, Vec<Arc<dyn crate::graph_hold::GraphHold>>>,
    /// External events recorded and waited on in each capture; moved into the graph at the
    /// end of the capture.
    pub(crate) capture_events: BTreeMap<CaptureId, ExternalNodes<B>>,
    pub(crate) tagged_streams: BTreeMap<String, Arc<StreamInner<B>>>,
    /// Every stream created on the device, held weakly (a stream lives while a handle does).
    pub(crate) streams: BTreeMap<StreamId, std::sync::Weak<StreamInner<B>>>,
    pub(crate) tagged_events: BTreeMap<String, Arc<EventInner<B>>>,
    /// Raw segments dropped while a capture was active: freed once no capture is.
    pub(crate) deferred_frees: Vec<DevicePtr>,
    /// Uids of the devices whose memory this device's streams may access (peer access
    /// enabled from this device to them).
    pub(crate) peers: Vec<u64>,
    /// Streams with an open task group or update, and what they record.
    pub(crate) task_recording: BTreeMap<StreamId, crate::task_group::Recording>,
}

impl<B: Backend> DeviceState<B> {
    pub(crate) fn new(device: u64) -> Self {
        DeviceState {
            ordering: Ordering::new(device),
            peers: Vec::new(),
            next_stream_id: 1,
            keep_alive: BTreeMap::new(),
            capture_keep_alive: BTreeMap::new(),
            capture_holds: BTreeMap::new(),
            capture_events: BTreeMap::new(),
            tagged_streams: BTreeMap::new(),
            streams: BTreeMap::new(),
            tagged_events: BTreeMap::new(),
            deferred_frees: Vec::new(),
            task_recording: BTreeMap::new(),
        }
    }

    /// Keeps `item` alive until the host has observed `pos` (or, for captured work, as long as
    /// the graph lives).
    pub(crate) fn keep_alive(&mut self, pos: StreamPosition, item: KeepAlive) {
        match pos.domain {
            Domain::Eager => self
                .keep_alive
                .entry(pos.stream)
                .or_default()
                .push_back((pos.seq, item)),
            Domain::Capture(c) => self.capture_keep_alive.entry(c).or_default().push(item),
        }
    }

    /// The external record and wait nodes of capture `c` so far.
    pub(crate) fn external_nodes(&mut self, c: CaptureId) -> &mut ExternalNodes<B> {
        self.capture_events.entry(c).or_default()
    }

    /// Drops keep-alives whose work the host has observed complete.
    pub(crate) fn release_completed(&mut self) {
        let host = self.ordering.host_clock();
        for (stream, queue) in self.keep_alive.iter_mut() {
            let done = host.get(stream.index());
            while queue.front().is_some_and(|(seq, _)| *seq <= done) {
                queue.pop_front();
            }
        }
    }

    /// Refuses a host-blocking call (synchronize, query) that an active capture forbids: one
    /// on the capture's own stream or event always ([`StreamError::ForbiddenDuringCapture`]), any
    /// other when the capture's mode and this thread's forbid it
    /// ([`StreamError::CaptureModeForbids`], [`crate::capture_mode`]).
    pub(crate) fn check_blocking(&self, call: &'static str, target: BlockingTarget) -> Result<()> {
        let own_capture = match target {
            BlockingTarget::Stream(s) => self.ordering.capture_of(s).map(|c| c.id),
            BlockingTarget::Event(Some(Domain::Capture(c))) => Some(c),
            _ => None,
        };
        let thread_mode = thread_capture_mode();
        for cap in self.ordering.captures() {
            if Some(cap.id) == own_capture {
                return Err(StreamError::ForbiddenDuringCapture {
                    call,
                    stream: cap.origin,
                });
            }
            if let Some(allowed_by) = refusal(cap, thread_mode) {
                return Err(StreamError::CaptureModeForbids {
                    call,
                    stream: cap.origin,
                    capture_mode: cap.mode,
                    thread_mode,
                    allowed_by,
                });
            }
        }
        Ok(())
    }

    /// Refuses work on the default stream while a capture that restricts this thread is active.
    pub(crate) fn check_submit(&self, call: &'static str, stream: StreamId) -> Result<()> {
        if stream != StreamId::DEFAULT {
            return Ok(());
        }
        let thread_mode = thread_capture_mode();
        match self
            .ordering
            .captures()
            .find(|cap| refusal(cap, thread_mode).is_some())
        {
            Some(cap) => Err(StreamError::DefaultStreamDuringCapture {
                call,
                capturing: cap.origin,
            }),
            None => Ok(()),
        }
    }
}

/// The capture-mode rule for capture `cap` and this thread in mode `thread_mode`.
fn refusal(cap: &CaptureState, thread_mode: CaptureMode) -> Option<CaptureMode> {
    mode_refusal(
        cap.mode,
        cap.thread == std::thread::current().id(),
        thread_mode,
    )
}
