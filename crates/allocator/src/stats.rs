//! Statistics with PyTorch's names and shape (`Stat`, `StatArray`, `DeviceStats`).
//!
//! [`MemoryStats`] flattens to PyTorch's keys (`"allocated_bytes.all.current"`,
//! `"reserved_bytes.large_pool.peak"`, `"num_ooms"`): `allocation`, `segment`, `active`,
//! `inactive_split` (counts) and `allocated_bytes`, `reserved_bytes`, `active_bytes`,
//! `inactive_split_bytes`, `requested_bytes` (bytes), each `{all, small_pool, large_pool}` ×
//! `{current, peak, allocated, freed}`; `oversize_allocations`, `oversize_segments`,
//! `num_alloc_retries`, `num_ooms`, `num_sync_all_streams`, `num_device_alloc`,
//! `num_device_free`, `max_split_size`; and braid's `num_events_recorded`,
//! `num_events_created`, `num_event_queries`, `num_pending_frees`,
//! `num_released_without_event`, `num_reuse_with_wait`, `pending_free_bytes`.

use crate::arena::{GrantSplit, SplitDelta};
use std::collections::BTreeMap;

/// One statistic: current value, peak, and totals added and removed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Stat {
    /// Current value.
    pub current: u64,
    /// Highest value since the last peak reset.
    pub peak: u64,
    /// Total added since the last accumulated reset.
    pub allocated: u64,
    /// Total removed since the last accumulated reset.
    pub freed: u64,
}

impl Stat {
    /// Adds `amount`. Inside the allocator `freed` is not kept up to date: it holds `current`
    /// as of the last accumulated reset, and [`MemoryStats::view`] derives the public value
    /// (`freed = allocated + base - current`), so a decrease is one subtraction.
    #[inline(always)]
    pub(crate) fn increase(&mut self, amount: u64) {
        let current = self.current + amount;
        self.current = current;
        // A new peak is rare once warm: a predictable branch instead of a store every time.
        if current > self.peak {
            self.peak = current;
        }
        self.allocated += amount;
    }

    #[inline(always)]
    pub(crate) fn decrease(&mut self, amount: u64) {
        debug_assert!(self.current >= amount, "stat underflow");
        self.current = self.current.wrapping_sub(amount);
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
    }

    /// Internal form: zero the total added and remember `current` as the base of `freed`.
    fn reset_accumulated(&mut self) {
        self.allocated = 0;
        self.freed = self.current;
    }

    /// The public form of an internal stat: `freed` derived from the base it holds.
    fn view(&self) -> Stat {
        Stat {
            current: self.current,
            peak: self.peak,
            allocated: self.allocated,
            freed: (self.allocated + self.freed).wrapping_sub(self.current),
        }
    }
}

/// A statistic for all pools together and for the small and large pools.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StatArray {
    /// All pools ("all").
    pub all: Stat,
    /// The small pool ("small_pool").
    pub small_pool: Stat,
    /// The large pool ("large_pool").
    pub large_pool: Stat,
}

impl StatArray {
    /// Adds `amount` to `all` and to the pool's stat. Inside the allocator `all.allocated` is
    /// not kept up to date (it is the sum of the pools', derived by [`MemoryStats::view`]).
    #[inline(always)]
    pub(crate) fn increase(&mut self, small: bool, amount: u64) {
        let current = self.all.current + amount;
        self.all.current = current;
        if current > self.all.peak {
            self.all.peak = current;
        }
        self.pool_mut(small).increase(amount);
    }

    #[inline(always)]
    pub(crate) fn decrease(&mut self, small: bool, amount: u64) {
        self.all.decrease(amount);
        self.pool_mut(small).decrease(amount);
    }

    #[inline(always)]
    fn pool_mut(&mut self, small: bool) -> &mut Stat {
        if small {
            &mut self.small_pool
        } else {
            &mut self.large_pool
        }
    }

    /// The public form of an internal array.
    fn view(&self) -> StatArray {
        let mut all = self.all;
        all.allocated = self.small_pool.allocated + self.large_pool.allocated;
        StatArray {
            all: all.view(),
            small_pool: self.small_pool.view(),
            large_pool: self.large_pool.view(),
        }
    }

    fn each(&mut self, f: impl Fn(&mut Stat)) {
        f(&mut self.all);
        f(&mut self.small_pool);
        f(&mut self.large_pool);
    }

    fn flatten(&self, name: &str, out: &mut BTreeMap<String, u64>) {
        for (pool, stat) in [
            ("all", &self.all),
            ("small_pool", &self.small_pool),
            ("large_pool", &self.large_pool),
        ] {
            out.insert(format!("{name}.{pool}.current"), stat.current);
            out.insert(format!("{name}.{pool}.peak"), stat.peak);
            out.insert(format!("{name}.{pool}.allocated"), stat.allocated);
            out.insert(format!("{name}.{pool}.freed"), stat.freed);
        }
    }
}

/// The allocator's statistics (PyTorch's `DeviceStats`, plus braid's cross-stream counters).
#[derive(Clone, PartialEq, Debug, Default)]
pub struct MemoryStats {
    /// Number of allocated blocks.
    pub allocation: StatArray,
    /// Number of segments held from the device.
    pub segment: StatArray,
    /// Number of active blocks (allocated, or freed but awaiting uses on other streams).
    pub active: StatArray,
    /// Number of inactive blocks that are part of a split segment (cannot be released).
    pub inactive_split: StatArray,
    /// Bytes in allocated blocks.
    pub allocated_bytes: StatArray,
    /// Bytes in segments held from the device.
    pub reserved_bytes: StatArray,
    /// Bytes in active blocks.
    pub active_bytes: StatArray,
    /// Bytes in inactive blocks of split segments.
    pub inactive_split_bytes: StatArray,
    /// Bytes requested by callers of active blocks (before rounding).
    pub requested_bytes: StatArray,
    /// Allocations of blocks at least `max_split_size` large.
    pub oversize_allocations: Stat,
    /// Segments at least `max_split_size` large.
    pub oversize_segments: Stat,
    /// Device allocations that failed and made the allocator flush its cache and retry.
    pub num_alloc_retries: u64,
    /// Allocations that failed after the whole out-of-memory ladder.
    pub num_ooms: u64,
    /// Times all pending events were synchronized.
    pub num_sync_all_streams: u64,
    /// Segments allocated from the device.
    pub num_device_alloc: u64,
    /// Segments returned to the device.
    pub num_device_free: u64,
    /// `max_split_size` in effect (`u64::MAX` = unlimited).
    pub max_split_size: u64,
    /// Events recorded on using streams for cross-stream frees (braid).
    pub num_events_recorded: u64,
    /// Events created for the event pool (braid).
    pub num_events_created: u64,
    /// Event queries made while processing pending frees (braid).
    pub num_event_queries: u64,
    /// Frees deferred because of uses on other streams (braid).
    pub num_pending_frees: u64,
    /// Pending frees released by the ordering model with no event (braid; MindSpore's return
    /// flow).
    pub num_released_without_event: u64,
    /// Allocations that reused a pending block by making the stream wait (braid).
    pub num_reuse_with_wait: u64,
    /// Bytes in blocks freed by their owner but awaiting uses on other streams (braid).
    pub pending_free_bytes: Stat,
}

/// Blocks freed by their owner and pending on other streams, per class (index 0 small, 1
/// large): inside the allocator `active` and `active_bytes` are derived from `allocation` and
/// `allocated_bytes` plus these, so the hot path does not update them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct PendingByClass {
    pub count: [u64; 2],
    pub bytes: [u64; 2],
}

impl PendingByClass {
    #[inline(always)]
    fn any(&self) -> bool {
        (self.count[0] | self.count[1]) != 0
    }

    /// A block of `size` bytes became pending.
    pub(crate) fn add(&mut self, small: bool, size: u64) {
        let i = usize::from(!small);
        self.count[i] += 1;
        self.bytes[i] += size;
    }

    /// A pending block of `size` bytes was freed.
    pub(crate) fn remove(&mut self, small: bool, size: u64) {
        let i = usize::from(!small);
        debug_assert!(
            self.count[i] >= 1 && self.bytes[i] >= size,
            "pending underflow"
        );
        self.count[i] = self.count[i].wrapping_sub(1);
        self.bytes[i] = self.bytes[i].wrapping_sub(size);
    }
}

/// `base` plus `extra` per class: (all, small, large).
fn with_pending(base: &StatArray, extra: [u64; 2]) -> [u64; 3] {
    [
        base.all.current + extra[0] + extra[1],
        base.small_pool.current + extra[0],
        base.large_pool.current + extra[1],
    ]
}

// Inside the allocator the statistics are kept in an internal form (see `Stat::increase`,
// `StatArray::increase`, `PendingByClass`): `freed` fields hold their base, `all.allocated` is
// derived, and of `active` / `active_bytes` only the peaks reached while blocks were pending
// and the bases are kept. `MemoryStats::view` gives the public form.
impl MemoryStats {
    /// A block of `size` bytes (`requested` asked for) is handed out: `allocation`,
    /// `allocated_bytes` and `requested_bytes` grow (and so do the derived `active` and
    /// `active_bytes`).
    #[inline(always)]
    pub(crate) fn grant(&mut self, small: bool, size: u64, requested: u64, p: &PendingByClass) {
        // One branch on the class for all the updates.
        if small {
            self.grant_in::<true>(size, requested);
        } else {
            self.grant_in::<false>(size, requested);
        }
        if p.any() {
            self.note_active_peaks(p);
        }
    }

    #[inline(always)]
    fn grant_in<const SMALL: bool>(&mut self, size: u64, requested: u64) {
        self.allocation.increase(SMALL, 1);
        self.allocated_bytes.increase(SMALL, size);
        self.requested_bytes.increase(SMALL, requested);
    }

    /// While blocks are pending, `active` exceeds `allocation`: its peaks are kept apart
    /// (otherwise they are `allocation`'s).
    #[cold]
    #[inline(never)]
    fn note_active_peaks(&mut self, p: &PendingByClass) {
        let count = with_pending(&self.allocation, p.count);
        let bytes = with_pending(&self.allocated_bytes, p.bytes);
        for (array, now) in [(&mut self.active, count), (&mut self.active_bytes, bytes)] {
            array.all.peak = array.all.peak.max(now[0]);
            array.small_pool.peak = array.small_pool.peak.max(now[1]);
            array.large_pool.peak = array.large_pool.peak.max(now[2]);
        }
    }

    /// The owner freed an allocated block of `size` bytes: `allocation` and `allocated_bytes`
    /// shrink.
    #[inline(always)]
    pub(crate) fn release(&mut self, small: bool, size: u64) {
        if small {
            self.allocation.decrease(true, 1);
            self.allocated_bytes.decrease(true, size);
        } else {
            self.allocation.decrease(false, 1);
            self.allocated_bytes.decrease(false, size);
        }
    }

    /// Applies a change of the free blocks that are split (`inactive_split` statistics).
    #[inline(always)]
    pub(crate) fn note_split_change(&mut self, small: bool, d: SplitDelta) {
        if d.blocks > 0 {
            self.inactive_split.increase(small, d.blocks as u64);
        } else if d.blocks < 0 {
            self.inactive_split.decrease(small, d.blocks.unsigned_abs());
        }
        if d.bytes > 0 {
            self.inactive_split_bytes.increase(small, d.bytes as u64);
        } else if d.bytes < 0 {
            self.inactive_split_bytes
                .decrease(small, d.bytes.unsigned_abs());
        }
    }

    /// Applies what handing a block out did to the free blocks that are split.
    #[inline(always)]
    pub(crate) fn note_grant_split(&mut self, small: bool, change: GrantSplit) {
        match change {
            GrantSplit::Unchanged => {}
            GrantSplit::NewRemainder(bytes) => {
                self.inactive_split_bytes.increase(small, bytes);
                self.inactive_split.increase(small, 1);
            }
            GrantSplit::Resplit(bytes) => self.inactive_split_bytes.decrease(small, bytes),
            GrantSplit::TakenWhole(bytes) => {
                self.inactive_split_bytes.decrease(small, bytes);
                self.inactive_split.decrease(small, 1);
            }
        }
    }

    /// A block with `requested` bytes asked for stops being active (`active` and
    /// `active_bytes` follow from `allocation` and the pending blocks).
    #[inline(always)]
    pub(crate) fn deactivate(&mut self, small: bool, requested: u64) {
        self.requested_bytes.decrease(small, requested);
    }

    /// Sets the derived currents of `active` and `active_bytes` into their `current` fields.
    fn fill_active(&mut self, p: &PendingByClass) {
        let count = with_pending(&self.allocation, p.count);
        let bytes = with_pending(&self.allocated_bytes, p.bytes);
        for (array, now) in [(&mut self.active, count), (&mut self.active_bytes, bytes)] {
            array.all.current = now[0];
            array.small_pool.current = now[1];
            array.large_pool.current = now[2];
        }
    }

    /// The public statistics.
    pub(crate) fn view(&self, p: &PendingByClass) -> MemoryStats {
        let mut out = self.clone();
        out.fill_active(p);
        // `active` grows only when `allocation` does: the same totals added, and the peaks
        // reached while no block was pending are `allocation`'s.
        for (active, base) in [
            (&mut out.active, &self.allocation),
            (&mut out.active_bytes, &self.allocated_bytes),
        ] {
            active.small_pool.allocated = base.small_pool.allocated;
            active.large_pool.allocated = base.large_pool.allocated;
            active.all.peak = active.all.peak.max(base.all.peak);
            active.small_pool.peak = active.small_pool.peak.max(base.small_pool.peak);
            active.large_pool.peak = active.large_pool.peak.max(base.large_pool.peak);
        }
        for a in out.arrays_mut() {
            *a = a.view();
        }
        for s in [
            &mut out.oversize_allocations,
            &mut out.oversize_segments,
            &mut out.pending_free_bytes,
        ] {
            *s = s.view();
        }
        out
    }

    pub(crate) fn reset_peak(&mut self, p: &PendingByClass) {
        self.fill_active(p);
        for a in self.arrays_mut() {
            a.each(Stat::reset_peak);
        }
        self.oversize_allocations.reset_peak();
        self.oversize_segments.reset_peak();
        self.pending_free_bytes.reset_peak();
    }

    pub(crate) fn reset_accumulated(&mut self, p: &PendingByClass) {
        self.fill_active(p);
        for a in self.arrays_mut() {
            a.each(Stat::reset_accumulated);
        }
        self.oversize_allocations.reset_accumulated();
        self.oversize_segments.reset_accumulated();
        self.pending_free_bytes.reset_accumulated();
        self.num_alloc_retries = 0;
        self.num_ooms = 0;
        self.num_sync_all_streams = 0;
        self.num_device_alloc = 0;
        self.num_device_free = 0;
        self.num_events_recorded = 0;
        self.num_events_created = 0;
        self.num_event_queries = 0;
        self.num_pending_frees = 0;
        self.num_released_without_event = 0;
        self.num_reuse_with_wait = 0;
    }

    fn arrays_mut(&mut self) -> [&mut StatArray; 9] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.inactive_split,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.inactive_split_bytes,
            &mut self.requested_bytes,
        ]
    }

    /// The statistics as a flat map with PyTorch's keys (`"allocated_bytes.all.current"`,
    /// `"num_ooms"`, ...), plus braid's counters.
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (name, array) in [
            ("allocation", &self.allocation),
            ("segment", &self.segment),
            ("active", &self.active),
            ("inactive_split", &self.inactive_split),
            ("allocated_bytes", &self.allocated_bytes),
            ("reserved_bytes", &self.reserved_bytes),
            ("active_bytes", &self.active_bytes),
            ("inactive_split_bytes", &self.inactive_split_bytes),
            ("requested_bytes", &self.requested_bytes),
        ] {
            array.flatten(name, &mut out);
        }
        for (name, stat) in [
            ("oversize_allocations", &self.oversize_allocations),
            ("oversize_segments", &self.oversize_segments),
            ("pending_free_bytes", &self.pending_free_bytes),
        ] {
            out.insert(format!("{name}.current"), stat.current);
            out.insert(format!("{name}.peak"), stat.peak);
            out.insert(format!("{name}.allocated"), stat.allocated);
            out.insert(format!("{name}.freed"), stat.freed);
        }
        for (name, value) in [
            ("num_alloc_retries", self.num_alloc_retries),
            ("num_ooms", self.num_ooms),
            ("num_sync_all_streams", self.num_sync_all_streams),
            ("num_device_alloc", self.num_device_alloc),
            ("num_device_free", self.num_device_free),
            ("max_split_size", self.max_split_size),
            ("num_events_recorded", self.num_events_recorded),
            ("num_events_created", self.num_events_created),
            ("num_event_queries", self.num_event_queries),
            ("num_pending_frees", self.num_pending_frees),
            (
                "num_released_without_event",
                self.num_released_without_event,
            ),
            ("num_reuse_with_wait", self.num_reuse_with_wait),
        ] {
            out.insert(name.to_string(), value);
        }
        out
    }
}

/// Formats a byte count as PyTorch does ("512 bytes", "1.50 KiB", "20.00 MiB", "3.00 GiB").
pub fn format_size(size: u64) -> String {
    const KIB: f64 = 1024.0;
    if size <= 1024 {
        format!("{size} bytes")
    } else if size <= 1 << 20 {
        format!("{:.2} KiB", size as f64 / KIB)
    } else if size <= 1 << 30 {
        format!("{:.2} MiB", size as f64 / (KIB * KIB))
    } else {
        format!("{:.2} GiB", size as f64 / (KIB * KIB * KIB))
    }
}
