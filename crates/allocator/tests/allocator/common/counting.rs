//! The test binary's global allocator: it counts, per thread, the host allocations and the
//! bytes asked for (so other test threads do not interfere), for the tests that check a path
//! allocates nothing or little on the host.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static HOST_ALLOCS: Cell<u64> = const { Cell::new(0) };
    static HOST_BYTES: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    HOST_ALLOCS.with(|c| c.set(c.get() + 1));
    HOST_BYTES.with(|c| c.set(c.get() + bytes as u64));
}

// SAFETY: forwards to the system allocator unchanged; only counts calls and bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The host allocations (and reallocations) the current thread has made.
pub fn host_allocs() -> u64 {
    HOST_ALLOCS.with(Cell::get)
}

/// The bytes the current thread has asked of the host allocator.
pub fn host_bytes() -> u64 {
    HOST_BYTES.with(Cell::get)
}
