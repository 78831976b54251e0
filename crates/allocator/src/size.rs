//! Size rounding and size classes (PyTorch's `round_size`, `get_allocation_size`).

use crate::config::{AllocatorConfig, ROUNDUP_POWER2_INTERVALS};

/// Which pool a block belongs to by size.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SizeClass {
    /// Requests up to `small_size` (1 MiB), packed into small segments.
    Small,
    /// Everything larger.
    Large,
}

/// Divisions configured for `size`'s power-of-two interval (1 MiB .. 64 GiB, clamped).
#[inline]
pub(crate) fn divisions_for(config: &AllocatorConfig, size: u64) -> u64 {
    let log_size = size.max(1).ilog2() as i64;
    let index = (log_size - 20).clamp(0, ROUNDUP_POWER2_INTERVALS as i64 - 1) as usize;
    config.roundup_power2_divisions[index]
}

#[inline]
fn round_up(size: u64, multiple: u64) -> Option<u64> {
    if multiple.is_power_of_two() {
        // A mask instead of a division (every default granule is a power of two).
        let mask = multiple - 1;
        size.checked_add(mask).map(|s| s & !mask)
    } else {
        size.checked_next_multiple_of(multiple)
    }
}

fn roundup_power2_next_division(size: u64, divisions: u64) -> Option<u64> {
    if size.is_power_of_two() {
        return Some(size);
    }
    let floor = 1u64 << size.ilog2();
    let step = floor >> divisions.ilog2();
    if step == 0 {
        return floor.checked_mul(2);
    }
    let rounded_floor = size & !(step - 1);
    if rounded_floor == size {
        Some(size)
    } else {
        rounded_floor.checked_add(step)
    }
}

/// The block size for a request of `size` bytes (`None` on overflow).
#[inline]
pub(crate) fn round_size(config: &AllocatorConfig, size: u64) -> Option<u64> {
    let min = config.min_block_size;
    if size < min {
        return Some(min);
    }
    let divisions = divisions_for(config, size);
    if divisions > 1 && size > min.saturating_mul(divisions) {
        roundup_power2_next_division(size, divisions).and_then(|s| round_up(s, min))
    } else {
        round_up(size, min)
    }
}

/// [`round_size`] when no power-of-two divisions are configured: `size` (below 1 EiB) rounded
/// up to the block size, a power of two (`AllocatorConfig::validate`).
#[inline(always)]
pub(crate) fn round_to_block(config: &AllocatorConfig, size: u64) -> u64 {
    let mask = config.min_block_size - 1;
    (size.max(config.min_block_size) + mask) & !mask
}

/// The segment size requested from the device for a block of `rounded` bytes.
#[inline]
pub(crate) fn segment_size(config: &AllocatorConfig, rounded: u64) -> Option<u64> {
    if rounded <= config.small_size {
        Some(config.small_segment_size)
    } else if rounded < config.min_large_alloc {
        if config.fit_large_segments {
            // The most whole requests of this size a large segment holds, rounded up to
            // `round_large` (never above `large_segment_size`).
            let fitted = config.large_segment_size / rounded * rounded;
            round_up(fitted, config.round_large).map(|s| s.min(config.large_segment_size))
        } else {
            Some(config.large_segment_size)
        }
    } else {
        round_up(rounded, config.round_large)
    }
}

/// The size class of a rounded block size.
#[inline]
pub(crate) fn class_of(config: &AllocatorConfig, rounded: u64) -> SizeClass {
    if rounded <= config.small_size {
        SizeClass::Small
    } else {
        SizeClass::Large
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn block_rounding_matches_round_size_without_divisions() {
        let configs = [
            AllocatorConfig::new(),
            AllocatorConfig {
                min_block_size: 4096,
                ..AllocatorConfig::new()
            },
        ];
        for c in configs {
            let mut size = 0u64;
            while size < (1 << 60) {
                for s in [size.saturating_sub(1), size, size + 1, size + 511] {
                    assert_eq!(Some(round_to_block(&c, s)), round_size(&c, s), "{s}");
                }
                size = size * 3 + 1;
            }
        }
    }

    #[test]
    fn pytorch_rounding() {
        let c = AllocatorConfig::new();
        assert_eq!(round_size(&c, 0), Some(512));
        assert_eq!(round_size(&c, 1), Some(512));
        assert_eq!(round_size(&c, 512), Some(512));
        assert_eq!(round_size(&c, 513), Some(1024));
        assert_eq!(round_size(&c, 84 * MIB), Some(84 * MIB));
        assert_eq!(round_size(&c, u64::MAX), None);
        assert_eq!(segment_size(&c, 512), Some(2 * MIB));
        assert_eq!(segment_size(&c, MIB), Some(2 * MIB));
        assert_eq!(segment_size(&c, MIB + 512), Some(20 * MIB));
        assert_eq!(segment_size(&c, 10 * MIB), Some(10 * MIB));
        assert_eq!(segment_size(&c, 11 * MIB + 512), Some(12 * MIB));
    }

    #[test]
    fn fitted_large_segments() {
        let c = AllocatorConfig::new().fit_large_segments(true);
        assert_eq!(segment_size(&c, MIB), Some(2 * MIB));
        assert_eq!(segment_size(&c, 9 * MIB), Some(18 * MIB));
        assert_eq!(segment_size(&c, 9 * MIB / 4), Some(18 * MIB));
        assert_eq!(segment_size(&c, 3 * MIB), Some(18 * MIB));
        assert_eq!(segment_size(&c, 3 * MIB / 2), Some(20 * MIB));
        // 17 requests of 1.125 MiB (19.125 MiB), rounded up to 20 MiB.
        assert_eq!(segment_size(&c, 9 * MIB / 8), Some(20 * MIB));
        assert_eq!(segment_size(&c, 10 * MIB), Some(10 * MIB));
        assert_eq!(segment_size(&c, 11 * MIB + 512), Some(12 * MIB));
    }

    #[test]
    fn power2_divisions() {
        let c = AllocatorConfig::new().roundup_power2_divisions(4);
        // The example in PyTorch's source: 1200 with 4 divisions stays below 512*4, so 1536.
        assert_eq!(round_size(&c, 1200), Some(1536));
        assert_eq!(round_size(&c, 84 * MIB), Some(96 * MIB));
        assert_eq!(round_size(&c, 64 * MIB), Some(64 * MIB));
        assert_eq!(round_size(&c, 65 * MIB), Some(80 * MIB));
    }
}
