//! Fitting requests to cached blocks: best fit in a free list under PyTorch's oversize rules,
//! splitting the remainder off a block handed out, and coalescing a freed block with its free
//! neighbours. The configuration's part is a [`FitRules`] value; what the statistics must
//! learn comes back as a [`GrantSplit`] or a [`SplitDelta`], so the arena keeps no statistics of its own.

use super::Arena;
use crate::block::{Block, BlockId, NewBlock, Status, NONE};
use crate::config::AllocatorConfig;
use crate::free_list::{class_index, FreeKey};
use crate::size::SizeClass;
use crate::snapshot::PoolId;
use braid_stream_core::StreamId;

/// One allocation request, from the allocator's `malloc` to the block it is granted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    /// `size` rounded to the block size (or by `roundup_power2_divisions`): the bytes granted
    /// unless a whole block is handed out.
    pub rounded: u64,
    /// Bytes the caller asked for.
    pub size: u64,
    /// The stream the block is allocated on (whose free lists are searched).
    pub stream: StreamId,
    /// The size class whose free lists and segments serve it.
    pub class: SizeClass,
    /// The pool the request is routed to.
    pub pool: PoolId,
}

impl Request {
    /// The same request served from the free lists or segments of `class`.
    #[inline(always)]
    pub(crate) fn in_class(self, class: SizeClass) -> Request {
        Request { class, ..self }
    }

    /// The same request served from the free lists of `pool`.
    #[inline(always)]
    pub(crate) fn in_pool(self, pool: PoolId) -> Request {
        Request { pool, ..self }
    }
}

/// What the configuration decides about fitting and splitting (PyTorch's `max_split_size`
/// family), copied out of [`AllocatorConfig`] where a search or a grant starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FitRules {
    /// Blocks at least this large are never split, and serve only requests at least as large.
    pub max_split_size: u64,
    /// How much larger than a request at or above `max_split_size` a block may be.
    pub max_non_split_rounding: u64,
    /// The smallest remainder a small block is split for.
    pub min_block_size: u64,
    /// A large block's remainder must be larger than this to be split off...
    pub small_size: u64,
    /// ...unless this is on, when `min_block_size` suffices.
    pub split_large_remainders: bool,
    /// Whether garbage collection is on: searches tick the free lists' clocks.
    pub gc: bool,
}

impl FitRules {
    /// The rules `config` sets.
    #[inline(always)]
    pub(crate) fn of(config: &AllocatorConfig) -> Self {
        FitRules {
            max_split_size: config.max_split_size,
            max_non_split_rounding: config.max_non_split_rounding,
            min_block_size: config.min_block_size,
            small_size: config.small_size,
            split_large_remainders: config.split_large_remainders,
            gc: config.garbage_collection_threshold > 0.0,
        }
    }

    /// Whether a free block of `block_size` bytes is too large to serve a request rounded to
    /// `rounded` (an oversize block serves only oversize requests, and only close fits).
    #[inline(always)]
    pub(crate) fn too_large(&self, rounded: u64, block_size: u64) -> bool {
        let max_split = self.max_split_size;
        (rounded < max_split && block_size >= max_split)
            || (rounded >= max_split
                && block_size >= rounded.saturating_add(self.max_non_split_rounding))
    }

    /// Whether handing a block of `block_size` bytes out for `rounded` bytes splits the
    /// remainder off. `small`: the block splits as a small one (blocks of expandable segments
    /// do too, as in PyTorch).
    #[inline(always)]
    fn splits(&self, block_size: u64, small: bool, rounded: u64) -> bool {
        let remaining = block_size - rounded;
        if small {
            remaining >= self.min_block_size
        } else {
            rounded < self.max_split_size
                && (remaining > self.small_size
                    || (self.split_large_remainders && remaining >= self.min_block_size))
        }
    }
}

/// A free block [`Arena::find_free`] chose, with its index in its free list.
#[derive(Clone, Copy)]
pub(crate) struct Found {
    pub block: BlockId,
    pub slot: usize,
}

/// How the free blocks that are split (PyTorch's `inactive_split` statistics) changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SplitDelta {
    /// Change in their number.
    pub blocks: i64,
    /// Change in their bytes.
    pub bytes: i64,
}

/// How handing a block out changed the free blocks that are split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GrantSplit {
    /// No split block was made or taken.
    Unchanged,
    /// A whole block was split: its free remainder of this many bytes is a new split block.
    NewRemainder(u64),
    /// A split block was split again: its granted part (this many bytes) is no longer free.
    Resplit(u64),
    /// A split block of this many bytes was handed out whole.
    TakenWhole(u64),
}

impl SplitDelta {
    /// What free block `blk` counts for among the split free blocks.
    #[inline]
    pub(crate) fn of_free(blk: &Block) -> Self {
        if blk.is_split() {
            SplitDelta {
                blocks: 1,
                bytes: blk.size as i64,
            }
        } else {
            SplitDelta::default()
        }
    }

    /// The opposite change.
    #[inline]
    pub(crate) fn negated(self) -> Self {
        SplitDelta {
            blocks: -self.blocks,
            bytes: -self.bytes,
        }
    }
}

impl std::ops::AddAssign for SplitDelta {
    #[inline]
    fn add_assign(&mut self, other: Self) {
        self.blocks += other.blocks;
        self.bytes += other.bytes;
    }
}

/// A block handed out by [`Arena::hand_out`].
pub(crate) struct HandedOut {
    pub addr: u64,
    pub size: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    pub split: GrantSplit,
}

/// A block cached by [`Arena::coalesce`], after merging with its free neighbours.
pub(crate) struct Coalesced {
    pub addr: u64,
    pub size: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    /// Bytes its owner had asked for.
    pub requested: u64,
    pub split: SplitDelta,
}

impl Arena {
    /// Best fit for `req` in its (pool, stream, class) free list, under `rules`' oversize
    /// rules. The block stays listed; [`Arena::hand_out`] takes it out (or puts its split
    /// remainder in its place). `skip_expandable`: blocks of expandable segments are passed
    /// over. `PLAIN`: no garbage collection and nothing to pass over (the caller's fast path).
    #[inline(always)]
    pub(crate) fn find_free<const PLAIN: bool>(
        &mut self,
        rules: FitRules,
        req: &Request,
        skip_expandable: bool,
    ) -> Option<Found> {
        let Request {
            pool,
            stream,
            class,
            rounded,
            ..
        } = *req;
        let gc = !PLAIN && rules.gc;
        let skip_expandable = !PLAIN && skip_expandable;
        let p = self.free.of_pool_mut(pool);
        if gc {
            p.gc_clock[class_index(class)] += 1;
        }
        let list = p.list_mut(stream, class == SizeClass::Small);
        let mut i = list.lower_bound(rounded);
        if skip_expandable {
            while let Some(k) = list.get(i) {
                if !self.blocks.get(k.id).expandable {
                    break;
                }
                i += 1;
            }
        }
        let key = list.get(i)?;
        if rules.too_large(rounded, key.size) {
            return None;
        }
        Some(Found {
            block: key.id,
            slot: i,
        })
    }

    /// Hands block `b` out for `req`, splitting the remainder off when `rules` allow it and
    /// `no_split` does not forbid it for the block's pool. `slot` is the block's index in its
    /// free list if it is listed (it leaves the list, or its remainder takes its place), `None`
    /// for a new segment's block. `small`: the block's class, which the caller knows.
    /// `PLAIN`: the block is in the default pool and garbage collection is off.
    #[inline(always)]
    pub(crate) fn hand_out<const PLAIN: bool>(
        &mut self,
        rules: FitRules,
        b: BlockId,
        slot: Option<usize>,
        req: &Request,
        small: bool,
        no_split: impl FnOnce(PoolId) -> bool,
    ) -> HandedOut {
        let (rounded, requested) = (req.rounded, req.size);
        let blk = self.blocks.get_mut(b);
        debug_assert_eq!(small, blk.small, "grant of a block of the other class");
        let block_pool = if PLAIN { PoolId::DEFAULT } else { blk.pool };
        let (addr, size, stream, already_split, expandable) = (
            blk.addr,
            blk.size,
            blk.stream,
            blk.is_split(),
            blk.expandable,
        );
        // Marked first, so that nothing runs between the branches below and the caller's
        // reading of the split change (each branch's change then reaches the statistics
        // without a switch).
        blk.status = Status::Allocated;
        blk.requested = requested;
        blk.generation = blk.generation.wrapping_add(1);
        blk.uses.clear();
        blk.capture = None;
        // Blocks of expandable segments split like small ones (PyTorch).
        if !no_split(block_pool) && rules.splits(size, small || expandable, rounded) {
            let blk = self.blocks.get(b);
            let old_next = blk.next;
            let rem = NewBlock {
                addr: addr + rounded,
                size: size - rounded,
                stream,
                pool: block_pool,
                small,
                expandable,
                segment: blk.segment,
                prev: b,
                next: old_next,
            };
            let (rem_addr, rem_size) = (rem.addr, rem.size);
            let r = self.blocks.insert(rem);
            if old_next != NONE {
                self.blocks.get_mut(old_next).prev = r;
            }
            let blk = self.blocks.get_mut(b);
            blk.next = r;
            blk.size = rounded;
            // The remainder takes the place of the block it was split from (in the list that
            // block was found in).
            let key = FreeKey {
                size: rem_size,
                addr: rem_addr,
                id: r,
            };
            let p = self.free.of_pool_mut(block_pool);
            let list = p.list_mut(stream, small);
            match slot {
                Some(i) => list.replace_with_smaller(i, key),
                None => list.insert(key),
            }
            if !PLAIN {
                // Read by garbage collection only, which is never on when plain.
                self.blocks.get_mut(r).gc_base = p.gc_clock[usize::from(!small)];
            }
            HandedOut {
                addr,
                size: rounded,
                stream,
                pool: block_pool,
                split: if already_split {
                    GrantSplit::Resplit(rounded)
                } else {
                    GrantSplit::NewRemainder(rem_size)
                },
            }
        } else {
            if let Some(i) = slot {
                self.free
                    .of_pool_mut(block_pool)
                    .list_mut(stream, small)
                    .take(i);
            }
            HandedOut {
                addr,
                size,
                stream,
                pool: block_pool,
                split: if already_split {
                    GrantSplit::TakenWhole(size)
                } else {
                    GrantSplit::Unchanged
                },
            }
        }
    }

    /// PyTorch's `free_block` on the arena's side: block `b` merges with its free neighbours
    /// and the merged block is cached in its free list. `small`: the block's class. `PLAIN`:
    /// garbage collection is off (the free-list clock is not read).
    #[inline(always)]
    pub(crate) fn coalesce<const PLAIN: bool>(&mut self, b: BlockId, small: bool) -> Coalesced {
        let blk = self.blocks.get(b);
        debug_assert_eq!(small, blk.small, "free of a block of the other class");
        let (requested, stream, pool) = (blk.requested, blk.stream, blk.pool);
        let (prev, next) = (blk.prev, blk.next);
        let is_free = |n: BlockId| n != NONE && self.blocks.get(n).status == Status::Free;
        let (prev_free, next_free) = (is_free(prev), is_free(next));
        // A block and its neighbours lie in one segment, hence in one free list.
        let mut split = SplitDelta::default();
        // The merged block takes the free-list place of the last free neighbour (usually
        // overwriting its entry); the previous one, when both are free, leaves the list.
        let mut slot = None;
        if prev_free {
            let key = self.blocks.free_key(prev);
            let list = self.free.of_pool_mut(pool).list_mut(stream, small);
            if next_free {
                let removed = list.remove(key);
                debug_assert!(removed, "free block missing from its free list");
            } else {
                slot = list.position(key);
            }
            let n = self.blocks.get(prev);
            let (n_addr, n_size, n_prev, seg) = (n.addr, n.size, n.prev, n.segment);
            let blk = self.blocks.get_mut(b);
            blk.addr = n_addr;
            blk.prev = n_prev;
            blk.size += n_size;
            if n_prev != NONE {
                self.blocks.get_mut(n_prev).next = b;
            }
            let segment = self.segments.get_mut(seg);
            if segment.head == prev {
                segment.head = b;
            }
            self.blocks.remove(prev);
            split.blocks -= 1;
            split.bytes -= n_size as i64;
        }
        if next_free {
            let key = self.blocks.free_key(next);
            slot = self
                .free
                .of_pool_mut(pool)
                .list_mut(stream, small)
                .position(key);
            let n = self.blocks.get(next);
            let (n_size, n_next) = (n.size, n.next);
            let blk = self.blocks.get_mut(b);
            blk.next = n_next;
            blk.size += n_size;
            if n_next != NONE {
                self.blocks.get_mut(n_next).prev = b;
            }
            self.blocks.remove(next);
            split.blocks -= 1;
            split.bytes -= n_size as i64;
        }
        debug_assert!(
            slot.is_some() || !(prev_free || next_free),
            "free neighbour missing from its free list"
        );
        let p = self.free.of_pool_mut(pool);
        // Without garbage collection (always so when plain) the clock is never read.
        let gc_base = if PLAIN {
            0
        } else {
            p.gc_clock[usize::from(!small)]
        };
        let blk = self.blocks.get_mut(b);
        blk.requested = 0;
        blk.uses.clear();
        blk.status = Status::Free;
        blk.gc_base = gc_base;
        let (addr, size, is_split) = (blk.addr, blk.size, blk.is_split());
        let key = FreeKey { size, addr, id: b };
        let list = p.list_mut(stream, small);
        match slot {
            // The merged block takes the place of the free neighbour it absorbed.
            Some(i) => list.replace_with_larger(i, key),
            None => list.insert(key),
        }
        if is_split {
            split.blocks += 1;
            split.bytes += size as i64;
        }
        Coalesced {
            addr,
            size,
            stream,
            pool,
            requested,
            split,
        }
    }
}
