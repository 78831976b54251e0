//! braid's stream-ordered caching device allocator, and a caching allocator of pinned host
//! memory.
//!
//! [`CachingAllocator`] carves buffers out of segments it gets from the backend
//! (`hal::Device::alloc`) and caches freed blocks for reuse, as PyTorch's
//! `CUDACachingAllocator` and torch_npu's `NPUCachingAllocator` do, generic over braid's
//! backend trait; it adds MindSpore's automatic cross-stream lifetime on the front layer's
//! happens-before model. Start with [`CachingAllocator`] (the `allocator` module's docs
//! state the rules) and [`AllocatorConfig`].
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | `allocator` | [`CachingAllocator`], [`WeakAllocator`]: the public API; the rules (blocks and segments, cross-stream use, out of memory) and the cost of a cache hit |
//! | `buffer` | [`DeviceBuffer`]: one block, freed on its stream when dropped |
//! | `config` | [`AllocatorConfig`], [`CrossStreamMode`]: every key of `BRAID_ALLOC_CONF` and the low-fragmentation policies |
//! | `error` | [`AllocError`], [`OutOfMemoryReport`] |
//! | `state` | the state machine under the lock: malloc, free, grants; `state::miss` (one request through the out-of-memory ladder), `state::pending`, `state::release` (release and garbage collection), and the device side of `state::expandable` (expandable segments), `state::lifetime` (placement by lifetime) and `state::restore` (checkpoint restore) |
//! | `arena` | blocks, segments and free lists with no device: find, split and coalesce under the config's `FitRules` (statistics changes handed back), expandable segments' mapped ranges and growth planning, the lifetime history, checkpoint re-carving, its own invariants |
//! | `block`, `free_list`, `size` | blocks and segments in slabs; free lists sorted for best fit; size rounding and classes |
//! | `reclaim` | frees waiting for uses on other streams: pending blocks, per-stream event FIFOs, the event pool, the happens-before query (also asked by the pinned host allocator) |
//! | `mempool`, `private_pool` | [`MemPool`], [`PoolDiversion`], [`PoolFilter`]: private pools and the diversions into them |
//! | `checkpoint` | [`PoolCheckpoint`]: save and restore a private pool's layout |
//! | `sleep` | sleep mode: sleepable pools ([`CachingAllocator::create_sleepable_pool`]) whose memory is offloaded or discarded and whose pages are released, addresses kept ([`CachingAllocator::sleep`], [`CachingAllocator::wake`], [`SleepMode`]); the state side is `state::sleep` |
//! | `stats`, `snapshot` | [`MemoryStats`] with PyTorch's names; [`MemorySnapshot`] and the history |
//! | `keepalive` | how buffers keep the allocator alive without a reference count each |
//! | `graph_pins` | buffers a captured graph uses stay allocated while the graph lives |
//! | `host` (`buffer`, `cache`, `stats`) | [`PinnedHostAllocator`], [`PinnedBuffer`], its cache, [`PinnedStats`] |
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
#![warn(missing_docs)]

mod allocator;
mod arena;
mod block;
mod buffer;
mod checkpoint;
mod config;
mod error;
mod free_list;
mod graph_pins;
mod host;
pub mod ipc;
mod keepalive;
mod mempool;
mod private_pool;
mod reclaim;
mod size;
mod sleep;
mod snapshot;
mod state;
mod stats;

pub use allocator::{CachingAllocator, WeakAllocator, DEFAULT_POOL, EMPTY_BUFFER_PTR};
pub use buffer::DeviceBuffer;
pub use checkpoint::{PoolCheckpoint, RestoreError};
pub use config::{
    AllocatorConfig, CrossStreamMode, ENV_VAR, MAX_HISTORY_SIZE, ROUNDUP_POWER2_INTERVALS,
};
pub use error::{AllocError, OutOfMemoryReport};
pub use host::{PinnedBuffer, PinnedHostAllocator, PinnedStats};
pub use ipc::{import_ipc, ImportedBuffer, IpcBufferHandle, SharedBuffer};
pub use mempool::{MemPool, PoolDiversion};
pub use private_pool::{PoolFilter, PoolOptions, PoolStats};
pub use size::SizeClass;
pub use sleep::{SleepMode, SleepReport, WakeReport};
pub use snapshot::{
    BlockSnapshot, BlockState, HistoryAction, HistoryEntry, MemorySnapshot, PoolId,
    SegmentSnapshot, SegmentType,
};
pub use stats::{format_size, MemoryStats, Stat, StatArray};
