//! Expandable segments (C28/C29 groundwork): growth by pages, unmapping free pages at the
//! end and in holes, and a typed error on a backend without virtual memory.

use crate::support::{all_equal, allocator, allocator_works, download, fill, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, AllocatorConfig};
use braid_stream_core::hal::Backend;

/// C28/C29 groundwork: expandable segments. On a backend with virtual memory, one stream's
/// large requests share one segment that grows by 20 MiB pages (a block continues the free
/// space at the end, across mappings, with its data intact), reserved memory is what the
/// device has mapped, and `empty_cache` unmaps the free pages at the end, then a free page
/// between live blocks (a hole a later request maps again), and finally the whole segment. On a backend without it, asking for expandable segments is a typed error and the
/// allocator stays usable.
pub fn expandable_segments_grow_and_shrink<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    if braid_stream_core::hal::Device::vmm_granularity(device.hal()).is_none() {
        expect_err!(
            alloc.set_expandable_segments(true),
            AllocError::ExpandableSegmentsUnsupported { .. },
            "expandable segments without virtual memory"
        );
        return allocator_works(&alloc);
    }
    alloc.set_expandable_segments(true)?;
    let used = || -> Result<u64, CaseError> {
        let info = device.mem_info()?;
        Ok(info.total - info.free)
    };
    let before = used()?;
    let s = device.create_stream(0)?;
    let a = alloc.alloc(8 * MIB, &s)?;
    let b = alloc.alloc(30 * MIB, &s)?;
    ensure_eq!(
        b.ptr().0,
        a.ptr().0 + 8 * MIB,
        "the block continues the segment"
    );
    ensure_eq!(alloc.memory_reserved(), 40 * MIB, "two 20 MiB pages");
    ensure_eq!(
        used()? - before,
        40 * MIB,
        "the device mapped what is reserved"
    );
    let snapshot = alloc.snapshot();
    ensure_eq!(snapshot.segments.len(), 1, "one segment");
    ensure!(
        snapshot.segments[0].is_expandable,
        "the segment is expandable"
    );
    fill(&s, a.slice(), 1.5)?;
    fill(&s, b.slice(), 2.5)?;
    all_equal(
        &download(&s, b.slice())?,
        2.5,
        "a block across two mappings",
    )?;
    drop(b);
    alloc.empty_cache();
    ensure_eq!(
        alloc.memory_reserved(),
        20 * MIB,
        "the free page at the end is unmapped"
    );
    ensure_eq!(used()? - before, 20 * MIB, "and its memory freed");
    all_equal(&download(&s, a.slice())?, 1.5, "live data after the unmap")?;
    // A free block between live ones: the whole page inside it is unmapped (a hole), and a
    // request that fits the hole maps it again.
    let b = alloc.alloc(44 * MIB, &s)?;
    let c = alloc.alloc(8 * MIB, &s)?;
    ensure_eq!(c.ptr().0, a.ptr().0 + 52 * MIB, "c follows b");
    fill(&s, c.slice(), 3.5)?;
    drop(b);
    alloc.empty_cache();
    ensure_eq!(
        alloc.memory_reserved(),
        40 * MIB,
        "the page [20, 40) MiB is unmapped"
    );
    ensure_eq!(used()? - before, 40 * MIB, "and its memory freed");
    ensure_eq!(
        alloc.snapshot().segments.len(),
        2,
        "one segment per mapped range"
    );
    all_equal(&download(&s, a.slice())?, 1.5, "data before the hole")?;
    all_equal(&download(&s, c.slice())?, 3.5, "data after the hole")?;
    let d = alloc.alloc(44 * MIB, &s)?;
    ensure_eq!(d.ptr().0, a.ptr().0 + 8 * MIB, "the hole is mapped again");
    ensure_eq!(used()? - before, 60 * MIB, "the device mapped the hole");
    fill(&s, d.slice(), 4.5)?;
    all_equal(
        &download(&s, d.slice())?,
        4.5,
        "a block across the filled hole",
    )?;
    all_equal(&download(&s, c.slice())?, 3.5, "data after the filled hole")?;
    drop((c, d));
    drop(a);
    alloc.empty_cache();
    ensure_eq!(alloc.memory_reserved(), 0, "everything unmapped");
    ensure_eq!(used()?, before, "the device has its memory back");
    ensure!(alloc.snapshot().segments.is_empty(), "no segment left");
    allocator_works(&alloc)
}
