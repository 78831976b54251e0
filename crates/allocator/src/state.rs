//! The allocator's state machine, under the allocator lock: it owns the arena (blocks,
//! segments, free lists), the reclaimer (pending cross-stream frees), the private pools, the
//! statistics and the history, and decides what happens to them. Here: malloc (routing, the
//! plain cache hit, grants), free (cross-stream deferral, caching), segment allocation, block
//! lifetime notes to the backend and the invariant check. Elsewhere in `state`: the miss path
//! and its out-of-memory ladder (`miss`), pending frees (`pending`), giving memory back and
//! garbage collection (`release`), the device side of expandable segments (`expandable`),
//! lifetime placement (`lifetime`) and checkpoint restore (`restore`).

mod expandable;
mod lifetime;
mod miss;

pub(crate) use crate::arena::Request;
use crate::arena::{Arena, FitRules, Found, Shape};
use crate::block::{BlockId, NewBlock, Segment, Status, NONE};
use crate::config::AllocatorConfig;
use crate::error::AllocError;
use crate::graph_pins::{HoldKey, Pins};
use crate::keepalive::Keepalive;
use crate::private_pool::{Diversion, PoolFilter, PrivatePools};
use crate::reclaim::Reclaimer;
use crate::size::{self, SizeClass};
use crate::snapshot::{History, HistoryAction, MemorySnapshot, PoolId};
use crate::stats::{MemoryStats, PendingByClass};
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::{
    Access, CaptureId, Device, DevicePtr, DeviceSlice, Domain, SizeOverflow, Stream, StreamError,
    StreamId,
};

mod pending;
mod release;
mod restore;
mod sleep;

/// Requests of at least this many bytes are refused outright (PyTorch's 1 EB check).
pub(crate) const ONE_EXA_BYTES: u64 = 1 << 60;

/// With lazy polling, events are also queried at every allocation once this many are
/// outstanding (torch_npu's `kLazyQuerySize`).
const LAZY_QUERY_SIZE: usize = 512;

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
    /// Whether `roundup_power2_divisions` rounds any size (fixed at creation); without it a
    /// request is only rounded to the block size.
    power2_rounding: bool,
    /// Whether nothing optional that a cache hit would consult is on (see
    /// [`State::refresh_plain`]): hits then skip those checks.
    plain: bool,
    /// Blocks live captured graphs use ([`crate::graph_pins`]).
    pub(crate) pins: Pins,
}

impl<B: Backend> State<B> {
    pub(crate) fn new(
        config: AllocatorConfig,
        device_total: u64,
        note_lifetimes: bool,
        vmm_granularity: Option<u64>,
        device_uid: u64,
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
            pending: Reclaimer::new(device_uid),
            pools: PrivatePools::default(),
            history,
            device_total,
            allowed_max: None,
            note_lifetimes,
            keepalive: Keepalive::default(),
            vmm_granularity,
            power2_rounding: false,
            plain: false,
            pins: Pins::default(),
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
        let thread = self
            .pools
            .diversions
            .iter()
            .any(|d| d.filter.needs_thread())
            .then(|| std::thread::current().id());
        for d in self.pools.diversions.iter().rev() {
            if d.filter.matches(stream.id(), domain, thread) {
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
                return Err(AllocError::SizeOverflow(SizeOverflow {
                    call: "alloc",
                    what: format!("{size} bytes rounded to a block"),
                }));
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
        if self.pins.posted() {
            self.release_pins(dev);
        }
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

        if pool != PoolId::DEFAULT && self.pools.is_asleep(pool) {
            return Err(AllocError::PoolAsleep {
                pool: pool.0,
                tag: self
                    .pools
                    .tag(pool)
                    .map_or_else(String::new, |t| t.to_string()),
            });
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

    /// [`Arena::find_free`] with the configuration's rules. `PLAIN`: called when
    /// [`State::plain`] (no GC clock, no expandable blocks to pass over).
    #[inline(always)]
    fn find_free<const PLAIN: bool>(&mut self, req: Request) -> Option<Found> {
        let skip_expandable = !PLAIN && self.skip_expandable();
        self.arena
            .find_free::<PLAIN>(FitRules::of(&self.config), &req, skip_expandable)
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
        let pools = &self.pools;
        let out = self.arena.hand_out::<PLAIN>(
            FitRules::of(&self.config),
            b,
            slot,
            &req,
            small,
            |pool| pools.no_split(pool),
        );
        let (addr, size, stream, pool) = (out.addr, out.size, out.stream, out.pool);
        self.stats.note_grant_split(small, out.split);
        if let Some(p) = self.pools.get_mut(pool) {
            p.allocated_bytes += size;
            p.allocated_blocks += 1;
        }
        let s = &mut self.stats;
        s.grant(small, size, req.size, &self.pending_by_class);
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
        // A sleepable pool's segment is mapped virtual memory, in whole pages.
        let vmm = self.pools.is_sleepable(pool);
        let seg_size = match (vmm, self.vmm_granularity) {
            (true, Some(page)) => seg_size
                .checked_next_multiple_of(page)
                .ok_or(SegmentFailure::OutOfMemory)?,
            _ => seg_size,
        };
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
        let got = if vmm {
            self.map_sleepable_segment(dev, seg_size)
        } else {
            dev.hal().alloc(seg_size)
        };
        let ptr = match got {
            Ok(ptr) => ptr,
            Err(HalError::OutOfMemory { .. } | HalError::HostMemoryExhausted { .. }) => {
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
            vmm,
            asleep: false,
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
        if vmm {
            self.note_segment(dev, seg, true);
        }
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
        if self.pins.posted() {
            self.release_pins(dev);
        }
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
                self.arena.lifetimes.died(b);
            }
        }
        if self.arena.blocks.get(b).uses.is_empty() && !self.pins.is_held(b) {
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
        if self.pins.is_held(b) {
            self.free_held(b);
            return;
        }
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

    /// [`State::free`] of a block a live graph uses ([`crate::graph_pins`]): pending, handed
    /// to no one, until the graph is gone.
    #[cold]
    #[inline(never)]
    fn free_held(&mut self, b: BlockId) {
        let blk = self.arena.blocks.get_mut(b);
        blk.status = Status::Pending;
        blk.generation = blk.generation.wrapping_add(1);
        let (addr, size, small) = (blk.addr, blk.size, blk.small);
        self.stats.pending_free_bytes.increase(size);
        self.pending_by_class.add(small, size);
        self.pins.note_freed(b);
        tracing::debug!(
            addr,
            size,
            "buffer dropped while a captured graph uses it: freed once the graph is gone"
        );
    }

    /// Releases the blocks of the graphs dropped since the last call, and frees those their
    /// buffers had freed (as a free would have, then: pending on other streams' uses, or
    /// cached).
    #[cold]
    #[inline(never)]
    pub(crate) fn release_pins(&mut self, dev: &Device<B>) {
        for b in self.pins.release_posted() {
            let blk = self.arena.blocks.get_mut(b);
            blk.status = Status::Allocated;
            let (size, small) = (blk.size, blk.small);
            self.stats.pending_free_bytes.decrease(size);
            self.pending_by_class.remove(small, size);
            if self.arena.blocks.get(b).uses.is_empty() {
                self.free_block(dev, b);
            } else {
                self.free_with_uses(dev, b);
            }
        }
    }

    /// Captured work at `pos` uses `[start, end)` of this allocator's device: the blocks there
    /// that were not allocated for a capture are held while the capture's graph lives. The
    /// capture may be another device's (a peer copy of this device's memory). Returns the
    /// capture's key when it held nothing before (the caller makes its pin).
    pub(crate) fn note_captured_use(
        &mut self,
        pos: braid_stream_core::StreamPosition,
        start: u64,
        end: u64,
    ) -> Option<HoldKey> {
        let Domain::Capture(capture) = pos.domain else {
            return None;
        };
        let key = HoldKey::Capture(crate::graph_pins::CaptureKey {
            device: pos.device,
            capture,
        });
        let mut new = false;
        for b in self.holdable_blocks(start, end) {
            new |= self.pins.hold(key, b);
        }
        new.then_some(key)
    }

    /// A task update of a graph was applied whose operators use `ranges` of this allocator's
    /// device: the blocks there that were not allocated for a capture are held by a new key
    /// (returned when it holds anything; the caller makes its pin for the graph). A block
    /// already freed by its buffer but held for a graph is held too, so the graph's next
    /// launch is refused ([`State::check_hold`]).
    pub(crate) fn note_graph_update(
        &mut self,
        ranges: &[(DeviceSlice, Access)],
    ) -> Option<HoldKey> {
        let mut blocks: Vec<BlockId> = Vec::new();
        for (range, _) in ranges {
            blocks.extend(self.holdable_blocks(range.ptr.0, range.end()));
        }
        if blocks.is_empty() {
            return None;
        }
        let key = self.pins.update_key();
        for b in blocks {
            self.pins.hold(key, b);
        }
        Some(key)
    }

    /// The blocks overlapping `[start, end)` a graph may hold: allocated outside any capture,
    /// or freed by their buffer while held for a graph.
    fn holdable_blocks(&self, start: u64, end: u64) -> Vec<BlockId> {
        let mut found = Vec::new();
        if start >= end {
            return found;
        }
        for seg in self.arena.segments.overlapping(start, end) {
            let mut b = self.arena.segments.get(seg).head;
            while b != NONE {
                let blk = self.arena.blocks.get(b);
                if blk.addr >= end {
                    break;
                }
                let holdable = match blk.status {
                    Status::Allocated => blk.capture.is_none(),
                    Status::Pending => self.pins.is_held(b),
                    _ => false,
                };
                if blk.end() > start && holdable {
                    found.push(b);
                }
                b = blk.next;
            }
        }
        found
    }

    /// Whether the graph keeping `key`'s pin may launch: not when one of its blocks sleeps
    /// ([`StreamError::GraphMemoryAsleep`]), nor, for an update's key, when a block its
    /// buffer freed ([`StreamError::GraphUsesDroppedBuffer`]).
    pub(crate) fn check_hold(&self, key: HoldKey) -> braid_stream_core::Result<()> {
        for &b in self.pins.blocks_of(key) {
            let blk = self.arena.blocks.get(b);
            if matches!(key, HoldKey::Update(_)) && self.pins.freed().contains(&b) {
                return Err(StreamError::GraphUsesDroppedBuffer {
                    addr: blk.addr,
                    len: blk.size,
                });
            }
            if blk.pool != PoolId::DEFAULT && self.pools.is_asleep(blk.pool) {
                return Err(StreamError::GraphMemoryAsleep {
                    addr: blk.addr,
                    len: blk.size,
                    tag: self
                        .pools
                        .tag(blk.pool)
                        .map_or_else(String::new, |t| t.to_string()),
                });
            }
        }
        Ok(())
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
        let out = self.arena.coalesce::<PLAIN>(b, small);
        let (addr, size, stream, pool) = (out.addr, out.size, out.stream, out.pool);
        let s = &mut self.stats;
        s.note_split_change(small, out.split);
        s.deactivate(small, out.requested);
        if !PLAIN {
            self.history
                .record(HistoryAction::FreeCompleted, addr, size, stream, pool);
        }
    }

    // ----- introspection -----

    /// The segments and blocks as PyTorch's `memory_snapshot` lists them, with the history.
    pub(crate) fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot::of(&self.arena, &self.history)
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
