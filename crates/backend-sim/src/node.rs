//! [`SimNode`]: several simulated devices on one virtual time axis, connected by a
//! [`Topology`].

use crate::config::SimConfig;
use crate::device::SimDevice;
use crate::engine::Engine;
use crate::timeline::OpRecord;
use crate::topology::Topology;
use std::fmt;
use std::sync::{Arc, Mutex};

/// Builder-style configuration of a [`SimNode`].
///
/// ```
/// use braid_backend_sim::{NodeConfig, SimConfig, SimMode, Topology};
/// let config = NodeConfig::new(4)
///     .device(SimConfig::new().mode(SimMode::TimingOnly))
///     .topology(Topology::two_servers(2));
/// assert_eq!(config.devices, 4);
/// ```
#[derive(Clone, PartialEq, Debug)]
pub struct NodeConfig {
    /// Number of devices (at least one; zero is treated as one).
    pub devices: u32,
    /// The configuration every device gets, except its ordinal: device `i` has ordinal `i`.
    /// The node-wide settings (data or timing-only mode, timeline, sanitizer) come from it.
    pub device: SimConfig,
    /// How the devices are connected.
    pub topology: Topology,
}

impl NodeConfig {
    /// `devices` devices with [`SimConfig::new`], in one Atlas 800T A2 server
    /// ([`Topology::atlas_800_a2`]; more than 8 devices make further servers of 8).
    pub fn new(devices: u32) -> Self {
        NodeConfig {
            devices,
            device: SimConfig::new(),
            topology: Topology::atlas_800_a2(devices),
        }
    }

    /// Sets the number of devices.
    pub fn devices(mut self, n: u32) -> Self {
        self.devices = n;
        self
    }

    /// Sets the configuration every device gets (each with its own ordinal).
    pub fn device(mut self, config: SimConfig) -> Self {
        self.device = config;
        self
    }

    /// Sets the topology.
    pub fn topology(mut self, topology: Topology) -> Self {
        self.topology = topology;
        self
    }
}

impl Default for NodeConfig {
    /// [`NodeConfig::new`] with 8 devices.
    fn default() -> Self {
        NodeConfig::new(8)
    }
}

/// A simulated node: several devices sharing one engine, so one lock, one virtual time axis,
/// one data store and one sanitizer. Cloning gives another handle to the same node.
///
/// Each device has its own host clock (it is driven as if by its own host thread or process:
/// a call on one device never advances another's host time), its own compute units, copy
/// engines and communication engine, its own memory capacity and its own range of
/// addresses (device `i`'s start at `0x1_0000_0000 + i × 2^48`), so a pointer names its
/// device. Events and streams of one node interoperate: a stream of one device may wait on
/// an event recorded on another, and a `memcpy_d2d` between two devices' memories (a peer
/// copy, after `enable_peer_access`) occupies the link between them (see [`Topology`]).
/// Objects of different nodes are refused.
///
/// The sanitizer sees all devices: a race between ops of two devices (say a peer copy that
/// reads a buffer another device's stream is still writing) is reported naming both ops and
/// both devices. It treats the hosts of all devices as one program (one process): what one
/// device's host observed complete (a synchronize) orders what any device's host submits
/// afterwards.
///
/// ```
/// use braid_backend_sim::{NodeConfig, SimNode};
/// use braid_stream_core::hal::Device as _;
///
/// let node = SimNode::new(NodeConfig::new(2));
/// let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
/// assert_eq!((a.ordinal(), b.ordinal()), (0, 1));
/// let x = a.alloc(64).unwrap();
/// assert_ne!(x, b.alloc(64).unwrap());
/// assert!(b.can_access_peer(&a).unwrap());
/// b.enable_peer_access(&a).unwrap();
/// ```
#[derive(Clone)]
pub struct SimNode {
    engine: Arc<Mutex<Engine>>,
    configs: Arc<[SimConfig]>,
}

impl fmt::Debug for SimNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimNode")
            .field("devices", &self.configs.len())
            .finish()
    }
}

impl SimNode {
    /// A fresh node: every device at host time 0, nothing allocated, each with only its
    /// default stream.
    pub fn new(config: NodeConfig) -> SimNode {
        let configs: Vec<SimConfig> = (0..config.devices.max(1))
            .map(|i| config.device.clone().ordinal(i))
            .collect();
        let engine = Engine::node(configs.clone(), config.topology);
        SimNode {
            engine: Arc::new(Mutex::new(engine)),
            configs: configs.into(),
        }
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.configs.len()
    }

    /// Whether the node has no device (never: a node has at least one).
    pub fn is_empty(&self) -> bool {
        self.configs.is_empty()
    }

    /// Device `i` (its ordinal is `i`), or `None` past the last.
    pub fn device(&self, i: u32) -> Option<SimDevice> {
        let config = self.configs.get(i as usize)?;
        Some(SimDevice::in_node(self.engine.clone(), i, config))
    }

    /// Every device, in ordinal order.
    pub fn devices(&self) -> Vec<SimDevice> {
        (0..self.len() as u32)
            .filter_map(|i| self.device(i))
            .collect()
    }

    /// Every executed op of every device in submission order (each with its device ordinal).
    pub fn timeline(&self) -> Vec<OpRecord> {
        self.lock().timeline().iter().cloned().collect()
    }

    /// Ops dropped from the timeline so far to keep it within
    /// [`SimConfig::timeline_capacity`](crate::SimConfig#structfield.timeline_capacity).
    pub fn timeline_dropped(&self) -> u64 {
        self.lock().timeline().dropped()
    }

    /// Latest end time of any op of any device, in nanoseconds.
    pub fn makespan_ns(&self) -> u64 {
        self.lock().node_makespan()
    }

    /// The timeline of every device as Chrome Trace Event JSON: one process per device
    /// (pid = its ordinal) with its host track, a track per stream and a track per link the
    /// device's transfers occupied; event flows cross devices. See [`crate::trace`].
    pub fn chrome_trace_json(&self) -> String {
        self.lock().chrome_trace_json(None)
    }

    /// Writes [`SimNode::chrome_trace_json`] to `path`.
    pub fn write_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        std::fs::write(path, self.chrome_trace_json())
    }

    /// The topology.
    pub fn topology(&self) -> Topology {
        *self.lock().topology()
    }

    /// Locks the engine (for node-wide reads; the current device does not matter). As
    /// `crate::device::lock`, a poisoned lock is recovered.
    fn lock(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
