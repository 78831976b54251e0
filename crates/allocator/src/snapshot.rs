//! Memory snapshots (segments and blocks) and the bounded history of allocator events.
//!
//! `CachingAllocator::snapshot` lists segments (address, size, stream, small/large, pool) and
//! their blocks (`active_allocated`, `active_pending_free`, `inactive`; each mapped range of
//! an expandable segment is one segment marked `is_expandable`); a bounded history ring
//! records `alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`,
//! `segment_map`, `segment_unmap` and `oom` events with a deterministic logical time (a count
//! of recorded events). `braid-trace` exports both in the format of PyTorch's
//! `_dump_snapshot`.

use crate::arena::Arena;
use crate::block::{Status, NONE};
use braid_stream_core::StreamId;

/// Identifies a memory pool; the default pool is `PoolId(0)`. Private pools (graph capture)
/// get other ids.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct PoolId(pub u64);

impl PoolId {
    /// The default pool.
    pub const DEFAULT: PoolId = PoolId(0);
}

/// Kind of segment, by the pool it serves.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SegmentType {
    /// Small-pool segment (requests up to 1 MiB).
    Small,
    /// Large-pool segment.
    Large,
}

impl SegmentType {
    /// `"small"` or `"large"`, as in PyTorch's snapshots.
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentType::Small => "small",
            SegmentType::Large => "large",
        }
    }
}

/// State of a block in a snapshot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BlockState {
    /// Held by a live buffer.
    ActiveAllocated,
    /// Freed by its owner but awaiting uses on other streams (PyTorch's
    /// `active_awaiting_free`).
    ActivePendingFree,
    /// Cached, free for reuse on its stream.
    Inactive,
}

impl BlockState {
    /// `"active_allocated"`, `"active_pending_free"` or `"inactive"`.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
        }
    }
}

/// One block of a segment.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BlockSnapshot {
    /// First byte.
    pub address: u64,
    /// Size in bytes (rounded).
    pub size: u64,
    /// Bytes requested by the caller (0 for inactive blocks).
    pub requested_size: u64,
    /// State.
    pub state: BlockState,
}

/// One segment held from the device.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SegmentSnapshot {
    /// First byte.
    pub address: u64,
    /// Size in bytes.
    pub total_size: u64,
    /// Stream the segment (and all its blocks) belongs to.
    pub stream: StreamId,
    /// Small or large.
    pub segment_type: SegmentType,
    /// Pool of the segment.
    pub pool_id: PoolId,
    /// Whether this is a mapped range of an expandable segment: pages mapped on demand into a
    /// larger address reservation. As in PyTorch's snapshot, each contiguous mapped range is
    /// one segment and unmapped memory is left out (`total_size` is the range's mapped
    /// bytes), so an expandable segment with holes shows as several segments.
    pub is_expandable: bool,
    /// Bytes in allocated blocks.
    pub allocated_size: u64,
    /// Bytes in active blocks (allocated or pending free).
    pub active_size: u64,
    /// Bytes requested in allocated blocks.
    pub requested_size: u64,
    /// Blocks by address.
    pub blocks: Vec<BlockSnapshot>,
}

/// The allocator's memory at one point: segments by address, and the recorded history.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct MemorySnapshot {
    /// Segments sorted by address.
    pub segments: Vec<SegmentSnapshot>,
    /// History entries, oldest first (empty unless history is recorded).
    pub history: Vec<HistoryEntry>,
}

/// What happened, in PyTorch's trace vocabulary.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum HistoryAction {
    /// A block was handed to a buffer.
    Alloc,
    /// A buffer was dropped (the block may still await uses on other streams).
    FreeRequested,
    /// The block returned to the cache.
    FreeCompleted,
    /// A segment was allocated from the device.
    SegmentAlloc,
    /// A segment was returned to the device.
    SegmentFree,
    /// Memory was mapped into an expandable segment (`addr`, `size`: the new range).
    SegmentMap,
    /// Memory was unmapped from an expandable segment (`addr`, `size`: the range).
    SegmentUnmap,
    /// An allocation failed with out of memory (`addr` holds the device's free bytes).
    Oom,
}

impl HistoryAction {
    /// `"alloc"`, `"free_requested"`, `"free_completed"`, `"segment_alloc"`, `"segment_free"`,
    /// `"segment_map"`, `"segment_unmap"` or `"oom"`.
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryAction::Alloc => "alloc",
            HistoryAction::FreeRequested => "free_requested",
            HistoryAction::FreeCompleted => "free_completed",
            HistoryAction::SegmentAlloc => "segment_alloc",
            HistoryAction::SegmentFree => "segment_free",
            HistoryAction::SegmentMap => "segment_map",
            HistoryAction::SegmentUnmap => "segment_unmap",
            HistoryAction::Oom => "oom",
        }
    }
}

/// One recorded allocator event.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct HistoryEntry {
    /// What happened.
    pub action: HistoryAction,
    /// Address (for `Oom`: the device's free bytes, as PyTorch records it).
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Stream of the block or segment (of the request for `Oom`).
    pub stream: StreamId,
    /// Pool.
    pub pool: PoolId,
    /// Logical time: a counter increasing by one per recorded event (deterministic).
    pub time: u64,
}

/// Entries of the history ring allocated up front when recording starts: the default size
/// (10 000) fits, so recording into a default ring never allocates. A larger ring grows by
/// doubling as it fills, up to its capacity, so a large `history_size` costs host memory only
/// once that much history is recorded.
const PREALLOCATED_HISTORY: usize = 1 << 16;

/// A bounded ring of history entries, allocated as it fills (see [`PREALLOCATED_HISTORY`]).
#[derive(Debug)]
pub(crate) struct History {
    enabled: bool,
    capacity: usize,
    entries: Vec<HistoryEntry>,
    /// Index of the oldest entry once the ring is full.
    head: usize,
    clock: u64,
}

impl History {
    pub(crate) fn new(enabled: bool, capacity: usize) -> Self {
        let mut h = History {
            enabled: false,
            capacity,
            entries: Vec::new(),
            head: 0,
            clock: 0,
        };
        h.set_enabled(enabled);
        h
    }

    pub(crate) fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled && self.capacity > 0;
        let upfront = self.capacity.min(PREALLOCATED_HISTORY);
        if self.enabled && self.entries.capacity() < upfront {
            self.entries.reserve_exact(upfront - self.entries.len());
        }
    }

    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        let old = self.to_vec();
        let keep = old.len().saturating_sub(capacity);
        self.capacity = capacity;
        self.entries = Vec::with_capacity(old.len() - keep);
        self.entries.extend_from_slice(&old[keep..]);
        self.head = 0;
        self.set_enabled(self.enabled);
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.head = 0;
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Records an event when recording is on.
    #[inline]
    pub(crate) fn record(
        &mut self,
        action: HistoryAction,
        addr: u64,
        size: u64,
        stream: StreamId,
        pool: PoolId,
    ) {
        if self.enabled {
            self.clock += 1;
            self.push(action, addr, size, stream, pool);
        }
    }

    fn push(
        &mut self,
        action: HistoryAction,
        addr: u64,
        size: u64,
        stream: StreamId,
        pool: PoolId,
    ) {
        let entry = HistoryEntry {
            action,
            addr,
            size,
            stream,
            pool,
            time: self.clock,
        };
        let len = self.entries.len();
        if len < self.capacity {
            if len == self.entries.capacity() {
                // Double, but never past the ring's capacity.
                self.entries
                    .reserve_exact(len.max(1).min(self.capacity - len));
            }
            self.entries.push(entry);
        } else {
            self.entries[self.head] = entry;
            self.head = (self.head + 1) % self.capacity;
        }
    }

    pub(crate) fn to_vec(&self) -> Vec<HistoryEntry> {
        let mut out = Vec::with_capacity(self.entries.len());
        out.extend_from_slice(&self.entries[self.head..]);
        out.extend_from_slice(&self.entries[..self.head]);
        out
    }
}

impl MemorySnapshot {
    /// The segments and blocks of `arena`, in address order, with `history`.
    pub(crate) fn of(arena: &Arena, history: &History) -> Self {
        let mut segments = Vec::new();
        for (_, seg) in arena.segments.by_addr() {
            let mut out = SegmentSnapshot {
                address: seg.addr,
                total_size: seg.size,
                stream: seg.stream,
                segment_type: if seg.small {
                    SegmentType::Small
                } else {
                    SegmentType::Large
                },
                pool_id: seg.pool,
                is_expandable: seg.expandable.is_some(),
                allocated_size: 0,
                active_size: 0,
                requested_size: 0,
                blocks: Vec::new(),
            };
            let mut b = seg.head;
            while b != NONE {
                let blk = arena.blocks.get(b);
                let state = match blk.status {
                    Status::Allocated => BlockState::ActiveAllocated,
                    Status::Pending => BlockState::ActivePendingFree,
                    _ => BlockState::Inactive,
                };
                if state == BlockState::ActiveAllocated {
                    out.allocated_size += blk.size;
                    out.requested_size += blk.requested;
                }
                if state != BlockState::Inactive {
                    out.active_size += blk.size;
                }
                out.blocks.push(BlockSnapshot {
                    address: blk.addr,
                    size: blk.size,
                    requested_size: blk.requested,
                    state,
                });
                b = blk.next;
            }
            segments.push(out);
        }
        MemorySnapshot {
            segments,
            history: history.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_entries() {
        let mut h = History::new(true, 3);
        for i in 0..5 {
            h.record(HistoryAction::Alloc, i, 1, StreamId(0), PoolId::DEFAULT);
        }
        let v = h.to_vec();
        assert_eq!(v.iter().map(|e| e.addr).collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(v.iter().map(|e| e.time).collect::<Vec<_>>(), vec![3, 4, 5]);
        h.set_capacity(2);
        assert_eq!(
            h.to_vec().iter().map(|e| e.addr).collect::<Vec<_>>(),
            vec![3, 4]
        );
    }
}
