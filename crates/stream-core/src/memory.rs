//! Raw device memory and host readbacks.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Result, StreamError};
use crate::event::Event;
use crate::hal::{Backend, Device as _};
use crate::ordering::StreamPosition;
use crate::types::{DevicePtr, DeviceSlice};
use bytes::Bytes;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::Arc;

/// A raw segment of device memory, returned to the device when dropped.
///
/// Dropping synchronizes the device first (as `cudaFree` and `aclrtFree` do), so no queued work
/// sees the memory freed; a segment dropped during a capture is freed when the capture ends.
///
/// # Collectives
///
/// Keep a segment a collective reads or writes until that collective has completed on every
/// rank (synchronize its stream, or an event recorded after it, first). The drop's synchronize
/// cannot finish a collective other ranks have not joined yet: it gives up after the
/// collective timeout, and the memory goes back to the device with the collective's access
/// still to come, so another rank may receive wrong numbers. The simulator's sanitizer reports
/// it as a use after free naming the collective and its rank. The caching allocator's buffers
/// (`braid-allocator`) hold their memory back from other buffers until the work using them has
/// completed (automatically, or through `record_stream` in its manual cross-stream mode).
pub struct DeviceMemory<B: Backend> {
    device: Device<B>,
    ptr: DevicePtr,
    len: u64,
}

impl<B: Backend> fmt::Debug for DeviceMemory<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceMemory({} bytes at {})", self.len, self.ptr)
    }
}

impl<B: Backend> DeviceMemory<B> {
    pub(crate) fn new(device: Device<B>, len: u64) -> Result<Self> {
        let ptr = device.hal().alloc(len)?;
        Ok(DeviceMemory { device, ptr, len })
    }

    /// The first byte.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the segment is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole segment as a slice.
    pub fn slice(&self) -> DeviceSlice {
        DeviceSlice::new(self.ptr, self.len)
    }

    /// `len` bytes at `offset`.
    pub fn range(&self, offset: u64, len: u64) -> Result<DeviceSlice> {
        self.slice()
            .sub(offset, len)
            .ok_or(StreamError::OutOfBounds {
                what: "device memory range",
                offset,
                len,
                capacity: self.len,
            })
    }
}

impl<B: Backend> Drop for DeviceMemory<B> {
    fn drop(&mut self) {
        // The gate keeps a capture from beginning between the check and the free.
        let _gate = self.device.inner.gate_shared();
        let capturing = {
            let mut st = self.device.inner.lock();
            let capturing = st.ordering.captures().next().is_some();
            if capturing {
                st.deferred_frees.push(self.ptr);
            }
            capturing
        };
        if !capturing {
            free_segments_gated(&self.device, vec![self.ptr]);
        }
    }
}

/// Synchronizes the device and frees `ptrs`; the caller holds the capture gate shared and saw
/// no capture active.
pub(crate) fn free_segments_gated<B: Backend>(device: &Device<B>, ptrs: Vec<DevicePtr>) {
    if let Err(err) = device.synchronize_gated() {
        tracing::warn!(%err, "synchronize before freeing raw device memory failed");
    }
    for ptr in ptrs {
        // SAFETY: `ptr` came from `alloc` on this device and is freed once (it leaves its owner
        // here); the synchronize above finished all queued eager work, and no capture is active.
        if let Err(err) = unsafe { device.hal().free(ptr) } {
            tracing::warn!(%err, %ptr, "freeing raw device memory failed");
        }
    }
}

/// Host memory a device-to-host copy writes into.
pub(crate) struct Staging {
    bytes: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the device writes the buffer only before the copy completes and the host reads it only
// after observing completion (`HostReadback` checks the ordering model first), so there is no
// concurrent access from two threads.
unsafe impl Sync for Staging {}

impl Staging {
    pub(crate) fn new(len: usize) -> Arc<Self> {
        Arc::new(Staging {
            bytes: (0..len).map(|_| UnsafeCell::new(0)).collect(),
        })
    }

    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.bytes.as_ptr())
    }

    /// # Safety
    /// The copy into this buffer has completed (observed by the host).
    unsafe fn read(&self) -> Bytes {
        let len = self.bytes.len();
        // SAFETY: completion was observed, so nothing writes the buffer any more; the cells are
        // contiguous `u8`s.
        let slice = unsafe { std::slice::from_raw_parts(self.as_mut_ptr() as *const u8, len) };
        Bytes::copy_from_slice(slice)
    }
}

/// The result of [`crate::Stream::copy_d2h`]: readable once the copy has completed.
pub struct HostReadback<B: Backend> {
    staging: Arc<Staging>,
    position: StreamPosition,
    done: Event<B>,
}

impl<B: Backend> fmt::Debug for HostReadback<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HostReadback({} bytes, ready: {})",
            self.staging.bytes.len(),
            self.is_ready()
        )
    }
}

impl<B: Backend> HostReadback<B> {
    pub(crate) fn new(staging: Arc<Staging>, position: StreamPosition, done: Event<B>) -> Self {
        HostReadback {
            staging,
            position,
            done,
        }
    }

    /// Where the copy sits in its stream.
    pub fn position(&self) -> StreamPosition {
        self.position
    }

    /// Whether the host has observed the copy complete.
    pub fn is_ready(&self) -> bool {
        self.done.device().is_complete(self.position)
    }

    /// The bytes, if the host has observed the copy complete; [`StreamError::NotReady`] otherwise.
    pub fn try_bytes(&self) -> Result<Bytes> {
        if !self.is_ready() {
            return Err(StreamError::NotReady);
        }
        // SAFETY: `is_ready` means the host observed the copy complete.
        Ok(unsafe { self.staging.read() })
    }

    /// Waits for the copy (an event synchronize) and returns the bytes.
    pub fn wait(&self) -> Result<Bytes> {
        self.done.synchronize()?;
        self.try_bytes()
    }

    /// Waits for the copy and decodes little-endian `f32`s.
    pub fn wait_f32(&self) -> Result<Vec<f32>> {
        Ok(f32s_from_bytes(&self.wait()?))
    }

    /// Waits for the copy and decodes its elements of `dtype`, widened to `f32` (a trailing
    /// partial element is ignored); `wait_as(DType::F32)` is [`HostReadback::wait_f32`].
    pub fn wait_as(&self, dtype: DType) -> Result<Vec<f32>> {
        Ok(dtype.decode(&self.wait()?))
    }
}

/// Encodes `f32`s as little-endian bytes, the layout the kernels use.
pub fn f32_bytes(values: &[f32]) -> Bytes {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

/// Decodes little-endian `f32`s (a trailing partial element is ignored).
pub fn f32s_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
