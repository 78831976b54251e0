//! The pinned host allocator ([`braid_allocator::PinnedHostAllocator`]) on every backend: A12
//! (a block freed while a non-blocking copy uses it is not reused; once idle, alloc, free,
//! alloc gives the same pointer), data round trips straight from and into pinned memory, and
//! `empty_cache` returning blocks to the device.

use crate::support::{alloc_f32, download, long_work, ramp, still_works};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, PinnedHostAllocator};
use braid_stream_core::hal::Backend;
use braid_stream_core::{f32_bytes, f32s_from_bytes};

/// A12 (PyTorch's `test_caching_pinned_memory`): the H2D copy from a pinned buffer is queued
/// behind long work when the buffer is dropped; a same-size allocation must get another block.
/// After the stream synchronized, allocations get the block back, twice in a row; two host
/// allocations and one event in all.
pub fn pinned_block_in_flight_is_not_reused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let pinned = PinnedHostAllocator::new(device.clone());
    let s = device.create_stream(0)?;
    let dst = alloc_f32(&device, 1)?;
    let mut x = pinned.alloc(4)?;
    x.as_mut_slice()?.copy_from_slice(&f32_bytes(&[1.0]));
    let ptr = x.host_ptr();
    long_work(&s)?;
    let copy = x.copy_to_device(&s, dst.slice())?;
    ensure!(!device.is_complete(copy), "the copy should still be queued");
    drop(x);
    ensure_eq!(pinned.stats().pending_blocks, 1, "pending blocks");
    let z = pinned.alloc(4)?;
    ensure!(
        z.host_ptr() != ptr,
        "the block was reused while the copy may still read it"
    );
    drop(z);
    s.synchronize()?;
    let x = pinned.alloc(4)?;
    ensure_eq!(
        x.host_ptr(),
        ptr,
        "the block is reused once the copy is done"
    );
    drop(x);
    ensure_eq!(pinned.alloc(4)?.host_ptr(), ptr, "alloc, free, alloc");
    ensure_eq!(
        download(&s, dst.slice())?,
        vec![1.0],
        "the copy read the bytes written before it"
    );
    let stats = pinned.stats();
    ensure_eq!(
        (
            stats.pending_blocks,
            stats.num_host_alloc,
            stats.num_events_recorded
        ),
        (0, 2, 1),
        "(pending blocks, host allocations, events recorded)"
    );
    still_works(&device)
}

/// Host → device → host through pinned buffers, with the host view refused while the readback
/// runs; then `empty_cache` returns every idle block and the books balance.
pub fn pinned_round_trip_and_empty_cache<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let pinned = PinnedHostAllocator::new(device.clone());
    let s = device.create_stream(0)?;
    let n = 300;
    let values = ramp(n, 17, 0.25);
    let mem = alloc_f32(&device, n)?;
    let mut up = pinned.alloc(4 * n as u64)?;
    up.as_mut_slice()?.copy_from_slice(&f32_bytes(&values));
    up.copy_to_device(&s, mem.slice())?;
    let mut back = pinned.alloc(4 * n as u64)?;
    long_work(&s)?;
    back.copy_from_device(&s, mem.slice())?;
    expect_err!(
        back.as_slice(),
        AllocError::PinnedBusy { .. },
        "reading while the readback runs"
    );
    s.synchronize()?;
    ensure_eq!(
        f32s_from_bytes(back.as_slice()?),
        values,
        "values after the round trip"
    );
    let stats = pinned.stats();
    ensure_eq!(
        stats.allocated_bytes,
        2048 * 2,
        "allocated (two 2 KiB classes)"
    );
    drop((up, back));
    pinned.empty_cache()?;
    let stats = pinned.stats();
    ensure_eq!(
        (
            stats.reserved_bytes,
            stats.num_host_alloc,
            stats.num_host_free
        ),
        (0, 2, 2),
        "reserved, host allocs and frees after empty_cache"
    );
    still_works(&device)
}
