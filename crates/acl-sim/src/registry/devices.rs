//! Peer access between the devices of the simulated node (`aclrtDeviceCanAccessPeer`,
//! `aclrtDeviceEnablePeerAccess`, `aclrtDeviceDisablePeerAccess`), with the rules of CANN's
//! API reference: the peer must be another device in `[0, count)` (else
//! `ACL_ERROR_INVALID_PARAM`), `flags` is reserved and must be 0 (CANN's own unit tests
//! expect `ACL_ERROR_FEATURE_UNSUPPORTED` for a non-zero value), and access is enabled from
//! the calling thread's current device, one direction per call. Every pair of the node can
//! access each other (the 8 NPUs of an Atlas A2 server are fully connected by HCCS).
//!
//! Enabling twice is accepted (CANN has no "already enabled" code; not confirmed either way),
//! disabling a direction that is not enabled is `ACL_ERROR_INVALID_PARAM`.
//!
//! The devices themselves: device `i` is device `i` of a [`SimNode`], so the devices share
//! one virtual time axis, a stream of one may wait on another's event, and a
//! device-to-device copy between two of them is a peer copy over their link. A copy whose
//! source or destination is another device's memory needs access from the stream's device
//! to it enabled first, as CANN's `aclrtMemcpyAsync` documentation requires (Atlas A2: "call
//! aclrtDeviceCanAccessPeer ... aclrtDeviceEnablePeerAccess ... then this API"); the code
//! CANN returns otherwise is not documented, braid-acl-sim answers
//! `ACL_ERROR_RT_PARAM_INVALID` (107000) naming both devices.
//!
//! The simulator's data or timing-only mode is node-wide: devices computing data are devices
//! of one node, timing-only devices (`BRAID_ACL_SIM_TIMING_ONLY`) of another, each device
//! keeping its id as its ordinal. Devices of different modes therefore cannot access each
//! other (`aclrtDeviceCanAccessPeer` answers 0) nor share a communicator.

use super::{sim_fail, Dev, EventEntry, Registry};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use crate::settings::TIMING_ONLY_ENV;
use braid_acl_sys::hccl::codes::HCCL_E_PARA;
use braid_backend_sim::{NodeConfig, SimConfig, SimMode, SimNode};
use braid_stream_core::hal::Device as _;
use std::collections::BTreeMap;

/// The two simulated nodes, made at first use.
#[derive(Default)]
pub(super) struct Nodes {
    data: Option<SimNode>,
    timing_only: Option<SimNode>,
}

impl Nodes {
    /// The nodes made so far (the data node first).
    pub(super) fn made(&self) -> impl Iterator<Item = &SimNode> {
        self.data.iter().chain(&self.timing_only)
    }
}

impl Registry {
    /// Whether device `index` runs timing-only.
    fn is_timing_only(&self, index: usize) -> bool {
        self.timing_only.get(index).copied().unwrap_or(false)
    }

    /// The node device `index` belongs to (made at first use, with every device of the
    /// process, so a device's ordinal is its id).
    fn node_of(&mut self, index: usize) -> SimNode {
        let timing_only = self.is_timing_only(index);
        let (count, capacity) = (self.device_count as u32, self.capacity);
        let record_timeline = self.system.records_timeline();
        let collective_timeout = self.collective_timeout;
        let host_memory = self.host_memory;
        let profile = &self.profile;
        let slot = if timing_only {
            &mut self.nodes.timing_only
        } else {
            &mut self.nodes.data
        };
        slot.get_or_insert_with(|| {
            let mode = if timing_only {
                SimMode::TimingOnly
            } else {
                SimMode::Data
            };
            let device = SimConfig::for_profile(profile.device.clone())
                .mode(mode)
                .record_timeline(record_timeline)
                .collective_timeout(collective_timeout)
                .host_memory_budget(host_memory);
            let device = match capacity {
                Some(bytes) => device.capacity(bytes),
                None => device,
            };
            let config = NodeConfig::new(count).device(device);
            // A profile without a node keeps the default node's links.
            SimNode::new(match &profile.node {
                Some(node) => config.topology(node.topology(count, 1)),
                None => config,
            })
        })
        .clone()
    }

    /// Device `index`'s state, made (with its default stream) the first time any call needs
    /// it: `aclrtSetDevice`, a peer, or a communicator.
    pub(super) fn ensure_device(&mut self, call: &str, index: usize) -> Result<&mut Dev, Fail> {
        if self.devices[index].is_none() {
            let node = self.node_of(index);
            let sim = node.device(index as u32).ok_or_else(|| {
                fail(
                    ACL_ERROR_RT_INVALID_DEVICEID,
                    format!("{call}: the simulated node has no device {index}"),
                )
            })?;
            let default_stream = sim.default_stream().map_err(|e| sim_fail(call, e))?;
            let context = self.handle();
            self.devices[index] = Some(Dev {
                sim,
                default_stream,
                context,
                context_params: BTreeMap::new(),
                refcount: 0,
                allocations: BTreeMap::new(),
                reservations: BTreeMap::new(),
                refused: None,
            });
        }
        self.dev_mut(index)
    }

    /// The device whose live segment or reservation holds `[addr, addr + len)`.
    pub(super) fn owner(&self, addr: u64, len: u64) -> Option<usize> {
        (0..self.devices.len()).find(|&d| self.is_device(d, addr, len))
    }

    /// Refuses a device-to-device copy on a stream of `device` whose source or destination is
    /// memory of a device it has no peer access to.
    pub(super) fn check_peer_copy(
        &self,
        call: &str,
        device: usize,
        dst: u64,
        src: u64,
        len: u64,
    ) -> Result<(), Fail> {
        for (what, addr) in [("destination", dst), ("source", src)] {
            match self.owner(addr, len) {
                Some(other) if !self.peer_enabled(device, other) => {
                    return Err(fail(
                        ACL_ERROR_RT_PARAM_INVALID,
                        format!("{call}: the {what} {addr:#x} is memory of device {other}, and device {device} has no peer access to it (call aclrtDeviceEnablePeerAccess({other}, 0) on device {device} first)"),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// An event of any device of the node (a cross-device wait needs no context check).
    pub(super) fn event_of_any_device(
        &self,
        call: &str,
        handle: usize,
    ) -> Result<&EventEntry, Fail> {
        self.events.get(&handle).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{call}: invalid event handle {handle:#x}"),
            )
        })
    }

    /// The device `id` as a peer of `of`: in range and different from it.
    fn peer_index(&self, call: &str, of: usize, id: i32) -> Result<usize, Fail> {
        let peer = self.index_in_node(id, ACL_ERROR_INVALID_PARAM, |count| {
            format!("{call}: peer device id {id} is not in [0, {count})")
        })?;
        if peer == of {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: the peer device {id} is the device itself"),
            ));
        }
        Ok(peer)
    }

    /// Refuses a communicator over `devices` (ids already checked) that mixes data-mode and
    /// timing-only devices: each mode is a simulated node of its own, and a communicator's
    /// devices must share one. `HCCL_E_PARA`, naming `BRAID_ACL_SIM_TIMING_ONLY` and what to
    /// set it to.
    pub(crate) fn check_one_mode(&self, call: &str, devices: &[i32]) -> Result<(), Fail> {
        let timing: Vec<String> = devices
            .iter()
            .filter(|&&d| self.is_timing_only(d as usize))
            .map(i32::to_string)
            .collect();
        if timing.is_empty() || timing.len() == devices.len() {
            return Ok(());
        }
        Err(fail(
            HCCL_E_PARA,
            format!(
                "{call}: the devices mix data mode and timing-only: {} (timing-only: {}; \
                 `{TIMING_ONLY_ENV}` is `{}`), and a communicator's devices must all be of one \
                 mode. Set `{TIMING_ONLY_ENV}=none` (every device computes data) or list all of \
                 the communicator's devices in it, before the library's first call",
                devices
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                timing.join(", "),
                std::env::var(TIMING_ONLY_ENV).unwrap_or_else(|_| "unset, default 1".into()),
            ),
        ))
    }

    /// `aclrtDeviceCanAccessPeer`: 1 for two different devices of the node.
    pub fn can_access_peer(&self, device: i32, peer: i32) -> Result<i32, Fail> {
        const CALL: &str = "aclrtDeviceCanAccessPeer";
        let device = self.index_in_node(device, ACL_ERROR_INVALID_PARAM, |count| {
            format!("{CALL}: device id {device} is not in [0, {count})")
        })?;
        let peer = self.peer_index(CALL, device, peer)?;
        Ok(i32::from(
            self.is_timing_only(device) == self.is_timing_only(peer),
        ))
    }

    /// `aclrtDeviceEnablePeerAccess`: the current device may access `peer`'s memory.
    pub fn enable_peer_access(&mut self, peer: i32, flags: u32) -> Result<(), Fail> {
        const CALL: &str = "aclrtDeviceEnablePeerAccess";
        let device = self.current(CALL)?;
        if flags != 0 {
            return Err(fail(
                ACL_ERROR_FEATURE_UNSUPPORTED,
                format!("{CALL}: flags is reserved and must be 0, got {flags:#x}"),
            ));
        }
        let peer = self.peer_index(CALL, device, peer)?;
        self.ensure_device(CALL, peer)?;
        let (this, other) = (self.dev(device)?.sim.clone(), self.dev(peer)?.sim.clone());
        this.enable_peer_access(&other).map_err(|e| {
            fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: device {device} cannot access device {peer}: {e}"),
            )
        })?;
        self.peers.insert((device, peer));
        Ok(())
    }

    /// `aclrtDeviceDisablePeerAccess`: the current device may no longer access `peer`'s
    /// memory.
    pub fn disable_peer_access(&mut self, peer: i32) -> Result<(), Fail> {
        const CALL: &str = "aclrtDeviceDisablePeerAccess";
        let device = self.current(CALL)?;
        let peer = self.peer_index(CALL, device, peer)?;
        if !self.peers.remove(&(device, peer)) {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: access from device {device} to device {peer} is not enabled"),
            ));
        }
        Ok(())
    }

    /// Whether `device` may access `peer`'s memory (itself always).
    pub(super) fn peer_enabled(&self, device: usize, peer: usize) -> bool {
        device == peer || self.peers.contains(&(device, peer))
    }
}
