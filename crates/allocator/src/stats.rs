//! Statistics with PyTorch's names and shape (`Stat`, `StatArray`, `DeviceStats`).

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
    #[inline(always)]
    pub(crate) fn increase(&mut self, amount: u64) {
        self.current += amount;
        self.peak = self.peak.max(self.current);
        self.allocated += amount;
    }

    #[inline(always)]
    pub(crate) fn decrease(&mut self, amount: u64) {
        debug_assert!(self.current >= amount, "stat underflow");
        self.current = self.current.saturating_sub(amount);
        self.freed += amount;
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
    }

    fn reset_accumulated(&mut self) {
        self.allocated = 0;
        self.freed = 0;
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
    #[inline(always)]
    pub(crate) fn increase(&mut self, small: bool, amount: u64) {
        self.all.increase(amount);
        if small {
            self.small_pool.increase(amount);
        } else {
            self.large_pool.increase(amount);
        }
    }

    #[inline(always)]
    pub(crate) fn decrease(&mut self, small: bool, amount: u64) {
        self.all.decrease(amount);
        if small {
            self.small_pool.decrease(amount);
        } else {
            self.large_pool.decrease(amount);
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

impl MemoryStats {
    pub(crate) fn reset_peak(&mut self) {
        for a in self.arrays_mut() {
            a.each(Stat::reset_peak);
        }
        self.oversize_allocations.reset_peak();
        self.oversize_segments.reset_peak();
        self.pending_free_bytes.reset_peak();
    }

    pub(crate) fn reset_accumulated(&mut self) {
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
