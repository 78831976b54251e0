//! Several devices in one process: lookup by uid, host knowledge handed across devices, peer
//! access, and memory of one device used on another device's stream.

use crate::clock::{RemoteClocks, VectorClock};
use crate::device::{Device, DeviceInner};
use crate::error::{ForeignMemory, Result, StreamError};
use crate::hal::{Backend, Device as _, HalError};
use crate::ordering::StreamPosition;
use crate::registry::{self, Lookup};
use crate::types::DeviceSlice;
use crate::uses::Access;

/// A range of another device's memory used by work on this device's stream (allowed by a
/// peer relation): its use is told to the owning device's observers.
pub(crate) struct ForeignUse<B: Backend> {
    pub(crate) range: DeviceSlice,
    pub(crate) access: Access,
    pub(crate) owner: Device<B>,
}

impl<B: Backend> Device<B> {
    /// The live device of this backend whose identity has `uid` ([`crate::DeviceId::uid`]), if
    /// any: how an observer that only sees a [`StreamPosition`] of another device finds it
    /// (then its stream with [`Device::stream`]).
    pub fn by_uid(uid: u64) -> Option<Device<B>> {
        match registry::find::<DeviceInner<B>>(uid) {
            Lookup::Live(inner) => Some(Device { inner }),
            Lookup::Gone | Lookup::Unknown => None,
        }
    }

    /// The host observed complete the work `local` covers on this device and, through it,
    /// what `learnt` covers on other devices: each device's host clock learns its part (one
    /// device's state locked at a time, none held by the caller).
    pub(crate) fn observe_host(&self, local: &VectorClock, learnt: &RemoteClocks) {
        {
            let mut st = self.inner.lock();
            st.ordering.observe_clock(local);
            st.release_completed();
        }
        for (uid, clock) in learnt.devices() {
            if let Lookup::Live(other) = registry::find::<DeviceInner<B>>(uid) {
                let mut st = other.lock();
                st.ordering.observe_clock(clock);
                st.release_completed();
            }
        }
    }

    /// Whether this device's streams can access `peer`'s memory once
    /// [`Device::enable_peer_access`] is called (the backend's answer; a device can always
    /// access its own memory).
    pub fn can_access_peer(&self, peer: &Device<B>) -> Result<bool> {
        if self.same_as(peer) {
            return Ok(true);
        }
        Ok(self.inner.hal.can_access_peer(&peer.inner.hal)?)
    }

    /// Lets this device's streams use `peer`'s memory (kernels, operators, copies and memsets
    /// on this device's streams reading or writing it; `aclrtDeviceEnablePeerAccess`,
    /// `cudaDeviceEnablePeerAccess`). One direction only: `peer`'s streams need their own call
    /// to use this device's memory. Enabling twice, or for the device itself, does nothing.
    /// When the backend cannot give access the error is [`StreamError::PeerAccessUnavailable`]
    /// naming both devices, and nothing changes.
    pub fn enable_peer_access(&self, peer: &Device<B>) -> Result<()> {
        if self.has_peer_access(peer) {
            return Ok(());
        }
        let unavailable = |reason: String| StreamError::PeerAccessUnavailable {
            from: self.id(),
            to: peer.id(),
            reason,
        };
        if !self.can_access_peer(peer)? {
            return Err(unavailable(
                "the backend reports no path between them".into(),
            ));
        }
        match self.inner.hal.enable_peer_access(&peer.inner.hal) {
            Ok(()) => {}
            Err(HalError::Unsupported(what)) => {
                return Err(unavailable(format!(
                    "not supported by the backend ({what})"
                )))
            }
            Err(err) => return Err(err.into()),
        }
        let mut st = self.inner.lock();
        if !st.peers.contains(&peer.inner.uid) {
            st.peers.push(peer.inner.uid);
        }
        drop(st);
        tracing::info!(from = %self.id(), to = %peer.id(), "peer access enabled");
        Ok(())
    }

    /// Whether this device's streams may use `peer`'s memory (the device itself, or peer
    /// access enabled by [`Device::enable_peer_access`]).
    pub fn has_peer_access(&self, peer: &Device<B>) -> bool {
        self.same_as(peer) || self.has_peer_uid(peer.inner.uid)
    }

    fn has_peer_uid(&self, uid: u64) -> bool {
        self.inner.lock().peers.contains(&uid)
    }

    /// Checks the ranges of work `work` for a stream of this device. A range the backend
    /// knows is not live here is looked up on the other live devices of the backend this one
    /// can reach ([`Device::owner_among_peers`]): live on one this device has peer access to,
    /// it is a [`ForeignUse`] (returned); live on one without, [`StreamError::ForeignMemory`] names
    /// both devices; live on none, [`StreamError::RangeNotLive`]. Ranges the backend cannot tell
    /// about count as this device's.
    pub(crate) fn place_ranges(
        &self,
        work: &str,
        ranges: impl IntoIterator<Item = (DeviceSlice, Access)>,
    ) -> Result<Vec<ForeignUse<B>>> {
        let mut foreign = Vec::new();
        for (range, access) in ranges {
            if range.len == 0 || self.inner.hal.is_live(range) != Some(false) {
                continue;
            }
            let owner = self.owner_among_peers(range);
            match owner {
                None => {
                    return Err(StreamError::RangeNotLive {
                        work: work.to_string(),
                        range,
                        device: self.id(),
                    })
                }
                Some(owner) if self.has_peer_uid(owner.inner.uid) => foreign.push(ForeignUse {
                    range,
                    access,
                    owner,
                }),
                Some(owner) => {
                    return Err(StreamError::ForeignMemory(Box::new(ForeignMemory {
                        work: work.to_string(),
                        range,
                        stream_device: self.id(),
                        memory_device: owner.id(),
                    })))
                }
            }
        }
        Ok(foreign)
    }

    /// The device that owns `range` among the devices this one can reach: those it has peer
    /// access to (asked first), then those its backend says it could access. Only devices that
    /// can reach each other share one address space (unified addressing on ACL and CUDA, a
    /// node of simulated devices); unrelated devices (separate simulators) may hand out the
    /// same addresses, so they are never asked.
    fn owner_among_peers(&self, range: DeviceSlice) -> Option<Device<B>> {
        let others: Vec<Device<B>> = registry::live::<DeviceInner<B>>()
            .into_iter()
            .map(|inner| Device { inner })
            .filter(|d| !d.same_as(self))
            .collect();
        let owns = |d: &Device<B>| d.inner.hal.is_live(range) == Some(true);
        let (enabled, rest): (Vec<_>, Vec<_>) = others
            .into_iter()
            .partition(|d| self.has_peer_uid(d.inner.uid));
        enabled.into_iter().find(owns).or_else(|| {
            rest.into_iter().find(|d| {
                matches!(self.inner.hal.can_access_peer(&d.inner.hal), Ok(true)) && owns(d)
            })
        })
    }

    /// Tells observers that the work at `position` (on this device) uses `ranges`: this
    /// device's observers for its own ranges, each owner's observers for the `foreign` ones.
    pub(crate) fn notify_placed(
        &self,
        position: StreamPosition,
        ranges: impl IntoIterator<Item = (DeviceSlice, Access)>,
        foreign: &[ForeignUse<B>],
    ) {
        if foreign.is_empty() {
            self.notify_uses(position, ranges);
            return;
        }
        let is_foreign = |r: &DeviceSlice| foreign.iter().any(|f| f.range == *r);
        self.notify_uses(position, ranges.into_iter().filter(|(r, _)| !is_foreign(r)));
        for f in foreign {
            f.owner.notify_uses(position, [(f.range, f.access)]);
        }
    }
}
