//! The cost model's numbers for an engine's collectives: its links, wiring and reduction
//! rate, within a server, between servers, or in two levels.

use super::{LinkParams, TwoLevel, Wiring};
use crate::engine::Engine;

impl Engine {
    /// The cost model's numbers for a collective between processes on `dtype` elements: the
    /// topology's network link, one port per rank, the current device's reduction rate.
    pub fn network_link_params(&self, dtype: braid_stream_core::dtype::DType) -> LinkParams {
        let topology = self.links.topology();
        LinkParams {
            alpha_ns: topology.network.latency_ns,
            link_bytes_per_s: topology.network.bytes_per_s,
            reduce_bytes_per_s: LinkParams::reduce_rate(&self.dev().config.profile, dtype),
            wiring: Wiring::Switched,
            overhead_ns: topology.collective.overhead_ns,
            two_level: None,
        }
    }

    /// The cost model's numbers for communicator `comm` on elements of `dtype`: the links
    /// between its devices (HCCS in one server, the network otherwise) and the first device's
    /// reduction rate.
    pub fn comm_link_params(
        &self,
        comm: usize,
        dtype: braid_stream_core::dtype::DType,
    ) -> LinkParams {
        let devices: Vec<usize> = self.coll.comms.get(comm).map_or_else(Vec::new, |c| {
            (0..c.ranks()).filter_map(|r| c.device(r)).collect()
        });
        self.link_params(&devices, dtype)
    }

    /// The cost model's numbers for a collective among `devices` (in rank order).
    pub(crate) fn link_params(
        &self,
        devices: &[usize],
        dtype: braid_stream_core::dtype::DType,
    ) -> LinkParams {
        let topology = self.links.topology();
        let coll = topology.collective;
        let first = devices.first().copied().unwrap_or(self.cur);
        let one_server = devices
            .iter()
            .all(|&d| topology.same_server(first as u32, d as u32));
        let intra_rate = topology
            .intra_server
            .bytes_per_s
            .min(coll.intra_link_bytes_per_s.max(1));
        let (alpha_ns, link_bytes_per_s, wiring, two_level) = if one_server {
            (
                topology.intra_server.latency_ns,
                intra_rate,
                Wiring::FullMesh,
                None,
            )
        } else {
            let two_level = even_servers(topology, devices).map(|per_server| TwoLevel {
                per_server,
                intra_alpha_ns: topology.intra_server.latency_ns,
                intra_link_bytes_per_s: intra_rate,
            });
            (
                topology.network.latency_ns,
                topology.network.bytes_per_s,
                Wiring::Switched,
                two_level,
            )
        };
        LinkParams {
            alpha_ns,
            link_bytes_per_s,
            reduce_bytes_per_s: LinkParams::reduce_rate(&self.devices[first].config.profile, dtype),
            wiring,
            overhead_ns: coll.overhead_ns,
            two_level,
        }
    }
}

/// Ranks per server when `devices` (in rank order) fill servers in runs of equal length, more
/// than one rank each, every server once: the shape HCCL's two-level algorithm needs.
fn even_servers(topology: &crate::Topology, devices: &[usize]) -> Option<u32> {
    let server = |d: usize| topology.server_of(d as u32);
    let first = *devices.first()?;
    let per_server = devices
        .iter()
        .take_while(|&&d| server(d) == server(first))
        .count();
    if per_server < 2 || devices.len() % per_server != 0 {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    for run in devices.chunks(per_server) {
        let s = server(run[0]);
        if !run.iter().all(|&d| server(d) == s) || !seen.insert(s) {
            return None;
        }
    }
    u32::try_from(per_server).ok()
}
