//! The allocator's state machine: malloc (best fit, split, segment allocation, the
//! out-of-memory ladder), free (cross-stream deferral, coalescing), release of segments,
//! garbage collection, statistics and history. Everything here runs under the allocator lock.

mod expandable;
mod lifetime;
mod miss;

pub(crate) use miss::Request;

use crate::arena::{Arena, Shape};
use crate::block::{BlockId, NewBlock, Segment, Status, NONE};
use crate::config::AllocatorConfig;
use crate::error::AllocError;
use crate::free_list::{class_index, FreeKey};
use crate::keepalive::Keepalive;
use crate::private_pool::{Diversion, PoolFilter, PrivatePools};
use crate::reclaim::{add_use, Reclaimer};
use crate::size::{self, SizeClass};
use crate::snapshot::{
    BlockSnapshot, BlockState, History, HistoryAction, MemorySnapshot, PoolId, SegmentSnapshot,
    SegmentType,
};
use crate::stats::{MemoryStats, PendingByClass};
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::{
    CaptureId, Device, DevicePtr, DeviceSlice, Domain, Stream, StreamId, StreamPosition,
};

mod restore;

/// Requests of at least this many bytes are refused outright (PyTorch's 1 EB check).
pub(crate) const ONE_EXA_BYTES: u64 = 1 << 60;

/// With lazy polling, events are also queried at every allocation once this many are
/// outstanding (torch_npu's `kLazyQuerySize`).
const LAZY_QUERY_SIZE: usize = 512;

/// A free block [`State::find_free`] chose, with its index in its free list.
#[derive(Clone, Copy)]
struct Found {
    block: BlockId,
    slot: usize,
}

/// A block handed to a buffer.
pub(crate) struct Granted {
    pub block: BlockId,
    pub addr: u64,
    pub size: u64,
    pub pool: PoolId,
}

enum SegmentFailure {
    OutOfMemory,
    Other(HalError),
}

pub(crate) struct State<B: Backend> {
    pub config: AllocatorConfig,
    /// Blocks, segments and free lists.
    arena: Arena,
    /// Frees waiting for uses on other streams, their events, and stream handles.
    pending: Reclaimer<B>,
    /// Private pools and the diversions into them.
    pub pools: PrivatePools,
    /// Internal form: `freed` fields hold their base and `all.allocated` is derived; the
    /// public statistics are [`MemoryStats::view`].
    pub stats: MemoryStats,
    /// Pending blocks per class, from which `active` statistics are derived.
    pub pending_by_class: PendingByClass,
    pub history: History,
    device_total: u64,
    /// Cap on reserved bytes from memory_fraction / limit_bytes.
    allowed_max: Option<u64>,
    /// Whether the backend wants block lifetimes (`hal::Device::wants_sub_allocation_notes`).
    note_lifetimes: bool,
    /// Live buffers and the self-reference that keeps the allocator alive for them.
    pub keepalive: Keepalive<B>,
    /// The backend's virtual-memory page size (`None`: no expandable segments possible).
    vmm_granularity: Option<u64>,
    /// The expandable segment of each (stream, small) that has one.
    expandable: Vec<expandable::Expandable>,
    /// Whether `roundup_power2_divisions` rounds any size (fixed at creation); without it a
    /// request is only rounded to the block size.
    power2_rounding: bool,
    /// Allocation lifetimes per size (`lifetime_placement`).
    lifetimes: lifetime::Lifetimes,
    /// Whether nothing optional that a cache hit would consult is on (see
    /// [`State::refresh_plain`]): hits then skip those checks.
    plain: bool,
}

impl<B: Backend> State<B> {
    pub(crate) fn new(
        config: AllocatorConfig,
        device_total: u64,
        note_lifetimes: bool,
        vmm_granularity: Option<u64>,
    ) -> Self {
        let history = History::new(config.record_history, config.history_size);
        let mut state = State {
            stats: MemoryStats {
                max_split_size: config.max_split_size,
                ..MemoryStats::default()
            },
            config,
            arena: Arena::new(),
            pending_by_class: PendingByClass::default(),
            pending: Reclaimer::default(),
            pools: PrivatePools::default(),
            history,
            device_total,
            allowed_max: None,
            note_lifetimes,
            keepalive: Keepalive::default(),
            vmm_granularity,
            expandable: Vec::new(),
            power2_rounding: false,
            lifetimes: lifetime::Lifetimes::default(),
            plain: false,
        };
        state.power2_rounding = state.config.roundup_power2_divisions.iter().any(|&d| d > 1);
        state.update_allowed_max();
        state.refresh_plain();
        state
    }

    /// Recomputes [`State::plain`]; called whenever one of its inputs changes (history on or
    /// off, expandable segments toggled). Plain means: no power-of-two rounding, no
    /// lifetime placement, no garbage collection, no history, and no expandable blocks to
    /// pass over.
    pub(crate) fn refresh_plain(&mut self) {
        self.plain = self.compute_plain();
    }

    fn compute_plain(&self) -> bool {
        !self.power2_rounding
            && !self.config.lifetime_placement
            && self.config.garbage_collection_threshold <= 0.0
            && !self.history.enabled()
            && !self.skip_expandable()
    }

    pub(crate) fn update_allowed_max(&mut self) {
        let by_fraction = self
            .config
            .memory_fraction
            .map(|f| (f * self.device_total as f64) as u64);
        self.allowed_max = match (by_fraction, self.config.limit_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    pub(crate) fn allowed_max(&self) -> Option<u64> {
        self.allowed_max
    }

    // ----- private pools -----

    /// Where an allocation on `stream` goes: the newest diversion whose filter selects it, else
    /// the default pool; and the capture it serves when it goes to a private pool from a
    /// capturing stream.
    fn route(&self, stream: &Stream<B>) -> (PoolId, Option<CaptureId>) {
        if self.pools.diversions.is_empty() {
            return (PoolId::DEFAULT, None);
        }
        let domain = if self
            .pools
            .diversions
            .iter()
            .any(|d| d.filter.needs_domain())
        {
            stream.domain()
        } else {
            Domain::Eager
        };
        for d in self.pools.diversions.iter().rev() {
            if d.filter.matches(stream.id(), domain) {
                let capture = match stream.domain() {
                    Domain::Capture(c) => Some(c),
                    Domain::Eager => None,
                };
                return (d.pool, capture);
            }
        }
        (PoolId::DEFAULT, None)
    }

    pub(crate) fn begin_diversion(
        &mut self,
        pool: PoolId,
        filter: PoolFilter,
    ) -> Result<u64, AllocError> {
        let Some(p) = self.pools.get_mut(pool) else {
            return Err(AllocError::InvalidArgument(format!(
                "private pool {} no longer exists",
                pool.0
            )));
        };
        if p.diversions > 0 {
            return Err(AllocError::PoolBusy { pool: pool.0 });
        }
        p.diversions += 1;
        p.use_count += 1;
        let token = self.pools.next_token();
        tracing::debug!(
            pool = pool.0,
            ?filter,
            "allocations diverted to a private pool"
        );
        self.pools.diversions.push(Diversion {
            token,
            pool,
            filter,
        });
        Ok(token)
    }

    pub(crate) fn end_diversion(&mut self, dev: &Device<B>, token: u64) {
        let Some(i) = self.pools.diversions.iter().position(|d| d.token == token) else {
            return;
        };
        let d = self.pools.diversions.remove(i);
        if let Some(p) = self.pools.get_mut(d.pool) {
            p.diversions = p.diversions.saturating_sub(1);
        }
        tracing::debug!(pool = d.pool.0, "diversion to a private pool ended");
        self.release_pool(dev, d.pool);
    }

    /// One user of `pool` is gone. At zero the pool becomes freeable: its cached segments go
    /// back to the device, and it disappears once it holds no segment.
    pub(crate) fn release_pool(&mut self, dev: &Device<B>, pool: PoolId) {
        let Some(p) = self.pools.get_mut(pool) else {
            return;
        };
        p.use_count = p.use_count.saturating_sub(1);
        if p.use_count > 0 {
            return;
        }
        tracing::debug!(pool = pool.0, "private pool released by its last user");
        self.release_cached_segments(dev, pool);
        self.forget_empty_pools();
    }

    /// Erases freeable pools that hold no segment.
    fn forget_empty_pools(&mut self) {
        for id in self.pools.freeable() {
            if self.pools.get(id).is_some_and(|p| p.segments == 0) {
                self.pools.remove(id);
                self.arena.free.remove_pool(id);
                tracing::debug!(pool = id.0, "private pool gone");
            }
        }
    }

    // ----- malloc -----

    #[inline]
    pub(crate) fn malloc(
        &mut self,
        dev: &Device<B>,
        stream: &Stream<B>,
        size: u64,
    ) -> Result<Granted, AllocError> {
        if size >= ONE_EXA_BYTES {
            return Err(AllocError::ExceedsMaxAllocation { requested: size });
        }
        // `let else` rather than `ok_or`: the error value is built (and dropped) only on
        // overflow, not on every allocation.
        let rounded = if self.power2_rounding {
            let Some(rounded) = size::round_size(&self.config, size) else {
                return Err(AllocError::SizeOverflow { requested: size });
            };
            rounded
        } else {
            // Below 1 EiB, rounding to the (power-of-two) block size cannot overflow.
            size::round_to_block(&self.config, size)
        };
        let req = Request {
            stream: stream.id(),
            pool: PoolId::DEFAULT,
            class: size::class_of(&self.config, rounded),
            size,
            rounded,
        };
        if self.plain && self.pools.diversions.is_empty() && self.pending.blocks.is_empty() {
            return self.malloc_plain(dev, stream, req);
        }
        self.pending.remember(stream);
        let (pool, capture) = if self.pools.diversions.is_empty() {
            (PoolId::DEFAULT, None)
        } else {
            self.route(stream)
        };

        // Reclaim cross-stream frees whose uses are now ordered (no work at all when none).
        // During a capture only the ordering model is consulted: no event is queried.
        if !self.pending.blocks.is_empty() {
            let capturing = dev.is_capturing();
            let query = !capturing
                && (!self.config.lazy_event_polling
                    || self.pending.outstanding() > LAZY_QUERY_SIZE);
            self.process_pending(dev, query);
        }

        let req = Request { pool, ..req };
        let granted = if self.config.lifetime_placement {
            self.malloc_by_lifetime(dev, req)
        } else {
            self.malloc_in(dev, req)
        };
        if let Ok(g) = &granted {
            // `grant` cleared it.
            if capture.is_some() {
                self.arena.blocks.get_mut(g.block).capture = capture;
            }
            self.note_lifetime(dev, g.block, true);
        }
        granted
    }

    /// [`State::malloc`] when [`State::plain`], with no diversion and no pending free: best
    /// fit in the default pool, else the miss path. The cache hit is inlined here.
    ///
    /// Only a miss remembers the stream's handle: a block cached for a stream was made by a
    /// miss on that stream (free lists are per stream, and blocks keep their stream), so on a
    /// hit the stream is known already.
    #[inline(always)]
    fn malloc_plain(
        &mut self,
        dev: &Device<B>,
        stream: &Stream<B>,
        req: Request,
    ) -> Result<Granted, AllocError> {
        // One copy of the grant per class: the class's branches fold away in each.
        let found = self.find_free::<true>(req);
        debug_assert!(
            found.is_none() || self.pending.knows(req.stream),
            "a cache hit on a stream the allocator never saw"
        );
        let granted = match (found, req.class) {
            (Some(f), SizeClass::Small) => {
                self.grant_inline::<true>(f.block, Some(f.slot), req, true)
            }
            (Some(f), SizeClass::Large) => {
                self.grant_inline::<true>(f.block, Some(f.slot), req, false)
            }
            // A copy: the miss takes its request by reference, and the one the hit reads stays in
            // registers (passing `req` itself makes it live in memory on the hit too).
            (None, _) => {
                self.pending.remember(stream);
                self.malloc_miss(dev, &{ req })?
            }
        };
        self.note_lifetime(dev, granted.block, true);
        Ok(granted)
    }

    #[inline(always)]
    fn malloc_in(&mut self, dev: &Device<B>, req: Request) -> Result<Granted, AllocError> {
        if let Some(f) = self.find_free::<false>(req) {
            return Ok(self.grant_found(f, req));
        }
        self.malloc_miss(dev, &req)
    }

    /// Best fit in the (pool, stream, class) free list, with PyTorch's oversize rules. The
    /// block stays listed; [`State::grant`] takes it out (or puts its split remainder in its
    /// place). `PLAIN`: called when [`State::plain`] (no GC clock, no expandable blocks to
    /// pass over).
    #[inline(always)]
    fn find_free<const PLAIN: bool>(&mut self, req: Request) -> Option<Found> {
        let Request {
            pool,
            stream,
            class,
            rounded,
            ..
        } = req;
        let max_split = self.config.max_split_size;
        let non_split = self.config.max_non_split_rounding;
        let gc = !PLAIN && self.config.garbage_collection_threshold > 0.0;
        let skip_expandable = !PLAIN && self.skip_expandable();
        let p = self.arena.free.of_pool_mut(pool);
        if gc {
            p.gc_clock[class_index(class)] += 1;
        }
        let list = p.list_mut(stream, class == SizeClass::Small);
        let mut i = list.lower_bound(rounded);
        if skip_expandable {
            i = expandable::first_normal(list, &self.arena.blocks, i);
        }
        let key = list.get(i)?;
        if rounded < max_split && key.size >= max_split {
            return None;
        }
        if rounded >= max_split && key.size >= rounded.saturating_add(non_split) {
            return None;
        }
        Some(Found {
            block: key.id,
            slot: i,
        })
    }

    #[inline(always)]
    fn should_split(&self, pool: PoolId, block_size: u64, small: bool, rounded: u64) -> bool {
        if self.pools.no_split(pool) {
            return false;
        }
        let remaining = block_size - rounded;
        if small {
            remaining >= self.config.min_block_size
        } else {
            rounded < self.config.max_split_size
                && (remaining > self.config.small_size
                    || (self.config.split_large_remainders
                        && remaining >= self.config.min_block_size))
        }
    }

    /// [`State::grant`] of a block [`State::find_free`] found.
    #[inline(always)]
    fn grant_found(&mut self, f: Found, req: Request) -> Granted {
        self.grant(f.block, Some(f.slot), req)
    }

    /// Hands block `b` out for a request of `requested` bytes rounded to `rounded`, splitting
    /// off the remainder when the rules allow. `slot` is the block's index in its free list if
    /// it is listed (it leaves the list, or its remainder takes its place), `None` for a new
    /// segment's block.
    #[inline(never)]
    fn grant(&mut self, b: BlockId, slot: Option<usize>, req: Request) -> Granted {
        let small = self.arena.blocks.get(b).small;
        self.grant_inline::<false>(b, slot, req, small)
    }

    /// [`State::grant`], inlined into the plain cache-hit path. `PLAIN`: block `b` is in the
    /// default pool and [`State::plain`] holds (no history to record). `small`: the block's
    /// class, which the caller knows (a constant on the cache-hit path).
    #[inline(always)]
    fn grant_inline<const PLAIN: bool>(
        &mut self,
        b: BlockId,
        slot: Option<usize>,
        req: Request,
        small: bool,
    ) -> Granted {
        let (rounded, requested) = (req.rounded, req.size);
        let (size, already_split, block_pool, expandable) = {
            let blk = self.arena.blocks.get(b);
            debug_assert_eq!(small, blk.small, "grant of a block of the other class");
            let pool = if PLAIN { PoolId::DEFAULT } else { blk.pool };
            (blk.size, blk.is_split(), pool, blk.expandable)
        };
        // Blocks of expandable segments split like small ones (PyTorch).
        if self.should_split(block_pool, size, small || expandable, rounded) {
            let blk = self.arena.blocks.get(b);
            let (stream, old_next) = (blk.stream, blk.next);
            let rem = NewBlock {
                addr: blk.addr + rounded,
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
            let r = self.arena.blocks.insert(rem);
            if old_next != NONE {
                self.arena.blocks.get_mut(old_next).prev = r;
            }
            let blk = self.arena.blocks.get_mut(b);
            blk.next = r;
            blk.size = rounded;
            // The remainder takes the place of the block it was split from (in the list that
            // block was found in).
            let key = FreeKey {
                size: rem_size,
                addr: rem_addr,
                id: r,
            };
            let p = self.arena.free.of_pool_mut(block_pool);
            let list = p.list_mut(stream, small);
            match slot {
                Some(i) => list.replace_with_smaller(i, key),
                None => list.insert(key),
            }
            if !PLAIN {
                // Read by garbage collection only, which is never on when plain.
                self.arena.blocks.get_mut(r).gc_base = p.gc_clock[usize::from(!small)];
            }
            if already_split {
                self.stats.inactive_split_bytes.decrease(small, rounded);
            } else {
                self.stats.inactive_split_bytes.increase(small, rem_size);
                self.stats.inactive_split.increase(small, 1);
            }
        } else {
            if let Some(i) = slot {
                let blk = self.arena.blocks.get(b);
                let (pool, stream) = (blk.pool, blk.stream);
                self.arena
                    .free
                    .of_pool_mut(pool)
                    .list_mut(stream, small)
                    .take(i);
            }
            if already_split {
                self.stats.inactive_split_bytes.decrease(small, size);
                self.stats.inactive_split.decrease(small, 1);
            }
        }
        let blk = self.arena.blocks.get_mut(b);
        blk.status = Status::Allocated;
        blk.requested = requested;
        blk.generation = blk.generation.wrapping_add(1);
        blk.uses.clear();
        blk.capture = None;
        let (addr, size, stream) = (blk.addr, blk.size, blk.stream);
        let pool = block_pool;
        if let Some(p) = self.pools.get_mut(pool) {
            p.allocated_bytes += size;
            p.allocated_blocks += 1;
        }
        let s = &mut self.stats;
        s.grant(small, size, requested, &self.pending_by_class);
        if size >= self.config.max_split_size {
            s.oversize_allocations.increase(1);
        }
        if !PLAIN {
            self.history
                .record(HistoryAction::Alloc, addr, size, stream, pool);
        }
        Granted {
            block: b,
            addr,
            size,
            pool,
        }
    }

    fn alloc_segment(
        &mut self,
        dev: &Device<B>,
        stream: StreamId,
        pool: PoolId,
        class: SizeClass,
        seg_size: u64,
    ) -> Result<BlockId, SegmentFailure> {
        let reserved = self.stats.reserved_bytes.all.current;
        if let Some(max) = self.allowed_max {
            if reserved.saturating_add(seg_size) > max {
                tracing::debug!(
                    seg_size,
                    reserved,
                    max,
                    "segment allocation refused by the memory limit"
                );
                return Err(SegmentFailure::OutOfMemory);
            }
        }
        let ptr = match dev.hal().alloc(seg_size) {
            Ok(ptr) => ptr,
            Err(HalError::OutOfMemory { .. }) => {
                tracing::debug!(seg_size, reserved, "device out of memory for a new segment");
                return Err(SegmentFailure::OutOfMemory);
            }
            Err(e) => return Err(SegmentFailure::Other(e)),
        };
        let small = class == SizeClass::Small;
        let seg = self.arena.segments.insert(Segment {
            addr: ptr.0,
            size: seg_size,
            stream,
            pool,
            small,
            head: NONE,
            live: true,
            expandable: None,
        });
        let b = self.arena.blocks.insert(NewBlock {
            addr: ptr.0,
            size: seg_size,
            stream,
            pool,
            small,
            expandable: false,
            segment: seg,
            prev: NONE,
            next: NONE,
        });
        self.arena.segments.get_mut(seg).head = b;
        if let Some(p) = self.pools.get_mut(pool) {
            p.segments += 1;
            p.reserved_bytes += seg_size;
        }
        let s = &mut self.stats;
        s.segment.increase(small, 1);
        s.reserved_bytes.increase(small, seg_size);
        s.num_device_alloc += 1;
        if seg_size >= self.config.max_split_size {
            s.oversize_segments.increase(1);
        }
        self.history
            .record(HistoryAction::SegmentAlloc, ptr.0, seg_size, stream, pool);
        tracing::debug!(ptr = %ptr, seg_size, stream = stream.0, "cache miss: segment allocated");
        Ok(b)
    }

    // ----- free -----

    /// The owner dropped the buffer of block `b`.
    #[inline]
    pub(crate) fn free(&mut self, dev: &Device<B>, b: BlockId) {
        let small = self.arena.blocks.get(b).small;
        match (self.plain, small) {
            // One copy per class when plain: the class's branches fold away in each.
            (true, true) => self.free_in::<true>(dev, b, true),
            (true, false) => self.free_in::<true>(dev, b, false),
            (false, _) => self.free_in::<false>(dev, b, small),
        }
    }

    /// [`State::free`]; `PLAIN`: [`State::plain`] holds (no history, no lifetime placement).
    /// `small`: the block's class.
    #[inline(always)]
    fn free_in<const PLAIN: bool>(&mut self, dev: &Device<B>, b: BlockId, small: bool) {
        let blk = self.arena.blocks.get(b);
        if blk.status != Status::Allocated {
            debug_assert!(false, "free of a block that is not allocated");
            return;
        }
        let (addr, size, stream, pool) = (blk.addr, blk.size, blk.stream, blk.pool);
        self.stats.release(small, size);
        if size >= self.config.max_split_size {
            self.stats.oversize_allocations.decrease(1);
        }
        if let Some(p) = self.pools.get_mut(pool) {
            p.allocated_bytes = p.allocated_bytes.saturating_sub(size);
            p.allocated_blocks = p.allocated_blocks.saturating_sub(1);
        }
        if !PLAIN {
            self.history
                .record(HistoryAction::FreeRequested, addr, size, stream, pool);
            if self.config.lifetime_placement {
                self.lifetimes.died(b);
            }
        }
        if self.arena.blocks.get(b).uses.is_empty() {
            self.free_block_in::<PLAIN>(dev, b, small);
            return;
        }
        self.free_with_uses(dev, b);
    }

    /// [`State::free`] of a block with uses on other streams: fill record_stream positions,
    /// drop uses already ordered, and keep the block pending on the rest.
    #[cold]
    #[inline(never)]
    fn free_with_uses(&mut self, dev: &Device<B>, b: BlockId) {
        let blk = self.arena.blocks.get(b);
        let (size, small) = (blk.size, blk.small);
        let capturing = dev.is_capturing();
        if self.pending.settle(dev, &mut self.arena.blocks, b) {
            self.stats.num_released_without_event += 1;
            self.free_block(dev, b);
            return;
        }
        let blk = self.arena.blocks.get_mut(b);
        blk.status = Status::Pending;
        blk.generation = blk.generation.wrapping_add(1);
        self.pending.blocks.push(b);
        self.stats.pending_free_bytes.increase(size);
        self.pending_by_class.add(small, size);
        self.stats.num_pending_frees += 1;
        if !capturing {
            self.pending
                .record_events(dev, &mut self.arena.blocks, b, &mut self.stats);
        }
    }

    /// Tells the backend that block `b` starts (`alive`) or ends a lifetime, so a memory checker
    /// (the simulator's sanitizer) sees blocks reused inside a segment. Only default-pool blocks
    /// allocated outside captures are declared: captured blocks are touched at every replay,
    /// long after the capture freed them, and a private pool's segments stay whole to the
    /// checker.
    #[inline(always)]
    fn note_lifetime(&mut self, dev: &Device<B>, b: BlockId, alive: bool) {
        if self.note_lifetimes {
            self.note_lifetime_slow(dev, b, alive);
        }
    }

    #[cold]
    #[inline(never)]
    fn note_lifetime_slow(&mut self, dev: &Device<B>, b: BlockId, alive: bool) {
        let blk = self.arena.blocks.get(b);
        if blk.pool != PoolId::DEFAULT || blk.capture.is_some() {
            return;
        }
        let owner_id = blk.stream;
        let Some(owner) = self.pending.stream(dev, owner_id) else {
            return;
        };
        let blk = self.arena.blocks.get(b);
        let range = DeviceSlice::new(DevicePtr(blk.addr), blk.size);
        let result = if alive {
            dev.hal().note_sub_alloc(range, owner.hal())
        } else {
            dev.hal().note_sub_free(range, owner.hal())
        };
        if let Err(err) = result {
            tracing::warn!(%err, addr = blk.addr, size = blk.size, "backend refused a block lifetime note");
        }
    }

    /// PyTorch's `free_block`: coalesce with free neighbours and cache.
    #[inline(never)]
    fn free_block(&mut self, dev: &Device<B>, b: BlockId) {
        let small = self.arena.blocks.get(b).small;
        self.free_block_in::<false>(dev, b, small);
    }

    /// [`State::free_block`]; `PLAIN`: [`State::plain`] holds (no history, no GC clock).
    /// `small`: the block's class.
    #[inline(always)]
    fn free_block_in<const PLAIN: bool>(&mut self, dev: &Device<B>, b: BlockId, small: bool) {
        self.note_lifetime(dev, b, false);
        let blk = self.arena.blocks.get(b);
        debug_assert_eq!(small, blk.small, "free of a block of the other class");
        let (requested, stream, pool) = (blk.requested, blk.stream, blk.pool);
        let (prev, next) = (blk.prev, blk.next);
        let is_free = |n: BlockId| n != NONE && self.arena.blocks.get(n).status == Status::Free;
        let (prev_free, next_free) = (is_free(prev), is_free(next));
        // A block and its neighbours lie in one segment, hence in one free list.
        let mut net_blocks: i64 = 0;
        let mut net_bytes: i64 = 0;
        // The merged block takes the free-list place of the last free neighbour (usually
        // overwriting its entry); the previous one, when both are free, leaves the list.
        let mut slot = None;
        if prev_free {
            let key = self.arena.blocks.free_key(prev);
            let list = self.arena.free.of_pool_mut(pool).list_mut(stream, small);
            if next_free {
                let removed = list.remove(key);
                debug_assert!(removed, "free block missing from its free list");
            } else {
                slot = list.position(key);
            }
            let n = self.arena.blocks.get(prev);
            let (n_addr, n_size, n_prev, seg) = (n.addr, n.size, n.prev, n.segment);
            let blk = self.arena.blocks.get_mut(b);
            blk.addr = n_addr;
            blk.prev = n_prev;
            blk.size += n_size;
            if n_prev != NONE {
                self.arena.blocks.get_mut(n_prev).next = b;
            }
            let segment = self.arena.segments.get_mut(seg);
            if segment.head == prev {
                segment.head = b;
            }
            self.arena.blocks.remove(prev);
            net_blocks -= 1;
            net_bytes -= n_size as i64;
        }
        if next_free {
            let key = self.arena.blocks.free_key(next);
            slot = self
                .arena
                .free
                .of_pool_mut(pool)
                .list_mut(stream, small)
                .position(key);
            let n = self.arena.blocks.get(next);
            let (n_size, n_next) = (n.size, n.next);
            let blk = self.arena.blocks.get_mut(b);
            blk.next = n_next;
            blk.size += n_size;
            if n_next != NONE {
                self.arena.blocks.get_mut(n_next).prev = b;
            }
            self.arena.blocks.remove(next);
            net_blocks -= 1;
            net_bytes -= n_size as i64;
        }
        debug_assert!(
            slot.is_some() || !(prev_free || next_free),
            "free neighbour missing from its free list"
        );
        let p = self.arena.free.of_pool_mut(pool);
        // Without garbage collection (always so when plain) the clock is never read.
        let gc_base = if PLAIN {
            0
        } else {
            p.gc_clock[usize::from(!small)]
        };
        let blk = self.arena.blocks.get_mut(b);
        blk.requested = 0;
        blk.uses.clear();
        blk.status = Status::Free;
        blk.gc_base = gc_base;
        let (addr, size, split) = (blk.addr, blk.size, blk.is_split());
        let key = FreeKey { size, addr, id: b };
        let list = p.list_mut(stream, small);
        match slot {
            // The merged block takes the place of the free neighbour it absorbed.
            Some(i) => list.replace_with_larger(i, key),
            None => list.insert(key),
        }
        if split {
            net_blocks += 1;
            net_bytes += size as i64;
        }
        let s = &mut self.stats;
        if net_blocks > 0 {
            s.inactive_split.increase(small, net_blocks as u64);
        } else if net_blocks < 0 {
            s.inactive_split.decrease(small, (-net_blocks) as u64);
        }
        if net_bytes > 0 {
            s.inactive_split_bytes.increase(small, net_bytes as u64);
        } else if net_bytes < 0 {
            s.inactive_split_bytes.decrease(small, (-net_bytes) as u64);
        }
        s.deactivate(small, requested);
        if !PLAIN {
            self.history
                .record(HistoryAction::FreeCompleted, addr, size, stream, pool);
        }
    }

    // ----- cross-stream uses -----

    /// `record_stream`: the block must not be reused before the work submitted to `stream` up
    /// to the free has completed (ordered before the owner's next work).
    pub(crate) fn record_stream(&mut self, b: BlockId, stream: &Stream<B>) {
        let blk = self.arena.blocks.get(b);
        if blk.status != Status::Allocated || blk.stream == stream.id() {
            return;
        }
        self.pending.remember(stream);
        add_use(&mut self.arena.blocks.get_mut(b).uses, stream.id(), None);
    }

    /// `erase_stream`: forgets the uses of allocated block `b` by `stream` (recorded or
    /// noted); the caller promises the stream no longer uses it.
    pub(crate) fn erase_stream(&mut self, b: BlockId, stream: StreamId) {
        let blk = self.arena.blocks.get_mut(b);
        if blk.status == Status::Allocated {
            blk.uses.retain(|u| u.stream != stream);
        }
    }

    /// Automatic mode: work at `pos` uses `[start, end)`. A use inside a capture counts only
    /// for blocks allocated for that capture (it runs at every replay; eager memory a graph
    /// reads must outlive the graph, as in PyTorch).
    pub(crate) fn note_use(&mut self, pos: StreamPosition, start: u64, end: u64) {
        if start >= end || self.arena.segments.is_empty() {
            return;
        }
        let capture = match pos.domain {
            Domain::Eager => None,
            Domain::Capture(c) => Some(c),
        };
        // Segments overlapping the range (almost always one).
        let mut segs = [u32::MAX; 4];
        let mut n = 0;
        for s in self.arena.segments.overlapping(start, end) {
            if n == segs.len() {
                break;
            }
            segs[n] = s;
            n += 1;
        }
        for &seg in &segs[..n] {
            let mut b = self.arena.segments.get(seg).head;
            while b != NONE {
                let blk = self.arena.blocks.get_mut(b);
                if blk.addr >= end {
                    break;
                }
                let next = blk.next;
                if blk.end() > start
                    && blk.stream != pos.stream
                    && matches!(blk.status, Status::Allocated | Status::Pending)
                    && (capture.is_none() || blk.capture == capture)
                {
                    add_use(&mut blk.uses, pos.stream, Some(pos));
                }
                b = next;
            }
        }
    }

    // ----- pending processing -----

    /// Re-checks the ordering model for every pending block (after querying the oldest events
    /// per stream when `query`), records events that could not be recorded earlier, and caches
    /// the blocks whose uses are all ordered before their owner's next work.
    pub(crate) fn process_pending(&mut self, dev: &Device<B>, query: bool) {
        if self.pending.blocks.is_empty() {
            return;
        }
        let capturing = dev.is_capturing();
        if query && !capturing {
            self.pending.poll(&self.arena.blocks, &mut self.stats);
        }
        let mut i = 0;
        while i < self.pending.blocks.len() {
            let b = self.pending.blocks[i];
            if self.pending.settle(dev, &mut self.arena.blocks, b) {
                self.pending.blocks.swap_remove(i);
                let (size, small) = (
                    self.arena.blocks.get(b).size,
                    self.arena.blocks.get(b).small,
                );
                self.stats.pending_free_bytes.decrease(size);
                self.pending_by_class.remove(small, size);
                self.free_block(dev, b);
            } else {
                if !capturing {
                    self.pending
                        .record_events(dev, &mut self.arena.blocks, b, &mut self.stats);
                }
                i += 1;
            }
        }
    }

    /// Synchronizes every pending event (and the device, for uses no event covers), then
    /// processes the pending blocks (PyTorch's `synchronize_and_free_events`).
    pub(crate) fn synchronize_pending(&mut self, dev: &Device<B>) {
        if dev.is_capturing() {
            return;
        }
        self.stats.num_sync_all_streams += 1;
        let uncovered = self
            .pending
            .blocks
            .iter()
            .any(|&b| self.arena.blocks.get(b).uses.iter().any(|u| !u.event));
        self.pending.synchronize_all(&self.arena.blocks);
        if uncovered {
            if let Err(err) = dev.synchronize() {
                tracing::warn!(%err, "device synchronize failed while freeing pending blocks");
            }
        }
        self.process_pending(dev, false);
    }

    /// Reuses a pending block of the right size by making `stream` wait on its uses' events.
    fn reuse_pending_with_wait(&mut self, dev: &Device<B>, req: Request) -> Option<Found> {
        let Request {
            stream: sid,
            pool,
            class,
            rounded,
            ..
        } = req;
        let stream = self.pending.stream(dev, sid)?;
        let max_split = self.config.max_split_size;
        let non_split = self.config.max_non_split_rounding;
        let small = class == SizeClass::Small;
        let skip_expandable = self.skip_expandable();
        let mut best: Option<(u64, u64, BlockId)> = None;
        for &b in &self.pending.blocks {
            let blk = self.arena.blocks.get(b);
            if blk.stream != sid
                || blk.pool != pool
                || blk.small != small
                || blk.size < rounded
                || (skip_expandable && blk.expandable)
            {
                continue;
            }
            if (rounded < max_split && blk.size >= max_split)
                || (rounded >= max_split && blk.size >= rounded.saturating_add(non_split))
            {
                continue;
            }
            if !blk.uses.iter().all(|u| u.event) {
                continue;
            }
            let key = (blk.size, blk.addr, b);
            if best.is_none_or(|cur| key < cur) {
                best = Some(key);
            }
        }
        let (_, _, b) = best?;
        let generation = self.arena.blocks.get(b).generation;
        for u in self.arena.blocks.get(b).uses.iter() {
            let event = self.pending.event_for(u.stream, b, generation)?;
            if let Err(err) = stream.wait(event) {
                tracing::warn!(%err, "could not wait on a pending block's event");
                return None;
            }
        }
        self.stats.num_reuse_with_wait += 1;
        tracing::debug!(
            block_size = self.arena.blocks.get(b).size,
            stream = sid.0,
            "reusing a pending block with a stream wait"
        );
        self.process_pending(dev, false);
        self.find_free::<false>(req)
    }

    // ----- releasing segments -----

    /// Returns whole free segments to the device (one device synchronize first, as `cudaFree`
    /// implies). Refused during capture.
    fn release_blocks(&mut self, dev: &Device<B>, candidates: &[BlockId]) -> u64 {
        if candidates.is_empty() {
            return 0;
        }
        if let Err(err) = dev.synchronize() {
            tracing::warn!(%err, "not releasing cached segments: device synchronize failed");
            return 0;
        }
        let mut released = 0;
        for &b in candidates {
            let blk = self.arena.blocks.get(b);
            if blk.status != Status::Free || blk.is_split() {
                continue;
            }
            let (addr, size, small, stream, pool, seg) = (
                blk.addr,
                blk.size,
                blk.small,
                blk.stream,
                blk.pool,
                blk.segment,
            );
            if self.arena.segments.get(seg).expandable.is_some() {
                // A whole free range of an expandable segment: unmap its pages.
                released += self.unmap_free_block(dev, b);
                continue;
            }
            self.arena.uncache(b);
            // SAFETY: `addr` is the base of a segment this allocator got from this device and has
            // not freed; the segment is one free block (no buffer refers to it, no pending use),
            // and the device was just synchronized, so no queued work uses it.
            if let Err(err) = unsafe { dev.hal().free(DevicePtr(addr)) } {
                tracing::warn!(%err, addr, "returning a segment to the device failed");
                self.arena.cache(b);
                continue;
            }
            self.arena.blocks.remove(b);
            self.arena.segments.remove(seg);
            if let Some(p) = self.pools.get_mut(pool) {
                p.segments = p.segments.saturating_sub(1);
                p.reserved_bytes = p.reserved_bytes.saturating_sub(size);
            }
            let s = &mut self.stats;
            s.segment.decrease(small, 1);
            s.reserved_bytes.decrease(small, size);
            s.num_device_free += 1;
            if size >= self.config.max_split_size {
                s.oversize_segments.decrease(1);
            }
            self.history
                .record(HistoryAction::SegmentFree, addr, size, stream, pool);
            tracing::debug!(
                addr,
                size,
                stream = stream.0,
                "segment returned to the device"
            );
            released += size;
        }
        released
    }

    pub(crate) fn release_cached_segments(&mut self, dev: &Device<B>, pool: PoolId) -> u64 {
        if dev.is_capturing() {
            return 0;
        }
        let candidates = self.arena.whole_free_segments(pool);
        self.release_blocks(dev, &candidates)
    }

    /// Returns the whole cached segments of the default pool and of every freeable private
    /// pool (PyTorch's `release_cached_blocks`); pools still in use keep theirs.
    fn release_all_cached_segments(&mut self, dev: &Device<B>) -> u64 {
        if dev.is_capturing() {
            return 0;
        }
        let mut candidates = self.arena.whole_free_segments(PoolId::DEFAULT);
        for id in self.pools.freeable() {
            candidates.extend(self.arena.whole_free_segments(id));
        }
        let released = self.release_blocks(dev, &candidates) + self.trim_expandable(dev);
        self.forget_empty_pools();
        released
    }

    /// `empty_cache`: synchronize pending events, then return every whole cached segment of
    /// the default pool and of freeable private pools.
    pub(crate) fn empty_cache(&mut self, dev: &Device<B>) {
        if dev.is_capturing() {
            tracing::warn!("empty_cache skipped: a capture is active on the device");
            return;
        }
        self.synchronize_pending(dev);
        self.release_all_cached_segments(dev);
    }

    /// The allocator's last handle is gone: no buffer, pool handle, diversion or graph refers
    /// to it any more, so every block is free or pending on other streams. Pending blocks are
    /// synchronized (their events, then the device for uses no event covers) and freed, and
    /// every segment of every pool goes back to the device (one device synchronize first, as
    /// for any segment release). Nothing panics: failures are logged and the segments they
    /// concern are left to the device. During a capture nothing can be freed (the device refuses
    /// to synchronize), so the segments are left with a warning.
    pub(crate) fn release_all_on_drop(&mut self, dev: &Device<B>) {
        if self.arena.segments.is_empty() {
            return;
        }
        if dev.is_capturing() {
            tracing::warn!(
                segments = self.stats.segment.all.current,
                bytes = self.stats.reserved_bytes.all.current,
                "allocator dropped during a capture: its cached segments are not returned to the device"
            );
            return;
        }
        if !self.pending.blocks.is_empty() {
            self.synchronize_pending(dev);
        }
        if !self.pending.blocks.is_empty() {
            // Uses neither an event nor the ordering model settles (recorded inside a capture
            // that has ended, or on a stream that is gone): all eager work is finished once the
            // device is synchronized, and no graph of this allocator's pools is left to replay.
            match dev.synchronize() {
                Ok(()) => {
                    for b in std::mem::take(&mut self.pending.blocks) {
                        let (size, small) = (
                            self.arena.blocks.get(b).size,
                            self.arena.blocks.get(b).small,
                        );
                        self.stats.pending_free_bytes.decrease(size);
                        self.pending_by_class.remove(small, size);
                        self.arena.blocks.get_mut(b).uses.clear();
                        self.free_block(dev, b);
                    }
                }
                Err(err) => tracing::warn!(
                    %err,
                    "allocator dropped: device synchronize failed, blocks pending on other streams are not returned"
                ),
            }
        }
        let mut candidates = self.arena.whole_free_segments(PoolId::DEFAULT);
        for id in self.pools.ids().collect::<Vec<_>>() {
            candidates.extend(self.arena.whole_free_segments(id));
        }
        self.release_blocks(dev, &candidates);
        if !self.arena.segments.is_empty() {
            tracing::warn!(
                segments = self.stats.segment.all.current,
                bytes = self.stats.reserved_bytes.all.current,
                "allocator dropped: segments not returned to the device"
            );
        }
    }

    /// PyTorch's `release_available_cached_blocks`.
    fn release_available_cached_blocks(&mut self, dev: &Device<B>, req: Request) -> bool {
        let max_split = self.config.max_split_size;
        let key_size = req.rounded.max(max_split);
        let list = self
            .arena
            .free
            .of_pool_mut(req.pool)
            .list_mut(req.stream, req.class == SizeClass::Small);
        let i = list.lower_bound(key_size);
        let mut chosen = Vec::new();
        if let Some(k) = list.get(i) {
            chosen.push(k.id);
        } else {
            let mut total = 0;
            let mut j = list.len();
            while j > 0 && total < key_size {
                j -= 1;
                let Some(k) = list.get(j) else { break };
                if k.size < max_split {
                    break;
                }
                if !self.arena.blocks.get(k.id).is_split() {
                    chosen.push(k.id);
                    total += k.size;
                }
            }
            if total < key_size {
                return false;
            }
        }
        self.release_blocks(dev, &chosen) > 0
    }

    /// PyTorch's `garbage_collect_cached_blocks`: free old whole large segments until reserved
    /// drops below threshold × allowed.
    fn garbage_collect(&mut self, dev: &Device<B>) {
        let allowed = self.allowed_max.unwrap_or(self.device_total);
        let threshold = (self.config.garbage_collection_threshold * allowed as f64) as u64;
        let reserved = self.stats.reserved_bytes.all.current;
        if reserved <= threshold {
            return;
        }
        let target = reserved - threshold;
        let Some(p) = self.arena.free.of_pool(PoolId::DEFAULT) else {
            return;
        };
        let clock = p.gc_clock[1];
        let mut candidates: Vec<(u64, BlockId, u64)> = Vec::new();
        for (_, list) in p.lists(false) {
            for k in list.keys() {
                let blk = self.arena.blocks.get(k.id);
                if !blk.is_split() {
                    candidates.push((clock.saturating_sub(blk.gc_base), k.id, k.size));
                }
            }
        }
        let mut chosen = Vec::new();
        let mut reclaimed = 0;
        let mut total_age: u64 = candidates.iter().map(|c| c.0).sum();
        let mut count = candidates.len() as u64;
        let mut freed_one = true;
        while reclaimed < target && freed_one && count > 0 {
            let avg = total_age as f64 / count as f64;
            freed_one = false;
            for c in candidates.iter_mut() {
                if c.2 != 0 && c.0 as f64 >= avg {
                    freed_one = true;
                    reclaimed += c.2;
                    total_age -= c.0;
                    count -= 1;
                    chosen.push(c.1);
                    c.2 = 0;
                }
            }
        }
        if !chosen.is_empty() {
            tracing::debug!(
                blocks = chosen.len(),
                reclaimed,
                "garbage collecting cached segments"
            );
            self.release_blocks(dev, &chosen);
        }
    }

    // ----- introspection -----

    pub(crate) fn snapshot(&self) -> MemorySnapshot {
        let mut segments = Vec::new();
        for (_, seg) in self.arena.segments.by_addr() {
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
                let blk = self.arena.blocks.get(b);
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
            history: self.history.to_vec(),
        }
    }

    /// Internal consistency check (tests and debug builds): links, coverage, free lists and
    /// statistics agree.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        // Plain may stay off when it could be on (expandable segments toggled off, then all
        // released), never the other way.
        if self.plain && !self.compute_plain() {
            return Err("the plain cache-hit path is on while an optional feature is".into());
        }
        let shape = self.arena.check(self.pools.ids())?;
        for id in self.pools.ids() {
            let (segs, bytes) = shape.pool_segments(id);
            let p = self.pools.get(id).copied().unwrap_or_default();
            if p.segments != segs || p.reserved_bytes != bytes {
                return Err(format!(
                    "pool {}: accounts {} segments / {} bytes, holds {segs} / {bytes}",
                    id.0, p.segments, p.reserved_bytes
                ));
            }
        }
        self.check_expandable()?;
        let Shape {
            allocated,
            allocated_blocks,
            reserved,
            inactive_split,
            ..
        } = shape;
        let stats_split = (
            self.stats.inactive_split.all.current,
            self.stats.inactive_split_bytes.all.current,
        );
        if inactive_split != stats_split {
            return Err(format!(
                "inactive_split (count, bytes) {stats_split:?} but free split blocks hold {inactive_split:?}"
            ));
        }
        if allocated != self.stats.allocated_bytes.all.current {
            return Err(format!(
                "allocated_bytes {} but blocks hold {allocated}",
                self.stats.allocated_bytes.all.current
            ));
        }
        if reserved != self.stats.reserved_bytes.all.current {
            return Err(format!(
                "reserved_bytes {} but segments hold {reserved}",
                self.stats.reserved_bytes.all.current
            ));
        }
        // Every allocated block has its buffer (empty buffers hold no block).
        if self.keepalive.live_buffers() < allocated_blocks {
            return Err(format!(
                "{allocated_blocks} allocated blocks but {} live buffers",
                self.keepalive.live_buffers()
            ));
        }
        Ok(())
    }
}
