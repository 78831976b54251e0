#![allow(dead_code)]

use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{Device, DeviceSlice, Kernel, Stream};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

pub type B = SimBackend;
pub type Dev = Device<B>;
pub type Alloc = CachingAllocator<B>;
pub type Buf = DeviceBuffer<B>;

pub fn setup(capacity: u64) -> (Dev, Alloc) {
    let dev = Device::new(SimDevice::new(
        SimConfig::new().capacity(capacity).record_timeline(false),
    ))
    .unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    (dev, alloc)
}

pub fn read(stream: &Stream<B>, slice: DeviceSlice) -> Vec<f32> {
    stream.copy_d2h(slice).unwrap().wait_f32().unwrap()
}

pub fn fill(stream: &Stream<B>, buf: &Buf, value: f32) {
    stream
        .launch(&Kernel::Fill {
            dst: buf.slice(),
            value,
        })
        .unwrap();
}

pub fn reports(dev: &Dev) -> u64 {
    dev.hal().sanitizer_report_count()
}
