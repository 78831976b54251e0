//! `DeviceBuffer<B>`: RAII ownership of one block.

use crate::allocator::{CachingAllocator, Inner};
use crate::block::BlockId;
use crate::error::AllocError;
use crate::snapshot::PoolId;
use crate::state::Granted;
use braid_stream_core::hal::Backend;
use braid_stream_core::{CollectiveBuffer, DevicePtr, DeviceSlice, Stream, StreamId};
use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

/// Device memory from a [`CachingAllocator`], freed on its allocation stream when dropped.
///
/// The buffer owns its block exclusively and is not `Clone`, so a block is freed exactly once
/// and never while the buffer lives. Uses on other streams must be declared with
/// [`DeviceBuffer::record_stream`] unless the allocator runs in automatic cross-stream mode.
pub struct DeviceBuffer<B: Backend> {
    /// The allocator's shared state, kept alive for the buffer by the allocator itself (it
    /// counts live buffers under its lock: [`crate::keepalive`]), so making and dropping a
    /// buffer touches no reference count.
    inner: NonNull<Inner<B>>,
    block: Option<BlockId>,
    ptr: DevicePtr,
    size: u64,
    requested: u64,
    stream: StreamId,
    pool: PoolId,
}

impl<B: Backend> fmt::Debug for DeviceBuffer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &self.ptr)
            .field("size", &self.size)
            .field("requested", &self.requested)
            .field("stream", &self.stream)
            .finish()
    }
}

impl<B: Backend> DeviceBuffer<B> {
    /// A buffer for block `g`; the allocator has counted it among its live buffers.
    pub(crate) fn new(inner: &Arc<Inner<B>>, g: Granted, requested: u64, stream: StreamId) -> Self {
        DeviceBuffer {
            inner: inner_ptr(inner),
            block: Some(g.block),
            ptr: DevicePtr(g.addr),
            size: g.size,
            requested,
            stream,
            pool: g.pool,
        }
    }

    /// An empty buffer; the allocator has counted it among its live buffers.
    pub(crate) fn empty(inner: &Arc<Inner<B>>, stream: StreamId) -> Self {
        DeviceBuffer {
            inner: inner_ptr(inner),
            block: None,
            ptr: DevicePtr::NULL,
            size: 0,
            requested: 0,
            stream,
            pool: PoolId::DEFAULT,
        }
    }

    pub(crate) fn block(&self) -> Option<BlockId> {
        self.block
    }

    /// Takes the block out of the buffer without freeing it (a restore that already
    /// re-carved its memory); dropping the buffer afterwards frees nothing.
    pub(crate) fn take_block(&mut self) -> Option<BlockId> {
        self.block.take()
    }

    /// The allocator's shared state.
    pub(crate) fn inner(&self) -> &Inner<B> {
        // SAFETY: the allocator holds a reference to its own `Inner` while it counts any live
        // buffer (`Keepalive`), and this buffer is counted until its `Drop` has run.
        unsafe { self.inner.as_ref() }
    }

    /// A handle to the allocator the buffer came from.
    pub fn allocator(&self) -> CachingAllocator<B> {
        // SAFETY: `self.inner` came from `Arc::as_ptr` (`inner_ptr`) of an `Arc<Inner<B>>` that
        // is alive while this buffer is (see `inner`); adding a strong count before `from_raw`
        // makes the new `Arc` own its own count.
        let arc = unsafe {
            Arc::increment_strong_count(self.inner.as_ptr());
            Arc::from_raw(self.inner.as_ptr())
        };
        CachingAllocator::from_inner(arc)
    }

    /// Runs `f` with a handle to the allocator borrowed from the buffer, touching no count.
    fn with_allocator<R>(&self, f: impl FnOnce(&CachingAllocator<B>) -> R) -> R {
        // SAFETY: the `Inner` is alive while this buffer is (see `inner`); the `Arc` made here
        // borrows one of its existing strong counts and is never dropped (`ManuallyDrop`), so
        // the count is left as it was.
        let borrowed = ManuallyDrop::new(CachingAllocator::borrowed(unsafe {
            Arc::from_raw(self.inner.as_ptr())
        }));
        f(&borrowed)
    }

    /// First byte ([`DevicePtr::NULL`] for an empty buffer).
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Size of the block in bytes (the request rounded up).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes requested.
    pub fn requested_size(&self) -> u64 {
        self.requested
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.requested == 0
    }

    /// The stream the buffer was allocated on (and is freed on).
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// The pool the buffer came from.
    pub fn pool(&self) -> PoolId {
        self.pool
    }

    /// The requested bytes as a slice, for kernels and copies.
    pub fn slice(&self) -> DeviceSlice {
        DeviceSlice::new(self.ptr, self.requested)
    }

    /// `len` bytes at `offset` within the requested bytes.
    pub fn range(&self, offset: u64, len: u64) -> Result<DeviceSlice, AllocError> {
        self.slice().sub(offset, len).ok_or_else(|| {
            AllocError::InvalidArgument(format!(
                "range of {len} bytes at offset {offset} is outside the buffer of {} bytes",
                self.requested
            ))
        })
    }

    /// See [`CachingAllocator::record_stream`].
    pub fn record_stream(&self, stream: &Stream<B>) -> Result<(), AllocError> {
        self.with_allocator(|a| a.record_stream(self, stream))
    }

    /// See [`CachingAllocator::erase_stream`]: the caller promises `stream` no longer uses
    /// the buffer.
    pub fn erase_stream(&self, stream: &Stream<B>) -> Result<(), AllocError> {
        self.with_allocator(|a| a.erase_stream(self, stream))
    }

    /// See [`CachingAllocator::record_stream_range`].
    pub fn record_stream_range(
        &self,
        offset: u64,
        len: u64,
        stream: &Stream<B>,
    ) -> Result<(), AllocError> {
        self.with_allocator(|a| a.record_stream_range(self, offset, len, stream))
    }

    /// See [`CachingAllocator::record_tagged_stream`].
    pub fn record_tagged_stream(&self, tag: &str) -> Result<(), AllocError> {
        self.with_allocator(|a| a.record_tagged_stream(self, tag))
    }
}

/// The pointer a buffer keeps: from `Arc::as_ptr`, whose provenance covers the whole
/// allocation (the reference counts too), as `Arc::from_raw` and
/// `Arc::increment_strong_count` in [`DeviceBuffer::allocator`] need; a pointer made from a
/// `&Inner` would cover only the `Inner`.
fn inner_ptr<B: Backend>(inner: &Arc<Inner<B>>) -> NonNull<Inner<B>> {
    // SAFETY: the pointer of a live `Arc` is never null.
    unsafe { NonNull::new_unchecked(Arc::as_ptr(inner).cast_mut()) }
}

/// A collective reads or writes the requested bytes of the buffer ([`DeviceBuffer::slice`]).
impl<B: Backend> CollectiveBuffer for DeviceBuffer<B> {
    fn device_slice(&self) -> DeviceSlice {
        self.slice()
    }
}

impl<B: Backend> Drop for DeviceBuffer<B> {
    fn drop(&mut self) {
        let block = self.block.take();
        let held = self.inner().buffer_dropped(block);
        // Dropping the self-reference may drop the allocator: nothing touches it after this.
        drop(held);
    }
}

// SAFETY: the buffer is a block id, plain numbers and a pointer to the allocator's `Inner`,
// which is `Send + Sync` (its state is behind a mutex) and outlives the buffer (see
// `DeviceBuffer::inner`); the buffer gives out only shared access to it.
unsafe impl<B: Backend> Send for DeviceBuffer<B> where Inner<B>: Send + Sync {}
// SAFETY: as for `Send`: `&DeviceBuffer` only reads the buffer's plain fields and locks the
// allocator's state.
unsafe impl<B: Backend> Sync for DeviceBuffer<B> where Inner<B>: Send + Sync {}
