//! [`CollectiveBuffer`]: what a collective accepts as a buffer, so device slices, raw device
//! memory and the caching allocator's buffers all go in as they are.

use braid_allocator::DeviceBuffer;
use braid_stream_core::hal::Backend;
use braid_stream_core::{DeviceMemory, DeviceSlice};

/// Device memory a collective reads or writes: the whole of [`CollectiveBuffer::device_slice`].
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

/// The requested bytes of an allocator buffer ([`DeviceBuffer::slice`]).
impl<B: Backend> CollectiveBuffer for DeviceBuffer<B> {
    fn device_slice(&self) -> DeviceSlice {
        self.slice()
    }
}

impl<T: CollectiveBuffer + ?Sized> CollectiveBuffer for &T {
    fn device_slice(&self) -> DeviceSlice {
        (**self).device_slice()
    }
}
