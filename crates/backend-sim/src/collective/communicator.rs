//! A communicator's state in the engine: which device each rank is on and the calls in
//! flight. A communicator joined through a root info exists from its first rank's join; a
//! collective cannot run before every rank has joined (each rank's part comes from its own
//! joined handle).

use std::collections::HashMap;

use braid_stream_core::collective::{CallKey, CollectiveCall, Matcher, Part, Peers};
use braid_stream_core::hal::HalError;

/// What the engine keeps with one rank's part of a call.
#[derive(Clone, Debug)]
pub(crate) struct PartInfo {
    /// The rank's call (its buffers).
    pub call: CollectiveCall,
    /// The node-wide stream index the part was submitted on.
    pub stream: u32,
    /// Its label for the timeline.
    pub label: std::sync::Arc<str>,
    /// For a part replayed from a graph, its node in the graph launched on `stream`.
    pub node: Option<usize>,
}

/// One communicator.
#[derive(Debug)]
pub(crate) struct CommState {
    ranks: u32,
    /// The device (index in the node) of each rank, once joined.
    devices: Vec<Option<usize>>,
    /// Calls in flight, matched by the one call matcher.
    pub matcher: Matcher<PartInfo>,
    /// Calls whose parts are all in, waiting for their streams to reach them.
    pub ready: HashMap<CallKey, Vec<Part<PartInfo>>>,
    /// Per rank and peers (all ranks, or a sender and its receiver), the number the rank's
    /// next captured call with those peers takes.
    captured: HashMap<(u32, Peers), u64>,
}

impl CommState {
    /// A communicator of `ranks` ranks with none joined yet.
    pub fn forming(ranks: u32) -> Self {
        CommState {
            ranks,
            devices: vec![None; ranks as usize],
            matcher: Matcher::new(ranks),
            ready: HashMap::new(),
            captured: HashMap::new(),
        }
    }

    /// A communicator whose rank `r` is on `devices[r]`.
    pub fn complete(devices: &[usize]) -> Self {
        let ranks = u32::try_from(devices.len()).unwrap_or(u32::MAX);
        let mut comm = CommState::forming(ranks);
        comm.devices = devices.iter().map(|&d| Some(d)).collect();
        comm
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The device of rank `rank`, if joined.
    pub fn device(&self, rank: u32) -> Option<usize> {
        self.devices.get(rank as usize).copied().flatten()
    }

    /// Rank `rank` of `ranks` joins on `device`: refused when the sizes differ, the rank is
    /// out of range or taken, or the device already holds a rank.
    pub fn join(&mut self, ranks: u32, rank: u32, device: usize) -> Result<(), HalError> {
        if ranks != self.ranks {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} joins with {ranks} ranks a communicator of {} ranks",
                self.ranks
            )));
        }
        let slot = self.devices.get(rank as usize).ok_or_else(|| {
            HalError::InvalidArgument(format!(
                "rank {rank} is out of range for a communicator of {ranks} ranks"
            ))
        })?;
        if slot.is_some() {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} of the communicator has already joined"
            )));
        }
        if let Some(other) = self.devices.iter().position(|d| *d == Some(device)) {
            return Err(HalError::InvalidArgument(format!(
                "device {device} already holds rank {other} of the communicator"
            )));
        }
        self.devices[rank as usize] = Some(device);
        Ok(())
    }

    /// The number rank `rank`'s next captured call with `peers` takes (counting it): captured
    /// calls are numbered per peers, as eager ones, so that a send captured by two ranks does
    /// not shift a third rank's numbers.
    pub fn next_captured(&mut self, rank: u32, peers: Peers) -> u64 {
        let n = self.captured.entry((rank, peers)).or_insert(0);
        *n += 1;
        *n - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_join_once_each_on_distinct_devices() {
        let mut c = CommState::forming(2);
        assert_eq!(c.device(1), None);
        c.join(2, 1, 5).unwrap();
        assert_eq!(c.device(1), Some(5));
        let again = c.join(2, 1, 6).unwrap_err().to_string();
        assert!(again.contains("already joined"), "{again}");
        let same_device = c.join(2, 0, 5).unwrap_err().to_string();
        assert!(
            same_device.contains("already holds rank 1"),
            "{same_device}"
        );
        let size = c.join(3, 0, 4).unwrap_err().to_string();
        assert!(size.contains("with 3 ranks a communicator of 2"), "{size}");
        let range = c.join(2, 2, 4).unwrap_err().to_string();
        assert!(range.contains("out of range"), "{range}");
        c.join(2, 0, 4).unwrap();
        assert_eq!((c.device(0), c.ranks()), (Some(4), 2));
    }

    #[test]
    fn a_complete_communicator_numbers_captured_calls_per_rank() {
        let mut c = CommState::complete(&[3, 1]);
        assert_eq!((c.device(0), c.device(1)), (Some(3), Some(1)));
        assert_eq!(c.next_captured(0, Peers::All), 0);
        assert_eq!(c.next_captured(0, Peers::All), 1);
        assert_eq!(c.next_captured(1, Peers::All), 0);
        let pair = Peers::Pair { from: 0, to: 1 };
        assert_eq!(c.next_captured(0, pair), 0);
        assert_eq!(c.next_captured(0, Peers::All), 2);
    }
}
