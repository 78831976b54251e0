//! Kernels split over threads: an output whose elements lie contiguously in its bytes is cut
//! into parts of whole items (elements, or rows) that the calling thread and rayon's threads
//! compute side by side, each part into its own bytes. Every element is computed exactly as
//! on one thread, so the numbers do not depend on the cut.

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
    run_parts(
        bytes[..items * item_bytes].chunks_mut(per * item_bytes),
        |i, part| f(i * per, part),
    );
}

/// Calls `f(i, part)` for the `i`-th of `parts`: the first on the calling thread, the others
/// on rayon's threads side by side with it. So a kernel on `n` threads wakes `n - 1` of the
/// pool's and computes a part itself, instead of handing every part to the pool and
/// sleeping until they are done (one wake-up more, and one core idle for nothing: what
/// shows when the machine's other cores are busy).
pub(crate) fn run_parts<T: Send>(parts: impl IntoIterator<Item = T>, f: impl Fn(usize, T) + Sync) {
    let mut parts = parts.into_iter().enumerate();
    let Some((_, first)) = parts.next() else {
        return;
    };
    let f = &f;
    rayon::in_place_scope(|scope| {
        for (i, part) in parts {
            scope.spawn(move |_| f(i, part));
        }
        f(0, first);
    });
}

/// The threads a kernel over `elements` elements uses: `threads` for a large one, else one.
pub(crate) fn threads_for(elements: usize, threads: usize) -> usize {
    if elements >= PARALLEL_MIN {
        threads.max(1)
    } else {
        1
    }
}
