//! braid's stream-ordered caching device allocator.
//!
//! [`CachingAllocator`] carves buffers out of segments it gets from the backend
//! (`hal::Device::alloc`) and caches freed blocks for reuse, as PyTorch's
//! `CUDACachingAllocator` and torch_npu's `NPUCachingAllocator` do, generic over braid's
//! backend trait. It adds MindSpore's automatic cross-stream lifetime on top of the front
//! layer's happens-before model.
//!
//! - **RAII buffers.** [`DeviceBuffer`] owns one block; dropping it frees the block on its
//!   allocation stream. No double free or use after free is possible in safe code. Zero-byte
//!   requests give an empty buffer at [`DevicePtr::NULL`](braid_stream_core::DevicePtr::NULL)
//!   holding no device memory; sizes that overflow when rounded are a typed error.
//! - **Blocks and segments** (PyTorch's defaults, all configurable): sizes rounded to 512 B
//!   (optionally to power-of-two divisions); a small pool for requests up to 1 MiB carved from
//!   2 MiB segments; a large pool where 1–10 MiB requests come from 20 MiB segments and larger
//!   ones get their own segment rounded up to 2 MiB; best fit per (stream, pool) by (size,
//!   address); splitting (small: remainder ≥ 512 B; large: remainder > 1 MiB and request below
//!   `max_split_size`); oversize rules (a request below `max_split_size` never takes a block at
//!   least that large; an oversize request only takes a block smaller than request +
//!   `max_non_split_rounding`); coalescing with free neighbours; segments go back to the
//!   device only whole ([`CachingAllocator::empty_cache`]), and all of them when the
//!   allocator's last handle drops (buffers, pools, diversions and graphs hold handles; pending
//!   blocks are synchronized first). A freed block is reused only by allocations on its
//!   stream.
//! - **Cross-stream use.** [`CachingAllocator::record_stream`] (PyTorch),
//!   [`CachingAllocator::record_stream_range`] (through a view),
//!   [`CachingAllocator::record_tagged_stream`] (TorchAir's `npu_record_tagged_stream`), and
//!   [`CrossStreamMode::Automatic`] (MindSpore): every use the front layer sees on another
//!   stream is noted with its position. On free, uses already ordered before the owner
//!   stream's next work are dropped with no event at all (MindSpore's "return flow": the owner
//!   waited on the user, or the host synchronized); for the rest a pooled event is recorded on
//!   each using stream and the block stays pending. Pending blocks are processed per using
//!   stream (no head-of-line blocking): each allocation re-checks the ordering model, then
//!   queries the oldest events per stream (or, with `lazy_event_polling`, only on a cache
//!   miss). Events are never queried during a capture. With `reuse_pending_with_wait`, a miss
//!   reuses a pending block by making the allocating stream wait on its uses instead of
//!   growing. [`CachingAllocator::erase_stream`] (torch_npu's `erase_stream`) cancels a
//!   stream's recorded or noted uses of a live buffer, on the caller's promise that the stream
//!   no longer uses it.
//! - **Private pools** ([`MemPool`], PyTorch's `MemPool` / `graph_pool_handle`):
//!   [`CachingAllocator::create_pool`] makes one (optionally [`PoolOptions::no_split`]);
//!   [`CachingAllocator::begin_allocate_to_pool`] diverts the allocations a [`PoolFilter`]
//!   selects (a stream, a set of streams, every stream of a capture, a function) into it until
//!   the returned [`PoolDiversion`] drops. Handles, diversions and graphs count as users; when
//!   the last is gone the pool's cached segments go back to the device and the pool disappears
//!   once its last live block (a graph output someone holds) is freed and released.
//!   In a private pool a small request that finds no small block takes a cached large block
//!   of the pool before the pool grows (its memory is reserved for its graphs anyway, so
//!   graphs captured largest first fit in the first graph's segments).
//!   `empty_cache` and the out-of-memory retry release the default pool and freeable pools,
//!   never a pool in use. Inside a capture, a block freed with uses on other streams of the
//!   capture is reused only once the happens-before model orders all its uses before the
//!   owner's next captured work (the graph topology, as PyTorch's
//!   `graph_capture_record_stream_reuse`); no event is recorded or queried during a capture,
//!   and uses inside a capture stop holding a block when the capture ends.
//! - **Pool checkpoints** ([`PoolCheckpoint`], PyTorch's cudagraph-tree checkpointing):
//!   [`CachingAllocator::checkpoint_pool`] takes a private pool's layout,
//!   [`CachingAllocator::restore_pool_checkpoint`] puts the pool back to it, taking ownership
//!   of the pool's live buffers and returning the checkpoint's live blocks as new buffers
//!   (a refusal gives the buffers back, [`RestoreError`]), and
//!   [`CachingAllocator::check_pool_live_allocations`] compares the pool's live blocks with a
//!   set of pointers.
//! - **Out of memory**: the ladder (process pending events → free oversize cached blocks when
//!   `max_split_size` is set → free cached whole segments → synchronize pending events and
//!   retry), then [`AllocError::OutOfMemory`] whose message states the request, the device's
//!   total and free memory, the limit, allocated, reserved, private-pool and pending bytes, the
//!   fragmentation (`1 - allocated / reserved`), and a hint: `expandable_segments:true` first
//!   when the fragmentation is at least [`OutOfMemoryReport::HIGH_FRAGMENTATION`], then the
//!   streams to synchronize when memory is pending, then the batch size. `memory_fraction` / `limit_bytes` cap reserved memory. Observers attached with
//!   [`CachingAllocator::attach_oom_observer`] get the report first, without the allocator
//!   lock held (they may free memory or read statistics; a [`WeakAllocator`] lets them call
//!   back without keeping the allocator alive).
//! - **Statistics** with PyTorch's names ([`MemoryStats`], flat keys such as
//!   `"allocated_bytes.all.current"`, `"reserved_bytes.large_pool.peak"`, `"num_ooms"`):
//!   `allocation`, `segment`, `active`, `inactive_split` (counts) and `allocated_bytes`,
//!   `reserved_bytes`, `active_bytes`, `inactive_split_bytes`, `requested_bytes` (bytes), each
//!   `{all, small_pool, large_pool}` × `{current, peak, allocated, freed}`;
//!   `oversize_allocations`, `oversize_segments`, `num_alloc_retries`, `num_ooms`,
//!   `num_sync_all_streams`, `num_device_alloc`, `num_device_free`, `max_split_size`; and
//!   braid's `num_events_recorded`, `num_events_created`, `num_event_queries`,
//!   `num_pending_frees`, `num_released_without_event`, `num_reuse_with_wait`,
//!   `pending_free_bytes`.
//! - **Snapshots and history**: [`CachingAllocator::snapshot`] lists segments (address, size,
//!   stream, small/large, pool) and their blocks (`active_allocated`, `active_pending_free`,
//!   `inactive`; each mapped range of an expandable segment is one segment marked
//!   `is_expandable`); a bounded history ring
//!   records `alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`,
//!   `segment_map`, `segment_unmap` and `oom` events with a deterministic logical time (a
//!   count of recorded events).
//!
//! # Cost of a cache hit
//!
//! An alloc+free pair served from the cache takes the state lock twice and makes no host
//! allocation. When nothing optional is on (no power-of-two rounding, lifetime placement,
//! garbage collection, history or expandable blocks to pass over) and no diversion into a
//! private pool or cross-stream free is pending, it takes a *plain* path that consults none of
//! them, with one copy per size class; anything else takes the general path, which places
//! blocks identically (a differential property test checks this). The `allocator` bench in
//! `braid-benches` measures the pair; `examples/hit_pair.rs` counts its instructions under
//! callgrind.
//!
//! # Configuration
//!
//! In code with the [`AllocatorConfig`] builder, or as a string in the style of
//! `PYTORCH_ALLOC_CONF` ([`AllocatorConfig::parse`], [`AllocatorConfig::from_env`] reading
//! `BRAID_ALLOC_CONF`). Keys: `max_split_size_mb`, `max_non_split_rounding_mb`,
//! `large_segment_size_mb`, `roundup_power2_divisions` (`4` or
//! `[64:8,128:2,256:2,512:2,1024:1,>:1]`), `garbage_collection_threshold`,
//! `per_process_memory_fraction` (or `memory_fraction`), `limit_mb`, `cross_stream`
//! (`manual` | `automatic`), `reuse_pending_with_wait`, `lazy_event_polling`,
//! `release_before_grow`, `split_large_remainders`, `fit_large_segments`, `record_history`,
//! `history_size`, `expandable_segments`, `expandable_large_page_mb`, `lifetime_placement`. An unknown key or a bad value is a typed error
//! naming both.
//!
//! `expandable_segments` (PyTorch's `expandable_segments:True`; also
//! [`CachingAllocator::set_expandable_segments`] at run time, so both kinds of segment
//! coexist) gives each (stream, small/large) of the default pool one segment: an address range
//! reserved from the backend's virtual-memory API, with pages of physical memory (2 MiB small,
//! 20 MiB large) mapped on demand, at the lowest address where the request fits. All sizes go
//! there, so free space merges with new pages. Releasing (`empty_cache`, the out-of-memory
//! ladder, garbage collection, drop) unmaps the whole pages inside free blocks anywhere in the
//! segment, leaving holes that later growth maps again first, and returns the range once
//! nothing is mapped; reserved bytes are the mapped bytes, and the snapshot lists one segment
//! per contiguous mapped range (as PyTorch's does). While the setting is off, cached blocks of
//! expandable segments serve no request (as in PyTorch). Private pools keep normal segments.
//! A backend without virtual memory makes it [`AllocError::ExpandableSegmentsUnsupported`].
//!
//! ```
//! use braid_allocator::{AllocatorConfig, CachingAllocator};
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::Device;
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(256 << 20))).unwrap();
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::parse("expandable_segments:true").unwrap()).unwrap();
//! let main = device.default_stream();
//! let a = alloc.alloc(8 << 20, &main).unwrap(); // maps one 20 MiB page
//! let b = alloc.alloc(44 << 20, &main).unwrap(); // maps two more: b follows a
//! let c = alloc.alloc(8 << 20, &main).unwrap(); // fits in the third page
//! assert_eq!(b.ptr().0, a.ptr().0 + (8 << 20));
//! assert_eq!(alloc.memory_reserved(), 60 << 20);
//! let snapshot = alloc.snapshot();
//! assert_eq!(snapshot.segments.len(), 1);
//! assert!(snapshot.segments[0].is_expandable);
//! drop(b);
//! alloc.empty_cache(); // unmaps the page [20, 40) MiB inside b's free block: a hole
//! assert_eq!(alloc.memory_reserved(), 40 << 20);
//! assert_eq!(alloc.snapshot().segments.len(), 2); // one per mapped range
//! let d = alloc.alloc(44 << 20, &main).unwrap(); // maps the hole again
//! assert_eq!(d.ptr().0, a.ptr().0 + (8 << 20));
//! assert_eq!(alloc.snapshot().segments.len(), 1);
//! # drop((a, c, d));
//! ```
//!
//! `release_before_grow` (off by default, so segment counts match PyTorch's) is braid's
//! low-fragmentation policy: before a new segment would raise reserved memory past its peak,
//! whole cached segments (which cannot serve the request) go back to the device, largest
//! first, until the new segment fits under the peak. It trades device mallocs and frees for
//! a lower peak reservation; on the PyTorch traces of `shared/traces` it keeps the peak
//! strictly below PyTorch's own.
//!
//! `split_large_remainders` (off by default: PyTorch never splits off a large-pool remainder
//! of 1 MiB or less) splits every large-pool remainder of at least `min_block_size` (512 B)
//! off the block handed out and caches it in the large pool; in the default pool a small
//! request that finds no small block then takes the best-fitting cached large block before a
//! new small segment is allocated (as private pools always do). Allocated bytes then equal the
//! rounded requests (a 1.125 MiB request in a 1.5 MiB free block no longer holds all of it),
//! and small requests fill the remainders instead of growing.
//!
//! `fit_large_segments` (off by default: PyTorch's 20 MiB `large_segment_size`) sizes the
//! segment for a large request below `min_large_alloc` (10 MiB) that finds no cached block to
//! the most whole requests of its size that fit in `large_segment_size`, rounded up to
//! `round_large` (2 MiB): a 9 MiB request gets an 18 MiB segment instead of 20 MiB with a
//! 2 MiB tail. Both keys trade PyTorch's exact layout for a lower peak reservation: together,
//! with `release_before_grow`, they keep the peak below both PyTorch's and `release_before_grow`
//! alone on the traces of `shared/traces` (and `split_large_remainders` cuts device mallocs).
//!
//! `lifetime_placement` (off by default; only with expandable segments) places blocks by
//! predicted lifetime, so transient blocks leave no holes between long-lived ones. Each free
//! notes whether the block lived for fewer than 10 allocations (its own excluded); a rounded
//! size is predicted short-lived when at most half of its last 8 frees were long-lived, and a
//! size never freed yet is long-lived. Small requests and short-lived ones share the stream's
//! small-pool expandable segment and take the best fit of both free lists (they leave soon);
//! long-lived ones take the best fit of the large pool and grow the large-pool segment. When a
//! segment would grow past the peak of reserved memory, the whole free pages of the stream's
//! other segment are unmapped first. Large blocks in the small-pool segment count as
//! small pool in the statistics. With 2 MiB pages it brings the bf16 forward trace of
//! `shared/traces` from 3.66% waste to 1.36%, and lowers inference and training too.
//!
//! ```
//! use braid_allocator::{AllocatorConfig, CachingAllocator, SegmentType};
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::Device;
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(256 << 20))).unwrap();
//! let conf = "expandable_segments:true,expandable_large_page_mb:2,lifetime_placement:true";
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::parse(conf).unwrap()).unwrap();
//! let main = device.default_stream();
//! drop(alloc.alloc(4 << 20, &main).unwrap()); // 4 MiB blocks die young from now on
//! let cache = alloc.alloc(6 << 20, &main).unwrap(); // never freed yet: long-lived
//! let scratch = alloc.alloc(4 << 20, &main).unwrap(); // predicted short-lived
//! let kind = |ptr: u64| {
//!     let snapshot = alloc.snapshot();
//!     let seg = snapshot.segments.iter().find(|s| s.address <= ptr && ptr < s.address + s.total_size);
//!     seg.unwrap().segment_type
//! };
//! assert_eq!(kind(cache.ptr().0), SegmentType::Large);
//! assert_eq!(kind(scratch.ptr().0), SegmentType::Small);
//! ```
//!
//! # Example
//!
//! ```
//! use braid_allocator::{AllocatorConfig, CachingAllocator};
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::{Device, Kernel};
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(256 << 20))).unwrap();
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::parse("max_split_size_mb:64").unwrap()).unwrap();
//! let main = device.default_stream();
//! let side = device.create_stream(0).unwrap();
//!
//! let buf = alloc.alloc(1024, &main).unwrap();
//! main.launch(&Kernel::Fill { dst: buf.slice(), value: 1.0 }).unwrap();
//! side.wait_stream(&main).unwrap();
//! side.launch(&Kernel::Busy { duration_ns: 1_000_000 }).unwrap();
//! buf.record_stream(&side).unwrap(); // the side stream uses it too
//! let first = buf.ptr();
//! drop(buf); // pending until the side stream's work is ordered before main's next work
//! assert_ne!(alloc.alloc(1024, &main).unwrap().ptr(), first);
//! side.synchronize().unwrap();
//! assert_eq!(alloc.alloc(1024, &main).unwrap().ptr(), first);
//! assert_eq!(alloc.memory_stats_map()["allocated_bytes.all.current"], 0);
//! ```
//!
//! # Pinned host memory
//!
//! [`PinnedHostAllocator`] caches page-locked host memory from `hal::Device::alloc_host`
//! (`aclrtMallocHost` on ACL), as PyTorch's `CachingHostAllocator`: requests are rounded up to
//! a power of two and freed blocks are cached per size. [`PinnedBuffer::copy_to_device`] and
//! [`PinnedBuffer::copy_from_device`] copy asynchronously straight from or into the pinned
//! memory and record the stream's use ([`PinnedBuffer::record_stream`] declares others). A
//! buffer dropped while such a copy may still run leaves its block pending behind an event on
//! each using stream; the next allocations query those events, so the block is reused only once
//! the copies completed (scenario A12). The host view ([`PinnedBuffer::as_slice`],
//! [`PinnedBuffer::as_mut_slice`]) is refused with [`AllocError::PinnedBusy`] while a copy may
//! still access it. [`PinnedHostAllocator::empty_cache`] returns idle blocks, [`PinnedStats`]
//! counts allocated, reserved, pending and peak bytes and the device's allocs and frees;
//! dropping the last handle waits for pending blocks and returns every block.
//!
//! ```
//! use braid_allocator::PinnedHostAllocator;
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::{Device, Kernel};
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new())).unwrap();
//! let pinned = PinnedHostAllocator::new(device.clone());
//! let stream = device.default_stream();
//! let dst = device.alloc(4).unwrap();
//!
//! let mut x = pinned.alloc(4).unwrap();
//! x.as_mut_slice().unwrap().copy_from_slice(&1.0f32.to_le_bytes());
//! let first = x.host_ptr();
//! stream.launch(&Kernel::Busy { duration_ns: 1_000_000 }).unwrap();
//! x.copy_to_device(&stream, dst.slice()).unwrap(); // non-blocking, still queued
//! drop(x); // pending: the copy may still read the block
//! assert_ne!(pinned.alloc(4).unwrap().host_ptr(), first);
//! stream.synchronize().unwrap();
//! assert_eq!(pinned.alloc(4).unwrap().host_ptr(), first);
//! assert_eq!(pinned.stats().allocated_bytes, 0);
//! ```
#![warn(missing_docs)]

mod allocator;
mod arena;
mod block;
mod buffer;
mod checkpoint;
mod config;
mod error;
mod free_list;
mod host;
mod keepalive;
mod mempool;
mod private_pool;
mod reclaim;
mod size;
mod snapshot;
mod state;
mod stats;

pub use allocator::{CachingAllocator, WeakAllocator, DEFAULT_POOL, EMPTY_BUFFER_PTR};
pub use buffer::DeviceBuffer;
pub use checkpoint::{PoolCheckpoint, RestoreError};
pub use config::{AllocatorConfig, CrossStreamMode, ENV_VAR, ROUNDUP_POWER2_INTERVALS};
pub use error::{AllocError, OutOfMemoryReport};
pub use host::{PinnedBuffer, PinnedHostAllocator, PinnedStats};
pub use mempool::{MemPool, PoolDiversion};
pub use private_pool::{PoolFilter, PoolOptions, PoolStats};
pub use size::SizeClass;
pub use snapshot::{
    BlockSnapshot, BlockState, HistoryAction, HistoryEntry, MemorySnapshot, PoolId,
    SegmentSnapshot, SegmentType,
};
pub use stats::{format_size, MemoryStats, Stat, StatArray};
