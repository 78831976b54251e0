//! Blocks and segments: slabs indexed by small integer ids, so the hot path never allocates.

use crate::free_list::FreeKey;
use crate::snapshot::PoolId;
use braid_stream_core::{CaptureId, StreamId, StreamPosition};
use std::collections::BTreeMap;

/// Index of a block in the slab.
pub(crate) type BlockId = u32;
/// Index of a segment in the slab.
pub(crate) type SegmentId = u32;
/// "No block" in prev/next links.
pub(crate) const NONE: BlockId = u32::MAX;

/// Lifecycle of a block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Status {
    /// Slot not in use.
    Dead,
    /// Cached in a free list.
    Free,
    /// Held by a buffer.
    Allocated,
    /// Freed by its owner, awaiting uses on other streams.
    Pending,
}

/// A use of a block by a stream other than its allocation stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct UseRec {
    /// Uid of the using stream's device (the allocator's own, or a peer's).
    pub device: u64,
    /// The using stream.
    pub stream: StreamId,
    /// Position of the last known use; `None` = "everything submitted to the stream up to the
    /// free" (record_stream), filled at free time (or after a capture ends).
    pub pos: Option<StreamPosition>,
    /// Whether an event covering the use was recorded on the using stream.
    pub event: bool,
}

#[derive(Debug)]
pub(crate) struct Block {
    pub addr: u64,
    pub size: u64,
    pub requested: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    pub small: bool,
    /// Whether the block lies in an expandable segment (it always splits, like small ones).
    pub expandable: bool,
    pub segment: SegmentId,
    pub prev: BlockId,
    pub next: BlockId,
    pub status: Status,
    /// Cross-stream uses (capacity kept across slot reuse).
    pub uses: Vec<UseRec>,
    /// GC clock of the pool when the block was last cached.
    pub gc_base: u64,
    /// Bumped whenever the block is handed out or becomes pending; guards stale references.
    pub generation: u32,
    /// The capture whose work the block was handed out to (allocated into a private pool by a
    /// stream capturing it); uses inside that capture are tracked with capture positions.
    pub capture: Option<CaptureId>,
}

impl Block {
    #[inline]
    pub(crate) fn is_split(&self) -> bool {
        self.prev != NONE || self.next != NONE
    }

    #[inline]
    pub(crate) fn end(&self) -> u64 {
        self.addr + self.size
    }
}

/// The slab of blocks.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    slots: Vec<Block>,
    free_slots: Vec<BlockId>,
}

/// Block slots a new allocator reserves: a model holds hundreds to thousands of live blocks,
/// and growing the slab by doubling from empty copies it (over 100 bytes a block) about ten
/// times on the way, on the allocations that add blocks.
pub(crate) const INITIAL_BLOCK_SLOTS: usize = 1024;

/// What a new block is.
pub(crate) struct NewBlock {
    pub addr: u64,
    pub size: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    pub small: bool,
    /// Whether the block lies in an expandable segment (it always splits, like small ones).
    pub expandable: bool,
    pub segment: SegmentId,
    pub prev: BlockId,
    pub next: BlockId,
}

impl Blocks {
    /// An empty slab with room for [`INITIAL_BLOCK_SLOTS`] blocks.
    pub(crate) fn with_initial_capacity() -> Self {
        Blocks {
            slots: Vec::with_capacity(INITIAL_BLOCK_SLOTS),
            free_slots: Vec::new(),
        }
    }

    /// Adds a free block, in a dead slot when there is one. Inlined: it is part of the split
    /// on the cache-hit path.
    #[inline(always)]
    pub(crate) fn insert(&mut self, b: NewBlock) -> BlockId {
        if let Some(id) = self.free_slots.pop() {
            let slot = &mut self.slots[id as usize];
            slot.addr = b.addr;
            slot.size = b.size;
            slot.requested = 0;
            slot.stream = b.stream;
            slot.pool = b.pool;
            slot.small = b.small;
            slot.expandable = b.expandable;
            slot.segment = b.segment;
            slot.prev = b.prev;
            slot.next = b.next;
            slot.status = Status::Free;
            slot.uses.clear();
            slot.gc_base = 0;
            slot.generation = slot.generation.wrapping_add(1);
            slot.capture = None;
            id
        } else {
            let id = self.slots.len() as BlockId;
            self.slots.push(Block {
                addr: b.addr,
                size: b.size,
                requested: 0,
                stream: b.stream,
                pool: b.pool,
                small: b.small,
                expandable: b.expandable,
                segment: b.segment,
                prev: b.prev,
                next: b.next,
                status: Status::Free,
                uses: Vec::new(),
                gc_base: 0,
                generation: 0,
                capture: None,
            });
            id
        }
    }

    #[inline]
    pub(crate) fn remove(&mut self, id: BlockId) {
        let slot = &mut self.slots[id as usize];
        slot.status = Status::Dead;
        slot.uses.clear();
        slot.generation = slot.generation.wrapping_add(1);
        self.free_slots.push(id);
    }

    /// The free-list key of block `id` (its size, address and id).
    #[inline(always)]
    pub(crate) fn free_key(&self, id: BlockId) -> FreeKey {
        let b = self.get(id);
        FreeKey {
            size: b.size,
            addr: b.addr,
            id,
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: BlockId) -> &Block {
        &self.slots[id as usize]
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: BlockId) -> &mut Block {
        &mut self.slots[id as usize]
    }

    /// Live blocks (any status but dead).
    pub(crate) fn live(&self) -> impl Iterator<Item = (BlockId, &Block)> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, b)| b.status != Status::Dead)
            .map(|(i, b)| (i as BlockId, b))
    }
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub addr: u64,
    pub size: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    pub small: bool,
    pub head: BlockId,
    pub live: bool,
    /// For a mapped range of an expandable segment: the page size it is mapped and unmapped
    /// in (one device mapping per page). `None` for a segment from one device malloc.
    pub expandable: Option<u64>,
    /// Whether the segment is an address reservation with one physical mapping over all of it
    /// (a sleepable pool's, `crate::sleep`) rather than one device malloc.
    pub vmm: bool,
    /// For a `vmm` segment: its mapping is released (its pool sleeps); the addresses stay
    /// reserved, and the bytes do not count as reserved.
    pub asleep: bool,
}

impl Segment {
    #[inline]
    pub(crate) fn end(&self) -> u64 {
        self.addr + self.size
    }
}

/// The slab of segments, with an address index.
#[derive(Debug, Default)]
pub(crate) struct Segments {
    slots: Vec<Segment>,
    free_slots: Vec<SegmentId>,
    by_addr: BTreeMap<u64, SegmentId>,
}

impl Segments {
    pub(crate) fn insert(&mut self, seg: Segment) -> SegmentId {
        let addr = seg.addr;
        let id = if let Some(id) = self.free_slots.pop() {
            self.slots[id as usize] = seg;
            id
        } else {
            self.slots.push(seg);
            (self.slots.len() - 1) as SegmentId
        };
        self.by_addr.insert(addr, id);
        id
    }

    pub(crate) fn remove(&mut self, id: SegmentId) {
        let seg = &mut self.slots[id as usize];
        seg.live = false;
        self.by_addr.remove(&seg.addr);
        self.free_slots.push(id);
    }

    pub(crate) fn get(&self, id: SegmentId) -> &Segment {
        &self.slots[id as usize]
    }

    pub(crate) fn get_mut(&mut self, id: SegmentId) -> &mut Segment {
        &mut self.slots[id as usize]
    }

    /// Live segments by address.
    pub(crate) fn by_addr(&self) -> impl Iterator<Item = (SegmentId, &Segment)> {
        self.by_addr
            .values()
            .map(|&id| (id, &self.slots[id as usize]))
    }

    /// Live segments overlapping `[start, end)`.
    pub(crate) fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = SegmentId> + '_ {
        self.by_addr
            .range(..end)
            .rev()
            .map(|(_, &id)| id)
            .take_while(move |&id| self.slots[id as usize].end() > start)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }
}
