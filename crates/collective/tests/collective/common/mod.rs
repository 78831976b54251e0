//! Simulated nodes, their ranks, and exact test values for the collective tests.
#![allow(dead_code)] // each test file uses its own part

use braid_backend_sim::{NodeConfig, SimBackend, SimConfig, SimDevice, SimMode, SimNode, Topology};
use braid_collective::Communicator;
use braid_stream_core::{DType, Device, DeviceMemory, DeviceSlice, Stream};

pub type Dev = Device<SimBackend>;

/// The devices of a simulated Atlas 800 A2 node of `n` devices (data mode unless `timing`).
pub fn node(n: u32, mode: SimMode) -> Vec<Dev> {
    SimNode::new(NodeConfig {
        devices: n,
        device: SimConfig::new().capacity(1 << 30).mode(mode),
        topology: Topology::atlas_800_a2(n),
    })
    .devices()
    .into_iter()
    .map(|d: SimDevice| Device::new(d).expect("device"))
    .collect()
}

/// Every rank of a node: its device, communicator and a stream.
pub struct Ranks {
    pub devices: Vec<Dev>,
    pub comms: Vec<Communicator<SimBackend>>,
    pub streams: Vec<Stream<SimBackend>>,
}

impl Ranks {
    pub fn new(n: u32) -> Ranks {
        let devices = node(n, SimMode::Data);
        let comms = Communicator::init_all(&devices).expect("communicator");
        let streams = devices
            .iter()
            .map(|d| d.create_stream(0).expect("stream"))
            .collect();
        Ranks {
            devices,
            comms,
            streams,
        }
    }

    pub fn n(&self) -> usize {
        self.devices.len()
    }

    /// Device memory on rank `r` holding `values` in `dtype`.
    pub fn upload(&self, r: usize, dtype: DType, values: &[f32]) -> DeviceMemory<SimBackend> {
        let bytes = dtype.encode(values);
        let mem = self.devices[r].alloc(bytes.len() as u64).expect("alloc");
        self.streams[r]
            .copy_h2d(mem.slice(), bytes)
            .expect("upload");
        mem
    }

    /// Uninitialised device memory on rank `r` for `n` elements of `dtype`.
    pub fn zeros(&self, r: usize, dtype: DType, n: usize) -> DeviceMemory<SimBackend> {
        self.upload(r, dtype, &vec![0.0; n])
    }

    /// The elements of `slice` on rank `r` once its stream has run.
    pub fn read(&self, r: usize, slice: DeviceSlice, dtype: DType) -> Vec<f32> {
        self.streams[r]
            .copy_d2h(slice)
            .expect("download")
            .wait_as(dtype)
            .expect("wait")
    }
}

/// Rank `r`'s element `i`: a power of two in {0.5, 1, 2}, so that sums, products, maxima
/// and minima over up to 8 ranks are exact in every data type, whatever the order.
pub fn value(r: usize, i: usize) -> f32 {
    [0.5, 1.0, 2.0][(r + 2 * i) % 3]
}

/// `count` elements of rank `r` from element `from` on.
pub fn values(r: usize, from: usize, count: usize) -> Vec<f32> {
    (from..from + count).map(|i| value(r, i)).collect()
}
