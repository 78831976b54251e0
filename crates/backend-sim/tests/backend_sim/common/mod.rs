//! Helpers shared by the integration tests.
#![allow(dead_code)]

use braid_backend_sim::{
    DeviceProfile, NodeConfig, SimComm, SimConfig, SimDevice, SimNode, SimStream, Topology,
};
use braid_stream_core::collective::RootInfo;
use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use std::time::Duration;

/// A profile with round numbers: one unit of each resource, 1 flop/ns on both units (at full
/// efficiency whatever the size), 1 byte/ns everywhere, 1 GiB of memory, a 100 ns
/// kernel floor, 10 ns per eager enqueue, 1 ns per cheap call, graph launch 50 + 2 per node.
pub fn unit_profile() -> DeviceProfile {
    DeviceProfile {
        name: "unit".to_string(),
        cube_flops_per_s: 1_000_000_000,
        cube_bf16_flops_per_s: 1_000_000_000,
        cube_f32_flops_per_s: 1_000_000_000,
        cube_efficiency: Vec::new(),
        vector_flops_per_s: 1_000_000_000,
        vector_f32_flops_per_s: 1_000_000_000,
        cube_units: 1,
        vector_units: 1,
        copy_engines: 1,
        cube_tile: 16,
        vector_tile_bytes: 1 << 20,
        hbm_bytes_per_s: 1_000_000_000,
        hbm_effective_bytes_per_s: 1_000_000_000,
        hbm_bytes: 1 << 30,
        memory_bytes: 1 << 30,
        h2d_bytes_per_s: 1_000_000_000,
        d2h_bytes_per_s: 1_000_000_000,
        min_kernel_ns: 100,
        eager_launch_ns: 10,
        host_call_ns: 1,
        graph_launch_ns: 50,
        graph_node_ns: 2,
    }
}

/// The settings of a data-mode device with the unit profile and 1 GiB.
pub fn unit_config() -> SimConfig {
    SimConfig::new().capacity(1 << 30).profile(unit_profile())
}

/// A data-mode device with the unit profile and 1 GiB.
pub fn unit_device() -> SimDevice {
    SimDevice::new(unit_config())
}

/// The devices of one simulated server of `devices` NPUs with an Atlas 800 A2's links, each
/// made from `config`.
pub fn server_devices(devices: u32, config: SimConfig) -> Vec<SimDevice> {
    SimNode::new(NodeConfig {
        devices,
        device: config,
        topology: Topology::atlas_800_a2(devices),
    })
    .devices()
}

/// [`server_devices`] of the unit device ([`unit_config`]) for tests that drive every rank
/// from one thread: a synchronization on a rank that has never submitted its part waits for
/// it, so their collectives time out after a short 20 ms.
pub fn one_thread_node(devices: u32) -> Vec<SimDevice> {
    server_devices(
        devices,
        unit_config().collective_timeout(Duration::from_millis(20)),
    )
}

/// `n` f32 at `ptr`.
pub fn slice(ptr: DevicePtr, n: u64) -> DeviceSlice {
    DeviceSlice::new(ptr, n * 4)
}

/// Uploads `values` to a fresh allocation on `s` and returns it.
pub fn upload(dev: &SimDevice, s: &SimStream, values: &[f32]) -> DevicePtr {
    let ptr = dev.alloc(values.len() as u64 * 4).expect("alloc");
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    // SAFETY: `bytes` lives until the synchronize below has observed the copy's completion.
    unsafe {
        s.memcpy_h2d(ptr, bytes.as_ptr(), bytes.len() as u64)
            .expect("h2d")
    };
    s.synchronize().expect("sync");
    ptr
}

/// Downloads `n` f32 from `ptr` on `s` (synchronizes `s`).
pub fn download(s: &SimStream, ptr: DevicePtr, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 4];
    // SAFETY: `bytes` is not touched until the synchronize below observes completion.
    unsafe {
        s.memcpy_d2h(bytes.as_mut_ptr(), ptr, bytes.len() as u64)
            .expect("d2h")
    };
    s.synchronize().expect("sync");
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A busy kernel.
pub fn busy(ns: u64) -> Kernel {
    Kernel::Busy { duration_ns: ns }
}

/// Every rank of `devs` joins the communicator of `info` from its own thread (joining blocks
/// until all have); the communicators in rank order.
pub fn join_all(devs: &[SimDevice], info: &RootInfo) -> Vec<SimComm> {
    let n = devs.len() as u32;
    std::thread::scope(|scope| {
        let joining: Vec<_> = (devs.iter().enumerate())
            .map(|(r, d)| scope.spawn(move || SimComm::init_root_info(d, n, r as u32, info)))
            .collect();
        joining
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    })
}
