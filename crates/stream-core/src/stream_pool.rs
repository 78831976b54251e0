//! The device's pool of reusable streams: what captures draw their streams from, so a batch
//! ladder (one graph per size, several streams each) needs a few streams, not a few per graph.
//!
//! A runtime caps the streams alive on a device (1984 on an Atlas A2/A3 card, the default
//! stream and the streams captured graphs hold included: `reference/acl-runtime.md` §1.5 and
//! §1.9), so streams made per capture run out. [`Device::lease_stream`] hands out an idle
//! stream of the asked priority, or creates one, and takes it back when the lease drops
//! (PyTorch and torch_npu draw user streams from per-device pools for the same reason).
//! Tagged streams ([`Device::tagged_stream`]) take an idle pooled stream first too, and keep
//! it: the same tag is always the same stream. At most [`IDLE_PER_PRIORITY`] idle streams
//! are kept per priority; more are destroyed when given back.
//!
//! When the runtime has no stream left, creating one (and ending a capture whose graph must
//! hold its streams) is [`StreamError::StreamsExhausted`], naming the limit and the count, where
//! the backend knows them ([`crate::hal::Device::stream_budget`]).

use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::hal::{Backend, Device as _, HalError};
use crate::stream::{Stream, StreamInner};
use crate::sync::Mutex;
use crate::types::Priority;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Idle streams kept per priority; more given back are destroyed.
pub const IDLE_PER_PRIORITY: usize = 32;

/// The idle streams of one device, by priority, and the pool's counters.
pub(crate) struct StreamPool<B: Backend> {
    idle: Mutex<BTreeMap<Priority, Vec<Arc<StreamInner<B>>>>>,
    created: AtomicU64,
    reused: AtomicU64,
}

impl<B: Backend> StreamPool<B> {
    pub(crate) fn new() -> Self {
        StreamPool {
            idle: Mutex::new(BTreeMap::new()),
            created: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        }
    }

    /// An idle stream of `priority`, if any.
    fn take(&self, priority: Priority) -> Option<Arc<StreamInner<B>>> {
        let taken = self.idle.lock().get_mut(&priority)?.pop();
        if taken.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Takes `stream` back (or lets it go when enough are idle).
    fn give_back(&self, stream: Arc<StreamInner<B>>) {
        let mut idle = self.idle.lock();
        let list = idle.entry(stream.priority).or_default();
        if list.len() < IDLE_PER_PRIORITY {
            list.push(stream);
        } else {
            drop(idle);
            drop(stream);
        }
    }
}

/// What the pool has done so far ([`Device::stream_pool_stats`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StreamPoolStats {
    /// Streams the pool created.
    pub created: u64,
    /// Leases (and tagged streams) served by an idle stream instead of a new one.
    pub reused: u64,
    /// Streams idle in the pool now.
    pub idle: usize,
}

/// A stream leased from the device's pool ([`Device::lease_stream`]): use it as a
/// [`Stream`]; dropping the lease gives it back for the next one. A stream still capturing
/// when its lease drops is not given back. Clones of the stream outlive the lease as any
/// stream handle does, and may then share the stream with its next holder (ordering stays
/// exact: a stream is a FIFO whoever submits to it).
pub struct PooledStream<B: Backend> {
    stream: Option<Stream<B>>,
}

impl<B: Backend> std::ops::Deref for PooledStream<B> {
    type Target = Stream<B>;
    fn deref(&self) -> &Stream<B> {
        self.stream
            .as_ref()
            .expect("a lease holds its stream until dropped")
    }
}

impl<B: Backend> fmt::Debug for PooledStream<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PooledStream").field(&self.stream).finish()
    }
}

impl<B: Backend> Drop for PooledStream<B> {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        if stream.is_capturing() {
            tracing::warn!(
                stream = stream.id().0,
                "a pooled stream dropped while capturing is not reused"
            );
            return;
        }
        let device = stream.device().clone();
        device.inner.stream_pool.give_back(stream.inner.clone());
    }
}

impl<B: Backend> Device<B> {
    /// Leases a stream of `priority` from the device's pool: an idle one when there is one,
    /// else a new one; it goes back to the pool when the lease drops. Graph capture draws its
    /// capture streams from here ([`crate::stream_pool`]). A device out of streams is
    /// [`StreamError::StreamsExhausted`].
    pub fn lease_stream(&self, priority: Priority) -> Result<PooledStream<B>> {
        let stream = self.pooled_or_new(priority)?;
        Ok(PooledStream {
            stream: Some(stream),
        })
    }

    /// What the stream pool has done so far.
    pub fn stream_pool_stats(&self) -> StreamPoolStats {
        let pool = &self.inner.stream_pool;
        StreamPoolStats {
            created: pool.created.load(Ordering::Relaxed),
            reused: pool.reused.load(Ordering::Relaxed),
            idle: pool.idle.lock().values().map(Vec::len).sum(),
        }
    }

    /// An idle pooled stream of `priority`, or a new one (counted as the pool's).
    pub(crate) fn pooled_or_new(&self, priority: Priority) -> Result<Stream<B>> {
        if let Some(inner) = self.inner.stream_pool.take(priority) {
            tracing::trace!(stream = inner.id.0, priority, "pooled stream reused");
            return Ok(Stream::from_parts(self.clone(), inner));
        }
        let stream = self.create_stream(priority)?;
        self.inner
            .stream_pool
            .created
            .fetch_add(1, Ordering::Relaxed);
        Ok(stream)
    }

    /// `err` from `call`, which needed `needed` more streams, as [`StreamError::StreamsExhausted`]
    /// when the backend says fewer are left, else as it is.
    pub(crate) fn stream_error(
        &self,
        call: &'static str,
        needed: u32,
        err: HalError,
    ) -> StreamError {
        match self.inner.hal.stream_budget() {
            Some(budget) if budget.live.saturating_add(needed) > budget.limit => {
                tracing::warn!(
                    call,
                    live = budget.live,
                    limit = budget.limit,
                    needed,
                    "the device is out of streams"
                );
                StreamError::StreamsExhausted {
                    call,
                    device: self.id(),
                    live: budget.live,
                    limit: budget.limit,
                    needed,
                }
            }
            _ => StreamError::Backend(err),
        }
    }
}
