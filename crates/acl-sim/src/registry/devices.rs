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

use super::Registry;
use crate::codes::*;
use crate::errmsg::{fail, Fail};

impl Registry {
    /// The device `id` as a peer of `of`: in range and different from it.
    fn peer_index(&self, call: &str, of: usize, id: i32) -> Result<usize, Fail> {
        let peer = usize::try_from(id)
            .ok()
            .filter(|i| *i < self.device_count)
            .ok_or_else(|| {
                fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!(
                        "{call}: peer device id {id} is not in [0, {})",
                        self.device_count
                    ),
                )
            })?;
        if peer == of {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{call}: the peer device {id} is the device itself"),
            ));
        }
        Ok(peer)
    }

    /// `aclrtDeviceCanAccessPeer`: 1 for two different devices of the node.
    pub fn can_access_peer(&self, device: i32, peer: i32) -> Result<i32, Fail> {
        const CALL: &str = "aclrtDeviceCanAccessPeer";
        let device = usize::try_from(device)
            .ok()
            .filter(|i| *i < self.device_count)
            .ok_or_else(|| {
                fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!(
                        "{CALL}: device id {device} is not in [0, {})",
                        self.device_count
                    ),
                )
            })?;
        self.peer_index(CALL, device, peer)?;
        Ok(1)
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
    #[allow(dead_code)] // used by peer copies once the node lands
    pub(crate) fn peer_enabled(&self, device: usize, peer: usize) -> bool {
        device == peer || self.peers.contains(&(device, peer))
    }
}
