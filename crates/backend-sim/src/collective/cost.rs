//! The alpha–beta cost of collectives (Thakur, Rabenseifner and Gropp 2005, "Optimization of
//! Collective Communication Operations in MPICH"), and which algorithm the simulator runs on
//! which wiring.
//!
//! With `p` ranks, a message of `n` bytes, a per-message latency `α` (`alpha_ns`), a per-byte
//! link time `β = 1 / link_bytes_per_s` and a per-byte reduction time
//! `γ = 1 / reduce_bytes_per_s`:
//!
//! | operation | algorithm | time |
//! |---|---|---|
//! | all-reduce | ring (reduce-scatter, then all-gather) | `2(p−1)α + 2((p−1)/p)nβ + ((p−1)/p)nγ` |
//! | all-reduce | recursive halving and doubling (power-of-two `p`) | `2 log2(p) α + 2((p−1)/p)nβ + ((p−1)/p)nγ` |
//! | all-reduce | mesh (reduce-scatter and all-gather over all `p−1` links at once) | `2(p−1)α + 2nβ/p + ((p−1)/p)nγ` |
//! | reduce-scatter | ring | `(p−1)α + ((p−1)/p)nβ + ((p−1)/p)nγ`, `n` the whole input |
//! | reduce-scatter | mesh | `(p−1)α + nβ/p + ((p−1)/p)nγ` |
//! | all-gather | ring | `(p−1)α + ((p−1)/p)nβ`, `n` the whole output |
//! | all-gather | mesh | `(p−1)α + nβ/p` |
//! | broadcast | binomial tree | `⌈log2 p⌉(α + nβ)` |
//! | broadcast | scatter, then ring all-gather (van de Geijn) | `(⌈log2 p⌉ + p − 1)α + 2((p−1)/p)nβ` |
//! | all-to-all | pairwise exchange | `(p−1)α + ((p−1)/p)nβ`, `n` one rank's whole send buffer |
//! | all-to-all | ring relay (store and forward) | `(p−1)α + ((p−1)/2)nβ` |
//! | send / receive | one message | `α + nβ` |
//!
//! `α` is paid for every message a rank sends, one after another (the issue overhead of the
//! rank's communication engine); the bytes of messages a rank sends in one step on distinct
//! links travel in parallel. So the mesh algorithms pay `p−1` latencies per phase but move
//! only `n/p` bytes per link, and recursive halving and doubling pays `log2 p` latencies.
//!
//! **Which algorithm.** On a [`Wiring::FullMesh`] (an Atlas 800T A2 server: eight 910B fully
//! connected by HCCS) every pair of ranks has its own link, so every algorithm above can run
//! and the simulator takes the cheapest for the size. For all-reduce this is HCCL's choice
//! within a server in spirit: its "mesh" algorithm drives all `p−1` links at once and wins
//! for large messages, recursive halving and doubling wins where the latency term dominates
//! (small messages, power-of-two `p`; each step's partner is a direct link), and the ring
//! remains for odd sizes in between. On a [`Wiring::Switched`] network (ranks in several
//! servers, one port each) every pair is reachable but a rank drives one message at a time:
//! ring, recursive halving and doubling, the broadcast algorithms and pairwise all-to-all
//! run, the mesh algorithms do not. On a
//! [`Wiring::Ring`] only neighbours are linked: ring algorithms and the binomial tree (whose
//! messages are counted as one hop each, an optimistic simplification) are used, recursive
//! halving and doubling and the mesh algorithms are not (their partners are not neighbours),
//! and all-to-all relays blocks around the ring. A send to a peer that is not a neighbour on
//! a ring is modelled as one message (cut-through forwarding).
//!
//! **Calibration** (the shipped 910B profile, `node` section; `tests/calibration.rs` replays
//! the published figures). Every collective of two ranks or more pays a fixed cost
//! ([`LinkParams::overhead_ns`], HCCL's per-call overhead: tens of microseconds measured). Inside
//! a server `1/β` is the rate one HCCS link sustains *inside a collective*
//! ([`crate::CollectiveSpec::intra_link_bytes_per_s`], 18 GB/s measured, a third of a peer
//! copy's 54.68 GB/s), and `γ` is a third of the achievable HBM bandwidth (a reduction reads two
//! operands and writes one). Ranks spread evenly over several servers run an all-reduce in two
//! levels as HCCL does on the A2 ([`TwoLevel`]): reduce-scatter inside each server, an
//! all-reduce of each `1/per_server` shard between the servers (the ports of a server in
//! parallel), all-gather inside each server; other operations across servers stay flat.
//!
//! With one rank nothing is communicated: every bound is zero.

use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::dtype::DType;

use crate::engine::Engine;
use crate::profile::DeviceProfile;

/// How the devices of a node are linked, as far as the cost model cares.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Wiring {
    /// Every pair of devices has a direct link (HCCS within an Atlas 800T A2 server).
    FullMesh,
    /// Every device has one network port per direction into a switch (RoCE between
    /// servers): any pair can talk, but each rank sends and receives one message at a time.
    Switched,
    /// Device `i` is linked to `i − 1` and `i + 1` (mod the count) only.
    Ring,
}

/// The numbers the cost model needs: per-link latency and bandwidth, the reduction rate, the
/// wiring, the fixed cost of a call, and for ranks in several servers the intra-server links
/// of HCCL's two-level all-reduce.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct LinkParams {
    /// Latency of one message on one link (`α`), nanoseconds.
    pub alpha_ns: u64,
    /// Bandwidth of one link in one direction (`1/β`), bytes per second; zero is treated as one.
    pub link_bytes_per_s: u64,
    /// Bytes per second one device reduces (`1/γ`); zero is treated as one.
    pub reduce_bytes_per_s: u64,
    /// How the devices are linked.
    pub wiring: Wiring,
    /// Fixed cost of one collective call (HCCL's per-call overhead), nanoseconds: added once
    /// to the time of every collective among two ranks or more.
    pub overhead_ns: u64,
    /// For ranks spread evenly over several servers (`link_bytes_per_s` then the network's):
    /// the servers' inner links, over which an all-reduce runs in two levels ([`TwoLevel`]).
    pub two_level: Option<TwoLevel>,
}

/// The intra-server half of HCCL's two-level all-reduce across servers: a reduce-scatter
/// inside each server over its full mesh, an all-reduce of each shard between the servers
/// (rank `i` of every server together, all servers' ports in parallel), an all-gather inside
/// each server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TwoLevel {
    /// Ranks in each server (consecutive ranks share a server).
    pub per_server: u32,
    /// Latency of one message on an intra-server link, nanoseconds.
    pub intra_alpha_ns: u64,
    /// Bytes per second one intra-server link carries inside a collective.
    pub intra_link_bytes_per_s: u64,
}

impl LinkParams {
    /// The reduction rate of a device of `profile` on elements of `dtype` (`1/γ`): one
    /// vector operation per element, at most a third of the achievable memory bandwidth
    /// (`hbm_effective_bytes_per_s`: a reduction reads two operands and writes one).
    pub fn reduce_rate(profile: &DeviceProfile, dtype: DType) -> u64 {
        profile
            .vector_rate(dtype)
            .saturating_mul(dtype.size())
            .min(profile.hbm_effective_bytes_per_s / 3)
            .max(1)
    }

    fn beta_ns(&self) -> f64 {
        1e9 / self.link_bytes_per_s.max(1) as f64
    }

    fn gamma_ns(&self) -> f64 {
        1e9 / self.reduce_bytes_per_s.max(1) as f64
    }

    /// The same links without the fixed cost or the second level: one level's parameters.
    fn one_level(&self) -> LinkParams {
        LinkParams {
            overhead_ns: 0,
            two_level: None,
            ..*self
        }
    }
}

/// A collective algorithm the simulator models (see the module documentation).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Algorithm {
    /// Ring: `p − 1` steps (twice for all-reduce), one link per rank per step.
    Ring,
    /// Recursive halving (reduce-scatter) then doubling (all-gather), power-of-two ranks.
    RecursiveHalvingDoubling,
    /// Every rank exchanges with all `p − 1` peers at once over its direct links.
    Mesh,
    /// Binomial tree from the root.
    BinomialTree,
    /// Scatter from the root, then a ring all-gather.
    ScatterAllGather,
    /// Pairwise exchange: in step `k` rank `i` sends to `i + k` and receives from `i − k`.
    Pairwise,
    /// Blocks relayed around the ring, each rank forwarding what is not yet delivered.
    RingRelay,
    /// One message between two ranks.
    Direct,
    /// HCCL's all-reduce across servers ([`TwoLevel`]): intra-server reduce-scatter (mesh),
    /// inter-server all-reduce of each shard, intra-server all-gather (mesh).
    TwoLevel {
        /// Ranks in each server.
        per_server: u32,
    },
}

impl Algorithm {
    /// A short name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::RecursiveHalvingDoubling => "recursive halving-doubling",
            Algorithm::Mesh => "mesh",
            Algorithm::BinomialTree => "binomial tree",
            Algorithm::ScatterAllGather => "scatter + all-gather",
            Algorithm::Pairwise => "pairwise",
            Algorithm::RingRelay => "ring relay",
            Algorithm::Direct => "direct",
            Algorithm::TwoLevel { .. } => "two-level (intra mesh, inter-server)",
        }
    }
}

impl Algorithm {
    /// The ordered pairs of ranks (sender, receiver) among `ranks` whose links the algorithm
    /// uses (`root` for the broadcast algorithms; `Direct` is a single pair the caller knows
    /// and gives no pairs here). The simulator occupies each pair's link for the whole
    /// collective.
    pub fn pairs(self, ranks: u32, root: u32) -> Vec<(u32, u32)> {
        let p = ranks;
        let ring = || (0..p).map(|r| (r, (r + 1) % p)).collect::<Vec<_>>();
        let tree = || {
            let mut out = Vec::new();
            let mut step = 1;
            while step < p {
                for r in 0..step.min(p) {
                    if r + step < p {
                        out.push(((r + root) % p, (r + step + root) % p));
                    }
                }
                step *= 2;
            }
            out
        };
        let mut pairs = match self {
            _ if p < 2 => Vec::new(),
            Algorithm::Ring | Algorithm::RingRelay => ring(),
            Algorithm::RecursiveHalvingDoubling => {
                let mut out = Vec::new();
                let mut bit = 1;
                while bit < p {
                    out.extend((0..p).map(|r| (r, r ^ bit)).filter(|&(_, q)| q < p));
                    bit *= 2;
                }
                out
            }
            Algorithm::Mesh | Algorithm::Pairwise => (0..p)
                .flat_map(|a| (0..p).filter(move |&b| b != a).map(move |b| (a, b)))
                .collect(),
            Algorithm::BinomialTree => tree(),
            Algorithm::ScatterAllGather => {
                let mut out = tree();
                out.extend(ring());
                out
            }
            Algorithm::Direct => Vec::new(),
            Algorithm::TwoLevel { per_server } => {
                let g = per_server.max(1);
                (0..p)
                    .flat_map(|a| {
                        (0..p)
                            .filter(move |&b| b != a && (a / g == b / g || a % g == b % g))
                            .map(move |b| (a, b))
                    })
                    .collect()
            }
        };
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    }
}

/// The algorithm chosen for a collective and its time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Plan {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its alpha–beta time, nanoseconds (rounded up).
    pub ns: u64,
}

/// The message size `n` of the alpha–beta model for one rank's `call` in a communicator of
/// `ranks` ranks: the larger of its send and receive buffers (the whole input of a
/// reduce-scatter, the whole output of an all-gather, the whole send buffer of an
/// all-to-all); for a variable-count operation, the ranks times its largest block (the
/// larger of its send and receive totals for an all-to-all-v). `None` on overflow.
pub fn model_bytes(call: &CollectiveCall, ranks: u32) -> Option<u64> {
    if call.op.is_variable() {
        return super::variable::model_bytes(call, ranks);
    }
    let full = match call.op {
        CollectiveOp::ReduceScatter(_)
        | CollectiveOp::AllToAll
        | CollectiveOp::AllGather
        | CollectiveOp::Scatter { .. } => call.count.checked_mul(u64::from(ranks))?,
        _ => call.count,
    };
    full.checked_mul(call.dtype.size())
}

/// The message size a call is costed on, from every participant's part (`parts`) in a
/// communicator of `ranks` ranks: the busiest part's [`model_bytes`] (only an all-to-all-v's
/// parts differ); `u64::MAX` on overflow.
pub(crate) fn busiest_bytes<'a>(
    parts: impl IntoIterator<Item = &'a CollectiveCall>,
    ranks: u32,
) -> u64 {
    (parts.into_iter())
        .map(|call| model_bytes(call, ranks))
        .try_fold(0, |m, b| Some(b?.max(m)))
        .unwrap_or(u64::MAX)
}

fn log2_ceil(p: u32) -> f64 {
    f64::from(32 - (p - 1).leading_zeros())
}

fn ns(t: f64) -> u64 {
    // Times are sums of non-negative finite terms; a saturating cast is enough.
    t.ceil() as u64
}

/// The algorithms that run `op` on `params.wiring`, each with its time, in the order
/// preferred on a tie.
fn candidates(op: CollectiveOp, ranks: u32, bytes: u64, params: &LinkParams) -> Vec<Plan> {
    let p = f64::from(ranks);
    let n = bytes as f64;
    let (a, b, g) = (params.alpha_ns as f64, params.beta_ns(), params.gamma_ns());
    let share = (p - 1.0) / p;
    let mesh = params.wiring == Wiring::FullMesh;
    // Any pair of ranks can exchange directly (not only ring neighbours).
    let any_pair = params.wiring != Wiring::Ring;
    let power_of_two = ranks.is_power_of_two();
    let log = log2_ceil(ranks);
    let mut out = Vec::new();
    let mut push = |algorithm, t: f64| {
        out.push(Plan {
            algorithm,
            ns: ns(t),
        })
    };
    match op {
        CollectiveOp::AllReduce(_) => {
            push(
                Algorithm::Ring,
                2.0 * (p - 1.0) * a + 2.0 * share * n * b + share * n * g,
            );
            if any_pair && power_of_two {
                push(
                    Algorithm::RecursiveHalvingDoubling,
                    2.0 * log * a + 2.0 * share * n * b + share * n * g,
                );
            }
            if mesh {
                push(
                    Algorithm::Mesh,
                    2.0 * (p - 1.0) * a + 2.0 * n * b / p + share * n * g,
                );
            }
        }
        CollectiveOp::ReduceScatter(_) => {
            push(
                Algorithm::Ring,
                (p - 1.0) * a + share * n * b + share * n * g,
            );
            if mesh {
                push(Algorithm::Mesh, (p - 1.0) * a + n * b / p + share * n * g);
            }
        }
        CollectiveOp::AllGather => {
            push(Algorithm::Ring, (p - 1.0) * a + share * n * b);
            if mesh {
                push(Algorithm::Mesh, (p - 1.0) * a + n * b / p);
            }
        }
        CollectiveOp::Broadcast { .. } => {
            push(Algorithm::BinomialTree, log * (a + n * b));
            push(
                Algorithm::ScatterAllGather,
                (log + p - 1.0) * a + 2.0 * share * n * b,
            );
        }
        CollectiveOp::AllToAll => {
            if any_pair {
                push(Algorithm::Pairwise, (p - 1.0) * a + share * n * b);
            } else {
                push(
                    Algorithm::RingRelay,
                    (p - 1.0) * a + (p - 1.0) / 2.0 * n * b,
                );
            }
        }
        CollectiveOp::Send { .. } | CollectiveOp::Recv { .. } => {
            push(Algorithm::Direct, a + n * b);
        }
        // From one root: halves of the message down a binomial tree.
        CollectiveOp::Scatter { .. } => {
            push(Algorithm::BinomialTree, log * a + share * n * b);
        }
        // To one root: a binomial tree of reductions, or a ring reduce-scatter then a gather.
        CollectiveOp::Reduce { .. } => {
            push(Algorithm::BinomialTree, log * (a + n * b + n * g));
            push(
                Algorithm::Ring,
                2.0 * (p - 1.0) * a + 2.0 * share * n * b + share * n * g,
            );
        }
        // The variable-count operations run their even counterparts' algorithms, on the
        // message size of their largest block (`model_bytes`).
        CollectiveOp::AllGatherV | CollectiveOp::ReduceScatterV(_) | CollectiveOp::AllToAllV => {
            return candidates(super::variable::even_counterpart(op), ranks, bytes, params)
        }
        // HCCL's barrier is an all-reduce of a token: the all-reduce's latency terms.
        CollectiveOp::Barrier => {
            return candidates(CollectiveOp::AllReduce(ReduceOp::Sum), ranks, 0, params)
        }
    }
    out
}

/// The algorithm the simulator runs for `op` among `ranks` ranks with a message of `bytes`
/// bytes ([`model_bytes`]) on links of `params`, and its time: the cheapest the wiring allows
/// (the first listed in the module table on a tie), plus the fixed cost of a call
/// ([`LinkParams::overhead_ns`]). An all-reduce among ranks spread evenly over several servers
/// ([`LinkParams::two_level`]) runs in two levels, as HCCL's does. With fewer than two ranks
/// the time is zero.
pub fn plan(op: CollectiveOp, ranks: u32, bytes: u64, params: &LinkParams) -> Plan {
    if ranks < 2 {
        let all = candidates(op, ranks.max(1), bytes, params);
        return Plan {
            algorithm: all[0].algorithm,
            ns: 0,
        };
    }
    let flat = match two_level(op, ranks, bytes, params) {
        Some(plan) => plan,
        None => cheapest(op, ranks, bytes, &params.one_level()),
    };
    Plan {
        ns: flat.ns.saturating_add(params.overhead_ns),
        ..flat
    }
}

/// The cheapest one-level algorithm and its time, without the fixed cost.
fn cheapest(op: CollectiveOp, ranks: u32, bytes: u64, params: &LinkParams) -> Plan {
    candidates(op, ranks, bytes, params)
        .into_iter()
        .reduce(|best, next| if next.ns < best.ns { next } else { best })
        .unwrap_or(Plan {
            algorithm: Algorithm::Direct,
            ns: 0,
        })
}

/// HCCL's two-level all-reduce when `params` describe ranks in several servers of more than
/// one rank each: reduce-scatter of the whole message inside each server, all-reduce of each
/// `1/per_server` shard between the servers (every rank on its own port, in parallel), and
/// all-gather inside each server; without the fixed cost.
fn two_level(op: CollectiveOp, ranks: u32, bytes: u64, params: &LinkParams) -> Option<Plan> {
    let t = params.two_level?;
    let g = t.per_server;
    let CollectiveOp::AllReduce(reduce) = op else {
        return None;
    };
    if g < 2 || ranks % g != 0 || ranks / g < 2 {
        return None;
    }
    let intra = LinkParams {
        alpha_ns: t.intra_alpha_ns,
        link_bytes_per_s: t.intra_link_bytes_per_s,
        wiring: Wiring::FullMesh,
        ..params.one_level()
    };
    let shard = bytes.div_ceil(u64::from(g));
    let ns = cheapest(CollectiveOp::ReduceScatter(reduce), g, bytes, &intra)
        .ns
        .saturating_add(cheapest(op, ranks / g, shard, &params.one_level()).ns)
        .saturating_add(cheapest(CollectiveOp::AllGather, g, bytes, &intra).ns);
    Some(Plan {
        algorithm: Algorithm::TwoLevel { per_server: g },
        ns,
    })
}

/// The alpha–beta time in nanoseconds of `op` among `ranks` ranks with a message of `bytes`
/// bytes ([`model_bytes`]) on links of `params`: the bound a simulated collective's duration
/// is compared against ([`plan`]'s time).
pub fn collective_bound(op: CollectiveOp, ranks: u32, bytes: u64, params: &LinkParams) -> u64 {
    plan(op, ranks, bytes, params).ns
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::collective::ReduceOp;
    use braid_stream_core::types::DevicePtr;

    /// α = 1000 ns, β = 1 ns/byte (1 GB/s), γ = 0.5 ns/byte (2 GB/s): round numbers to check
    /// by hand.
    fn params(wiring: Wiring) -> LinkParams {
        LinkParams {
            alpha_ns: 1000,
            link_bytes_per_s: 1_000_000_000,
            reduce_bytes_per_s: 2_000_000_000,
            wiring,
            overhead_ns: 0,
            two_level: None,
        }
    }

    const SUM: CollectiveOp = CollectiveOp::AllReduce(ReduceOp::Sum);

    #[test]
    fn ring_all_reduce_on_a_ring() {
        // p = 4, n = 4000: 2·3·1000 + 2·(3/4)·4000·1 + (3/4)·4000·0.5 = 6000 + 6000 + 1500.
        let plan = plan(SUM, 4, 4000, &params(Wiring::Ring));
        assert_eq!(
            plan,
            Plan {
                algorithm: Algorithm::Ring,
                ns: 13_500
            }
        );
    }

    #[test]
    fn full_mesh_all_reduce_picks_halving_doubling_when_small_and_mesh_when_large() {
        let mesh = params(Wiring::FullMesh);
        // p = 8, n = 800: ring 14·1000 + 2·(7/8)·800 + (7/8)·800·0.5 = 14000 + 1400 + 350;
        // halving-doubling 2·3·1000 + 1400 + 350 = 7750; mesh 14000 + 2·800/8 + 350 = 14550.
        assert_eq!(
            candidates(SUM, 8, 800, &mesh),
            vec![
                Plan {
                    algorithm: Algorithm::Ring,
                    ns: 15_750
                },
                Plan {
                    algorithm: Algorithm::RecursiveHalvingDoubling,
                    ns: 7750
                },
                Plan {
                    algorithm: Algorithm::Mesh,
                    ns: 14_550
                },
            ]
        );
        assert_eq!(
            plan(SUM, 8, 800, &mesh).algorithm,
            Algorithm::RecursiveHalvingDoubling
        );
        // n = 800000: halving-doubling 6000 + 1400000 + 350000; mesh 14000 + 200000 + 350000.
        assert_eq!(
            plan(SUM, 8, 800_000, &mesh),
            Plan {
                algorithm: Algorithm::Mesh,
                ns: 564_000
            }
        );
        // Not a power of two: no halving-doubling candidate. p = 6, n = 60: ring
        // 10000 + 100 + 25, mesh 10000 + 20 + 25.
        let six = candidates(SUM, 6, 60, &mesh);
        assert_eq!(six.len(), 2);
        assert_eq!(
            plan(SUM, 6, 60, &mesh),
            Plan {
                algorithm: Algorithm::Mesh,
                ns: 10_045
            }
        );
    }

    #[test]
    fn a_switched_network_allows_halving_doubling_and_pairwise_but_no_mesh() {
        let switched = params(Wiring::Switched);
        // p = 8, n = 800: ring 15750, halving-doubling 7750; no mesh candidate.
        assert_eq!(
            candidates(SUM, 8, 800, &switched),
            vec![
                Plan {
                    algorithm: Algorithm::Ring,
                    ns: 15_750
                },
                Plan {
                    algorithm: Algorithm::RecursiveHalvingDoubling,
                    ns: 7750
                },
            ]
        );
        assert_eq!(
            plan(CollectiveOp::AllToAll, 4, 4000, &switched).algorithm,
            Algorithm::Pairwise
        );
        assert_eq!(
            candidates(CollectiveOp::AllGather, 4, 4000, &switched).len(),
            1
        );
    }

    #[test]
    fn reduce_scatter_and_all_gather() {
        let ring = params(Wiring::Ring);
        // p = 4, n = 4000: 3000 + 3000 + 1500.
        assert_eq!(
            collective_bound(CollectiveOp::ReduceScatter(ReduceOp::Max), 4, 4000, &ring),
            7500
        );
        // 3000 + 3000.
        assert_eq!(
            collective_bound(CollectiveOp::AllGather, 4, 4000, &ring),
            6000
        );
        // Mesh: 3000 + 4000/4 = 4000.
        let mesh = params(Wiring::FullMesh);
        assert_eq!(
            collective_bound(CollectiveOp::AllGather, 4, 4000, &mesh),
            4000
        );
        // Mesh reduce-scatter: 3000 + 1000 + 1500.
        assert_eq!(
            collective_bound(CollectiveOp::ReduceScatter(ReduceOp::Sum), 4, 4000, &mesh),
            5500
        );
    }

    #[test]
    fn broadcast_takes_the_tree_for_small_and_scatter_all_gather_for_large() {
        let ring = params(Wiring::Ring);
        let bcast = CollectiveOp::Broadcast { root: 0 };
        // p = 8, n = 100: tree 3·(1000 + 100) = 3300; scatter+all-gather 10·1000 + 175.
        assert_eq!(
            plan(bcast, 8, 100, &ring),
            Plan {
                algorithm: Algorithm::BinomialTree,
                ns: 3300
            }
        );
        // n = 80000: tree 3·81000 = 243000; other 10000 + 2·(7/8)·80000 = 150000.
        assert_eq!(
            plan(bcast, 8, 80_000, &ring),
            Plan {
                algorithm: Algorithm::ScatterAllGather,
                ns: 150_000
            }
        );
        // p = 5: ⌈log2 5⌉ = 3 steps.
        assert_eq!(collective_bound(bcast, 5, 0, &ring), 3000);
    }

    #[test]
    fn all_to_all_pairwise_on_a_mesh_and_relayed_on_a_ring() {
        // p = 4, n = 4000: 3000 + 3000 pairwise; 3000 + 1.5·4000 relayed.
        assert_eq!(
            plan(CollectiveOp::AllToAll, 4, 4000, &params(Wiring::FullMesh)),
            Plan {
                algorithm: Algorithm::Pairwise,
                ns: 6000
            }
        );
        assert_eq!(
            plan(CollectiveOp::AllToAll, 4, 4000, &params(Wiring::Ring)),
            Plan {
                algorithm: Algorithm::RingRelay,
                ns: 9000
            }
        );
    }

    #[test]
    fn send_and_receive_are_one_message() {
        let ring = params(Wiring::Ring);
        assert_eq!(
            collective_bound(CollectiveOp::Send { peer: 1 }, 2, 500, &ring),
            1500
        );
        assert_eq!(
            collective_bound(CollectiveOp::Recv { peer: 0 }, 2, 500, &ring),
            1500
        );
    }

    #[test]
    fn each_algorithm_names_the_links_it_uses() {
        assert_eq!(Algorithm::Ring.pairs(3, 0), vec![(0, 1), (1, 2), (2, 0)]);
        assert_eq!(
            Algorithm::RecursiveHalvingDoubling.pairs(4, 0),
            vec![
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 3),
                (2, 0),
                (2, 3),
                (3, 1),
                (3, 2)
            ]
        );
        assert_eq!(Algorithm::Mesh.pairs(3, 0).len(), 6);
        // Root 1 of 4: 1→2, then 1→3 and 2→0.
        assert_eq!(
            Algorithm::BinomialTree.pairs(4, 1),
            vec![(1, 2), (1, 3), (2, 0)]
        );
        assert_eq!(
            Algorithm::ScatterAllGather.pairs(2, 0),
            vec![(0, 1), (1, 0)]
        );
        assert!(Algorithm::Direct.pairs(2, 0).is_empty());
        assert!(Algorithm::Ring.pairs(1, 0).is_empty());
    }

    #[test]
    fn the_fixed_cost_is_added_once_to_every_collective_of_two_ranks_or_more() {
        let with = LinkParams {
            overhead_ns: 20_000,
            ..params(Wiring::FullMesh)
        };
        let without = params(Wiring::FullMesh);
        for (op, ranks, bytes) in [
            (SUM, 8, 800),
            (SUM, 8, 800_000),
            (CollectiveOp::AllGather, 4, 4000),
            (CollectiveOp::Send { peer: 1 }, 2, 500),
        ] {
            let (a, b) = (
                plan(op, ranks, bytes, &with),
                plan(op, ranks, bytes, &without),
            );
            assert_eq!(a.algorithm, b.algorithm);
            assert_eq!(a.ns, b.ns + 20_000, "{op:?} among {ranks}");
        }
        assert_eq!(collective_bound(SUM, 1, 1 << 20, &with), 0);
    }

    #[test]
    fn an_all_reduce_across_servers_runs_in_two_levels() {
        // 2 servers × 4 ranks, n = 8000. Network: α = 1000, 1 GB/s; inside a server α = 100,
        // 4 GB/s (β = 0.25); γ = 0.5. Intra reduce-scatter (mesh): 3·100 + 8000·0.25/4 +
        // (3/4)·8000·0.5 = 300 + 500 + 3000; inter all-reduce of the 2000-byte shard between 2
        // (halving-doubling = ring here, 2·1000 + 2·(1/2)·2000 + (1/2)·2000·0.5 = 4500, taken
        // first: the ring); intra all-gather 300 + 500. Total 9100, plus the fixed 7.
        let across = LinkParams {
            overhead_ns: 7,
            two_level: Some(TwoLevel {
                per_server: 4,
                intra_alpha_ns: 100,
                intra_link_bytes_per_s: 4_000_000_000,
            }),
            ..params(Wiring::Switched)
        };
        assert_eq!(
            plan(SUM, 8, 8000, &across),
            Plan {
                algorithm: Algorithm::TwoLevel { per_server: 4 },
                ns: 9107
            }
        );
        // The flat algorithms over the network are slower: halving-doubling 6000 + 14000 +
        // 3500.
        assert_eq!(plan(SUM, 8, 8000, &params(Wiring::Switched)).ns, 23_500);
        // Other operations, and ranks that do not fill the servers evenly, stay flat.
        assert_ne!(
            plan(CollectiveOp::AllGather, 8, 8000, &across).algorithm,
            Algorithm::TwoLevel { per_server: 4 }
        );
        assert_eq!(
            plan(SUM, 6, 6000, &across).algorithm,
            Algorithm::Ring,
            "6 ranks are not 2 servers of 4"
        );
        // The links it uses: each server's mesh and the pairs of equal position.
        let pairs = Algorithm::TwoLevel { per_server: 2 }.pairs(4, 0);
        assert_eq!(
            pairs,
            vec![
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 3),
                (2, 0),
                (2, 3),
                (3, 1),
                (3, 2)
            ]
        );
    }

    #[test]
    fn one_rank_costs_nothing() {
        assert_eq!(collective_bound(SUM, 1, 1 << 20, &params(Wiring::Ring)), 0);
        assert_eq!(collective_bound(SUM, 0, 1 << 20, &params(Wiring::Ring)), 0);
    }

    #[test]
    fn model_bytes_is_the_larger_buffer() {
        let call = |op| CollectiveCall {
            op,
            send: DevicePtr(0),
            recv: DevicePtr(0),
            count: 10,
            dtype: DType::F16,
            v: None,
        };
        assert_eq!(model_bytes(&call(SUM), 4), Some(20));
        assert_eq!(model_bytes(&call(CollectiveOp::AllGather), 4), Some(80));
        assert_eq!(
            model_bytes(&call(CollectiveOp::ReduceScatter(ReduceOp::Sum)), 4),
            Some(80)
        );
        assert_eq!(model_bytes(&call(CollectiveOp::AllToAll), 4), Some(80));
        assert_eq!(
            model_bytes(&call(CollectiveOp::Broadcast { root: 1 }), 4),
            Some(20)
        );
        let huge = CollectiveCall {
            count: u64::MAX,
            ..call(CollectiveOp::AllGather)
        };
        assert_eq!(model_bytes(&huge, 4), None);
    }

    #[test]
    fn reduce_rate_follows_the_vector_units_and_memory() {
        let p = DeviceProfile::ascend_910b();
        // f16: 19.5e12 flops × 2 bytes = 39e12 B/s, above the achievable HBM/3 ≈ 467e9:
        // memory bound.
        assert_eq!(
            LinkParams::reduce_rate(&p, DType::F16),
            1_400_000_000_000 / 3
        );
        let slow = DeviceProfile {
            vector_f32_flops_per_s: 1000,
            ..DeviceProfile::ascend_910b()
        };
        assert_eq!(LinkParams::reduce_rate(&slow, DType::F32), 4000);
    }
}
