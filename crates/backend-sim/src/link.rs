//! The links of a node as contended resources, and transfers placed on them.
//!
//! Each ordered pair of devices of one server has its own link (a full mesh, one direction
//! each); each device has a network port per direction for transfers between servers. A
//! transfer occupies every resource of its route (the link, or the sender's outgoing port and
//! the receiver's incoming one) plus whatever else the caller adds (a copy engine, a
//! communication engine) for its whole duration, starting at the earliest time at which all
//! of them are free: two transfers on one link take turns, each at the link's full bandwidth.
//!
//! This is the crate-internal interface peer copies and collectives are scheduled with
//! ([`Links::route`], [`earliest_all`], [`Links::reserve`]).

use crate::resource::Pool;
use crate::topology::{LinkSpec, Topology};
use std::collections::HashMap;

/// One resource of a route.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum LinkId {
    /// The link from device `.0` to device `.1` of one server.
    Direct(u32, u32),
    /// The outgoing network port of a device.
    PortOut(u32),
    /// The incoming network port of a device.
    PortIn(u32),
}

impl LinkId {
    /// The name of its trace track, with device indices turned into ordinals by `ordinal`.
    pub fn name(&self, ordinal: impl Fn(u32) -> u32) -> String {
        match *self {
            LinkId::Direct(a, b) => format!("link {}→{}", ordinal(a), ordinal(b)),
            LinkId::PortOut(a) => format!("port out {}", ordinal(a)),
            LinkId::PortIn(a) => format!("port in {}", ordinal(a)),
        }
    }
}

/// The resources a transfer between two devices occupies, and how long it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// Resources occupied for the whole transfer (one each).
    pub hops: Vec<LinkId>,
    /// Bandwidth and latency of the route.
    pub spec: LinkSpec,
}

impl Route {
    /// Duration of a transfer of `bytes` on the route.
    pub fn duration_ns(&self, bytes: u64) -> u64 {
        self.spec.transfer_ns(bytes)
    }
}

/// Link usage of a node over virtual time.
#[derive(Debug)]
pub(crate) struct Links {
    topology: Topology,
    /// Usage per link, created on first use.
    pools: HashMap<LinkId, Pool>,
}

/// The earliest time `>= ready` at which every pool of `pools` has `demand` units free for
/// `duration` ns at once (each pool with its own demand).
pub(crate) fn earliest_all(pools: &[(&Pool, u32)], ready: u64, duration: u64) -> u64 {
    let mut t = ready;
    // Each round moves `t` to the first time the next pool is free; a round in which no pool
    // moves it is the answer. Every move is to the end of some busy run, so this ends.
    loop {
        let mut moved = false;
        for (pool, demand) in pools {
            let at = pool.earliest(t, duration, *demand);
            if at != t {
                t = at;
                moved = true;
            }
        }
        if !moved {
            return t;
        }
    }
}

impl Links {
    /// No link in use yet.
    pub fn new(topology: Topology) -> Self {
        Links {
            topology,
            pools: HashMap::new(),
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The route from device `from` to device `to` (indices in the node, different).
    pub fn route(&self, from: u32, to: u32) -> Route {
        let spec = self.topology.link_between(from, to);
        let hops = if self.topology.same_server(from, to) {
            vec![LinkId::Direct(from, to)]
        } else {
            vec![LinkId::PortOut(from), LinkId::PortIn(to)]
        };
        Route { hops, spec }
    }

    /// The usage of `link` (an idle pool when it was never used).
    pub fn pool(&self, link: LinkId) -> Option<&Pool> {
        self.pools.get(&link)
    }

    /// The earliest time at or after `ready` at which every pool of `pools` has its demand
    /// free and every hop of `route` is free, all for `duration`.
    pub fn earliest_along<'a>(
        &'a self,
        route: &Route,
        mut pools: Vec<(&'a Pool, u32)>,
        ready: u64,
        duration: u64,
    ) -> u64 {
        pools.extend(
            route
                .hops
                .iter()
                .filter_map(|h| self.pool(*h))
                .map(|p| (p, 1)),
        );
        earliest_all(&pools, ready, duration)
    }

    /// Marks every hop of `route` busy over `[start, end)`.
    pub fn reserve(&mut self, route: &Route, start: u64, end: u64) {
        for hop in &route.hops {
            self.pools
                .entry(*hop)
                .or_insert_with(|| Pool::new(1))
                .reserve(start, end.saturating_sub(start), 1);
        }
    }

    /// Forgets usage before `now` (no transfer of any device can start before it).
    pub fn prune(&mut self, now: u64) {
        for pool in self.pools.values_mut() {
            pool.prune(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_follow_the_topology() {
        let links = Links::new(Topology::two_servers(2));
        assert_eq!(links.route(0, 1).hops, vec![LinkId::Direct(0, 1)]);
        assert_eq!(links.route(1, 0).hops, vec![LinkId::Direct(1, 0)]);
        let far = links.route(1, 2);
        assert_eq!(far.hops, vec![LinkId::PortOut(1), LinkId::PortIn(2)]);
        assert_eq!(far.spec, LinkSpec::roce_200ge());
        assert!(far.duration_ns(1 << 20) > links.route(0, 1).duration_ns(1 << 20));
    }

    #[test]
    fn transfers_on_one_link_take_turns() {
        let mut links = Links::new(Topology::atlas_800_a2(4));
        let r = links.route(0, 1);
        links.reserve(&r, 100, 200);
        let busy = links.pool(LinkId::Direct(0, 1)).unwrap();
        assert_eq!(earliest_all(&[(busy, 1)], 50, 60), 200);
        assert_eq!(earliest_all(&[(busy, 1)], 0, 100), 0);
        // The other direction is another link.
        assert!(links.pool(LinkId::Direct(1, 0)).is_none());
    }

    #[test]
    fn earliest_all_finds_a_time_every_pool_is_free() {
        let mut a = Pool::new(1);
        let mut b = Pool::new(1);
        a.reserve(0, 10, 1);
        b.reserve(10, 10, 1);
        a.reserve(20, 5, 1);
        assert_eq!(earliest_all(&[(&a, 1), (&b, 1)], 0, 5), 25);
        assert_eq!(earliest_all(&[(&b, 1)], 12, 0), 20);
    }
}
