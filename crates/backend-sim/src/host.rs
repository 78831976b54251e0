//! Pinned host memory of a simulated device: real host allocations, counted and capped.
//!
//! The simulator's copies read and write host memory through raw pointers when the host clock
//! passes them, so any host memory works for them; this heap models what `aclrtMallocHost` /
//! `cudaHostAlloc` add: a separate, limited supply, page alignment, and accounting. Everything
//! still allocated is released when the device's last handle drops.

use braid_stream_core::hal::HalError;
use braid_stream_core::types::HostPtr;
use std::alloc::Layout;
use std::collections::HashMap;

/// Alignment of every pinned allocation (one page, as page-locked memory is).
pub(crate) const HOST_ALIGN: usize = 4096;

/// The live pinned allocations of one device.
#[derive(Debug)]
pub(crate) struct HostHeap {
    capacity: u64,
    /// Live allocations by address, with their layout (needed to deallocate).
    live: HashMap<usize, Layout>,
    used: u64,
    peak: u64,
    allocations: u64,
    frees: u64,
}

impl HostHeap {
    pub(crate) fn new(capacity: u64) -> Self {
        HostHeap {
            capacity,
            live: HashMap::new(),
            used: 0,
            peak: 0,
            allocations: 0,
            frees: 0,
        }
    }

    /// Allocates `size` bytes, zeroed; beyond the capacity is out of memory.
    pub(crate) fn alloc(&mut self, size: u64) -> Result<HostPtr, HalError> {
        if size == 0 {
            return Err(HalError::InvalidArgument(
                "alloc_host: size must not be 0".to_string(),
            ));
        }
        let free = self.capacity - self.used;
        let oom = HalError::OutOfMemory {
            requested: size,
            free,
            total: self.capacity,
        };
        if size > free {
            return Err(oom);
        }
        let layout = usize::try_from(size)
            .ok()
            .and_then(|len| Layout::from_size_align(len, HOST_ALIGN).ok())
            .ok_or_else(|| oom.clone())?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = HostPtr::new(raw).ok_or(oom)?;
        self.live.insert(ptr.addr(), layout);
        self.used += size;
        self.peak = self.peak.max(self.used);
        self.allocations += 1;
        Ok(ptr)
    }

    /// Frees an allocation of this heap; anything else is an invalid argument.
    pub(crate) fn free(&mut self, ptr: HostPtr) -> Result<(), HalError> {
        let layout = self.live.remove(&ptr.addr()).ok_or_else(|| {
            HalError::InvalidArgument(format!(
                "free_host: {ptr} is not a live pinned allocation of this device"
            ))
        })?;
        // SAFETY: `ptr` was returned by `alloc_zeroed` with `layout` and is removed from the
        // live map above, so it is deallocated once.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        self.used -= layout.size() as u64;
        self.frees += 1;
        Ok(())
    }

    /// Bytes allocated now.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// Highest `used` so far.
    pub(crate) fn peak(&self) -> u64 {
        self.peak
    }

    /// Successful allocations.
    pub(crate) fn allocations(&self) -> u64 {
        self.allocations
    }

    /// Successful frees.
    pub(crate) fn frees(&self) -> u64 {
        self.frees
    }
}

impl Drop for HostHeap {
    /// The device is gone, and its queued work with it: nothing can copy into these any more.
    fn drop(&mut self) {
        for (addr, layout) in self.live.drain() {
            // SAFETY: every live entry came from `alloc_zeroed` with its layout and was not
            // freed (freeing removes it).
            unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_counted_capped_and_freed_once() {
        let mut heap = HostHeap::new(16 << 10);
        let a = heap.alloc(4096).unwrap();
        assert_eq!(a.addr() % HOST_ALIGN, 0);
        let b = heap.alloc(100).unwrap();
        assert_eq!((heap.used(), heap.allocations()), (4196, 2));
        assert!(matches!(
            heap.alloc(16 << 10),
            Err(HalError::OutOfMemory {
                requested: 16384,
                free: 12188,
                total: 16384
            })
        ));
        assert!(matches!(heap.alloc(0), Err(HalError::InvalidArgument(_))));
        heap.free(a).unwrap();
        assert!(matches!(heap.free(a), Err(HalError::InvalidArgument(_))));
        assert_eq!((heap.used(), heap.peak(), heap.frees()), (100, 4196, 1));
        // `b` is left for the drop to release.
        let _ = b;
    }
}
