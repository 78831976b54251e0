//! What the engine keeps per device of a node: its configuration, host clock, compute and
//! copy resources, communication engine, pinned host memory, streams, counters, fault plan
//! and limits. What the devices share (virtual time axis, data store, streams and events by
//! node-wide index, sanitizer, links, captures, timeline) is in the engine itself.

use crate::config::SimConfig;
use crate::fault::FaultState;
use crate::host::HostHeap;
use crate::limits::Limits;
use crate::resource::Pool;
use braid_stream_core::kernel::ComputeUnit;

/// The state of one device of a node.
#[derive(Debug)]
pub(crate) struct DeviceState {
    /// The device's configuration (its ordinal, capacity, profile, ...).
    pub config: SimConfig,
    /// The device's host clock: each device is driven as if by its own host thread.
    pub host_ns: u64,
    /// Pinned host memory (`alloc_host`).
    pub host: HostHeap,
    /// Cube, vector and copy resources (see [`DeviceState::unit_pool`]).
    pub resources: [Pool; 3],
    /// The communication engine: one unit, occupied by collective transfers, so that
    /// communication overlaps the compute units but two transfers of the device take turns.
    pub comm: Pool,
    /// Node-wide indices of the device's streams, by their index in the device (0: the
    /// default stream).
    pub streams: Vec<u32>,
    /// Latest end of any op of the device.
    pub makespan: u64,
    /// Ops placed on the device's streams.
    pub ops_executed: u64,
    /// Graph launches on the device's streams.
    pub graph_launches: u64,
    /// The fault plan, its counters and pending asynchronous failures ([`crate::fault`]).
    pub faults: FaultState,
    /// Live streams and events against the runtime's limits ([`crate::limits`]).
    pub limits: Limits,
}

impl DeviceState {
    /// A fresh device whose default stream has node-wide index `default_stream`.
    pub fn new(config: SimConfig, default_stream: u32) -> Self {
        let p = &config.profile;
        let resources = [
            Pool::new(p.cube_units),
            Pool::new(p.vector_units),
            Pool::new(p.copy_engines),
        ];
        DeviceState {
            host: HostHeap::new(config.host_capacity),
            resources,
            comm: Pool::new(1),
            streams: vec![default_stream],
            makespan: 0,
            ops_executed: 0,
            graph_launches: 0,
            faults: FaultState::new(&config.faults),
            limits: Limits::new(config.max_streams, config.max_events),
            host_ns: 0,
            config,
        }
    }

    /// The pool of `unit`, if it has one.
    pub fn unit_pool(&self, unit: ComputeUnit) -> Option<&Pool> {
        unit_index(unit).map(|i| &self.resources[i])
    }

    /// The pool of `unit`, mutably.
    pub fn unit_pool_mut(&mut self, unit: ComputeUnit) -> Option<&mut Pool> {
        unit_index(unit).map(|i| &mut self.resources[i])
    }

    /// Forgets the usage of the compute and copy units before `now` (the device's host
    /// time: only its own calls place work on them).
    pub fn prune_units(&mut self, now: u64) {
        for r in &mut self.resources {
            r.prune(now);
        }
    }
}

/// Index of `unit`'s pool in `DeviceState::resources`.
fn unit_index(unit: ComputeUnit) -> Option<usize> {
    match unit {
        ComputeUnit::Cube => Some(0),
        ComputeUnit::Vector => Some(1),
        ComputeUnit::Copy => Some(2),
        ComputeUnit::None => None,
    }
}
