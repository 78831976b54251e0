//! Variable-count collectives on a simulated node, through the hal: their time is their even
//! counterpart's on the largest block (the busiest rank's bytes for an all-to-all-v), and
//! parts that break HCCL's rules are refused when they arrive.

use crate::common;

use braid_backend_sim::{collective_bound, SimBackend, SimComm, SimDevice, SimStream};
use braid_stream_core::collective::{Blocks, CollectiveCall, CollectiveOp, VCounts};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, HalError, Stream as _};
use braid_stream_core::types::DevicePtr;
use common::*;

fn v_call(
    op: CollectiveOp,
    send: DevicePtr,
    recv: DevicePtr,
    count: u64,
    v: VCounts,
) -> CollectiveCall {
    CollectiveCall::variable(op, send, recv, count, DType::F16, v)
}

/// Runs one part per rank (`part(rank, send, recv)`, buffers of `bytes`) and returns the
/// duration of the first rank's collective.
fn duration(
    devs: &[SimDevice],
    bytes: u64,
    part: impl Fn(usize, DevicePtr, DevicePtr) -> CollectiveCall,
) -> u64 {
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let streams: Vec<SimStream> = devs.iter().map(|d| d.create_stream(0).unwrap()).collect();
    for (r, (d, (s, c))) in devs.iter().zip(streams.iter().zip(&comms)).enumerate() {
        let (send, recv) = (d.alloc(bytes).unwrap(), d.alloc(bytes).unwrap());
        SimBackend::launch_collective(s, c, &part(r, send, recv), "v").unwrap();
    }
    streams[0].synchronize().unwrap();
    let tl = devs[0].timeline();
    tl.iter().find(|o| o.label == "v").unwrap().duration_ns()
}

#[test]
fn an_uneven_all_gather_v_takes_the_all_gather_time_of_its_largest_block() {
    let devs = one_thread_node(4);
    let counts = [1 << 16, 0, 1 << 18, 3];
    let blocks = Blocks::packed(&counts);
    let total = blocks.total() * 2;
    let ns = duration(&devs, total, |r, send, recv| {
        let v = VCounts {
            recv: blocks.clone(),
            ..VCounts::default()
        };
        v_call(CollectiveOp::AllGatherV, send, recv, counts[r], v)
    });
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let params = SimComm::init_all(&refs).unwrap()[0].link_params(DType::F16);
    let even = collective_bound(CollectiveOp::AllGather, 4, 4 * (1 << 18) * 2, &params);
    assert_eq!(ns, even);
    // The same total split evenly would be faster: the uneven one is paced by its largest
    // block.
    assert!(ns > collective_bound(CollectiveOp::AllGather, 4, total, &params));
}

#[test]
fn an_all_to_all_v_takes_the_all_to_all_time_of_its_busiest_rank() {
    let devs = one_thread_node(2);
    // Rank 0 sends 8 to itself and 1000 to rank 1; rank 1 sends 10 and 2.
    let sends = [[8, 1000], [10, 2]];
    let ns = duration(&devs, 4096, |r, send, recv| {
        let v = VCounts {
            send: Blocks::packed(&sends[r]),
            recv: Blocks::packed(&[sends[0][r], sends[1][r]]),
        };
        v_call(
            CollectiveOp::AllToAllV,
            send,
            recv,
            sends[r].iter().sum(),
            v,
        )
    });
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let params = SimComm::init_all(&refs).unwrap()[0].link_params(DType::F16);
    // Rank 1 receives 1002 elements: the busiest.
    assert_eq!(
        ns,
        collective_bound(CollectiveOp::AllToAll, 2, 1002 * 2, &params)
    );
}

#[test]
fn parts_breaking_hccl_s_rules_are_refused_when_they_arrive() {
    let devs = one_thread_node(2);
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let s: Vec<SimStream> = devs.iter().map(|d| d.create_stream(0).unwrap()).collect();
    let bufs: Vec<DevicePtr> = devs.iter().map(|d| d.alloc(64).unwrap()).collect();
    let gather = |counts: &[u64], displs: &[u64]| VCounts {
        recv: Blocks {
            counts: counts.to_vec(),
            displs: displs.to_vec(),
        },
        ..VCounts::default()
    };
    let launch = |r: usize, count, v| {
        let call = v_call(CollectiveOp::AllGatherV, bufs[r], bufs[r], count, v);
        SimBackend::launch_collective(&s[r], &comms[r], &call, "agv")
    };
    // Its own count must be its block's; blocks one per rank; receive blocks disjoint.
    let invalid = |r: Result<(), HalError>, what: &str| match r {
        Err(HalError::InvalidArgument(m)) if m.contains(what) => {}
        other => panic!("expected {what}, got {other:?}"),
    };
    invalid(
        launch(0, 3, gather(&[2, 2], &[0, 2])),
        "not its block's count 2",
    );
    invalid(launch(0, 2, gather(&[2], &[0])), "one per rank");
    invalid(launch(0, 2, gather(&[2, 2], &[0, 1])), "overlap");
    let no_blocks = CollectiveCall::new(CollectiveOp::AllGatherV, bufs[0], bufs[0], 2, DType::F16);
    invalid(
        SimBackend::launch_collective(&s[0], &comms[0], &no_blocks, "agv"),
        "no per-rank counts",
    );
    // Rank 1's blocks differ from rank 0's: a mismatch naming the block.
    launch(0, 2, gather(&[2, 2], &[0, 2])).unwrap();
    match launch(1, 2, gather(&[2, 2], &[0, 4])) {
        Err(HalError::CollectiveMismatch(m)) => {
            assert_eq!(m.rank, 1);
            assert!(
                m.difference.contains("receive block of rank 1"),
                "{}",
                m.difference
            );
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    launch(1, 2, gather(&[2, 2], &[0, 2])).unwrap();
    s[1].synchronize().unwrap();
}
