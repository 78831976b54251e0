//! Kernels split over threads: an output whose elements lie contiguously in its bytes is cut
//! into parts of whole items (elements, or rows), each part computed into its own bytes by
//! whichever thread takes it next. Every element is computed exactly as on one thread, so the
//! numbers depend neither on the cut nor on which thread computes a part.
//!
//! The calling thread computes parts itself, and each of rayon's threads asked to help takes
//! parts too from the moment it starts. A helper that starts late (a sleeping thread takes
//! tens of microseconds to wake on a virtual machine, longer when its core is busy) then
//! costs the kernel only the parts it did not take, instead of half the kernel waited for:
//! so an output is cut into a few parts per thread, not one.

use parking_lot::Mutex;

/// Elements below which a kernel computes on one thread: under it, handing parts to other
/// threads costs more than they save.
pub(crate) const PARALLEL_MIN: usize = 1 << 16;

/// Parts per thread an output is cut into (see the module's text).
const PARTS_PER_THREAD: usize = 8;

/// The items per part when `items` items are computed on `threads` threads: at least one,
/// [`PARTS_PER_THREAD`] parts per thread where there are enough items.
pub(crate) fn items_per_part(items: usize, threads: usize) -> usize {
    let parts = threads
        .max(1)
        .saturating_mul(PARTS_PER_THREAD)
        .min(items)
        .max(1);
    items.div_ceil(parts).max(1)
}

/// Cuts `bytes`, `items` items of `item_bytes` bytes each, into parts of whole items
/// ([`items_per_part`]) and calls `f(first item, its bytes)` for each: on this thread and
/// `threads - 1` of rayon's when there are several threads, else here.
pub(crate) fn for_parts(
    bytes: &mut [u8],
    items: usize,
    item_bytes: usize,
    threads: usize,
    f: impl Fn(usize, &mut [u8]) + Sync,
) {
    if threads <= 1 || items <= 1 || item_bytes == 0 {
        return f(0, bytes);
    }
    let per = items_per_part(items, threads);
    run_parts(
        bytes[..items * item_bytes].chunks_mut(per * item_bytes),
        threads,
        |i, part| f(i * per, part),
    );
}

/// Calls `f(i, part)` for the `i`-th of `parts`, each part taken by the next free thread
/// among this one and `threads - 1` of rayon's: this thread takes parts until none is left,
/// instead of handing them all to the pool and sleeping until they are done (one wake-up
/// more, and one core idle for nothing), and waits only for the parts the others took.
pub(crate) fn run_parts<T: Send>(
    parts: impl IntoIterator<Item = T, IntoIter: Send>,
    threads: usize,
    f: impl Fn(usize, T) + Sync,
) {
    let queue = Mutex::new(parts.into_iter().enumerate());
    let take_parts = || loop {
        // The lock is held only to take a part, not while it is computed.
        let next = queue.lock().next();
        match next {
            Some((i, part)) => f(i, part),
            None => return,
        }
    };
    let take_parts = &take_parts;
    rayon::in_place_scope(|scope| {
        for _ in 1..threads {
            scope.spawn(move |_| take_parts());
        }
        take_parts();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn items_per_part_cuts_a_few_parts_per_thread_and_never_none() {
        assert_eq!(items_per_part(1 << 20, 2), (1 << 20) / 16);
        assert_eq!(items_per_part(64, 2), 4);
        assert_eq!(items_per_part(3, 2), 1);
        assert_eq!(items_per_part(0, 2), 1);
        assert_eq!(items_per_part(10, 0), 2);
    }

    #[test]
    fn every_part_is_computed_once_whatever_thread_takes_it() {
        for threads in 1..=4 {
            let mut bytes = vec![0u8; 1000];
            let calls = AtomicUsize::new(0);
            for_parts(&mut bytes, 250, 4, threads, |first, part| {
                calls.fetch_add(1, Ordering::Relaxed);
                for (k, item) in part.chunks_mut(4).enumerate() {
                    item.copy_from_slice(&((first + k) as u32).to_le_bytes());
                }
            });
            let items: Vec<u32> = bytes
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(items, (0..250).collect::<Vec<u32>>(), "threads {threads}");
            let expected = if threads == 1 {
                1
            } else {
                250usize.div_ceil(items_per_part(250, threads))
            };
            assert_eq!(calls.load(Ordering::Relaxed), expected, "threads {threads}");
        }
    }
}
