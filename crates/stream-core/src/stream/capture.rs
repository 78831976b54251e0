//! Capturing a stream's work into a graph: beginning, ending, and who is in the capture.

use super::Stream;
use crate::error::{Result, StreamError};
use crate::graph::Graph;
use crate::hal::{Backend, Stream as _};
use crate::ordering::Domain;
use crate::task_group;
use crate::types::{CaptureMode, StreamId};

impl<B: Backend> Stream<B> {
    /// Begins capturing this stream's work into a graph. Work submitted afterwards is recorded,
    /// not run; other streams join by waiting on events recorded here.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        if self.is_default() {
            return Err(StreamError::CaptureOnDefaultStream);
        }
        // Exclusive: no submission, record, wait or blocking call is inside the device while
        // the stream's domain changes (see `crate::sync`).
        let _gate = self.device.inner.gate_exclusive();
        if self
            .device
            .inner
            .lock()
            .ordering
            .capture_of(self.id())
            .is_some()
        {
            return Err(StreamError::AlreadyCapturing { stream: self.id() });
        }
        self.inner.hal.begin_capture(mode)?;
        let id = self.device.inner.lock().ordering.begin_capture(
            self.id(),
            mode,
            std::thread::current().id(),
        );
        tracing::info!(stream = self.id().0, capture = id.0, ?mode, "capture begun");
        Ok(())
    }

    /// Ends the capture begun on this stream and returns the graph.
    ///
    /// Every stream that joined the capture must have rejoined this one (an event recorded after
    /// its last captured work and waited on here); otherwise the capture is discarded and
    /// [`StreamError::UnjoinedStream`] names the stream and where it forked. A task group still
    /// open on a stream of the capture discards it too
    /// ([`StreamError::TaskGroupOpenAtCaptureEnd`], naming the stream; the group is ended in
    /// the backend first). Either way all streams of the capture are back to eager work
    /// afterwards, with no group open.
    pub fn end_capture(&self) -> Result<Graph<B>> {
        let gate = self.device.inner.gate_exclusive();
        let (id, unjoined, members, open_group) = {
            let st = self.device.inner.lock();
            let (id, origin) = match st.ordering.capture_of(self.id()) {
                None => return Err(StreamError::NotCapturing { stream: self.id() }),
                Some(cap) => (cap.id, cap.origin),
            };
            if origin != self.id() {
                return Err(StreamError::NotCaptureOrigin {
                    stream: self.id(),
                    origin,
                });
            }
            let members = st
                .ordering
                .capture_of(self.id())
                .map_or(1, |cap| cap.members.len().max(1));
            let open_group = st.task_recording.iter().find_map(|(s, r)| {
                matches!(r, task_group::Recording::Group { capture, .. } if *capture == id)
                    .then_some(*s)
            });
            (id, st.ordering.unjoined(id), members, open_group)
        };
        let origin = self.id();
        if let Some(stream) = open_group {
            self.end_open_group(stream);
        }
        // The graph holds a stream per member on runtimes that count them (ACL's models).
        let hal_graph = self.inner.hal.end_capture().map_err(|e| {
            let needed = u32::try_from(members).unwrap_or(u32::MAX);
            self.device.stream_error("Stream::end_capture", needed, e)
        });
        let (keep_alive, holds, external) = {
            let mut st = self.device.inner.lock();
            // A group left open ends with its capture (the capture is discarded below).
            st.task_recording.retain(
                |_, r| !matches!(r, task_group::Recording::Group { capture, .. } if *capture == id),
            );
            st.ordering.end_capture(id);
            (
                st.capture_keep_alive.remove(&id).unwrap_or_default(),
                st.capture_holds.remove(&id).unwrap_or_default(),
                st.capture_events.remove(&id).unwrap_or_default(),
            )
        };
        drop(gate);
        self.device.free_deferred();
        if let Some(stream) = open_group {
            tracing::warn!(
                stream = stream.0,
                origin = origin.0,
                "capture discarded: a task group is still open"
            );
            return Err(StreamError::TaskGroupOpenAtCaptureEnd { stream, origin });
        }
        if let Some(u) = unjoined.first() {
            tracing::warn!(
                stream = u.stream.0,
                origin = origin.0,
                "capture discarded: unjoined stream"
            );
            return Err(StreamError::UnjoinedStream {
                stream: u.stream,
                origin,
                joined_at: u.joined_at,
                last_work: u.last_work,
            });
        }
        let graph = Graph::new(
            self.device.clone(),
            id,
            hal_graph?,
            keep_alive,
            holds,
            external,
        );
        if graph.node_count() == 0 {
            tracing::warn!(stream = self.id().0, "the captured graph is empty");
        }
        tracing::info!(
            stream = self.id().0,
            capture = id.0,
            nodes = graph.node_count(),
            "capture ended"
        );
        Ok(graph)
    }

    /// Ends, in the backend, the task group left open on `stream` of a capture that is being
    /// discarded (the capture gate held exclusively by the caller), so the backend's capture
    /// ends with no group open.
    fn end_open_group(&self, stream: StreamId) {
        let inner = if stream == self.id() {
            Some(self.inner.clone())
        } else if stream == StreamId::DEFAULT {
            Some(self.device.inner.default_stream.clone())
        } else {
            let st = self.device.inner.lock();
            st.streams.get(&stream).and_then(std::sync::Weak::upgrade)
        };
        if let Some(inner) = inner {
            let _turn = inner.submission_turn();
            if let Err(err) = inner.hal.end_task_group() {
                tracing::warn!(%err, stream = stream.0, "ending the open task group failed");
            }
        }
    }

    /// The streams of the capture this stream belongs to, its origin first (empty when the
    /// stream is not capturing). Graph capture sessions use it to join side streams back.
    pub fn capture_members(&self) -> Vec<StreamId> {
        let st = self.device.inner.lock();
        let Some(cap) = st.ordering.capture_of(self.id()) else {
            return Vec::new();
        };
        let mut members = vec![cap.origin];
        members.extend(cap.members.keys().copied().filter(|s| *s != cap.origin));
        members
    }

    /// Where work submitted to this stream now goes: eager, or into a capture.
    pub fn domain(&self) -> Domain {
        self.device.inner.lock().ordering.domain_of(self.id())
    }
}
