//! `MemPool<B>` handles and `PoolDiversion<B>` guards: the public face of private pools.

use crate::allocator::CachingAllocator;
use crate::error::AllocError;
use crate::private_pool::{PoolFilter, PoolStats};
use crate::snapshot::{MemorySnapshot, PoolId};
use braid_stream_core::hal::Backend;
use braid_stream_core::Stream;
use std::fmt;

/// A private memory pool of a [`CachingAllocator`] (PyTorch's `MemPool`, and what
/// `graph_pool_handle()` returns).
///
/// Each handle counts as one user of the pool: cloning adds one, dropping removes one, as do
/// diversions ([`MemPool::allocate_to`]) and the graphs that keep a handle. When the last user
/// is gone the pool is *freeable*: its cached segments go back to the device at once (and at
/// every later `empty_cache` or out-of-memory retry), and blocks still allocated from it — the
/// outputs of a graph someone still holds — stay valid until freed.
///
/// ```
/// use braid_allocator::{AllocatorConfig, CachingAllocator, PoolOptions};
/// use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
/// use braid_stream_core::Device;
///
/// let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(64 << 20))).unwrap();
/// let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
/// let s = device.create_stream(0).unwrap();
/// let pool = alloc.create_pool(PoolOptions::new());
/// let inside = {
///     let _diversion = pool.use_on_current_thread().unwrap(); // PyTorch's `with use_mem_pool(pool)`
///     assert_eq!(pool.use_count(), 2);
///     alloc.alloc(1 << 20, &s).unwrap()
/// };
/// assert_eq!(inside.pool(), pool.id());
/// assert_eq!(pool.use_count(), 1);
/// assert_ne!(alloc.alloc(1 << 20, &s).unwrap().pool(), pool.id());
/// drop(inside);
/// drop(pool); // the last user: the pool's segment goes back to the device
/// assert_eq!(alloc.memory_reserved(), 2 << 20);
/// ```
pub struct MemPool<B: Backend> {
    allocator: CachingAllocator<B>,
    id: PoolId,
}

impl<B: Backend> fmt::Debug for MemPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemPool")
            .field("id", &self.id.0)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<B: Backend> Clone for MemPool<B> {
    fn clone(&self) -> Self {
        self.allocator.retain_pool(self.id);
        MemPool {
            allocator: self.allocator.clone(),
            id: self.id,
        }
    }
}

impl<B: Backend> Drop for MemPool<B> {
    fn drop(&mut self) {
        self.allocator.release_pool(self.id);
    }
}

impl<B: Backend> MemPool<B> {
    /// Wraps a pool id whose use count the caller already added.
    pub(crate) fn adopt(allocator: CachingAllocator<B>, id: PoolId) -> Self {
        MemPool { allocator, id }
    }

    /// The pool's id (on segments, blocks and buffers).
    pub fn id(&self) -> PoolId {
        self.id
    }

    /// The allocator the pool belongs to.
    pub fn allocator(&self) -> &CachingAllocator<B> {
        &self.allocator
    }

    /// Whether `other` is a handle to the same pool.
    pub fn same_as(&self, other: &MemPool<B>) -> bool {
        self.id == other.id && self.allocator.same_as(&other.allocator)
    }

    /// Users of the pool: handles, diversions, graphs.
    pub fn use_count(&self) -> u32 {
        self.stats().use_count
    }

    /// What the allocator knows about the pool now.
    pub fn stats(&self) -> PoolStats {
        self.allocator.pool_stats(self.id).unwrap_or_default()
    }

    /// Bytes in the pool's segments ([`PoolStats::reserved_bytes`]: a sleeping pool's are not
    /// counted).
    pub fn reserved_bytes(&self) -> u64 {
        self.stats().reserved_bytes
    }

    /// Diverts allocations that `filter` selects into this pool until the guard drops
    /// ([`CachingAllocator::begin_allocate_to_pool`]).
    pub fn allocate_to(&self, filter: PoolFilter) -> Result<PoolDiversion<B>, AllocError> {
        self.allocator.begin_allocate_to_pool(self, filter)
    }

    /// Diverts every thread's allocations on `stream` into this pool until the guard drops.
    ///
    /// This is not PyTorch's `use_mem_pool`, which diverts only the calling thread's
    /// allocations: that is [`MemPool::use_on_current_thread`]. Use this one when work on
    /// `stream` is issued from several threads and all of it should land in the pool.
    pub fn use_on(&self, stream: &Stream<B>) -> Result<PoolDiversion<B>, AllocError> {
        self.allocate_to(PoolFilter::Stream(stream.id()))
    }

    /// PyTorch's `with torch.cuda.use_mem_pool(pool)` (`beginAllocateCurrentThreadToPool`):
    /// diverts the allocations the calling thread makes on this allocator's device, on any
    /// stream, into this pool until the guard drops. Other threads' allocations, on the same
    /// streams too, go where they would have gone.
    ///
    /// The guard may be dropped on any thread; it diverts the thread that created it. Like
    /// every diversion it counts as a user of the pool, and a pool takes one diversion at a
    /// time ([`AllocError::PoolBusy`]): give each thread its own pool.
    pub fn use_on_current_thread(&self) -> Result<PoolDiversion<B>, AllocError> {
        self.allocate_to(PoolFilter::Thread {
            thread: std::thread::current().id(),
            stream: None,
        })
    }

    /// [`MemPool::use_on_current_thread`] restricted to one stream: the calling thread's
    /// allocations on `stream` go to this pool until the guard drops; its allocations on other
    /// streams, and other threads' on `stream`, do not.
    pub fn use_on_current_thread_stream(
        &self,
        stream: &Stream<B>,
    ) -> Result<PoolDiversion<B>, AllocError> {
        self.allocate_to(PoolFilter::Thread {
            thread: std::thread::current().id(),
            stream: Some(stream.id()),
        })
    }

    /// Returns the pool's whole cached segments to the device (PyTorch's
    /// `empty_cache(mempool_id)`), after synchronizing the events of pending cross-stream frees
    /// and freeing their blocks, as [`crate::CachingAllocator::empty_cache`] does. Skipped
    /// while a capture is active.
    pub fn empty_cache(&self) {
        self.allocator.empty_cache_pool(self.id);
    }

    /// The segments of this pool and their blocks.
    pub fn snapshot(&self) -> MemorySnapshot {
        let mut snap = self.allocator.snapshot();
        snap.segments.retain(|s| s.pool_id == self.id);
        snap.history.retain(|h| h.pool == self.id);
        snap
    }
}

/// Allocations selected by a filter go to a private pool while this guard lives (PyTorch's
/// `beginAllocateToPool` / `endAllocateToPool`). The diversion counts as a user of the pool.
pub struct PoolDiversion<B: Backend> {
    allocator: CachingAllocator<B>,
    pool: PoolId,
    token: u64,
}

impl<B: Backend> fmt::Debug for PoolDiversion<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolDiversion")
            .field("pool", &self.pool.0)
            .finish()
    }
}

impl<B: Backend> PoolDiversion<B> {
    pub(crate) fn new(allocator: CachingAllocator<B>, pool: PoolId, token: u64) -> Self {
        PoolDiversion {
            allocator,
            pool,
            token,
        }
    }

    /// The pool allocations go to.
    pub fn pool(&self) -> PoolId {
        self.pool
    }
}

impl<B: Backend> Drop for PoolDiversion<B> {
    fn drop(&mut self) {
        self.allocator.end_allocate_to_pool(self.token);
    }
}
