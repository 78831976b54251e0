//! The interconnect of a simulated node: which devices share a server, and the links between
//! them, with figures from a profile ([`crate::Profile`]; the shipped 910B one by default).
//!
//! A node is made of servers of [`Topology::server_size`] devices each (device `i` is in
//! server `i / server_size`). Within a server every pair of devices has its own point-to-point
//! link in each direction (a full mesh, as the HCCS links of an Atlas 800T A2); between servers
//! a transfer leaves through the sender's network port and enters through the receiver's (a
//! RoCE port per NPU). Each link and port is a contended resource: two transfers on one link
//! take turns, each at the link's full bandwidth (see `crate::link`).
//!
//! The host link (PCIe) of each device is not part of the topology: host-to-device and
//! device-to-host copies keep the figures of the device's [`crate::DeviceProfile`]
//! (`h2d_bytes_per_s`, `d2h_bytes_per_s`) and run on its copy engines.

use crate::profile::NodeProfile;

/// Bandwidth and latency of one link (one direction).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LinkSpec {
    /// Bytes per second in one direction; zero is treated as one.
    pub bytes_per_s: u64,
    /// Fixed cost of one transfer (one message, one hop), in nanoseconds.
    pub latency_ns: u64,
}

impl LinkSpec {
    /// How long a transfer of `bytes` takes on the link alone: latency + bytes / bandwidth.
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        let rate = self.bytes_per_s.max(1) as u128;
        let ns = (bytes as u128 * 1_000_000_000).div_ceil(rate);
        self.latency_ns
            .saturating_add(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// HCCS, one link between two 910B NPUs of an Atlas 800T A2, one direction: the shipped
    /// profile's intra-server link ([`crate::Profile::atlas_800t_a2`], `node.link_bandwidth`
    /// and `node.link_latency`: 54.68 GB/s measured with `ascend-dmi` by the vendor, 2 µs
    /// estimated).
    pub fn hccs_910b() -> Self {
        atlas_node().intra_server
    }

    /// RoCE over one 200GE port of an NPU, one direction: the shipped profile's network port
    /// ([`crate::Profile::atlas_800t_a2`], `node.network_bandwidth` and
    /// `node.network_latency`: 25 GB/s line rate, 10 µs estimated).
    pub fn roce_200ge() -> Self {
        atlas_node().network
    }
}

/// What the collective cost model adds to the links of a node: HCCL's fixed cost per call
/// and the rate one intra-server link sustains inside a collective.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CollectiveSpec {
    /// Fixed cost of one collective call (any size, any number of ranks above one),
    /// nanoseconds.
    pub overhead_ns: u64,
    /// Bytes per second one intra-server link carries in one direction inside a collective;
    /// the collective uses the lower of this and the link's own rate. Zero is treated as one.
    pub intra_link_bytes_per_s: u64,
}

impl CollectiveSpec {
    /// The shipped profile's figures ([`crate::Profile::atlas_800t_a2`],
    /// `node.collective_overhead` and `node.collective_link_bandwidth`).
    pub fn hccl_910b() -> Self {
        atlas_node().topology(1, 1).collective
    }
}

/// The node figures of the shipped Atlas 800T A2 profile.
fn atlas_node() -> &'static NodeProfile {
    crate::Profile::atlas_800t_a2()
        .node
        .as_ref()
        .expect("the shipped Atlas 800T A2 profile describes a node (tested)")
}

/// How the devices of a [`crate::SimNode`] are connected.
///
/// ```
/// use braid_backend_sim::Topology;
/// let one_server = Topology::atlas_800_a2(8);
/// assert!(one_server.same_server(0, 7));
/// let two = Topology::two_servers(4);
/// assert_eq!(two.devices(), 8);
/// assert!(!two.same_server(3, 4));
/// assert!(two.network.bytes_per_s < two.intra_server.bytes_per_s);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Topology {
    /// Devices per server (at least one; zero is treated as one).
    pub server_size: u32,
    /// Servers the topology describes (a node config's `devices` may differ: devices past
    /// `server_size × servers` form further servers of the same shape).
    pub servers: u32,
    /// The link between two devices of one server (each ordered pair has its own).
    pub intra_server: LinkSpec,
    /// The network port of each device, used for transfers between servers (each device
    /// has one port per direction).
    pub network: LinkSpec,
    /// The collective cost model's figures on these links.
    pub collective: CollectiveSpec,
}

impl Topology {
    /// One Atlas 800T A2 / 800I A2 server with `n` 910B NPUs (at most 8, at least 1: the
    /// server has 8), fully connected by HCCS ([`LinkSpec::hccs_910b`]), each with a 200GE
    /// RoCE port ([`LinkSpec::roce_200ge`]) for other servers; the figures are the shipped
    /// profile's ([`crate::Profile::atlas_800t_a2`]).
    pub fn atlas_800_a2(n: u32) -> Self {
        atlas_node().topology(n, 1)
    }

    /// Two Atlas 800T A2 servers of `per_server` NPUs each (at most 8, at least 1): HCCS
    /// inside each, RoCE between them.
    pub fn two_servers(per_server: u32) -> Self {
        Topology {
            servers: 2,
            ..Topology::atlas_800_a2(per_server)
        }
    }

    /// Devices the topology describes: `server_size × servers`.
    pub fn devices(&self) -> u32 {
        self.server_size().saturating_mul(self.servers)
    }

    /// Devices per server, at least one.
    pub fn server_size(&self) -> u32 {
        self.server_size.max(1)
    }

    /// The server device `index` is in.
    pub fn server_of(&self, index: u32) -> u32 {
        index / self.server_size()
    }

    /// Whether devices `a` and `b` (indices in the node) are in one server.
    pub fn same_server(&self, a: u32, b: u32) -> bool {
        self.server_of(a) == self.server_of(b)
    }

    /// The link a transfer from device `a` to device `b` uses: the intra-server link within
    /// a server, the network between servers.
    pub fn link_between(&self, a: u32, b: u32) -> LinkSpec {
        if self.same_server(a, b) {
            self.intra_server
        } else {
            self.network
        }
    }
}

impl Default for Topology {
    /// [`Topology::atlas_800_a2`] with 8 NPUs.
    fn default() -> Self {
        Topology::atlas_800_a2(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_time_is_latency_plus_bytes_over_bandwidth() {
        let l = LinkSpec {
            bytes_per_s: 1_000_000_000,
            latency_ns: 500,
        };
        assert_eq!(l.transfer_ns(0), 500);
        assert_eq!(l.transfer_ns(1000), 1500);
        let zero = LinkSpec {
            bytes_per_s: 0,
            latency_ns: 0,
        };
        assert_eq!(zero.transfer_ns(2), 2_000_000_000);
        assert_eq!(zero.transfer_ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn servers_split_devices_and_pick_links() {
        let t = Topology::two_servers(4);
        assert_eq!(t.devices(), 8);
        assert_eq!(t.server_of(3), 0);
        assert_eq!(t.server_of(4), 1);
        assert_eq!(t.link_between(0, 3), LinkSpec::hccs_910b());
        assert_eq!(t.link_between(0, 4), LinkSpec::roce_200ge());
        assert_eq!(Topology::atlas_800_a2(20).server_size, 8);
        assert_eq!(Topology::atlas_800_a2(0).devices(), 1);
        let odd = Topology {
            server_size: 0,
            ..Topology::default()
        };
        assert!(!odd.same_server(0, 1));
    }
}
