//! Sizes, blocks and segments (C30 and PyTorch's pool rules): rounding settings, small and
//! large pools, splitting, best fit, coalescing, and blocks staying on their stream.

use crate::support::{all_equal, allocator, allocator_works, download, fill, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, AllocatorConfig, BlockState, SegmentType};
use braid_stream_core::hal::Backend;
use braid_stream_core::DevicePtr;

/// C30: size rounding. 84 MiB is allocated exactly by default, as 96 MiB with
/// `roundup_power2_divisions:4` and 88 MiB with the per-size table
/// `[64:8,128:2,256:2,512:2,1024:1,>:1]` (requested bytes stay 84 MiB); invalid settings are
/// `AllocError::InvalidConfigValue` naming the key.
pub fn size_rounding_settings<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let nbytes = 84 * MIB;
    let table =
        AllocatorConfig::parse("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]")?;
    ensure_eq!(
        table.roundup_power2_divisions[..8],
        [8, 8, 8, 8, 8, 8, 8, 2],
        "the table's first intervals"
    );
    ensure_eq!(table.roundup_power2_divisions[10], 1, "interval 10");
    ensure_eq!(table.roundup_power2_divisions[15], 1, "interval 15");
    ensure_eq!(table.round_size(200 * MIB), Some(256 * MIB), "200 MiB");
    ensure_eq!(table.round_size(2000 * MIB), Some(2000 * MIB), "2000 MiB");
    for (config, expect, what) in [
        (AllocatorConfig::new(), 84 * MIB, "default"),
        (
            AllocatorConfig::parse("roundup_power2_divisions:4")?,
            96 * MIB,
            "roundup_power2_divisions:4",
        ),
        (table, 88 * MIB, "the per-size table"),
    ] {
        let alloc = allocator(&device, config)?;
        let buf = alloc.alloc(nbytes, &device.default_stream())?;
        ensure_eq!(buf.size(), expect, "block size with {what}");
        ensure_eq!(alloc.memory_allocated(), expect, "allocated with {what}");
        ensure_eq!(
            alloc.memory_stats().requested_bytes.all.current,
            nbytes,
            "requested with {what}"
        );
        drop(buf);
        allocator_works(&alloc)?;
    }
    for bad in [
        "roundup_power2_divisions:3",
        "roundup_power2_divisions:[64:3]",
        "roundup_power2_divisions:[63:2]",
        "roundup_power2_divisions:[64:2",
        "roundup_power2_divisions:x",
    ] {
        expect_err!(
            AllocatorConfig::parse(bad),
            AllocError::InvalidConfigValue { ref key, .. } if key == "roundup_power2_divisions",
            "{bad:?}"
        );
    }
    still_works_after_config_errors(h)
}

/// Opens a device and proves an allocator with the default configuration works on it.
fn still_works_after_config_errors<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    allocator_works(&alloc)
}

/// Blocks and segments: small requests are packed into one 2 MiB segment and split, a freed
/// hole is reused by best fit, everything coalesces; 1–10 MiB requests come from 20 MiB
/// segments, larger ones get their own rounded to 2 MiB; a freed block is reused only by its
/// own stream; `empty_cache` returns every segment.
pub fn blocks_split_coalesce_and_stay_on_their_stream<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let a = alloc.alloc(1000, &main)?;
    let b = alloc.alloc(1000, &main)?;
    let c = alloc.alloc(1000, &main)?;
    ensure_eq!(b.ptr().0, a.ptr().0 + 1024, "b follows a");
    ensure_eq!(c.ptr().0, b.ptr().0 + 1024, "c follows b");
    let snap = alloc.snapshot();
    ensure_eq!(snap.segments.len(), 1, "segments");
    ensure_eq!(
        snap.segments[0].segment_type,
        SegmentType::Small,
        "segment type"
    );
    ensure_eq!(snap.segments[0].total_size, 2 * MIB, "segment size");
    ensure_eq!(snap.segments[0].blocks.len(), 4, "blocks in the segment");
    let b_ptr = b.ptr();
    drop(b);
    let stats = alloc.memory_stats();
    ensure_eq!(stats.inactive_split.all.current, 2, "inactive split blocks");
    ensure_eq!(
        stats.inactive_split_bytes.all.current,
        2 * MIB - 2048,
        "inactive split bytes"
    );
    let b2 = alloc.alloc(600, &main)?;
    ensure_eq!(b2.ptr(), b_ptr, "best fit reuses the hole");
    fill(&main, b2.slice(), 4.0)?;
    all_equal(
        &download(&main, b2.slice())?,
        4.0,
        "data in the reused hole",
    )?;
    drop((a, b2, c));
    let snap = alloc.snapshot();
    ensure_eq!(snap.segments[0].blocks.len(), 1, "blocks after coalescing");
    ensure_eq!(
        snap.segments[0].blocks[0].state,
        BlockState::Inactive,
        "the coalesced block"
    );
    ensure_eq!(
        alloc.memory_stats().inactive_split.all.current,
        0,
        "inactive split blocks after coalescing"
    );

    let big = alloc.alloc(11 * MIB + 1, &main)?;
    let mid = alloc.alloc(5 * MIB, &main)?;
    let snap = alloc.snapshot();
    let segment_of = |p: DevicePtr| {
        snap.segments
            .iter()
            .find(|s| s.address <= p.0 && p.0 < s.address + s.total_size)
            .map(|s| (s.total_size, s.segment_type))
    };
    ensure_eq!(
        segment_of(mid.ptr()),
        Some((20 * MIB, SegmentType::Large)),
        "segment of a 5 MiB block"
    );
    ensure_eq!(
        segment_of(big.ptr()),
        Some((12 * MIB, SegmentType::Large)),
        "segment of an 11 MiB block"
    );
    let mid2 = alloc.alloc(5 * MIB, &main)?;
    ensure_eq!(
        mid2.ptr().0,
        mid.ptr().0 + 5 * MIB,
        "a second 5 MiB block is split from the same segment"
    );
    alloc.check_invariants()?;

    let side = device.create_stream(0)?;
    let p = mid2.ptr();
    drop(mid2);
    let on_side = alloc.alloc(5 * MIB, &side)?;
    ensure!(
        on_side.ptr() != p,
        "a block freed on main was given to side"
    );
    ensure_eq!(on_side.stream(), side.id(), "the buffer's stream");
    let again = alloc.alloc(5 * MIB, &main)?;
    ensure_eq!(again.ptr(), p, "main gets its freed block back");
    drop((mid, big, on_side, again));
    alloc.empty_cache();
    ensure_eq!(alloc.memory_reserved(), 0, "reserved after empty_cache");
    allocator_works(&alloc)
}
