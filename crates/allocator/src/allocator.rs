//! The public allocator type: one per device, a shared handle around the locked state.
//!
//! # The rules
//!
//! - **RAII buffers.** [`DeviceBuffer`] owns one block; dropping it frees the block on its
//!   allocation stream. No double free or use after free is possible in safe code. Zero-byte
//!   requests give an empty buffer at [`DevicePtr::NULL`] holding no device memory; sizes that
//!   overflow when rounded are a typed error.
//! - **Blocks and segments** (PyTorch's defaults, all configurable in [`AllocatorConfig`]):
//!   sizes rounded to 512 B (optionally to power-of-two divisions); a small pool for requests
//!   up to 1 MiB carved from 2 MiB segments; a large pool where 1–10 MiB requests come from
//!   20 MiB segments and larger ones get their own segment rounded up to 2 MiB; best fit per
//!   (stream, pool) by (size, address); splitting (small: remainder ≥ 512 B; large:
//!   remainder above 1 MiB and request below `max_split_size`); oversize rules (a request below
//!   `max_split_size` never takes a block at least that large; an oversize request only takes
//!   a block smaller than request + `max_non_split_rounding`); coalescing with free
//!   neighbours; segments go back to the device only whole ([`CachingAllocator::empty_cache`]),
//!   and all of them when the allocator's last handle drops (buffers, pools, diversions and
//!   graphs hold handles; pending blocks are synchronized first). A freed block is reused only
//!   by allocations on its stream.
//! - **Cross-stream use.** [`CachingAllocator::record_stream`] (PyTorch),
//!   [`CachingAllocator::record_stream_range`] (through a view),
//!   [`CachingAllocator::record_tagged_stream`] (TorchAir's `npu_record_tagged_stream`), and
//!   [`CrossStreamMode::Automatic`] (MindSpore): every use the front layer sees on another
//!   stream is noted with its position. On free, uses already ordered before the owner
//!   stream's next work are dropped with no event at all (MindSpore's "return flow": the owner
//!   waited on the user, or the host synchronized); for the rest a pooled event is recorded on
//!   each using stream and the block stays pending (`crate::pending`). Pending blocks are
//!   processed per using stream (no head-of-line blocking): each allocation re-checks the
//!   ordering model, then queries the oldest events per stream (or, with
//!   `lazy_event_polling`, only on a cache miss). Events are never queried during a capture.
//!   With `reuse_pending_with_wait`, a miss reuses a pending block by making the allocating
//!   stream wait on its uses instead of growing. [`CachingAllocator::erase_stream`]
//!   (torch_npu's `erase_stream`) cancels a stream's recorded or noted uses of a live buffer,
//!   on the caller's promise that the stream no longer uses it.
//! - **Other devices' streams.** A buffer used by a stream of another device (a peer copy,
//!   a collective) is a cross-stream use like any other: `record_stream` and `erase_stream`
//!   accept a stream of a device that has peer access to this allocator's device
//!   (`Device::enable_peer_access`; without it [`AllocError::WrongDevice`] names both
//!   devices), automatic mode sees the uses other devices' streams make of this device's
//!   buffers (the front layer tells the owning device's observers), events for them are
//!   recorded on the peer's stream, and the block is reused once the cross-device
//!   happens-before model orders those uses before the owner stream's next work (the owner
//!   waited on an event of the peer, or the peer's host observed the work complete).
//!   Allocation itself needs a stream of the allocator's device.
//! - **Private pools** ([`MemPool`], PyTorch's `MemPool` / `graph_pool_handle`):
//!   [`CachingAllocator::create_pool`] makes one (optionally `PoolOptions::no_split`);
//!   [`CachingAllocator::begin_allocate_to_pool`] diverts the allocations a [`PoolFilter`]
//!   selects (a stream, a set of streams, every stream of a capture, the allocations of one
//!   thread — PyTorch's `use_mem_pool` is [`MemPool::use_on_current_thread`] —, a function) into it until
//!   the returned [`PoolDiversion`] drops. Handles, diversions and graphs count as users; when
//!   the last is gone the pool's cached segments go back to the device and the pool
//!   disappears once its last live block (a graph output someone holds) is freed and
//!   released. In a private pool a small request that finds no small block takes a cached
//!   large block of the pool before the pool grows (its memory is reserved for its graphs
//!   anyway, so graphs captured largest first fit in the first graph's segments).
//!   `empty_cache` and the out-of-memory retry release the default pool and freeable pools,
//!   never a pool in use. Inside a capture, a block freed with uses on other streams of the
//!   capture is reused only once the happens-before model orders all its uses before the
//!   owner's next captured work (the graph topology, as PyTorch's
//!   `graph_capture_record_stream_reuse`); no event is recorded or queried during a capture,
//!   and uses inside a capture stop holding a block when the capture ends. Checkpoints of a
//!   pool are in `crate::checkpoint`.
//! - **Graphs hold what they use.** A buffer allocated outside a capture (an input, weights,
//!   an output made before `begin_capture`) that captured work reads or writes stays
//!   allocated while the graph lives: dropping it then leaves its block pending until the
//!   graph is dropped and its last launches have completed, so no other buffer gets memory a
//!   replay writes (`crate::graph_pins`). In both cross-stream modes.
//! - **Out of memory**: the ladder (process pending events → free oversize cached blocks when
//!   `max_split_size` is set → free cached whole segments → synchronize pending events and
//!   retry), then [`AllocError::OutOfMemory`] whose message states the request, the device's
//!   total and free memory, the limit, allocated, reserved, private-pool and pending bytes,
//!   the fragmentation (`1 - allocated / reserved`), and a hint: `expandable_segments:true`
//!   first when the fragmentation is at least [`OutOfMemoryReport::HIGH_FRAGMENTATION`], then
//!   the streams to synchronize when memory is pending, then the batch size.
//!   `memory_fraction` / `limit_bytes` cap reserved memory. Observers attached with
//!   [`CachingAllocator::attach_oom_observer`] get the report first, without the allocator
//!   lock held (they may free memory or read statistics; a [`WeakAllocator`] lets them call
//!   back without keeping the allocator alive).
//!
//! # Cost of a cache hit
//!
//! An alloc+free pair served from the cache takes the state lock twice and makes no host
//! allocation. When nothing optional is on (no power-of-two rounding, lifetime placement,
//! garbage collection, history, or expandable blocks to pass over) and no diversion into a
//! private pool or cross-stream free is pending, it takes a *plain* path that consults none
//! of those features, with one copy per size class; anything else takes the general path,
//! which places blocks identically (a differential property test checks this).
//!
//! Measured: `cargo bench -p braid-benches --bench allocator` times an alloc+free pair on one
//! stream; on the 2-core development VM the medians were 75–81 ns (512 B), 77–87 ns (1 MiB)
//! and 57–67 ns (64 MiB) over two quiet runs. `examples/hit_pair.rs` counts 575 instructions
//! per small pair under callgrind (446 for 64 MiB, whose block is not split); keep it no
//! higher.

use crate::block::BlockId;
use crate::buffer::DeviceBuffer;
use crate::config::{AllocatorConfig, CrossStreamMode};
use crate::error::{AllocError, OutOfMemoryReport};
use crate::graph_pins::GraphPin;
use crate::mempool::{MemPool, PoolDiversion};
use crate::private_pool::{PoolFilter, PoolOptions, PoolStats};
use crate::snapshot::{HistoryEntry, MemorySnapshot, PoolId};
use crate::state::State;
use crate::stats::MemoryStats;
use braid_stream_core::hal::Backend;
use braid_stream_core::sync::{Mutex, MutexGuard};
use braid_stream_core::{
    Access, Device, DevicePtr, DeviceSlice, GraphHold, Stream, StreamPosition, UseObserver,
    Workspace, WorkspaceProvider, WrongDevice,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Weak};

/// An out-of-memory observer ([`CachingAllocator::attach_oom_observer`]).
type OomObserver = dyn Fn(&OutOfMemoryReport) + Send + Sync;

pub(crate) struct Inner<B: Backend> {
    pub(crate) device: Device<B>,
    state: Mutex<State<B>>,
    /// Strong [`CachingAllocator`] handles. Buffers do not count here: they count in the
    /// locked state ([`crate::keepalive`]).
    handles: AtomicUsize,
    /// Out-of-memory observers, called without the state lock.
    oom_observers: Mutex<Vec<Arc<OomObserver>>>,
    /// Kept alive here: the device holds use observers weakly.
    _observer: Option<Arc<dyn UseObserver>>,
    /// Holds the blocks captured work uses for its graph (`crate::graph_pins`); held weakly
    /// by the device too.
    _capture_observer: Arc<dyn UseObserver>,
    /// This allocator as the device's workspace provider (held weakly by the device).
    workspace_provider: Arc<dyn WorkspaceProvider<B>>,
    /// Sleep mode's offloaded data; its lock makes sleeps and wakes take turns
    /// (`crate::sleep`). Taken before the state lock, never while holding it.
    pub(crate) sleepers: Mutex<crate::sleep::Sleepers<B>>,
}

impl<B: Backend> Inner<B> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock()
    }

    /// A buffer is gone (its block, if any, freed). Returns the allocator's self-reference
    /// when nothing else keeps the allocator alive: the caller drops it, after its last use
    /// of `self`.
    #[must_use]
    pub(crate) fn buffer_dropped(&self, block: Option<BlockId>) -> Option<Arc<Inner<B>>> {
        let mut st = self.lock();
        if let Some(block) = block {
            st.free(&self.device, block);
        }
        st.keepalive.buffer_dropped(&self.handles)
    }
}

impl<B: Backend> Drop for Inner<B> {
    /// The last handle is gone (buffers, pools, diversions and graphs all hold one): every
    /// segment still held goes back to the device.
    fn drop(&mut self) {
        let state = self.state.get_mut();
        state.release_all_on_drop(&self.device);
    }
}

/// Notes cross-stream uses for automatic mode.
struct Observer<B: Backend> {
    inner: Weak<Inner<B>>,
}

impl<B: Backend> UseObserver for Observer<B> {
    fn note_use(&self, position: StreamPosition, range: DeviceSlice, _access: Access) {
        if let Some(inner) = self.inner.upgrade() {
            inner.lock().note_use(position, range.ptr.0, range.end());
        }
    }
}

/// Holds the blocks captured work uses until its graph is gone (`crate::graph_pins`).
struct CaptureObserver<B: Backend> {
    inner: Weak<Inner<B>>,
}

impl<B: Backend> UseObserver for CaptureObserver<B> {
    fn note_use(&self, position: StreamPosition, range: DeviceSlice, _access: Access) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let pin = {
            let mut st = inner.lock();
            st.note_captured_use(position, range.ptr.0, range.end())
                .map(|key| GraphPin::new(&inner, st.pins.board(), key))
        };
        // Handed over once the allocator lock is released: the capturing device's state lock
        // (this device's, or a peer's for a captured peer copy) need not nest in it. A capture
        // that ended meanwhile drops the pin, which releases the blocks at the allocator's next
        // call.
        if let Some(pin) = pin {
            inner.device.attach_to_capture(position, pin);
        }
    }

    fn note_graph_update(&self, ranges: &[(DeviceSlice, Access)]) -> Option<Arc<dyn GraphHold>> {
        let inner = self.inner.upgrade()?;
        let mut st = inner.lock();
        let key = st.note_graph_update(ranges)?;
        Some(Arc::new(GraphPin::new(&inner, st.pins.board(), key)))
    }
}

/// Gives launches their workspace: a block allocated on the launching stream (inside a capture,
/// from the capture's pool), freed when the launch is submitted.
struct Provider<B: Backend> {
    inner: Weak<Inner<B>>,
}

impl<B: Backend> WorkspaceProvider<B> for Provider<B> {
    fn workspace(&self, stream: &Stream<B>, bytes: u64) -> braid_stream_core::Result<Workspace> {
        let unavailable =
            |reason: String| braid_stream_core::StreamError::Workspace { bytes, reason };
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| unavailable("the caching allocator is gone".to_string()))?;
        let allocator = CachingAllocator::from_inner(inner);
        let buffer = allocator
            .alloc(bytes, stream)
            .map_err(|e| unavailable(e.to_string()))?;
        Ok(Workspace::new(buffer.slice(), buffer))
    }
}

/// A stream-ordered caching allocator for one device. Cheap to clone (a shared handle);
/// `Send + Sync`.
///
/// Blocks belong to the stream they were allocated on and are reused only by allocations on
/// that stream; uses on other streams are declared with [`CachingAllocator::record_stream`] or,
/// in [`CrossStreamMode::Automatic`], observed by the allocator.
pub struct CachingAllocator<B: Backend> {
    pub(crate) inner: Arc<Inner<B>>,
}

impl<B: Backend> CachingAllocator<B> {
    /// A handle around `inner` that does not count as a handle: only for a
    /// `ManuallyDrop` view that is never dropped.
    pub(crate) fn borrowed(inner: Arc<Inner<B>>) -> Self {
        CachingAllocator { inner }
    }

    /// A new strong handle to `inner`.
    pub(crate) fn from_inner(inner: Arc<Inner<B>>) -> Self {
        inner.handles.fetch_add(1, AtomicOrdering::AcqRel);
        CachingAllocator { inner }
    }
}

impl<B: Backend> Clone for CachingAllocator<B> {
    fn clone(&self) -> Self {
        CachingAllocator::from_inner(self.inner.clone())
    }
}

impl<B: Backend> Drop for CachingAllocator<B> {
    fn drop(&mut self) {
        if self.inner.handles.fetch_sub(1, AtomicOrdering::AcqRel) != 1 {
            return;
        }
        // The last handle: let go of the self-reference unless buffers still need it. It is
        // dropped after the lock is released; `self.inner` still keeps the allocator alive.
        let held = self.inner.lock().keepalive.last_handle_dropped();
        drop(held);
    }
}

impl<B: Backend> fmt::Debug for CachingAllocator<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("CachingAllocator")
            .field("device", &self.inner.device)
            .field("allocated", &st.stats.allocated_bytes.all.current)
            .field("reserved", &st.stats.reserved_bytes.all.current)
            .finish()
    }
}

impl<B: Backend> CachingAllocator<B> {
    /// Creates the allocator of `device` and registers it as the device's workspace provider
    /// ([`Device::set_workspace_provider`]: launches take their workspace from it, on the
    /// launching stream; the last allocator created on a device provides it). Fails on an invalid configuration, and with
    /// [`AllocError::ExpandableSegmentsUnsupported`] when `expandable_segments` is on and the
    /// backend has no virtual-memory API.
    pub fn new(device: Device<B>, config: AllocatorConfig) -> Result<Self, AllocError> {
        config.validate()?;
        let granularity = vmm_granularity(&device, config.expandable_segments)?;
        let total = device.mem_info()?.total;
        config.validate_for_device(total)?;
        let automatic = config.cross_stream == CrossStreamMode::Automatic;
        let inner = Arc::new_cyclic(|weak: &Weak<Inner<B>>| {
            let observer: Option<Arc<dyn UseObserver>> = automatic.then(|| {
                Arc::new(Observer {
                    inner: weak.clone(),
                }) as Arc<dyn UseObserver>
            });
            let workspace_provider: Arc<dyn WorkspaceProvider<B>> = Arc::new(Provider {
                inner: weak.clone(),
            });
            let capture_observer: Arc<dyn UseObserver> = Arc::new(CaptureObserver {
                inner: weak.clone(),
            });
            Inner {
                workspace_provider,
                device: device.clone(),
                state: Mutex::new(State::new(
                    config,
                    total,
                    braid_stream_core::hal::Device::wants_sub_allocation_notes(device.hal()),
                    granularity,
                    device.id().uid,
                )),
                handles: AtomicUsize::new(1),
                oom_observers: Mutex::new(Vec::new()),
                sleepers: Mutex::new(crate::sleep::Sleepers::default()),
                _observer: observer,
                _capture_observer: capture_observer,
            }
        });
        if let Some(observer) = &inner._observer {
            device.add_use_observer(observer);
        }
        device.add_capture_use_observer(&inner._capture_observer);
        device.set_workspace_provider(&inner.workspace_provider);
        Ok(CachingAllocator { inner })
    }

    /// Makes this allocator the device's workspace provider again (after another allocator
    /// of the same device took over, or [`Device::clear_workspace_provider`]).
    pub fn provide_workspace(&self) {
        self.inner
            .device
            .set_workspace_provider(&self.inner.workspace_provider);
    }

    /// The device.
    pub fn device(&self) -> &Device<B> {
        &self.inner.device
    }

    /// The configuration in effect.
    pub fn config(&self) -> AllocatorConfig {
        self.inner.lock().config.clone()
    }

    /// Allocates `size` bytes for use on `stream`.
    ///
    /// Zero bytes give an empty buffer at [`DevicePtr::NULL`] that holds no device memory.
    /// Sizes that overflow when rounded are [`AllocError::SizeOverflow`]; when the device (or
    /// the configured limit) cannot provide the memory after the out-of-memory ladder, the error
    /// is [`AllocError::OutOfMemory`] and the allocator stays usable.
    pub fn alloc(&self, size: u64, stream: &Stream<B>) -> Result<DeviceBuffer<B>, AllocError> {
        if braid_stream_core::dry_run::is_fenced_out(self.inner.device.id().uid) {
            // A dry run on another device must not allocate here (`braid_stream_core::dry_run`).
            braid_stream_core::dry_run::check(self.inner.device.id(), "CachingAllocator::alloc")?;
        }
        self.check_device("alloc", stream)?;
        if size == 0 {
            self.inner.lock().keepalive.buffer_created(&self.inner);
            return Ok(DeviceBuffer::empty(&self.inner, stream.id()));
        }
        let mut st = self.inner.lock();
        match st.malloc(&self.inner.device, stream, size) {
            Ok(granted) => {
                st.keepalive.buffer_created(&self.inner);
                drop(st);
                Ok(DeviceBuffer::new(&self.inner, granted, size, stream.id()))
            }
            Err(err) => {
                // Out-of-memory observers run without the lock.
                drop(st);
                Err(self.alloc_failed(err))
            }
        }
    }

    /// Tells the out-of-memory observers about `err` when it is one.
    #[cold]
    #[inline(never)]
    fn alloc_failed(&self, err: AllocError) -> AllocError {
        if let AllocError::OutOfMemory(report) = &err {
            let observers = self.inner.oom_observers.lock().clone();
            for observer in observers {
                observer(report);
            }
        }
        err
    }

    /// PyTorch's `attachOutOfMemoryObserver`: `observer` is called with the report of every
    /// [`AllocError::OutOfMemory`] this allocator returns, once, before the error is returned,
    /// on the allocating thread. Observers run in the order attached, without the allocator's
    /// lock held, so they may call back into the allocator (statistics, snapshots,
    /// [`CachingAllocator::empty_cache`], freeing buffers they can give up); the failed request
    /// is not retried. Observers stay attached as long as the allocator lives.
    ///
    /// An observer that keeps a strong handle (a `CachingAllocator` or a `DeviceBuffer`)
    /// keeps the allocator, and the memory it caches, alive: capture a
    /// [`WeakAllocator`] ([`CachingAllocator::downgrade`]) instead.
    pub fn attach_oom_observer<F>(&self, observer: F)
    where
        F: Fn(&OutOfMemoryReport) + Send + Sync + 'static,
    {
        self.inner.oom_observers.lock().push(Arc::new(observer));
    }

    /// A weak handle, which does not keep the allocator alive (for observers and callbacks
    /// the allocator itself holds).
    pub fn downgrade(&self) -> WeakAllocator<B> {
        WeakAllocator {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Allocates `size` bytes on this thread's current stream of the device.
    pub fn alloc_current(&self, size: u64) -> Result<DeviceBuffer<B>, AllocError> {
        let stream = self.inner.device.current_stream();
        self.alloc(size, &stream)
    }

    /// PyTorch's `record_stream`: `buffer`'s memory is not reused before the work submitted to
    /// `stream` up to the buffer's drop is ordered before the next work of the allocation
    /// stream. A no-op for the allocation stream itself and for empty buffers.
    pub fn record_stream(
        &self,
        buffer: &DeviceBuffer<B>,
        stream: &Stream<B>,
    ) -> Result<(), AllocError> {
        self.check_owner(buffer)?;
        self.check_peer("record_stream", stream)?;
        if let Some(block) = buffer.block() {
            self.inner.lock().record_stream(block, stream);
        }
        Ok(())
    }

    /// torch_npu's `erase_stream`: cancels the uses of `buffer` by `stream` recorded so far
    /// ([`CachingAllocator::record_stream`], and in [`CrossStreamMode::Automatic`] the uses
    /// the allocator noted), so that dropping the buffer no longer waits for `stream`. Uses on
    /// other streams are kept; uses of `stream` after this call are noted again in automatic
    /// mode. A no-op for the allocation stream and for empty buffers.
    ///
    /// This is the caller's promise that `stream` no longer uses the buffer's memory, or that
    /// its work is ordered before whatever reuses it (for example a collective whose completion
    /// the caller waits for): after the drop, the memory may be handed to the next allocation
    /// on the allocation stream at once, while `stream` may still be running.
    pub fn erase_stream(
        &self,
        buffer: &DeviceBuffer<B>,
        stream: &Stream<B>,
    ) -> Result<(), AllocError> {
        self.check_owner(buffer)?;
        self.check_peer("erase_stream", stream)?;
        if let Some(block) = buffer.block() {
            let device = stream.device().id().uid;
            self.inner.lock().erase_stream(block, device, stream.id());
        }
        Ok(())
    }

    /// `record_stream` through a sub-range (`len` bytes at `offset`) of the buffer, as for a
    /// view of a tensor. The whole block is gated, as in PyTorch.
    pub fn record_stream_range(
        &self,
        buffer: &DeviceBuffer<B>,
        offset: u64,
        len: u64,
        stream: &Stream<B>,
    ) -> Result<(), AllocError> {
        if offset
            .checked_add(len)
            .is_none_or(|end| end > buffer.requested_size())
        {
            return Err(AllocError::InvalidArgument(format!(
                "range of {len} bytes at offset {offset} is outside the buffer of {} bytes",
                buffer.requested_size()
            )));
        }
        self.record_stream(buffer, stream)
    }

    /// TorchAir's `npu_record_tagged_stream`: `record_stream` on the tagged stream `tag`
    /// (created with priority 0 if new).
    pub fn record_tagged_stream(
        &self,
        buffer: &DeviceBuffer<B>,
        tag: &str,
    ) -> Result<(), AllocError> {
        let stream = self.inner.device.tagged_stream(tag, 0)?;
        self.record_stream(buffer, &stream)
    }

    /// Processes pending cross-stream frees now (re-checks the ordering model and queries the
    /// oldest events per stream). Skipped during capture.
    pub fn process_pending(&self) {
        self.inner.lock().process_pending(&self.inner.device, true);
    }

    /// Synchronizes all pending events and returns every whole cached segment of the default
    /// pool and of freeable private pools to the device (private pools still in use keep
    /// theirs). Skipped (with a warning) while a capture is active.
    pub fn empty_cache(&self) {
        self.inner.lock().empty_cache(&self.inner.device);
    }

    /// Whether `other` is a handle to this same allocator.
    pub fn same_as(&self, other: &CachingAllocator<B>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    // ----- private pools -----

    /// Creates a private pool; the returned handle is its first user.
    pub fn create_pool(&self, options: PoolOptions) -> MemPool<B> {
        let id = self.inner.lock().pools.create(options);
        tracing::debug!(
            pool = id.0,
            no_split = options.no_split,
            "private pool created"
        );
        MemPool::adopt(self.clone(), id)
    }

    /// Diverts allocations that `filter` selects into `pool` until the returned guard drops
    /// (PyTorch's `beginAllocateToPool`). The guard is a user of the pool. Diversions are
    /// tried newest first; an allocation no diversion selects goes to the default pool.
    /// A pool takes one diversion at a time ([`AllocError::PoolBusy`]).
    pub fn begin_allocate_to_pool(
        &self,
        pool: &MemPool<B>,
        filter: PoolFilter,
    ) -> Result<PoolDiversion<B>, AllocError> {
        if !pool.allocator().same_as(self) {
            return Err(AllocError::InvalidArgument(
                "the pool belongs to another allocator".to_string(),
            ));
        }
        let token = self.inner.lock().begin_diversion(pool.id(), filter)?;
        Ok(PoolDiversion::new(self.clone(), pool.id(), token))
    }

    pub(crate) fn end_allocate_to_pool(&self, token: u64) {
        self.inner.lock().end_diversion(&self.inner.device, token);
    }

    pub(crate) fn retain_pool(&self, id: PoolId) {
        if let Some(p) = self.inner.lock().pools.get_mut(id) {
            p.use_count += 1;
        }
    }

    pub(crate) fn release_pool(&self, id: PoolId) {
        self.inner.lock().release_pool(&self.inner.device, id);
    }

    pub(crate) fn empty_cache_pool(&self, id: PoolId) {
        self.inner.lock().empty_cache_pool(&self.inner.device, id);
    }

    /// What the allocator knows about private pool `id` (`None` once it is gone).
    pub fn pool_stats(&self, id: PoolId) -> Option<PoolStats> {
        self.inner.lock().pools.get(id).copied()
    }

    /// Ids of the private pools that still exist (in use, or freeable with live blocks).
    pub fn private_pools(&self) -> Vec<PoolId> {
        self.inner.lock().pools.ids().collect()
    }

    /// Caps reserved memory at `fraction` of the device capacity; (0, 1] else a typed error.
    pub fn set_memory_fraction(&self, fraction: f64) -> Result<(), AllocError> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(AllocError::InvalidMemoryFraction(fraction));
        }
        let mut st = self.inner.lock();
        st.config.memory_fraction = Some(fraction);
        st.update_allowed_max();
        Ok(())
    }

    /// Turns expandable segments on or off at run time (PyTorch's
    /// `_set_allocator_settings("expandable_segments:True")`): misses from then on grow the
    /// stream's expandable segment, or allocate normal segments. Segments of both kinds
    /// coexist; while it is off, cached blocks of expandable segments serve no request
    /// (PyTorch's `get_free_block` skips them, so memory that must not be virtual-memory
    /// mapped, e.g. for IPC, comes from normal segments), and they are still unmapped by
    /// `empty_cache` and the out-of-memory ladder. Turning it on for a backend without
    /// virtual memory is [`AllocError::ExpandableSegmentsUnsupported`] (and changes nothing).
    pub fn set_expandable_segments(&self, on: bool) -> Result<(), AllocError> {
        vmm_granularity(&self.inner.device, on)?;
        let mut st = self.inner.lock();
        st.config.expandable_segments = on;
        st.refresh_plain();
        tracing::debug!(on, "expandable segments toggled");
        Ok(())
    }

    /// The cap on reserved memory, if a fraction or limit is set.
    pub fn memory_limit(&self) -> Option<u64> {
        self.inner.lock().allowed_max()
    }

    /// All statistics.
    pub fn memory_stats(&self) -> MemoryStats {
        {
            let st = self.inner.lock();
            st.stats.view(&st.pending_by_class)
        }
    }

    /// The statistics as a flat map with PyTorch's keys.
    pub fn memory_stats_map(&self) -> BTreeMap<String, u64> {
        self.memory_stats().to_map()
    }

    /// Bytes in allocated blocks (`allocated_bytes.all.current`).
    pub fn memory_allocated(&self) -> u64 {
        self.inner.lock().stats.allocated_bytes.all.current
    }

    /// Peak of [`CachingAllocator::memory_allocated`].
    pub fn max_memory_allocated(&self) -> u64 {
        self.inner.lock().stats.allocated_bytes.all.peak
    }

    /// Bytes in segments held from the device (`reserved_bytes.all.current`).
    pub fn memory_reserved(&self) -> u64 {
        self.inner.lock().stats.reserved_bytes.all.current
    }

    /// Peak of [`CachingAllocator::memory_reserved`].
    pub fn max_memory_reserved(&self) -> u64 {
        self.inner.lock().stats.reserved_bytes.all.peak
    }

    /// Bytes in freed blocks awaiting uses on other streams.
    pub fn pending_free_bytes(&self) -> u64 {
        self.inner.lock().stats.pending_free_bytes.current
    }

    /// Sets every peak to its current value.
    pub fn reset_peak_stats(&self) {
        let mut st = self.inner.lock();
        let p = st.pending_by_class;
        st.stats.reset_peak(&p);
    }

    /// Zeroes the accumulated totals and counters.
    pub fn reset_accumulated_stats(&self) {
        let mut st = self.inner.lock();
        let p = st.pending_by_class;
        st.stats.reset_accumulated(&p);
    }

    /// Segments and blocks now, with the recorded history.
    pub fn snapshot(&self) -> MemorySnapshot {
        self.inner.lock().snapshot()
    }

    /// Turns history recording on or off.
    pub fn record_history(&self, enabled: bool) {
        let mut st = self.inner.lock();
        st.history.set_enabled(enabled);
        st.refresh_plain();
    }

    /// Whether history is being recorded.
    pub fn is_recording_history(&self) -> bool {
        self.inner.lock().history.enabled()
    }

    /// Changes the capacity of the history ring (keeping the newest entries). A size above
    /// [`crate::MAX_HISTORY_SIZE`] is [`AllocError::InvalidConfigValue`] naming
    /// `history_size`, and changes nothing.
    pub fn set_history_size(&self, entries: usize) -> Result<(), AllocError> {
        let checked = AllocatorConfig::new().history_size(entries);
        checked.validate()?;
        let mut st = self.inner.lock();
        st.history.set_capacity(entries);
        st.config.history_size = entries;
        st.refresh_plain();
        Ok(())
    }

    /// Drops the recorded history.
    pub fn clear_history(&self) {
        self.inner.lock().history.clear();
    }

    /// The recorded history, oldest first.
    pub fn history(&self) -> Vec<HistoryEntry> {
        self.inner.lock().history.to_vec()
    }

    /// Checks internal consistency (block links, free lists, statistics); for tests and
    /// debugging. Returns a description of the first problem found.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.inner.lock().check_invariants()
    }

    /// Refuses a stream of another device whose streams have no peer access to this
    /// allocator's device ([`Device::enable_peer_access`]).
    fn check_peer(&self, call: &'static str, stream: &Stream<B>) -> Result<(), AllocError> {
        if stream.device().has_peer_access(&self.inner.device) {
            Ok(())
        } else {
            self.check_device(call, stream)
        }
    }

    /// Refuses a stream of another device.
    fn check_device(&self, call: &'static str, stream: &Stream<B>) -> Result<(), AllocError> {
        if stream.device().same_as(&self.inner.device) {
            Ok(())
        } else {
            Err(AllocError::WrongDevice(Box::new(WrongDevice {
                call: call.into(),
                what: "stream",
                expected: self.inner.device.id(),
                found: stream.device().id(),
            })))
        }
    }

    fn check_owner(&self, buffer: &DeviceBuffer<B>) -> Result<(), AllocError> {
        if std::ptr::eq(buffer.inner(), Arc::as_ptr(&self.inner)) {
            Ok(())
        } else {
            Err(AllocError::InvalidArgument(
                "the buffer belongs to another allocator".to_string(),
            ))
        }
    }
}

/// A weak handle to a [`CachingAllocator`] ([`CachingAllocator::downgrade`]): it does not
/// keep the allocator alive, so an allocator whose last strong handle drops returns its memory
/// to the device even while weak handles exist.
pub struct WeakAllocator<B: Backend> {
    inner: Weak<Inner<B>>,
}

impl<B: Backend> WeakAllocator<B> {
    /// A strong handle, if the allocator still exists.
    pub fn upgrade(&self) -> Option<CachingAllocator<B>> {
        self.inner.upgrade().map(CachingAllocator::from_inner)
    }
}

impl<B: Backend> Clone for WeakAllocator<B> {
    fn clone(&self) -> Self {
        WeakAllocator {
            inner: self.inner.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for WeakAllocator<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakAllocator")
            .field("alive", &(self.inner.strong_count() > 0))
            .finish()
    }
}

/// The pool id of buffers from the default pool.
pub const DEFAULT_POOL: PoolId = PoolId::DEFAULT;

/// The address of empty (zero-byte) buffers.
pub const EMPTY_BUFFER_PTR: DevicePtr = DevicePtr::NULL;

/// The backend's virtual-memory page size; when expandable segments are `wanted`, a backend
/// without virtual memory is a typed error.
fn vmm_granularity<B: Backend>(
    device: &Device<B>,
    wanted: bool,
) -> Result<Option<u64>, AllocError> {
    let granularity = braid_stream_core::hal::Device::vmm_granularity(device.hal());
    if wanted && granularity.is_none() {
        return Err(AllocError::ExpandableSegmentsUnsupported { backend: B::NAME });
    }
    Ok(granularity)
}
