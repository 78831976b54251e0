//! [`PinnedHostAllocator`]: the caching allocator of pinned host memory, one per device.
//!
//! It caches page-locked host memory from `hal::Device::alloc_host` (real aligned host memory
//! on the simulator, `aclrtMallocHost` / `aclrtFreeHost` on ACL), as PyTorch's
//! `CachingHostAllocator` and torch_npu's host allocator do (scenario A12): requests are
//! rounded up to a power of two and freed blocks are cached per size.
//!
//! - [`PinnedBuffer::copy_to_device`] and [`PinnedBuffer::copy_from_device`] copy
//!   asynchronously straight from or into the pinned memory and record the stream's use;
//!   [`PinnedBuffer::record_stream`] declares any other. A block freed while a recorded use
//!   may still run gets a pooled event on each such stream (uses the host already saw
//!   complete need none) and is reused only after later allocations find those events
//!   complete; nothing synchronizes.
//! - The host view ([`PinnedBuffer::as_slice`], [`PinnedBuffer::as_mut_slice`]) is refused
//!   with [`AllocError::PinnedBusy`] while a copy may still write (or, for `as_mut_slice`,
//!   read) the buffer. Copies on a capturing stream are refused.
//! - [`PinnedHostAllocator::empty_cache`] returns idle blocks to the device; [`PinnedStats`]
//!   gives allocated and reserved bytes, their peaks, requested bytes, pending blocks and
//!   bytes, the device's allocs and frees, cache hits, events recorded and queried. Out of
//!   host memory returns the idle cache and retries once, then fails with
//!   [`AllocError::PinnedOutOfMemory`]; a backend without pinned memory gives
//!   [`AllocError::PinnedUnsupported`]. Dropping the last handle waits for pending blocks and
//!   returns everything.
//! - The buffers copy with the front layer's `Stream::copy_h2d_raw` / `copy_d2h_raw`
//!   (`unsafe`: the host memory stays valid and untouched until the host observes the copy
//!   complete).
//!
//! ```
//! use braid_allocator::PinnedHostAllocator;
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::{Device, Kernel};
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new())).unwrap();
//! let pinned = PinnedHostAllocator::new(device.clone());
//! let stream = device.default_stream();
//! let dst = device.alloc(4).unwrap();
//!
//! let mut x = pinned.alloc(4).unwrap();
//! x.as_mut_slice().unwrap().copy_from_slice(&1.0f32.to_le_bytes());
//! let first = x.host_ptr();
//! stream.launch(&Kernel::Busy { duration_ns: 1_000_000 }).unwrap();
//! x.copy_to_device(&stream, dst.slice()).unwrap(); // non-blocking, still queued
//! drop(x); // pending: the copy may still read the block
//! assert_ne!(pinned.alloc(4).unwrap().host_ptr(), first);
//! stream.synchronize().unwrap();
//! assert_eq!(pinned.alloc(4).unwrap().host_ptr(), first);
//! assert_eq!(pinned.stats().allocated_bytes, 0);
//! ```
//!
//! The module holds everything of the pinned allocator: the handle and its growth (here),
//! [`PinnedBuffer`] and the copies that use it (`buffer`), the locked cache of idle and
//! pending blocks (`cache`, whose event handling is the device allocator's
//! [`crate::reclaim::EventPool`]) and [`PinnedStats`] (`stats`).

mod buffer;
mod cache;
mod stats;

pub use buffer::PinnedBuffer;
pub use stats::PinnedStats;

use crate::error::AllocError;
use braid_stream_core::hal::{Backend, Device as _, HalError};
use braid_stream_core::sync::{Mutex, MutexGuard};
use braid_stream_core::{Device, HostPtr, SizeOverflow, Stream, StreamPosition};
use cache::HostCache;
use std::fmt;
use std::sync::Arc;

struct HostInner<B: Backend> {
    device: Device<B>,
    state: Mutex<HostCache<B>>,
}

impl<B: Backend> HostInner<B> {
    fn lock(&self) -> MutexGuard<'_, HostCache<B>> {
        self.state.lock()
    }
}

impl<B: Backend> Drop for HostInner<B> {
    /// The last handle is gone (every buffer holds one): wait for the copies pending blocks
    /// await, then return every block to the device.
    fn drop(&mut self) {
        let state = self.state.get_mut();
        for (ptr, size) in state.take_everything() {
            // SAFETY: `ptr` came from `alloc_host` on this device, is owned by no buffer (all are
            // gone) and leaves the cache here, so it is freed once; the copies that used it
            // completed (`take_everything` waited for them, and leaks what it could not wait
            // for).
            if let Err(err) = unsafe { self.device.hal().free_host(ptr) } {
                tracing::warn!(%err, %ptr, size, "returning pinned memory on drop failed");
            }
        }
    }
}

/// A caching allocator of pinned (page-locked) host memory for one device, as PyTorch's
/// `CachingHostAllocator` and torch_npu's host allocator over `aclrtMallocHost`. Cheap to
/// clone (a shared handle); `Send + Sync`.
///
/// Requests are rounded up to a power of two and freed blocks are cached per size. A block
/// freed while a copy that uses it may still run (a non-blocking copy recorded by
/// [`PinnedBuffer::copy_to_device`], [`PinnedBuffer::copy_from_device`] or
/// [`PinnedBuffer::record_stream`]) is not reused until the host has seen that copy complete:
/// an event is recorded on each such stream and queried by later allocations. Nothing blocks
/// the host except dropping the last handle, which waits for pending blocks and returns every
/// block to the device.
pub struct PinnedHostAllocator<B: Backend> {
    inner: Arc<HostInner<B>>,
}

impl<B: Backend> Clone for PinnedHostAllocator<B> {
    fn clone(&self) -> Self {
        PinnedHostAllocator {
            inner: self.inner.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for PinnedHostAllocator<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stats = self.stats();
        f.debug_struct("PinnedHostAllocator")
            .field("device", &self.inner.device)
            .field("allocated", &stats.allocated_bytes)
            .field("reserved", &stats.reserved_bytes)
            .finish()
    }
}

impl<B: Backend> PinnedHostAllocator<B> {
    /// The pinned host allocator of `device`. Whether the backend has pinned memory shows at
    /// the first allocation ([`AllocError::PinnedUnsupported`]).
    pub fn new(device: Device<B>) -> Self {
        PinnedHostAllocator {
            inner: Arc::new(HostInner {
                device,
                state: Mutex::new(HostCache::default()),
            }),
        }
    }

    /// The device whose pinned memory this is.
    pub fn device(&self) -> &Device<B> {
        &self.inner.device
    }

    /// A pinned buffer of `size` bytes (zeroed when fresh from the device; a reused block keeps
    /// its previous contents). A zero-byte request gives an empty buffer holding no memory.
    /// Completed pending blocks are reclaimed first; a cached block of the same size class is
    /// reused, else one is allocated from the device, retrying once after returning the idle
    /// cache on out of memory.
    pub fn alloc(&self, size: u64) -> Result<PinnedBuffer<B>, AllocError> {
        if size == 0 {
            return Ok(PinnedBuffer::new(self.clone(), None, 0, 0));
        }
        let overflow = || {
            AllocError::SizeOverflow(SizeOverflow {
                call: "PinnedHostAllocator::alloc",
                what: format!("{size} bytes rounded to a power of two in host memory"),
            })
        };
        let rounded = size.checked_next_power_of_two().ok_or_else(overflow)?;
        let len = usize::try_from(size).map_err(|_| overflow())?;
        usize::try_from(rounded).map_err(|_| overflow())?;
        let cached = self.inner.lock().take_idle(&self.inner.device, rounded);
        let hit = cached.is_some();
        let ptr = match cached {
            Some(ptr) => ptr,
            None => self.grow(size, rounded)?,
        };
        self.inner.lock().stats.on_buffer_alloc(rounded, size, hit);
        tracing::trace!(%ptr, size, rounded, cache_hit = hit, "pinned alloc");
        Ok(PinnedBuffer::new(self.clone(), Some(ptr), len, rounded))
    }

    /// A new block from the device; on out of memory, the idle cache goes back first and the
    /// allocation is retried once.
    fn grow(&self, requested: u64, rounded: u64) -> Result<HostPtr, AllocError> {
        let first = self.host_alloc(rounded);
        let result = match first {
            Err(HalError::OutOfMemory { .. }) => {
                self.inner.lock().stats.num_alloc_retries += 1;
                if let Err(err) = self.empty_cache() {
                    tracing::warn!(%err, "returning idle pinned blocks before a retry failed");
                }
                self.host_alloc(rounded)
            }
            other => other,
        };
        result.map_err(|err| match err {
            HalError::OutOfMemory { .. } => {
                let mut st = self.inner.lock();
                st.stats.num_ooms += 1;
                let s = &st.stats;
                tracing::warn!(requested, rounded, "pinned host memory exhausted");
                AllocError::PinnedOutOfMemory {
                    requested,
                    rounded,
                    reserved: s.reserved_bytes,
                    allocated: s.allocated_bytes,
                    pending: s.pending_bytes,
                }
            }
            HalError::Unsupported(_) => AllocError::PinnedUnsupported { backend: B::NAME },
            other => AllocError::Backend(other),
        })
    }

    fn host_alloc(&self, size: u64) -> Result<HostPtr, HalError> {
        let ptr = self.inner.device.hal().alloc_host(size)?;
        self.inner.lock().stats.on_host_alloc(size);
        tracing::debug!(%ptr, size, "pinned block allocated from the device");
        Ok(ptr)
    }

    /// Returns every idle cached block to the device (after reclaiming completed pending
    /// blocks). Live and still-pending blocks stay. During a capture nothing is returned
    /// (freeing pinned memory synchronizes, which a capture forbids). The first failure is
    /// returned after trying every block; blocks the device refused stay cached.
    pub fn empty_cache(&self) -> Result<(), AllocError> {
        let device = &self.inner.device;
        let idle = {
            let mut st = self.inner.lock();
            st.process_pending(device);
            if device.is_capturing() {
                tracing::debug!("pinned empty_cache skipped during a capture");
                return Ok(());
            }
            st.take_all_idle()
        };
        let mut first_err = None;
        for (ptr, size) in idle {
            // SAFETY: `ptr` came from `alloc_host` on this device; it was idle (no buffer owns
            // it, every copy that used it completed) and left the cache above, so it is freed
            // once.
            match unsafe { device.hal().free_host(ptr) } {
                Ok(()) => self.inner.lock().stats.on_host_free(size),
                Err(err) => {
                    tracing::warn!(%err, %ptr, size, "free_host failed; the block stays cached");
                    self.inner.lock().push_idle(ptr, size);
                    first_err.get_or_insert(AllocError::Backend(err));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> PinnedStats {
        self.inner.lock().stats
    }

    /// Takes back a buffer's block; `uses` are the last positions of the copies that may
    /// access it.
    pub(crate) fn release(
        &self,
        ptr: HostPtr,
        size: u64,
        requested: u64,
        uses: Vec<(Stream<B>, StreamPosition)>,
    ) {
        let mut st = self.inner.lock();
        st.stats.on_buffer_free(size, requested);
        st.free(&self.inner.device, ptr, size, uses);
    }
}
