//! Variable-count collectives on a communicator spanning processes (ranks on separate nodes
//! of this process, joined through a root info, so their parts cross the simulator's
//! transport): the same bytes as on a node-local communicator (uneven and zero counts, gaps
//! that keep their bytes), the time of their even counterpart on the busiest part, and parts
//! that break HCCL's rules refused on every rank alike, after which the communicator goes on.

use crate::common;

use braid_backend_sim::{
    collective_bound, NodeConfig, SimBackend, SimComm, SimConfig, SimDevice, SimNode, Topology,
};
use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, ReduceOp, VCounts};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, HalError, Stream as _};
use braid_stream_core::types::DevicePtr;
use common::*;
use std::thread;

const RANKS: usize = 3;

/// A node of `devices` devices (a generous collective timeout: every rank has its thread).
fn node(devices: u32) -> Vec<SimDevice> {
    let config = SimConfig::new()
        .capacity(1 << 30)
        .profile(unit_profile())
        .collective_timeout(std::time::Duration::from_secs(10));
    SimNode::new(NodeConfig {
        devices,
        device: config,
        topology: Topology::atlas_800_a2(devices),
    })
    .devices()
}

/// `RANKS` ranks on one node (a node-local communicator) or on `RANKS` nodes (one spanning
/// "processes").
struct Ranks {
    devs: Vec<SimDevice>,
    comms: Vec<SimComm>,
}

impl Ranks {
    fn local() -> Ranks {
        let devs = node(RANKS as u32);
        let refs: Vec<&SimDevice> = devs.iter().collect();
        let comms = SimComm::init_all(&refs).unwrap();
        assert!(comms[0].is_node_local());
        Ranks { devs, comms }
    }

    fn remote() -> Ranks {
        let devs: Vec<SimDevice> = (0..RANKS).flat_map(|_| node(1)).collect();
        let info = SimComm::root_info(&devs[0]).unwrap();
        let comms = join_all(&devs, &info);
        assert!(!comms[0].is_node_local());
        Ranks { devs, comms }
    }

    /// Every rank uploads `sends[r]` and `before[r]`, launches `part(r, send, recv)` labelled
    /// `label` from its own thread, and reads back its receive buffer (as long as
    /// `before[r]`); per rank, the launch's outcome and what the buffer holds.
    fn run(
        &self,
        label: &str,
        sends: &[Vec<f32>],
        before: &[Vec<f32>],
        part: impl Fn(usize, DevicePtr, DevicePtr) -> CollectiveCall + Sync,
    ) -> Vec<(Result<(), HalError>, Vec<f32>)> {
        thread::scope(|scope| {
            let running: Vec<_> = (0..RANKS)
                .map(|r| {
                    let (dev, comm, part) = (&self.devs[r], &self.comms[r], &part);
                    scope.spawn(move || {
                        let s = dev.create_stream(0).unwrap();
                        // An empty send is still a live allocation of one element.
                        let send = upload(dev, &s, &padded(&sends[r]));
                        let recv = upload(dev, &s, &before[r]);
                        let launched =
                            SimBackend::launch_collective(&s, comm, &part(r, send, recv), label);
                        s.synchronize().unwrap();
                        (launched, download(&s, recv, before[r].len()))
                    })
                })
                .collect();
            running.into_iter().map(|t| t.join().unwrap()).collect()
        })
    }

    /// How long each rank's collective labelled `label` took.
    fn durations(&self, label: &str) -> Vec<u64> {
        (self.devs.iter())
            .map(|d| {
                let timeline = d.timeline();
                let op = timeline.iter().find(|o| o.label == label).unwrap();
                op.duration_ns()
            })
            .collect()
    }
}

fn padded(values: &[f32]) -> Vec<f32> {
    if values.is_empty() {
        vec![0.0]
    } else {
        values.to_vec()
    }
}

fn v_call(
    op: CollectiveOp,
    send: DevicePtr,
    recv: DevicePtr,
    count: u64,
    v: VCounts,
) -> CollectiveCall {
    CollectiveCall::variable(op, send, recv, count, DType::F32, v)
}

/// Rank `r`'s `n` distinct send values.
fn values(r: usize, n: u64) -> Vec<f32> {
    (0..n).map(|i| (10 * (r + 1)) as f32 + i as f32).collect()
}

/// A receive buffer of `n` elements before the call: what the gaps must keep.
fn before(n: usize) -> Vec<Vec<f32>> {
    (0..RANKS).map(|r| vec![-(r as f32) - 1.0; n]).collect()
}

/// Runs the same parts on a node-local and on a remote communicator: both launches succeed
/// on every rank and leave the same bytes; returns them and the two communicators.
fn same_on_both(
    label: &str,
    sends: &[Vec<f32>],
    before: &[Vec<f32>],
    part: impl Fn(usize, DevicePtr, DevicePtr) -> CollectiveCall + Sync,
) -> (Vec<Vec<f32>>, Ranks, Ranks) {
    let (local, remote) = (Ranks::local(), Ranks::remote());
    let mut results = [&local, &remote].map(|ranks| {
        ranks
            .run(label, sends, before, &part)
            .into_iter()
            .map(|(launched, bytes)| {
                launched.unwrap();
                bytes
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(results[1], results[0], "remote vs node-local");
    (std::mem::take(&mut results[0]), local, remote)
}

#[test]
fn an_uneven_all_gather_v_gathers_the_same_bytes_across_processes() {
    // Rank 2's block first, a one-element gap, rank 0's block, rank 1 sends nothing; the
    // receive buffer goes on past the blocks' span.
    let recv = Blocks {
        counts: vec![2, 0, 3],
        displs: vec![4, 7, 0],
    };
    let counts = [2, 0, 3];
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|r| values(r, counts[r])).collect();
    let v = VCounts {
        recv: recv.clone(),
        ..VCounts::default()
    };
    let (out, local, remote) = same_on_both("agv", &sends, &before(8), |r, send, recv| {
        v_call(CollectiveOp::AllGatherV, send, recv, counts[r], v.clone())
    });
    assert_eq!(out[1], [30.0, 31.0, 32.0, -2.0, 10.0, 11.0, -2.0, -2.0]);
    // An all-gather's time on the largest block, on each communicator's links.
    for ranks in [&local, &remote] {
        let params = ranks.comms[0].link_params(DType::F32);
        let even = collective_bound(CollectiveOp::AllGather, 3, 3 * 3 * 4, &params);
        assert_eq!(ranks.durations("agv"), [even; RANKS]);
    }
}

#[test]
fn an_uneven_reduce_scatter_v_reduces_the_same_bytes_across_processes() {
    // Rank 1's block first, then rank 2's (empty) and rank 0's one element.
    let send = Blocks {
        counts: vec![1, 3, 0],
        displs: vec![4, 0, 3],
    };
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|r| values(r, 5)).collect();
    let v = VCounts {
        send: send.clone(),
        ..VCounts::default()
    };
    let op = CollectiveOp::ReduceScatterV(ReduceOp::Sum);
    let (out, ..) = same_on_both("rsv", &sends, &before(4), |r, s, rv| {
        v_call(op, s, rv, send.counts[r], v.clone())
    });
    // Element 4 of every rank, elements 0..3 of every rank; rank 2 receives nothing.
    assert_eq!(out[0], [14.0 + 24.0 + 34.0, -1.0, -1.0, -1.0]);
    assert_eq!(out[1], [60.0, 63.0, 66.0, -2.0]);
    assert_eq!(out[2], [-3.0; 4]);
}

/// Rank `i` sends `SENT[i][j]` elements to rank `j`.
const SENT: [[u64; RANKS]; RANKS] = [[1, 0, 2], [3, 1, 0], [0, 2, 1]];

/// Rank `r`'s all-to-all-v blocks when rank `i` sends `sent[i][j]` elements to rank `j`: its
/// sends packed from offset 1, its receives in reverse rank order with a gap of one after
/// each.
fn all_to_all_blocks(sent: &[[u64; RANKS]; RANKS], r: usize) -> VCounts {
    let send_counts = sent[r].to_vec();
    let mut send_displs = Vec::new();
    let mut at = 1;
    for c in &send_counts {
        send_displs.push(at);
        at += c;
    }
    let recv_counts: Vec<u64> = (0..RANKS).map(|i| sent[i][r]).collect();
    let mut recv_displs = vec![0; RANKS];
    let mut at = 0;
    for i in (0..RANKS).rev() {
        recv_displs[i] = at;
        at += recv_counts[i] + 1;
    }
    VCounts {
        send: Blocks {
            counts: send_counts,
            displs: send_displs,
        },
        recv: Blocks {
            counts: recv_counts,
            displs: recv_displs,
        },
    }
}

/// Rank `r`'s all-to-all-v call with blocks `v`, sending the `sent[r]` elements in all.
fn all_to_all_v(
    sent: &[[u64; RANKS]; RANKS],
    r: usize,
    send: DevicePtr,
    recv: DevicePtr,
    v: VCounts,
) -> CollectiveCall {
    v_call(CollectiveOp::AllToAllV, send, recv, sent[r].iter().sum(), v)
}

#[test]
fn an_uneven_all_to_all_v_moves_the_same_bytes_across_processes() {
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|r| values(r, 5)).collect();
    let (out, local, remote) = same_on_both("a2av", &sends, &before(8), |r, send, recv| {
        all_to_all_v(&SENT, r, send, recv, all_to_all_blocks(&SENT, r))
    });
    // Rank 0 receives from rank 2 nothing (its slot then a gap), from rank 1 three elements,
    // from itself one.
    assert_eq!(out[0], [-1.0, 21.0, 22.0, 23.0, -1.0, 11.0, -1.0, -1.0]);
    // The busiest part: rank 0 receives 4 elements and rank 1 sends 4.
    for ranks in [&local, &remote] {
        let params = ranks.comms[0].link_params(DType::F32);
        let even = collective_bound(CollectiveOp::AllToAll, 3, 4 * 4, &params);
        assert_eq!(ranks.durations("a2av"), [even; RANKS]);
    }
}

#[test]
fn every_rank_of_an_all_to_all_v_across_processes_takes_the_busiest_part_s_time() {
    // Rank 0 sends 64 Ki elements to rank 1; rank 2 sends and receives one element.
    const N: u64 = 1 << 16;
    let sent = [[0, N, 0], [0, 0, 0], [0, 0, 1]];
    let remote = Ranks::remote();
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|_| vec![1.0; N as usize + 1]).collect();
    let outcomes = remote.run("a2av", &sends, &before(N as usize + 2), |r, send, recv| {
        all_to_all_v(&sent, r, send, recv, all_to_all_blocks(&sent, r))
    });
    assert!(outcomes.iter().all(|(launched, _)| launched.is_ok()));
    let params = remote.comms[0].link_params(DType::F32);
    let busiest = collective_bound(CollectiveOp::AllToAll, 3, N * 4, &params);
    let own = collective_bound(CollectiveOp::AllToAll, 3, 4, &params);
    assert!(busiest > own, "{busiest} vs {own}");
    assert_eq!(remote.durations("a2av"), [busiest; RANKS]);
}

/// Every rank's outcome is the same collective mismatch: the rank refused, the rank it
/// differs from, and a difference containing `what`.
fn refused_alike(outcomes: &[(Result<(), HalError>, Vec<f32>)], rank: u32, what: &str) {
    for (r, (launched, _)) in outcomes.iter().enumerate() {
        match launched {
            Err(HalError::CollectiveMismatch(m)) => {
                assert_eq!(m.rank, rank, "on rank {r}: {m}");
                assert!(m.difference.contains(what), "on rank {r}: {m}");
            }
            other => panic!("rank {r}: expected a collective mismatch, got {other:?}"),
        }
    }
}

#[test]
fn all_gather_v_blocks_that_differ_are_refused_on_every_rank_and_the_next_call_runs() {
    let remote = Ranks::remote();
    let blocks = |last: u64| Blocks {
        counts: vec![1, 1, 1],
        displs: vec![0, 1, last],
    };
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|r| values(r, 1)).collect();
    let gather = |displ_of_rank_2: &(dyn Fn(usize) -> u64 + Sync)| {
        remote.run("agv", &sends, &before(4), |r, send, recv| {
            let v = VCounts {
                recv: blocks(displ_of_rank_2(r)),
                ..VCounts::default()
            };
            v_call(CollectiveOp::AllGatherV, send, recv, 1, v)
        })
    };
    // Rank 1 places rank 2's block at 3, the others at 2.
    let outcomes = gather(&|r| if r == 1 { 3 } else { 2 });
    refused_alike(&outcomes, 1, "receive block of rank 2");
    for (r, (_, bytes)) in outcomes.iter().enumerate() {
        assert_eq!(bytes, &before(4)[r], "a refused call writes nothing");
    }
    // Call 0 was refused; the same communicator runs call 1.
    if let (Err(HalError::CollectiveMismatch(m)), _) = &outcomes[0] {
        assert_eq!(m.key.number, 0, "{m}");
    }
    for (r, (launched, bytes)) in gather(&|_| 2).into_iter().enumerate() {
        launched.unwrap();
        assert_eq!(bytes, [10.0, 20.0, 30.0, -(r as f32) - 1.0]);
    }
}

#[test]
fn all_to_all_v_counts_that_do_not_pair_are_refused_on_every_rank() {
    let remote = Ranks::remote();
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|r| values(r, 5)).collect();
    let outcomes = remote.run("a2av", &sends, &before(8), |r, send, recv| {
        let mut v = all_to_all_blocks(&SENT, r);
        if r == 2 {
            // Rank 2 expects one element from rank 0, which sends it two.
            v.recv.counts[0] = 1;
        }
        all_to_all_v(&SENT, r, send, recv, v)
    });
    refused_alike(
        &outcomes,
        2,
        "rank 2 expects 1 element(s) from rank 0, which sends 2",
    );
    let outcomes = remote.run("a2av", &sends, &before(8), |r, send, recv| {
        all_to_all_v(&SENT, r, send, recv, all_to_all_blocks(&SENT, r))
    });
    assert!(outcomes.iter().all(|(launched, _)| launched.is_ok()));
}

#[test]
fn even_calls_that_differ_across_processes_are_refused_too() {
    let remote = Ranks::remote();
    let sends: Vec<Vec<f32>> = (0..RANKS).map(|r| values(r, 4)).collect();
    let sum = CollectiveOp::AllReduce(ReduceOp::Sum);
    let outcomes = remote.run("ar", &sends, &before(4), |r, send, _| {
        let count = if r == 2 { 2 } else { 4 };
        CollectiveCall::new(sum, send, send, count, DType::F32)
    });
    refused_alike(&outcomes, 2, "count 4 vs 2");
}
