//! Kernels split over threads: an output whose elements lie contiguously in its bytes is cut
//! into parts of whole items (elements, or rows) that rayon's threads compute side by side,
//! each part into its own bytes. Every element is computed exactly as on one thread, so the
//! numbers do not depend on the cut.

use rayon::prelude::*;

/// Elements below which a kernel computes on one thread: under it, handing parts to other
/// threads costs more than they save.
pub(crate) const PARALLEL_MIN: usize = 1 << 16;

/// Cuts `bytes`, `items` items of `item_bytes` bytes each, into at most `threads` parts of
/// whole items and calls `f(first item, its bytes)` for each: on rayon's threads when there
/// are several parts, else here.
pub(crate) fn for_parts(
    bytes: &mut [u8],
    items: usize,
    item_bytes: usize,
    threads: usize,
    f: impl Fn(usize, &mut [u8]) + Sync,
) {
    let parts = threads.min(items).max(1);
    if parts == 1 || item_bytes == 0 {
        return f(0, bytes);
    }
    let per = items.div_ceil(parts);
    bytes[..items * item_bytes]
        .par_chunks_mut(per * item_bytes)
        .enumerate()
        .for_each(|(i, part)| f(i * per, part));
}

/// The threads a kernel over `elements` elements uses: `threads` for a large one, else one.
pub(crate) fn threads_for(elements: usize, threads: usize) -> usize {
    if elements >= PARALLEL_MIN {
        threads.max(1)
    } else {
        1
    }
}
