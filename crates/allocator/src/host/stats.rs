//! Statistics of the pinned host allocator.

/// Counters of a [`crate::PinnedHostAllocator`] (a snapshot; see
/// [`crate::PinnedHostAllocator::stats`]). Bytes are of size classes (requests rounded up to a
/// power of two) unless named `requested`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PinnedStats {
    /// Bytes in live buffers.
    pub allocated_bytes: u64,
    /// Highest `allocated_bytes` so far.
    pub peak_allocated_bytes: u64,
    /// Bytes held from the device: live, pending and idle cached blocks.
    pub reserved_bytes: u64,
    /// Highest `reserved_bytes` so far.
    pub peak_reserved_bytes: u64,
    /// Bytes requested by the live buffers (before rounding).
    pub requested_bytes: u64,
    /// Live buffers (zero-byte buffers hold no block and are not counted).
    pub live_buffers: u64,
    /// Freed blocks awaiting copies that may still use them.
    pub pending_blocks: u64,
    /// Bytes of `pending_blocks`.
    pub pending_bytes: u64,
    /// Buffers handed out (zero-byte ones excluded).
    pub num_allocations: u64,
    /// Allocations served from the cache.
    pub num_cache_hits: u64,
    /// Pinned allocations from the device (`alloc_host`).
    pub num_host_alloc: u64,
    /// Pinned blocks returned to the device (`free_host`).
    pub num_host_free: u64,
    /// Frees that left a block pending.
    pub num_pending_frees: u64,
    /// Events recorded for pending blocks.
    pub num_events_recorded: u64,
    /// Event queries made while polling pending blocks.
    pub num_event_queries: u64,
    /// Device allocations retried after returning the idle cache.
    pub num_alloc_retries: u64,
    /// Requests that failed with out of memory.
    pub num_ooms: u64,
}

impl PinnedStats {
    /// Bytes of idle cached blocks (reserved, neither live nor pending).
    pub fn cached_bytes(&self) -> u64 {
        self.reserved_bytes - self.allocated_bytes - self.pending_bytes
    }

    pub(crate) fn on_buffer_alloc(&mut self, size: u64, requested: u64, cache_hit: bool) {
        self.allocated_bytes += size;
        self.peak_allocated_bytes = self.peak_allocated_bytes.max(self.allocated_bytes);
        self.requested_bytes += requested;
        self.live_buffers += 1;
        self.num_allocations += 1;
        self.num_cache_hits += u64::from(cache_hit);
    }

    pub(crate) fn on_buffer_free(&mut self, size: u64, requested: u64) {
        self.allocated_bytes -= size;
        self.requested_bytes -= requested;
        self.live_buffers -= 1;
    }

    pub(crate) fn on_host_alloc(&mut self, size: u64) {
        self.reserved_bytes += size;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        self.num_host_alloc += 1;
    }

    pub(crate) fn on_host_free(&mut self, size: u64) {
        self.reserved_bytes -= size;
        self.num_host_free += 1;
    }
}
