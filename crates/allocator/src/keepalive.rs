//! How buffers keep their allocator alive without a reference-count update per buffer.
//!
//! A [`DeviceBuffer`](crate::DeviceBuffer) points at the allocator's shared state without
//! owning a reference count: an atomic increment and decrement on every alloc+free pair would
//! cost as much as a tenth of the cache-hit path. Instead the state counts live buffers under
//! the lock it already takes, and holds one reference to itself while any buffer lives or any
//! handle exists. The reference is let go when both counts reach zero, whichever reaches zero
//! last, and the allocator then drops as before (returning its segments to the device).

use crate::allocator::Inner;
use braid_stream_core::hal::Backend;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Live-buffer count and the self-reference that keeps the allocator alive for them. Kept in
/// the allocator's locked state.
pub(crate) struct Keepalive<B: Backend> {
    live_buffers: usize,
    held: Option<Arc<Inner<B>>>,
}

impl<B: Backend> Default for Keepalive<B> {
    fn default() -> Self {
        Keepalive {
            live_buffers: 0,
            held: None,
        }
    }
}

impl<B: Backend> Keepalive<B> {
    /// A buffer was handed out by the allocator `inner`.
    #[inline(always)]
    pub(crate) fn buffer_created(&mut self, inner: &Arc<Inner<B>>) {
        self.live_buffers += 1;
        if self.held.is_none() {
            self.hold(inner);
        }
    }

    #[cold]
    #[inline(never)]
    fn hold(&mut self, inner: &Arc<Inner<B>>) {
        self.held = Some(Arc::clone(inner));
    }

    /// A buffer is gone. Returns the self-reference when nothing else needs it: the caller
    /// drops it after releasing the lock, which may drop the allocator.
    #[inline(always)]
    pub(crate) fn buffer_dropped(&mut self, handles: &AtomicUsize) -> Option<Arc<Inner<B>>> {
        debug_assert!(self.live_buffers > 0, "buffer count underflow");
        self.live_buffers -= 1;
        if self.live_buffers == 0 && handles.load(Ordering::Acquire) == 0 {
            return self.held.take();
        }
        None
    }

    /// The last handle is gone. Returns the self-reference when no buffer lives (the caller
    /// drops it after releasing the lock).
    pub(crate) fn last_handle_dropped(&mut self) -> Option<Arc<Inner<B>>> {
        if self.live_buffers == 0 {
            return self.held.take();
        }
        None
    }

    /// Buffers alive now.
    pub(crate) fn live_buffers(&self) -> usize {
        self.live_buffers
    }
}
