//! The interface collectives are scheduled with: transfers between devices of the node on
//! their links, driven by the sending device's communication engine.
//!
//! A transfer of `bytes` from device `from` to device `to` (indices in the node) takes the
//! route's latency plus `bytes` over its bandwidth ([`crate::topology::LinkSpec`]). It
//! occupies every link of the route (within a server the direct link `from → to`; between
//! servers `from`'s outgoing network port and `to`'s incoming one) and `from`'s communication
//! engine, and starts at the earliest time at or after `not_before` at which all of them are
//! free. So communication overlaps the compute and copy units, but two transfers that share a
//! link, a port or a sending device take turns. The caller (a collective) orders the steps of
//! an algorithm by passing each step's `not_before` (for example the end of the step it
//! depends on) and records its ops on the streams itself.

use super::*;

// The collectives scheduled on the node (the next part of issue 12) are this interface's
// users; until they land, only the tests below call it.
#[cfg_attr(not(test), allow(dead_code))]
impl Engine {
    /// Checks that `device` is an index of the node.
    fn check_device(&self, device: u32) -> Result<(), HalError> {
        if (device as usize) < self.devices.len() {
            Ok(())
        } else {
            Err(invalid(format!(
                "device index {device} is not in the node (it has {} devices)",
                self.devices.len()
            )))
        }
    }

    /// How long a transfer of `bytes` from device `from` to device `to` takes on the route
    /// between them, when nothing else uses it.
    pub(crate) fn transfer_ns(&self, from: u32, to: u32, bytes: u64) -> Result<u64, HalError> {
        self.check_device(from)?;
        self.check_device(to)?;
        Ok(self.links.route(from, to).duration_ns(bytes))
    }

    /// Places a transfer of `bytes` from device `from` to device `to` (different) on the
    /// route between them and `from`'s communication engine, starting no earlier than
    /// `not_before`; returns its `(start, end)`. With the timeline on, the transfer shows on
    /// `from`'s link and `comm engine` tracks of the trace, named `label`.
    pub(crate) fn occupy_transfer(
        &mut self,
        from: u32,
        to: u32,
        bytes: u64,
        not_before: u64,
        label: &str,
    ) -> Result<(u64, u64), HalError> {
        self.check_device(from)?;
        self.check_device(to)?;
        if from == to {
            return Err(invalid(format!(
                "a transfer from device {} to itself: transfers are between two devices",
                self.ordinal_of(from)
            )));
        }
        let route = self.links.route(from, to);
        let duration = route.duration_ns(bytes);
        let comm = &self.devices[from as usize].comm;
        let mut pools = vec![(comm, 1)];
        pools.extend(
            route
                .hops
                .iter()
                .filter_map(|h| self.links.pool(*h))
                .map(|p| (p, 1)),
        );
        let start = earliest_all(&pools, not_before, duration);
        let end = start.saturating_add(duration);
        self.links.reserve(&route, start, end);
        self.devices[from as usize]
            .comm
            .reserve(start, end - start, 1);
        if self.record_timeline {
            let device = self.ordinal_of(from);
            let tracks = route
                .hops
                .iter()
                .map(|h| h.name(|i| self.ordinal_of(i)))
                .chain(["comm engine".to_string()]);
            let slices: Vec<LinkSlice> = tracks
                .map(|track| LinkSlice {
                    device,
                    track,
                    label: label.to_string(),
                    start_ns: start,
                    end_ns: end,
                })
                .collect();
            self.trace.links.extend(slices);
        }
        Ok((start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::LinkSpec;

    /// A node of `n` devices, servers of `per_server`, links of 1 byte/ns after 10 ns inside
    /// a server and 0.5 byte/ns after 100 ns between servers.
    fn node(n: u32, per_server: u32) -> Engine {
        let topology = Topology {
            server_size: per_server,
            servers: n.div_ceil(per_server),
            intra_server: LinkSpec {
                bytes_per_s: 1_000_000_000,
                latency_ns: 10,
            },
            network: LinkSpec {
                bytes_per_s: 500_000_000,
                latency_ns: 100,
            },
        };
        let configs = (0..n).map(|i| SimConfig::new().ordinal(i)).collect();
        Engine::node(configs, topology)
    }

    #[test]
    fn transfers_take_latency_plus_bytes_over_bandwidth() {
        let e = node(4, 2);
        assert_eq!(e.transfer_ns(0, 1, 1000).unwrap(), 1010);
        assert_eq!(e.transfer_ns(1, 2, 1000).unwrap(), 2100);
        assert!(e.transfer_ns(0, 4, 1).is_err());
    }

    #[test]
    fn transfers_share_links_ports_and_the_sending_engine() {
        let mut e = node(4, 2);
        assert_eq!(e.occupy_transfer(0, 1, 100, 0, "a").unwrap(), (0, 110));
        // Same link: after the first.
        assert_eq!(e.occupy_transfer(0, 1, 100, 0, "b").unwrap(), (110, 220));
        // The other direction is free.
        assert_eq!(e.occupy_transfer(1, 0, 100, 0, "c").unwrap(), (0, 110));
        // Across servers (port out of 0, port in of 2), after device 0's communication
        // engine is free at 220.
        assert_eq!(e.occupy_transfer(0, 2, 100, 0, "d").unwrap(), (220, 520));
        // Device 1 (other server) sends into 2's incoming port: it waits for "d".
        assert_eq!(e.occupy_transfer(1, 2, 100, 0, "e").unwrap(), (520, 820));
        // Devices 2 and 3 share a server: their direct link is free.
        assert_eq!(e.occupy_transfer(3, 2, 100, 0, "g").unwrap(), (0, 110));
        // Not before the given time.
        assert_eq!(e.occupy_transfer(2, 3, 0, 5000, "f").unwrap(), (5000, 5010));
        assert!(e.occupy_transfer(1, 1, 8, 0, "self").is_err());
        assert!(e.occupy_transfer(0, 9, 8, 0, "far").is_err());
    }

    #[test]
    fn transfers_show_on_link_and_engine_tracks() {
        let mut e = node(2, 2);
        e.occupy_transfer(1, 0, 10, 0, "step").unwrap();
        let tracks: Vec<&str> = e.trace.links.iter().map(|l| l.track.as_str()).collect();
        assert_eq!(tracks, vec!["link 1→0", "comm engine"]);
        assert!(e.trace.links.iter().all(|l| l.device == 1));
    }
}
