//! The registry of private pools (graph capture, user `MemPool`s) and of the diversions that
//! route allocations into them (PyTorch's `PrivatePool`, `captures_underway`,
//! `graph_pools_freeable`).

use crate::snapshot::PoolId;
use braid_stream_core::{CaptureId, Domain, StreamId};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::thread::ThreadId;

/// How a private pool carves its segments.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct PoolOptions {
    /// Never split a block of this pool: each allocation gets a whole block, and large
    /// segments are sized to the request (rounded to 2 MiB) instead of 20 MiB (PyTorch's
    /// `MemPool(no_split=True)`).
    pub no_split: bool,
    /// Lend this pool's free cached blocks to allocations of the default pool that would
    /// otherwise run out of memory (PyTorch's `MemPool(use_on_oom=True)`): the last step of
    /// the out-of-memory ladder, after every cached segment was released and every retry
    /// failed. A lent block stays this pool's (its buffer's [`crate::DeviceBuffer::pool`] is
    /// this pool) and returns to this pool's free list when freed. Pools without the flag are
    /// never borrowed from, and requests diverted into a private pool never borrow.
    ///
    /// Mark only pools whose free blocks nothing still reads: a graph pool's free blocks may
    /// be read by a graph captured into it at its next replay, so a graph pool marked to lend
    /// can hand such a block to eager work.
    pub use_on_oom: bool,
}

impl PoolOptions {
    /// Default options: blocks split as in the default pool.
    pub fn new() -> Self {
        PoolOptions::default()
    }

    /// Sets [`PoolOptions::no_split`].
    pub fn no_split(mut self, on: bool) -> Self {
        self.no_split = on;
        self
    }

    /// Sets [`PoolOptions::use_on_oom`].
    pub fn use_on_oom(mut self, on: bool) -> Self {
        self.use_on_oom = on;
        self
    }
}

/// Which allocations a diversion ([`crate::CachingAllocator::begin_allocate_to_pool`]) sends
/// to its pool.
#[derive(Clone)]
pub enum PoolFilter {
    /// Every allocation.
    AllStreams,
    /// Allocations on one stream, made by any thread ([`crate::MemPool::use_on`]).
    Stream(StreamId),
    /// Allocations on any of these streams.
    Streams(Vec<StreamId>),
    /// Allocations on streams whose work goes to this capture (its origin and every stream
    /// that joined it) — what a graph capture uses.
    Capture(CaptureId),
    /// Allocations made by one thread: on every stream, or only on `stream` when it is set
    /// (PyTorch's `use_mem_pool`, whose `beginAllocateCurrentThreadToPool` diverts only the
    /// calling thread's allocations; [`crate::MemPool::use_on_current_thread`]).
    Thread {
        /// The thread whose allocations are diverted.
        thread: ThreadId,
        /// Only its allocations on this stream (`None`: on any stream).
        stream: Option<StreamId>,
    },
    /// Allocations for which the function, given the stream and where its work goes, says yes.
    Custom(Arc<dyn Fn(StreamId, Domain) -> bool + Send + Sync>),
}

impl fmt::Debug for PoolFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolFilter::AllStreams => write!(f, "AllStreams"),
            PoolFilter::Stream(s) => write!(f, "Stream({s})"),
            PoolFilter::Streams(s) => f.debug_tuple("Streams").field(s).finish(),
            PoolFilter::Capture(c) => write!(f, "Capture({})", c.0),
            PoolFilter::Thread { thread, stream } => f
                .debug_struct("Thread")
                .field("thread", thread)
                .field("stream", stream)
                .finish(),
            PoolFilter::Custom(_) => write!(f, "Custom(..)"),
        }
    }
}

impl PoolFilter {
    /// Whether the filter needs the stream's domain to decide.
    pub(crate) fn needs_domain(&self) -> bool {
        matches!(self, PoolFilter::Capture(_) | PoolFilter::Custom(_))
    }

    /// Whether the filter needs the allocating thread to decide.
    pub(crate) fn needs_thread(&self) -> bool {
        matches!(self, PoolFilter::Thread { .. })
    }

    /// Whether an allocation on `stream`, whose work goes to `domain`, made by `thread`, is
    /// selected (`thread` is only looked at when [`PoolFilter::needs_thread`]).
    pub(crate) fn matches(
        &self,
        stream: StreamId,
        domain: Domain,
        thread: Option<ThreadId>,
    ) -> bool {
        match self {
            PoolFilter::AllStreams => true,
            PoolFilter::Stream(s) => *s == stream,
            PoolFilter::Streams(list) => list.contains(&stream),
            PoolFilter::Capture(c) => domain == Domain::Capture(*c),
            PoolFilter::Thread {
                thread: t,
                stream: s,
            } => thread == Some(*t) && s.is_none_or(|s| s == stream),
            PoolFilter::Custom(f) => f(stream, domain),
        }
    }
}

/// What the allocator knows about one private pool.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PoolStats {
    /// Handles, diversions and graphs using the pool. At zero the pool is *freeable*: its
    /// cached segments go back to the device, and the pool disappears once its last block
    /// (an output still held somewhere) is freed and released.
    pub use_count: u32,
    /// Whether the pool never splits blocks.
    pub no_split: bool,
    /// Whether the pool lends its free cached blocks to the default pool at out-of-memory
    /// ([`PoolOptions::use_on_oom`]).
    pub use_on_oom: bool,
    /// Segments held by the pool.
    pub segments: u64,
    /// Bytes in the pool's segments (those of a sleeping pool are in `asleep_bytes` instead).
    pub reserved_bytes: u64,
    /// Bytes in allocated blocks of the pool.
    pub allocated_bytes: u64,
    /// Allocated blocks of the pool.
    pub allocated_blocks: u64,
    /// Active diversions into the pool.
    pub diversions: u32,
    /// Whether the pool is asleep ([`crate::CachingAllocator::sleep`]): its segments' pages
    /// are released, their addresses kept, and allocations from it are refused until
    /// [`crate::CachingAllocator::wake`].
    pub asleep: bool,
    /// Bytes of the pool's segments whose pages are released while it sleeps (not counted in
    /// `reserved_bytes`).
    pub asleep_bytes: u64,
}

/// A diversion of allocations into a pool.
pub(crate) struct Diversion {
    pub token: u64,
    pub pool: PoolId,
    pub filter: PoolFilter,
}

/// All private pools and active diversions.
#[derive(Default)]
pub(crate) struct PrivatePools {
    pools: BTreeMap<PoolId, PoolStats>,
    /// The tag of each sleepable pool (`crate::sleep`).
    tags: BTreeMap<PoolId, Arc<str>>,
    pub diversions: Vec<Diversion>,
    next_id: u64,
    next_token: u64,
}

impl PrivatePools {
    /// Creates a pool with a use count of 1.
    pub(crate) fn create(&mut self, options: PoolOptions) -> PoolId {
        self.next_id += 1;
        let id = PoolId(self.next_id);
        self.pools.insert(
            id,
            PoolStats {
                use_count: 1,
                no_split: options.no_split,
                use_on_oom: options.use_on_oom,
                ..PoolStats::default()
            },
        );
        id
    }

    #[inline]
    pub(crate) fn get(&self, id: PoolId) -> Option<&PoolStats> {
        if id == PoolId::DEFAULT {
            return None;
        }
        self.pools.get(&id)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: PoolId) -> Option<&mut PoolStats> {
        if id == PoolId::DEFAULT {
            return None;
        }
        self.pools.get_mut(&id)
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = PoolId> + '_ {
        self.pools.keys().copied()
    }

    /// Pools nobody uses any more (their cached segments may be released).
    pub(crate) fn freeable(&self) -> Vec<PoolId> {
        self.pools
            .iter()
            .filter(|(_, p)| p.use_count == 0)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Forgets a pool (its last segment is gone and nobody uses it).
    pub(crate) fn remove(&mut self, id: PoolId) {
        self.pools.remove(&id);
        self.tags.remove(&id);
    }

    /// Creates a sleepable pool tagged `tag`, with a use count of 1.
    pub(crate) fn create_sleepable(&mut self, options: PoolOptions, tag: Arc<str>) -> PoolId {
        let id = self.create(options);
        self.tags.insert(id, tag);
        id
    }

    /// Whether `id` is a sleepable pool (its segments are mapped virtual memory).
    #[inline]
    pub(crate) fn is_sleepable(&self, id: PoolId) -> bool {
        id != PoolId::DEFAULT && self.tags.contains_key(&id)
    }

    /// The tag of sleepable pool `id`.
    pub(crate) fn tag(&self, id: PoolId) -> Option<&Arc<str>> {
        self.tags.get(&id)
    }

    /// The sleepable pools tagged `tag`, oldest first.
    pub(crate) fn tagged(&self, tag: &str) -> Vec<PoolId> {
        self.tags
            .iter()
            .filter(|(_, t)| &***t == tag)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Private pools asleep now.
    pub(crate) fn asleep_count(&self) -> usize {
        self.pools.values().filter(|p| p.asleep).count()
    }

    /// Whether private pool `id` is asleep.
    #[inline]
    pub(crate) fn is_asleep(&self, id: PoolId) -> bool {
        self.get(id).is_some_and(|p| p.asleep)
    }

    /// Whether `id` is a no-split pool.
    #[inline]
    pub(crate) fn no_split(&self, id: PoolId) -> bool {
        id != PoolId::DEFAULT && self.pools.get(&id).is_some_and(|p| p.no_split)
    }

    /// Pools that lend their free cached blocks at out-of-memory, oldest first.
    pub(crate) fn lenders(&self) -> Vec<PoolId> {
        self.pools
            .iter()
            .filter(|(_, p)| p.use_on_oom && !p.asleep)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Bytes allocated in all private pools.
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.pools.values().map(|p| p.allocated_bytes).sum()
    }

    pub(crate) fn next_token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }
}
