#![allow(dead_code)]

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::{Device, DeviceSlice, Stream};

mod counting;

pub use counting::{host_allocs, host_bytes};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

pub type Dev = Device<SimBackend>;
pub type Alloc = CachingAllocator<SimBackend>;

pub fn device(capacity: u64) -> Dev {
    Device::new(SimDevice::new(
        SimConfig::new().capacity(capacity).record_timeline(false),
    ))
    .unwrap()
}

pub fn timing_device(capacity: u64) -> Dev {
    Device::new(SimDevice::new(
        SimConfig::new()
            .capacity(capacity)
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    ))
    .unwrap()
}

pub fn setup(capacity: u64, config: AllocatorConfig) -> (Dev, Alloc) {
    let dev = device(capacity);
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    (dev, alloc)
}

pub fn read(stream: &Stream<SimBackend>, slice: DeviceSlice) -> Vec<f32> {
    stream.copy_d2h(slice).unwrap().wait_f32().unwrap()
}

/// 10 ms of device time.
pub const LONG_NS: u64 = 10_000_000;
