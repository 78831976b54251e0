//! Typed errors of the allocator.

use crate::stats::format_size;
use braid_stream_core::hal::HalError;
use braid_stream_core::{DeviceId, StreamId};
use std::fmt;

/// Everything the allocator can refuse or report. After any of these the allocator is
/// consistent and serves the next request.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum AllocError {
    /// The device (or the configured limit) cannot provide the memory, even after the
    /// out-of-memory ladder ran. The report says what was asked and where the memory is.
    #[error("{0}")]
    OutOfMemory(Box<OutOfMemoryReport>),
    /// The request exceeds the largest allocation the allocator accepts (1 EiB).
    #[error("out of memory: tried to allocate more than 1EB memory ({requested} bytes requested)")]
    ExceedsMaxAllocation {
        /// Bytes requested.
        requested: u64,
    },
    /// Rounding the request (or its segment) overflows `u64`.
    #[error("allocation size {requested} bytes overflows when rounded to a block or segment size")]
    SizeOverflow {
        /// Bytes requested.
        requested: u64,
    },
    /// A configuration key is not known. The message suggests the nearest valid key when one
    /// is near ([`AllocError::config_key_suggestion`]), else lists the valid keys.
    #[error(
        "unrecognized key '{key}' in allocator config: {}",
        unknown_key_hint(key)
    )]
    UnknownConfigKey {
        /// The key.
        key: String,
    },
    /// A configuration key is given twice in one string (directly or by an alias, such as
    /// `history_size` and `max_entries`).
    #[error(
        "allocator config key '{key}' is given twice ('{first}' and '{second}'): give it once"
    )]
    DuplicateConfigKey {
        /// The key's name (not the alias).
        key: String,
        /// The first item naming it, as written.
        first: String,
        /// The second item naming it, as written.
        second: String,
    },
    /// A configuration value is invalid for its key.
    #[error("invalid value '{value}' for allocator config key '{key}': {reason}")]
    InvalidConfigValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A memory fraction outside (0, 1].
    #[error("invalid memory fraction {0}: it must be in (0, 1]")]
    InvalidMemoryFraction(f64),
    /// A buffer of another allocator, or a sub-range outside the buffer.
    #[error("{0}")]
    InvalidArgument(String),
    /// A stream of another device was given to this allocator's device: to allocate on, or
    /// to record (or erase) a use of a buffer by a device without peer access to this one
    /// (`Device::enable_peer_access` from the stream's device to the allocator's).
    #[error("{call}: {stream} belongs to {stream_device}, the allocator's memory to {allocator_device} (allocations need a stream of the allocator's device; uses on another device's stream need peer access from it)")]
    WrongDevice {
        /// The call refused (`alloc`, `record_stream`, `erase_stream`).
        call: &'static str,
        /// The stream.
        stream: StreamId,
        /// Its device.
        stream_device: DeviceId,
        /// The allocator's device.
        allocator_device: DeviceId,
    },
    /// A diversion into a pool that already has one (PyTorch: "already recording to mempool").
    #[error("private pool {pool} is already being allocated to by another diversion or capture")]
    PoolBusy {
        /// The pool id.
        pool: u64,
    },
    /// A checkpoint or liveness check names a pool that is not a live private pool of this
    /// allocator, or a checkpoint taken by another allocator.
    #[error("checkpoint of private pool {pool}: {reason}")]
    CheckpointPool {
        /// The pool id.
        pool: u64,
        /// What is wrong.
        reason: String,
    },
    /// A block of the pool is freed but still awaits uses on other streams (or a stale buffer
    /// handed to a restore has such uses): its memory cannot be described or re-carved yet.
    #[error(
        "private pool {pool} has the block at {addr:#x} awaiting uses on other streams; \
         synchronize the using streams (or end their capture) before checkpointing or restoring"
    )]
    CheckpointPendingFrees {
        /// The pool id.
        pool: u64,
        /// First byte of the block.
        addr: u64,
    },
    /// A restore was not given the buffer of a block that is live in the pool: restoring would
    /// re-carve memory that buffer still points into.
    #[error(
        "restore of private pool {pool}: the live buffer at {addr:#x} ({size} bytes) is not \
         among the stale buffers handed over"
    )]
    CheckpointLiveBuffer {
        /// The pool id.
        pool: u64,
        /// First byte of the live block.
        addr: u64,
        /// Its size.
        size: u64,
    },
    /// A stale buffer handed to a restore belongs to another pool or allocator.
    #[error(
        "restore of private pool {expected}: the stale buffer at {addr:#x} belongs to pool \
         {pool}{}", if *.foreign { " of another allocator" } else { "" }
    )]
    CheckpointForeignBuffer {
        /// The pool being restored.
        expected: u64,
        /// First byte of the buffer.
        addr: u64,
        /// The buffer's pool.
        pool: u64,
        /// Whether the buffer comes from another allocator.
        foreign: bool,
    },
    /// A segment recorded in the checkpoint is no longer held by the pool (it was released,
    /// or its memory now backs another segment).
    #[error(
        "restore of private pool {pool}: the checkpointed segment at {addr:#x} ({size} bytes) \
         is no longer held by the pool"
    )]
    CheckpointSegmentMissing {
        /// The pool id.
        pool: u64,
        /// First byte of the segment.
        addr: u64,
        /// Its size.
        size: u64,
    },
    /// Pinned host memory could not be allocated, even after the idle cached pinned blocks went
    /// back to the device.
    #[error("pinned host memory exhausted: tried to allocate {} (requested {requested} bytes, rounded to {rounded}); the pinned allocator holds {} of which {} is in use and {} awaits copies in flight. Hint: drop pinned buffers you no longer need, or synchronize the streams copying from them", format_size(*.rounded), format_size(*.reserved), format_size(*.allocated), format_size(*.pending))]
    PinnedOutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// The request rounded to its power-of-two size class.
        rounded: u64,
        /// Pinned bytes the allocator holds (in use, pending and cached).
        reserved: u64,
        /// Pinned bytes in live buffers.
        allocated: u64,
        /// Pinned bytes freed but awaiting copies in flight.
        pending: u64,
    },
    /// The backend provides no pinned host memory (`hal::Device::alloc_host`).
    #[error("the {backend} backend does not provide pinned host memory")]
    PinnedUnsupported {
        /// Backend name.
        backend: &'static str,
    },
    /// A pinned buffer's host memory was asked for while a copy on a stream may still access
    /// it.
    #[error("the pinned buffer may still be accessed by a copy on {stream} (up to its position {seq}): synchronize that stream, or query an event recorded after the copy, first")]
    PinnedBusy {
        /// The stream whose copy may still run.
        stream: StreamId,
        /// Position of that work on the stream.
        seq: u64,
    },
    /// Expandable segments were asked for on a backend without the virtual-memory API
    /// (`hal::Device::vmm_granularity` is `None`).
    #[error("expandable segments need a backend with virtual memory; the {backend} backend has none (set expandable_segments:false)")]
    ExpandableSegmentsUnsupported {
        /// Name of the backend.
        backend: &'static str,
    },
    /// A sleepable pool was asked for on a backend without the virtual-memory API (sleep
    /// releases pages while keeping their addresses).
    #[error("sleep mode needs a backend with virtual memory (to release pages and keep their addresses); the {backend} backend has none: on the simulator leave SimConfig::virtual_memory on, on Ascend use a CANN with aclrtReserveMemAddress, aclrtMallocPhysical and aclrtMapMem, or use a plain pool (create_pool) that never sleeps")]
    SleepUnsupported {
        /// Name of the backend.
        backend: &'static str,
    },
    /// `sleep` or `wake` named a tag no sleepable pool has.
    #[error("no sleepable pool is tagged '{tag}': create one with create_sleepable_pool(\"{tag}\", ..) and allocate into it first")]
    UnknownSleepTag {
        /// The tag.
        tag: String,
    },
    /// `sleep` of pools that already sleep.
    #[error("the pools tagged '{tag}' are already asleep: wake(\"{tag}\") them before putting them to sleep again")]
    AlreadyAsleep {
        /// The tag.
        tag: String,
    },
    /// `wake` of pools that are not asleep (a wake without a sleep).
    #[error("wake(\"{tag}\") without a sleep: the pools tagged '{tag}' are awake; call sleep(\"{tag}\", ..) first")]
    NotAsleep {
        /// The tag.
        tag: String,
    },
    /// An allocation was diverted into a pool that sleeps.
    #[error("private pool {pool} (tagged '{tag}') is asleep: wake(\"{tag}\") it before allocating from it")]
    PoolAsleep {
        /// The pool id.
        pool: u64,
        /// Its tag.
        tag: String,
    },
    /// Work (a graph's replay) would use memory of a pool that sleeps.
    #[error("{len} bytes at {addr:#x} belong to a pool tagged '{tag}' that is asleep: wake(\"{tag}\") before launching work that uses them")]
    MemoryAsleep {
        /// First byte of the sleeping range used.
        addr: u64,
        /// Its length.
        len: u64,
        /// The tag of its pool.
        tag: String,
    },
    /// `sleep` or `wake` while a graph is being captured on the device.
    #[error(
        "{call} is refused while a graph is being captured on the device: end the capture first"
    )]
    SleepDuringCapture {
        /// `sleep` or `wake`.
        call: &'static str,
    },
    /// A wake could not map the sleeping pools' memory again: the device (or the configured
    /// limit) has too little free, even after the cached segments were released. The pools
    /// stay asleep; nothing was lost.
    #[error("wake(\"{tag}\"): out of memory mapping a segment of {} ({} of {} free); the pools stay asleep with their offloaded data: free memory (drop buffers, empty_cache) and wake again", format_size(*.needed), format_size(*.free), format_size(*.total))]
    WakeOutOfMemory {
        /// The tag.
        tag: String,
        /// Bytes of the segment that could not be mapped.
        needed: u64,
        /// Bytes free on the device (or under the limit).
        free: u64,
        /// Device capacity (or the limit).
        total: u64,
    },
    /// The backend failed with something other than out of memory.
    #[error(transparent)]
    Backend(#[from] HalError),
    /// The front layer refused a call the allocator made.
    #[error(transparent)]
    Stream(#[from] braid_stream_core::Error),
}

impl AllocError {
    /// For [`AllocError::UnknownConfigKey`]: the valid key nearest to the one given, when it
    /// is likely a typo of it (`max_split_size` → `max_split_size_mb`).
    pub fn config_key_suggestion(&self) -> Option<&'static str> {
        match self {
            AllocError::UnknownConfigKey { key } => crate::config::nearest_key(key),
            _ => None,
        }
    }
}

fn unknown_key_hint(key: &str) -> String {
    match crate::config::nearest_key(key) {
        Some(nearest) => format!("did you mean '{nearest}'?"),
        None => format!("valid keys are {}", crate::config::key_list()),
    }
}

/// The contents of an out-of-memory error: what was asked, what the device has, and where the
/// memory is. Its `Display` is the message users see.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OutOfMemoryReport {
    /// Device ordinal.
    pub device: u32,
    /// Backend name.
    pub backend: &'static str,
    /// Stream of the request.
    pub stream: StreamId,
    /// Bytes requested by the caller.
    pub requested: u64,
    /// The request rounded to a block size.
    pub rounded: u64,
    /// Size of the segment the allocator tried to get from the device.
    pub segment_size: u64,
    /// Device capacity.
    pub device_total: u64,
    /// Device bytes free at the time of the error.
    pub device_free: u64,
    /// Cap from `memory_fraction` / `limit_bytes`, if one is set.
    pub allowed: Option<u64>,
    /// Bytes in allocated blocks.
    pub allocated: u64,
    /// Bytes in segments held by the allocator.
    pub reserved: u64,
    /// Bytes allocated in private (graph) pools.
    pub private_pools: u64,
    /// Bytes in freed blocks still awaiting uses on other streams.
    pub pending_other_streams: u64,
}

impl fmt::Display for OutOfMemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} out of memory. Tried to allocate {} (requested {} bytes, rounded to {} bytes, on {}). \
             Device {} has a total capacity of {} of which {} is free.",
            self.backend,
            format_size(self.segment_size),
            self.requested,
            self.rounded,
            self.stream,
            self.device,
            format_size(self.device_total),
            format_size(self.device_free),
        )?;
        if let Some(allowed) = self.allowed {
            write!(
                f,
                " The allocator is limited to {} (memory_fraction / limit_bytes).",
                format_size(allowed)
            )?;
        }
        let unallocated = self.reserved.saturating_sub(self.allocated);
        write!(
            f,
            " Of the allocated memory {} is allocated by braid, with {} allocated in private pools, \
             and {} is reserved by braid but unallocated (fragmentation {:.1}%: 1 - allocated / \
             reserved). {} is pending on other streams (freed buffers awaiting cross-stream uses).",
            format_size(self.allocated),
            format_size(self.private_pools),
            format_size(unallocated),
            self.fragmentation() * 100.0,
            format_size(self.pending_other_streams),
        )?;
        let mut hints = Vec::new();
        if self.is_fragmented() {
            hints.push(
                "reserved but unallocated memory is high: set expandable_segments:true in \
                 BRAID_ALLOC_CONF (if it is not on already; it needs a backend with virtual \
                 memory, elsewhere max_split_size_mb stops large cached blocks from being split) \
                 or call empty_cache()",
            );
        }
        if self.pending_other_streams > 0 {
            hints.push(
                "memory is pending on other streams: synchronize them or make the owning stream \
                 wait on them",
            );
        }
        hints.push(if hints.is_empty() {
            "reduce the batch size"
        } else {
            "otherwise reduce the batch size"
        });
        write!(f, " Hint: {}.", hints.join("; "))
    }
}

impl OutOfMemoryReport {
    /// Share of reserved memory at or above which the out-of-memory message suggests
    /// `expandable_segments:true` first.
    pub const HIGH_FRAGMENTATION: f64 = 0.2;

    /// The share of reserved memory that is not allocated, `1 - allocated / reserved`
    /// (0 when nothing is reserved).
    pub fn fragmentation(&self) -> f64 {
        if self.reserved == 0 {
            return 0.0;
        }
        let unallocated = self.reserved.saturating_sub(self.allocated);
        unallocated as f64 / self.reserved as f64
    }

    /// Whether [`fragmentation`](Self::fragmentation) is at least
    /// [`HIGH_FRAGMENTATION`](Self::HIGH_FRAGMENTATION): the message then suggests expandable
    /// segments before anything else.
    pub fn is_fragmented(&self) -> bool {
        self.fragmentation() >= Self::HIGH_FRAGMENTATION
    }
}
