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
