//! `DeviceBuffer<B>`: RAII ownership of one block.

use crate::allocator::CachingAllocator;
use crate::block::BlockId;
use crate::error::AllocError;
use crate::snapshot::PoolId;
use crate::state::Granted;
use braid_stream_core::hal::Backend;
use braid_stream_core::{DevicePtr, DeviceSlice, Stream, StreamId};
use std::fmt;

/// Device memory from a [`CachingAllocator`], freed on its allocation stream when dropped.
///
/// The buffer owns its block exclusively and is not `Clone`, so a block is freed exactly once
/// and never while the buffer lives. Uses on other streams must be declared with
/// [`DeviceBuffer::record_stream`] unless the allocator runs in automatic cross-stream mode.
pub struct DeviceBuffer<B: Backend> {
    allocator: CachingAllocator<B>,
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
    pub(crate) fn new(
        allocator: CachingAllocator<B>,
        g: Granted,
        requested: u64,
        stream: StreamId,
    ) -> Self {
        DeviceBuffer {
            allocator,
            block: Some(g.block),
            ptr: DevicePtr(g.addr),
            size: g.size,
            requested,
            stream,
            pool: g.pool,
        }
    }

    pub(crate) fn empty(allocator: CachingAllocator<B>, stream: StreamId) -> Self {
        DeviceBuffer {
            allocator,
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

    /// The allocator the buffer came from.
    pub fn allocator(&self) -> &CachingAllocator<B> {
        &self.allocator
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
        self.allocator.record_stream(self, stream)
    }

    /// See [`CachingAllocator::erase_stream`]: the caller promises `stream` no longer uses
    /// the buffer.
    pub fn erase_stream(&self, stream: &Stream<B>) -> Result<(), AllocError> {
        self.allocator.erase_stream(self, stream)
    }

    /// See [`CachingAllocator::record_stream_range`].
    pub fn record_stream_range(
        &self,
        offset: u64,
        len: u64,
        stream: &Stream<B>,
    ) -> Result<(), AllocError> {
        self.allocator
            .record_stream_range(self, offset, len, stream)
    }

    /// See [`CachingAllocator::record_tagged_stream`].
    pub fn record_tagged_stream(&self, tag: &str) -> Result<(), AllocError> {
        self.allocator.record_tagged_stream(self, tag)
    }
}

impl<B: Backend> Drop for DeviceBuffer<B> {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.allocator.inner.free(block);
        }
    }
}
