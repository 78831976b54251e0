//! Events recorded and waited on, and the host waiting for a stream.

use super::Stream;
use crate::capture_rule::WaitOutcome;
use crate::error::{Result, StreamError};
use crate::event::Event;
use crate::hal::{Backend, Stream as _};
use crate::ordering::WaitEffect;
use crate::state::BlockingTarget;
use crate::types::EventFlags;

impl<B: Backend> Stream<B> {
    /// Records `event` at this stream's current position.
    pub fn record(&self, event: &Event<B>) -> Result<()> {
        event.record(self)
    }

    /// Records a new event at this stream's current position.
    pub fn record_event(&self) -> Result<Event<B>> {
        let event = self.device.create_event(EventFlags::ORDERING)?;
        event.record(self)?;
        Ok(event)
    }

    /// Makes all later work on this stream wait for `event`'s last record. Waiting on an event
    /// recorded inside a capture makes this stream join that capture.
    ///
    /// The event may belong to another device (as CUDA and ACL allow): this stream is then
    /// ordered after that device's work up to the record, in the backend and in the model.
    /// Captures stay per device: a stream does not join another device's capture, and a
    /// capturing stream waits on no eager work of another device
    /// ([`StreamError::CaptureIsolation`], the one rule of [`crate::capture_rule`]).
    pub fn wait(&self, event: &Event<B>) -> Result<()> {
        let inner = &self.device.inner;
        let _gate = inner.gate_shared();
        let _turn = self.inner.submission_turn();
        inner.check_submit("Stream::wait", self.id())?;
        // The event's state stays locked until the backend has the wait, so a record of the
        // event from another thread lands wholly before (this wait sees it in the model and in
        // the backend) or wholly after (neither sees it).
        let record = event.inner.record_state();
        // Check first, so a refused wait reaches neither the backend nor the model. The answer
        // holds until the update below: only this stream's turn or the exclusive gate change
        // this stream's domain, and no capture ends while the gate is shared.
        let outcome = inner.lock().ordering.wait_outcome(
            self.id(),
            record.snapshot.as_ref(),
            event.inner.is_external(),
        );
        let snap = match outcome {
            Err(refusal) => {
                return Err(StreamError::CaptureIsolation {
                    stream: self.id(),
                    reason: refusal.reason(),
                })
            }
            Ok(WaitOutcome::WaitNode) => {
                // An external event waited on inside a capture: the graph waits at each launch
                // for the event's last record then (see `Graph::launch`).
                self.inner.hal.wait(&event.inner.hal)?;
                let mut st = inner.lock();
                if let Some(c) = st.ordering.capture_of(self.id()).map(|c| c.id) {
                    st.external_nodes(c).waits.push(event.inner.clone());
                }
                return Ok(());
            }
            Ok(_) => record.snapshot.clone(),
        };
        let Some(snap) = snap else {
            // Waiting on an event never recorded orders nothing (as in CUDA and ACL). A
            // foreign event may have been recorded by its library: the backend waits on it,
            // outside the model (see `Device::adopt_event`).
            if event.inner.foreign {
                self.inner.hal.wait(&event.inner.hal)?;
            }
            return Ok(());
        };
        self.inner.hal.wait(&event.inner.hal)?;
        drop(record);
        let effect = inner.lock().ordering.wait(self.id(), &snap);
        if let Ok(WaitEffect::JoinedCapture(c)) = effect {
            tracing::debug!(
                stream = self.id().0,
                capture = c.0,
                "stream joined a capture"
            );
        }
        Ok(())
    }

    /// Makes all later work on this stream wait for the work submitted to `other` so far;
    /// `other` may be a stream of another device (see [`Stream::wait`]).
    pub fn wait_stream(&self, other: &Stream<B>) -> Result<()> {
        if self == other {
            return Ok(());
        }
        let event = other.record_event()?;
        self.wait(&event)
    }

    /// Blocks the host until all work on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        let _gate = self.device.inner.gate_shared();
        // The clock before the backend call: all of its work reached the backend before the
        // synchronize began, so all of it is done when it returns.
        let (clock, learnt) = {
            let st = self.device.inner.lock();
            st.check_blocking("Stream::synchronize", BlockingTarget::Stream(self.id()))?;
            (
                st.ordering.clock_of(self.id()),
                st.ordering.remote_of(self.id()),
            )
        };
        self.inner.hal.synchronize()?;
        self.device.observe_host(&clock, &learnt);
        Ok(())
    }

    /// Whether all work on this stream is done. A `true` answer counts as a host observation.
    pub fn query(&self) -> Result<bool> {
        let _gate = self.device.inner.gate_shared();
        let (clock, learnt) = {
            let st = self.device.inner.lock();
            st.check_blocking("Stream::query", BlockingTarget::Stream(self.id()))?;
            (
                st.ordering.clock_of(self.id()),
                st.ordering.remote_of(self.id()),
            )
        };
        let done = self.inner.hal.query()?;
        if done {
            self.device.observe_host(&clock, &learnt);
        }
        Ok(done)
    }
}
