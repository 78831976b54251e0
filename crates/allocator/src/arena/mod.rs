//! The arena: the blocks, the segments they tile, and the free lists of cached blocks — the
//! device allocator's memory map, with no device in it.
//!
//! Every segment is tiled by a doubly linked list of blocks in address order; a free block
//! is in exactly one free list (its pool, stream and class), sorted by (size, address), and
//! two free blocks never touch (freeing coalesces). The state above decides when memory is
//! grown, released or reused and keeps the statistics; the arena does the work on the map and
//! answers for its shape ([`Arena::check`]):
//!
//! | module | what it does |
//! |---|---|
//! | `fit` | [`Request`], [`FitRules`]: best fit, the split of a block handed out, the coalesce of a freed one; statistics changes come back as [`GrantSplit`] / [`SplitDelta`] |
//! | `expandable` | expandable segments' reservations and mapped ranges (each range an arena segment): growth planning, newly mapped pages joining the ranges, holes cut by unmapping |
//! | `lifetime` | the lifetime history behind `lifetime_placement` |
//! | `restore` | a private pool's blocks, and re-carving a segment to a checkpoint's layout |
//!
//! The arena knows the configuration only through the values passed in, and no device.

mod expandable;
mod fit;
mod lifetime;
mod restore;

pub(crate) use expandable::Expandable;
pub(crate) use fit::{FitRules, Found, GrantSplit, Request, SplitDelta};
pub(crate) use lifetime::Lifetimes;

use crate::block::{BlockId, Blocks, Segments, Status, NONE};
use crate::free_list::FreeLists;
use crate::snapshot::PoolId;

/// Blocks, segments and free lists.
#[derive(Debug)]
pub(crate) struct Arena {
    pub blocks: Blocks,
    pub segments: Segments,
    pub free: FreeLists,
    /// The expandable segments' reservations, each with its mapped ranges (arena segments).
    pub expandable: Vec<Expandable>,
    /// Allocation lifetimes per size (`lifetime_placement`).
    pub lifetimes: Lifetimes,
}

/// What [`Arena::check`] counted while walking the segments, for the statistics to match.
pub(crate) struct Shape {
    /// Bytes in allocated blocks.
    pub allocated: u64,
    /// Allocated blocks.
    pub allocated_blocks: usize,
    /// Bytes in mapped segments (a sleeping segment's are not counted).
    pub reserved: u64,
    /// Free blocks that are split: (count, bytes).
    pub inactive_split: (u64, u64),
    /// (pool, segments, mapped bytes) of each private pool holding segments.
    pools: Vec<(PoolId, u64, u64)>,
}

impl Shape {
    /// Segments and bytes the arena holds for private pool `pool`.
    pub(crate) fn pool_segments(&self, pool: PoolId) -> (u64, u64) {
        self.pools
            .iter()
            .find(|(id, _, _)| *id == pool)
            .map_or((0, 0), |&(_, segs, bytes)| (segs, bytes))
    }
}

impl Arena {
    /// An empty arena.
    pub(crate) fn new() -> Self {
        Arena {
            blocks: Blocks::with_initial_capacity(),
            segments: Segments::default(),
            free: FreeLists::default(),
            expandable: Vec::new(),
            lifetimes: Lifetimes::default(),
        }
    }

    /// Puts free block `b` into its free list, at its sorted place.
    pub(crate) fn cache(&mut self, b: BlockId) {
        let blk = self.blocks.get(b);
        let (pool, stream, small) = (blk.pool, blk.stream, blk.small);
        let key = self.blocks.free_key(b);
        let p = self.free.of_pool_mut(pool);
        let clock = p.gc_clock[usize::from(!small)];
        p.list_mut(stream, small).insert(key);
        let blk = self.blocks.get_mut(b);
        blk.status = Status::Free;
        blk.gc_base = clock;
    }

    /// Takes free block `b` out of its free list.
    pub(crate) fn uncache(&mut self, b: BlockId) {
        let blk = self.blocks.get(b);
        let key = self.blocks.free_key(b);
        let (pool, stream, small) = (blk.pool, blk.stream, blk.small);
        let removed = self
            .free
            .of_pool_mut(pool)
            .list_mut(stream, small)
            .remove(key);
        debug_assert!(removed, "free block missing from its free list");
    }

    /// The index of free block `b` in its free list.
    #[inline(always)]
    pub(crate) fn slot_of(&mut self, b: BlockId) -> Option<usize> {
        let blk = self.blocks.get(b);
        let key = self.blocks.free_key(b);
        let (pool, stream, small) = (blk.pool, blk.stream, blk.small);
        let slot = self
            .free
            .of_pool_mut(pool)
            .list_mut(stream, small)
            .position(key);
        debug_assert!(slot.is_some(), "free block missing from its free list");
        slot
    }

    /// Whole free segments of `pool` (all streams, both classes).
    pub(crate) fn whole_free_segments(&self, pool: PoolId) -> Vec<BlockId> {
        let Some(p) = self.free.of_pool(pool) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for small in [true, false] {
            for (_, list) in p.lists(small) {
                out.extend(
                    list.keys()
                        .iter()
                        .filter(|k| !self.blocks.get(k.id).is_split())
                        .map(|k| k.id),
                );
            }
        }
        out
    }

    /// The arena's own invariants: each segment is tiled by its blocks, correctly linked, with
    /// no two free blocks touching; every free block is in its free list and every free-list
    /// entry (of the default pool and of `pools`) is a free block of that list, sorted; no
    /// live block lies outside a segment. Returns what it counted.
    pub(crate) fn check(&self, pools: impl Iterator<Item = PoolId>) -> Result<Shape, String> {
        let mut shape = Shape {
            allocated: 0,
            allocated_blocks: 0,
            reserved: 0,
            inactive_split: (0, 0),
            pools: Vec::new(),
        };
        let mut blocks_seen = 0usize;
        for (sid, seg) in self.segments.by_addr() {
            // A sleeping segment keeps its addresses but no memory: not reserved.
            let mapped = if seg.asleep { 0 } else { seg.size };
            if seg.asleep && !seg.vmm {
                return Err(format!(
                    "segment {:#x} asleep but not virtual memory",
                    seg.addr
                ));
            }
            shape.reserved += mapped;
            if seg.pool != PoolId::DEFAULT {
                match shape.pools.iter_mut().find(|(id, _, _)| *id == seg.pool) {
                    Some(p) => {
                        p.1 += 1;
                        p.2 += mapped;
                    }
                    None => shape.pools.push((seg.pool, 1, mapped)),
                }
            }
            let mut b = seg.head;
            let mut expect = seg.addr;
            let mut prev = NONE;
            let mut prev_free = false;
            while b != NONE {
                let blk = self.blocks.get(b);
                blocks_seen += 1;
                if blk.addr != expect
                    || blk.prev != prev
                    || blk.segment != sid
                    || blk.stream != seg.stream
                {
                    return Err(format!("segment {:#x}: block {b} badly linked", seg.addr));
                }
                if blk.status == Status::Dead {
                    return Err(format!("dead block {b} in segment {:#x}", seg.addr));
                }
                let free = blk.status == Status::Free;
                if free && prev_free {
                    return Err(format!("two adjacent free blocks at {:#x}", blk.addr));
                }
                if free {
                    let key = self.blocks.free_key(b);
                    let listed = self
                        .free
                        .of_pool(blk.pool)
                        .and_then(|p| p.lists(blk.small).find(|(s, _)| *s == blk.stream))
                        .is_some_and(|(_, l)| l.keys().binary_search(&key).is_ok());
                    if !listed {
                        return Err(format!(
                            "free block {b} at {:#x} not in its free list",
                            blk.addr
                        ));
                    }
                }
                if blk.status == Status::Allocated {
                    shape.allocated += blk.size;
                    shape.allocated_blocks += 1;
                }
                if free && blk.is_split() {
                    shape.inactive_split.0 += 1;
                    shape.inactive_split.1 += blk.size;
                }
                prev_free = free;
                expect = blk.end();
                prev = b;
                b = blk.next;
            }
            if expect != seg.end() {
                return Err(format!("segment {:#x} not covered by its blocks", seg.addr));
            }
        }
        for id in std::iter::once(PoolId::DEFAULT).chain(pools) {
            let Some(p) = self.free.of_pool(id) else {
                continue;
            };
            for small in [true, false] {
                for (stream, list) in p.lists(small) {
                    for k in list.keys() {
                        let blk = self.blocks.get(k.id);
                        if blk.status != Status::Free
                            || blk.size != k.size
                            || blk.addr != k.addr
                            || blk.pool != id
                            || blk.stream != stream
                            || blk.small != small
                        {
                            return Err(format!("stale free-list entry for block {}", k.id));
                        }
                    }
                    if !list.keys().windows(2).all(|w| w[0] < w[1]) {
                        return Err(format!(
                            "free list of pool {} on {stream} not sorted by (size, address)",
                            id.0
                        ));
                    }
                }
            }
        }
        if blocks_seen != self.blocks.live().count() {
            return Err("live blocks outside any segment".to_string());
        }
        self.check_expandable()?;
        Ok(shape)
    }
}
