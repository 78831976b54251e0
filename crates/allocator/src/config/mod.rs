//! Allocator configuration: a builder in code, and a `key:value,...` string in the style of
//! `PYTORCH_ALLOC_CONF` (read from `BRAID_ALLOC_CONF` by [`AllocatorConfig::from_env`]).
//!
//! Keys ([`AllocatorConfig::parse`]): `max_split_size_mb`, `max_non_split_rounding_mb`,
//! `large_segment_size_mb`, `roundup_power2_divisions` (`4` or
//! `[64:8,128:2,256:2,512:2,1024:1,>:1]`), `garbage_collection_threshold`,
//! `per_process_memory_fraction` (or `memory_fraction`), `limit_mb`, `cross_stream`
//! (`manual` | `automatic`), `reuse_pending_with_wait`, `lazy_event_polling`,
//! `release_before_grow`, `split_large_remainders`, `fit_large_segments`, `record_history`,
//! `history_size`, `expandable_segments`, `expandable_large_page_mb`, `lifetime_placement`.
//!
//! Every setting is bounded and checked by name, whatever the order of the keys: the whole
//! string is read first and checked as one configuration ([`AllocatorConfig::validate`]); a
//! key given twice is [`AllocError::DuplicateConfigKey`]; an unknown key is
//! [`AllocError::UnknownConfigKey`], whose message suggests the nearest valid key; a bad value
//! is [`AllocError::InvalidConfigValue`] naming the key and the value. What depends on the
//! device (a segment or page bigger than it) is checked when the allocator is made
//! ([`AllocatorConfig::validate_for_device`]), and `history_size` is at most
//! [`MAX_HISTORY_SIZE`], its ring allocated as it fills.
//!
//! # The low-fragmentation policies
//!
//! All off by default, so the layout and segment counts are PyTorch's. Measured on the real
//! PyTorch traces of the repository's `traces/` (figures in the README and in
//! `braid-trace`'s tests):
//!
//! - `release_before_grow`: before a new segment would raise reserved memory past its peak,
//!   whole cached segments (which cannot serve the request) go back to the device, largest
//!   first, until the new segment fits under the peak. It trades device mallocs and frees for
//!   a lower peak reservation; on every trace it keeps the peak strictly below PyTorch's own.
//! - `split_large_remainders` (PyTorch never splits off a large-pool remainder of 1 MiB or
//!   less): every large-pool remainder of at least `min_block_size` (512 B) is split off the
//!   block handed out and cached in the large pool; in the default pool a small request that
//!   finds no small block then takes the best-fitting cached large block before a new small
//!   segment is allocated (as private pools always do). Allocated bytes then equal the
//!   rounded requests (a 1.125 MiB request in a 1.5 MiB free block no longer holds all of
//!   it), and small requests fill the remainders instead of growing.
//! - `fit_large_segments` (PyTorch: always the 20 MiB `large_segment_size`): the segment for a
//!   large request below `min_large_alloc` (10 MiB) that finds no cached block is sized to the
//!   most whole requests of its size that fit in `large_segment_size`, rounded up to
//!   `round_large` (2 MiB): a 9 MiB request gets an 18 MiB segment instead of 20 MiB with a
//!   2 MiB tail. With `release_before_grow` and `split_large_remainders` it keeps the peak
//!   below both PyTorch's and `release_before_grow` alone on every trace
//!   (`split_large_remainders` also cuts device mallocs).
//! - `expandable_segments` and `expandable_large_page_mb`: see `crate::state::expandable`.
//! - `lifetime_placement` (only with expandable segments): places blocks by predicted
//!   lifetime, so transient blocks leave no holes between long-lived ones (the prediction and
//!   placement are in `crate::state::lifetime`). Large blocks in the small-pool segment count
//!   as small pool in the statistics. With 2 MiB pages it brings the bf16 forward trace from
//!   3.66% waste to 1.36%, and lowers inference and training too. A prediction per size is a
//!   heuristic: a size whose lifetime changes over a run is placed by its recent past, and
//!   the two segments' free ends cost up to a page each (one 2 MiB page more than the best
//!   configuration on SketchKV2, whose blocks are never freed).
//!
//! Peak reserved bytes (and waste, 1 − peak live / peak reserved) replaying the four traces
//! with `braid trace replay --conf ...`, beside PyTorch's own over the same window:
//!
//! | configuration | inference | training | bf16 | SketchKV2 |
//! |---|---|---|---|---|
//! | PyTorch's own | 1,763,704,832 (1.52%) | 7,235,174,400 (3.07%) | 861,929,472 (9.52%) | 17,133,731,840 (4.40%) |
//! | defaults | 1,763,704,832 (1.52%) | 7,218,397,184 (2.84%) | 861,929,472 (9.52%) | 16,475,226,112 (0.58%) |
//! | `release_before_grow:true,split_large_remainders:true,fit_large_segments:true` | 1,755,316,224 (1.05%) | 7,090,470,912 (1.09%) | 817,889,280 (4.65%) | 16,450,060,288 (0.43%) |
//! | `expandable_segments:true,expandable_large_page_mb:2` | 1,751,121,920 (0.81%) | 7,151,288,320 (1.93%) | 813,694,976 (4.16%) | 16,382,951,424 (0.02%) |
//! | the same plus `release_before_grow:true,split_large_remainders:true` | 1,746,927,616 (0.57%) | 7,153,385,472 (1.96%) | 809,500,672 (3.66%) | 16,380,854,272 (0.00%) |
//! | `expandable_segments:true,expandable_large_page_mb:2,lifetime_placement:true` | 1,742,733,312 (0.33%) | 7,117,733,888 (1.47%) | 790,626,304 (1.36%) | 16,382,951,424 (0.02%) |
//!
//! Adding `release_before_grow:true,split_large_remainders:true` to the last row gives the
//! same figures; on training it stays above the normal-segment row, whose 20 MiB segments can
//! be returned whole.
//!
//! ```
//! use braid_allocator::{AllocatorConfig, CachingAllocator, SegmentType};
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::Device;
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(256 << 20))).unwrap();
//! let conf = "expandable_segments:true,expandable_large_page_mb:2,lifetime_placement:true";
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::parse(conf).unwrap()).unwrap();
//! let main = device.default_stream();
//! drop(alloc.alloc(4 << 20, &main).unwrap()); // 4 MiB blocks die young from now on
//! let cache = alloc.alloc(6 << 20, &main).unwrap(); // never freed yet: long-lived
//! let scratch = alloc.alloc(4 << 20, &main).unwrap(); // predicted short-lived
//! let kind = |ptr: u64| {
//!     let snapshot = alloc.snapshot();
//!     let seg = snapshot.segments.iter().find(|s| s.address <= ptr && ptr < s.address + s.total_size);
//!     seg.unwrap().segment_type
//! };
//! assert_eq!(kind(cache.ptr().0), SegmentType::Large);
//! assert_eq!(kind(scratch.ptr().0), SegmentType::Small);
//! ```

mod parse;

pub(crate) use parse::{key_list, nearest_key};

use crate::error::AllocError;
use crate::size;
use crate::stats::format_size;

/// Number of power-of-two intervals covered by `roundup_power2_divisions` (1 MiB .. 64 GiB).
pub const ROUNDUP_POWER2_INTERVALS: usize = 16;

/// Environment variable read by [`AllocatorConfig::from_env`].
pub const ENV_VAR: &str = "BRAID_ALLOC_CONF";

const MIB: u64 = 1 << 20;

/// The largest `history_size`: 16 Mi entries (about 48 bytes each). The ring is allocated as
/// it fills, so a large size costs memory only once that much history is recorded.
pub const MAX_HISTORY_SIZE: usize = 16 << 20;

/// How uses of a buffer on streams other than its allocation stream are learned.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum CrossStreamMode {
    /// PyTorch semantics: only [`crate::DeviceBuffer::record_stream`] (and friends) count.
    #[default]
    Manual,
    /// MindSpore semantics: the allocator observes every use the front layer sees (kernels,
    /// copies, memsets, `Stream::note_use`) and defers frees until those uses are ordered
    /// before the next user of the memory. `record_stream` still works on top.
    Automatic,
}

/// Configuration of a [`crate::CachingAllocator`]. Defaults are PyTorch's.
///
/// ```
/// use braid_allocator::{AllocatorConfig, CrossStreamMode};
/// let config = AllocatorConfig::new()
///     .max_split_size(128 << 20)
///     .garbage_collection_threshold(0.8)
///     .cross_stream(CrossStreamMode::Automatic);
/// let parsed = AllocatorConfig::parse(
///     "max_split_size_mb:128,garbage_collection_threshold:0.8,cross_stream:automatic",
/// )
/// .unwrap();
/// assert_eq!(config, parsed);
/// ```
#[derive(Clone, PartialEq, Debug)]
pub struct AllocatorConfig {
    /// Every block size is a multiple of this (PyTorch `kMinBlockSize`, 512 B).
    pub min_block_size: u64,
    /// Largest request served by the small pool (`kSmallSize`, 1 MiB).
    pub small_size: u64,
    /// Segment size of the small pool (`kSmallBuffer`, 2 MiB).
    pub small_segment_size: u64,
    /// Requests at least this large get a segment of their own (`kMinLargeAlloc`, 10 MiB).
    pub min_large_alloc: u64,
    /// Segment size for large requests below `min_large_alloc` (`kLargeBuffer` /
    /// `large_segment_size_mb`, 20 MiB).
    pub large_segment_size: u64,
    /// Own segments are rounded up to a multiple of this (`kRoundLarge`, 2 MiB).
    pub round_large: u64,
    /// Blocks at least this large are never split (`max_split_size_mb`; `u64::MAX` = no limit).
    pub max_split_size: u64,
    /// An oversize request only takes a cached block smaller than request + this
    /// (`max_non_split_rounding_mb`, 20 MiB).
    pub max_non_split_rounding: u64,
    /// Power-of-two divisions per interval, 1 MiB .. 64 GiB (`roundup_power2_divisions`);
    /// 0 or 1 = round to `min_block_size` only.
    pub roundup_power2_divisions: [u64; ROUNDUP_POWER2_INTERVALS],
    /// Free cached segments (oldest first) when reserved memory exceeds this fraction of the
    /// allowed maximum (`garbage_collection_threshold`; 0 = off).
    pub garbage_collection_threshold: f64,
    /// Cap on reserved memory as a fraction of the device capacity (`per_process_memory_fraction`).
    pub memory_fraction: Option<f64>,
    /// Cap on reserved memory in bytes (`limit_mb`).
    pub limit_bytes: Option<u64>,
    /// How cross-stream uses are learned.
    pub cross_stream: CrossStreamMode,
    /// When no cached block fits, reuse a block still pending on other streams by making the
    /// allocating stream wait on those uses, instead of growing.
    pub reuse_pending_with_wait: bool,
    /// Query pending events only when no cached block fits (or many events are outstanding),
    /// instead of at every allocation (torch_npu's `multi_stream_lazy_reclaim`).
    pub lazy_event_polling: bool,
    /// Before a new segment raises reserved memory past its peak, return whole cached
    /// segments (default pool and freeable private pools; none can serve the request) to the
    /// device until the new segment fits under the peak (`release_before_grow`; off =
    /// PyTorch). Trades device mallocs and frees (each release synchronizes the device) for a
    /// lower peak reservation. Not during a capture.
    pub release_before_grow: bool,
    /// Split any large-pool remainder of at least `min_block_size` bytes off a cached block
    /// (`split_large_remainders`; off = PyTorch, which splits a large block only when more than
    /// `small_size` (1 MiB) would remain). The remainder stays in the large pool; in the default
    /// pool a small request that finds no small block then takes the best-fitting cached large
    /// block before a new small segment is allocated (as private pools always do).
    pub split_large_remainders: bool,
    /// Size the segment for a large request below `min_large_alloc` to the most whole
    /// requests of its size that fit in `large_segment_size`, rounded up to `round_large`
    /// (`fit_large_segments`; off = PyTorch's `large_segment_size` (20 MiB) segments): a 9 MiB
    /// request gets an 18 MiB segment, not 20 MiB with a 2 MiB tail.
    pub fit_large_segments: bool,
    /// Grow one virtual-memory segment per (stream, small/large) by mapping pages on demand
    /// instead of allocating a segment per miss (`expandable_segments`, PyTorch's
    /// `expandable_segments:True`). Needs a backend with the virtual-memory API
    /// (`hal::Device::vmm_granularity`); [`crate::CachingAllocator::new`] refuses it
    /// otherwise. Can be toggled at run time with
    /// [`crate::CachingAllocator::set_expandable_segments`].
    pub expandable_segments: bool,
    /// Page size of the large pool's expandable segments: each growth maps a multiple of it
    /// (`expandable_large_page_mb`; `None` = `large_segment_size`, 20 MiB, as PyTorch).
    /// Smaller pages leave less mapped but unused at the end of a segment, for more device
    /// mappings; rounded up to the backend's granularity.
    pub expandable_large_page: Option<u64>,
    /// With expandable segments, place requests by predicted lifetime (off by default):
    /// requests whose size was mostly freed soon after allocation go to the stream's
    /// small-pool segment with the small requests, long-lived ones to the large-pool segment,
    /// so transient blocks leave no holes between long-lived ones (`lifetime_placement`; see
    /// the crate docs). Large requests placed in the small-pool segment count as small pool
    /// in the statistics. Without expandable segments it changes nothing.
    pub lifetime_placement: bool,
    /// Whether history is recorded from the start.
    pub record_history: bool,
    /// Capacity of the history ring (`history_size`, at most [`MAX_HISTORY_SIZE`]).
    pub history_size: usize,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl AllocatorConfig {
    /// PyTorch's defaults, manual cross-stream mode, history off (10 000 entries when on).
    pub fn new() -> Self {
        AllocatorConfig {
            min_block_size: 512,
            small_size: MIB,
            small_segment_size: 2 * MIB,
            min_large_alloc: 10 * MIB,
            large_segment_size: 20 * MIB,
            round_large: 2 * MIB,
            max_split_size: u64::MAX,
            max_non_split_rounding: 20 * MIB,
            roundup_power2_divisions: [0; ROUNDUP_POWER2_INTERVALS],
            garbage_collection_threshold: 0.0,
            memory_fraction: None,
            limit_bytes: None,
            cross_stream: CrossStreamMode::Manual,
            reuse_pending_with_wait: false,
            lazy_event_polling: false,
            release_before_grow: false,
            split_large_remainders: false,
            fit_large_segments: false,
            expandable_segments: false,
            expandable_large_page: None,
            lifetime_placement: false,
            record_history: false,
            history_size: 10_000,
        }
    }

    /// Sets `max_split_size` in bytes.
    pub fn max_split_size(mut self, bytes: u64) -> Self {
        self.max_split_size = bytes;
        self
    }

    /// Sets `max_non_split_rounding` in bytes.
    pub fn max_non_split_rounding(mut self, bytes: u64) -> Self {
        self.max_non_split_rounding = bytes;
        self
    }

    /// Sets the large-pool segment size in bytes.
    pub fn large_segment_size(mut self, bytes: u64) -> Self {
        self.large_segment_size = bytes;
        self
    }

    /// Uses `divisions` for every interval.
    pub fn roundup_power2_divisions(mut self, divisions: u64) -> Self {
        self.roundup_power2_divisions = [divisions; ROUNDUP_POWER2_INTERVALS];
        self
    }

    /// Sets the per-interval divisions table (index 0 = sizes in [1 MiB, 2 MiB), ...).
    pub fn roundup_power2_divisions_table(
        mut self,
        table: [u64; ROUNDUP_POWER2_INTERVALS],
    ) -> Self {
        self.roundup_power2_divisions = table;
        self
    }

    /// Sets the garbage collection threshold (in (0, 1); 0 turns it off).
    pub fn garbage_collection_threshold(mut self, threshold: f64) -> Self {
        self.garbage_collection_threshold = threshold;
        self
    }

    /// Caps reserved memory at `fraction` of the device capacity (in (0, 1]).
    pub fn memory_fraction(mut self, fraction: f64) -> Self {
        self.memory_fraction = Some(fraction);
        self
    }

    /// Caps reserved memory at `bytes`.
    pub fn limit_bytes(mut self, bytes: u64) -> Self {
        self.limit_bytes = Some(bytes);
        self
    }

    /// Sets the cross-stream mode.
    pub fn cross_stream(mut self, mode: CrossStreamMode) -> Self {
        self.cross_stream = mode;
        self
    }

    /// Turns the wait-instead-of-grow reuse policy on or off.
    pub fn reuse_pending_with_wait(mut self, on: bool) -> Self {
        self.reuse_pending_with_wait = on;
        self
    }

    /// Turns lazy event polling on or off.
    pub fn lazy_event_polling(mut self, on: bool) -> Self {
        self.lazy_event_polling = on;
        self
    }

    /// Turns [`AllocatorConfig::release_before_grow`] on or off.
    pub fn release_before_grow(mut self, on: bool) -> Self {
        self.release_before_grow = on;
        self
    }

    /// Turns [`AllocatorConfig::split_large_remainders`] on or off.
    pub fn split_large_remainders(mut self, on: bool) -> Self {
        self.split_large_remainders = on;
        self
    }

    /// Sets [`AllocatorConfig::expandable_large_page`].
    pub fn expandable_large_page(mut self, bytes: u64) -> Self {
        self.expandable_large_page = Some(bytes);
        self
    }

    /// Turns [`AllocatorConfig::expandable_segments`] on or off.
    pub fn expandable_segments(mut self, on: bool) -> Self {
        self.expandable_segments = on;
        self
    }

    /// Turns [`AllocatorConfig::fit_large_segments`] on or off.
    pub fn fit_large_segments(mut self, on: bool) -> Self {
        self.fit_large_segments = on;
        self
    }

    /// Turns [`AllocatorConfig::lifetime_placement`] on or off.
    pub fn lifetime_placement(mut self, on: bool) -> Self {
        self.lifetime_placement = on;
        self
    }

    /// Records history from the start (or not).
    pub fn record_history(mut self, on: bool) -> Self {
        self.record_history = on;
        self
    }

    /// Sets the capacity of the history ring (at most [`MAX_HISTORY_SIZE`]).
    pub fn history_size(mut self, entries: usize) -> Self {
        self.history_size = entries;
        self
    }

    /// Checks the configuration as a whole (what the builder methods accept unchecked, and
    /// what the string's keys must satisfy together, such as `max_split_size_mb` above
    /// `large_segment_size_mb`). Errors name the key as the configuration string spells it.
    pub fn validate(&self) -> Result<(), AllocError> {
        let check = |ok: bool, key: &str, value: String, reason: &str| {
            if ok {
                Ok(())
            } else {
                Err(bad(key, &value, reason))
            }
        };
        check(
            self.min_block_size.is_power_of_two(),
            "min_block_size",
            self.min_block_size.to_string(),
            "must be a power of two",
        )?;
        check(
            self.small_size >= self.min_block_size && self.small_segment_size >= self.small_size,
            "small_segment_size",
            self.small_segment_size.to_string(),
            "must be at least small_size, which must be at least min_block_size",
        )?;
        check(
            self.large_segment_size >= self.min_large_alloc,
            "large_segment_size_mb",
            mib_text(self.large_segment_size),
            &format!(
                "must be at least {} (min_large_alloc)",
                mib_text(self.min_large_alloc)
            ),
        )?;
        check(
            self.max_split_size == u64::MAX || self.max_split_size > self.large_segment_size,
            "max_split_size_mb",
            mib_text(self.max_split_size),
            &format!(
                "must be greater than large_segment_size_mb ({}), or blocks of a large segment \
                 could never be split",
                mib_text(self.large_segment_size)
            ),
        )?;
        check(
            self.round_large >= self.min_block_size && self.round_large % self.min_block_size == 0,
            "round_large",
            self.round_large.to_string(),
            "must be a multiple of min_block_size",
        )?;
        for d in self.roundup_power2_divisions {
            check(
                d == 0 || d.is_power_of_two(),
                "roundup_power2_divisions",
                d.to_string(),
                "divisions must be powers of two",
            )?;
        }
        let t = self.garbage_collection_threshold;
        check(
            t == 0.0 || (t > 0.0 && t < 1.0),
            "garbage_collection_threshold",
            t.to_string(),
            "must be in (0, 1)",
        )?;
        if let Some(page) = self.expandable_large_page {
            check(
                page > 0 && page % self.min_block_size == 0,
                "expandable_large_page_mb",
                mib_text(page),
                "must be a non-zero multiple of min_block_size",
            )?;
        }
        if let Some(limit) = self.limit_bytes {
            check(
                limit > 0,
                "limit_mb",
                mib_text(limit),
                "a limit of 0 allows no memory at all: leave limit_mb out for no limit",
            )?;
        }
        check(
            self.history_size <= MAX_HISTORY_SIZE,
            "history_size",
            self.history_size.to_string(),
            &format!("must be at most {MAX_HISTORY_SIZE}"),
        )?;
        if let Some(f) = self.memory_fraction {
            if !(f > 0.0 && f <= 1.0) {
                return Err(AllocError::InvalidMemoryFraction(f));
            }
        }
        Ok(())
    }

    /// Checks what depends on the device, whose capacity is `device_total` bytes: a segment
    /// or page size set to more than the device has could never be allocated, so it is
    /// refused here, naming its key, instead of surfacing later as an out-of-memory error for
    /// an absurd size. The defaults (PyTorch's 2 MiB and 20 MiB segments) are not refused on a
    /// smaller device: requests that need them fail as out of memory, as in PyTorch.
    /// [`crate::CachingAllocator::new`] calls it after [`AllocatorConfig::validate`].
    pub fn validate_for_device(&self, device_total: u64) -> Result<(), AllocError> {
        let defaults = AllocatorConfig::new();
        let fits = |key: &str, what: &str, bytes: u64, default: Option<u64>| {
            if bytes <= device_total || Some(bytes) == default {
                return Ok(());
            }
            Err(bad(
                key,
                &mib_text(bytes),
                &format!(
                    "{what} ({}) is larger than the device ({})",
                    format_size(bytes),
                    format_size(device_total)
                ),
            ))
        };
        fits(
            "small_segment_size",
            "the small pool's segment",
            self.small_segment_size,
            Some(defaults.small_segment_size),
        )?;
        fits(
            "large_segment_size_mb",
            "the large pool's segment",
            self.large_segment_size,
            Some(defaults.large_segment_size),
        )?;
        if let Some(page) = self.expandable_large_page {
            fits(
                "expandable_large_page_mb",
                "the expandable page",
                page,
                None,
            )?;
        }
        Ok(())
    }

    /// The block size a request of `size` bytes is rounded to (`None` on overflow).
    pub fn round_size(&self, size: u64) -> Option<u64> {
        size::round_size(self, size)
    }

    /// The segment size requested from the device for a block of `rounded` bytes.
    pub fn segment_size(&self, rounded: u64) -> Option<u64> {
        size::segment_size(self, rounded)
    }
}

pub(crate) fn bad(key: &str, value: &str, reason: &str) -> AllocError {
    AllocError::InvalidConfigValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// `bytes` as the configuration string's MiB value (`"30"`, `"0.5"`).
fn mib_text(bytes: u64) -> String {
    if bytes % MIB == 0 {
        (bytes / MIB).to_string()
    } else {
        (bytes as f64 / MIB as f64).to_string()
    }
}
