//! [`CollectiveBuffer`]: what the collectives of `braid-collective` accept as a buffer.

use crate::hal::Backend;
use crate::memory::DeviceMemory;
use crate::types::DeviceSlice;

/// Device memory a collective reads or writes: the whole of
/// [`CollectiveBuffer::device_slice`]. Device slices and device memory are buffers; the
/// caching allocator's buffers are too (`braid-allocator` implements it), so each goes in as
/// it is.
pub trait CollectiveBuffer {
    /// The bytes the collective uses.
    fn device_slice(&self) -> DeviceSlice;
}

impl CollectiveBuffer for DeviceSlice {
    fn device_slice(&self) -> DeviceSlice {
        *self
    }
}

impl<B: Backend> CollectiveBuffer for DeviceMemory<B> {
    fn device_slice(&self) -> DeviceSlice {
        self.slice()
    }
}

impl<T: CollectiveBuffer + ?Sized> CollectiveBuffer for &T {
    fn device_slice(&self) -> DeviceSlice {
        (**self).device_slice()
    }
}
