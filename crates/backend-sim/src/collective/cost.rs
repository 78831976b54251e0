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
//! **Calibration** (the shipped 910B profile, `node` section; `tests/backend_sim/calibration.rs` replays
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

use crate::profile::DeviceProfile;

mod algorithm;
mod link_params;

pub use algorithm::Algorithm;

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

#[cfg(test)]
mod tests;
