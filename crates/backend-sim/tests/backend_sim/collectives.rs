//! Collectives on a simulated node: matching, data, timing, deferral, captures.

use crate::common;

use braid_backend_sim::{
    collective_bound, NodeConfig, SimBackend, SimComm, SimConfig, SimDevice, SimNode, SimStream,
    Topology, Wiring,
};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{
    CollectiveBackend, Comm as _, Device as _, Event as _, Graph as _, HalError, Stream as _,
};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::{CaptureMode, DevicePtr, EventFlags};
use common::*;

const SUM: CollectiveOp = CollectiveOp::AllReduce(ReduceOp::Sum);

fn put(dev: &SimDevice, s: &SimStream, dtype: DType, values: &[f32]) -> DevicePtr {
    let bytes = dtype.encode(values);
    let ptr = dev.alloc(bytes.len() as u64).unwrap();
    // SAFETY: `bytes` lives until the synchronize below has observed the copy's completion.
    unsafe {
        s.memcpy_h2d(ptr, bytes.as_ptr(), bytes.len() as u64)
            .unwrap()
    };
    s.synchronize().unwrap();
    ptr
}

fn get(s: &SimStream, ptr: DevicePtr, dtype: DType, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * dtype.size() as usize];
    // SAFETY: `bytes` is not touched until the synchronize below observes completion.
    unsafe {
        s.memcpy_d2h(bytes.as_mut_ptr(), ptr, bytes.len() as u64)
            .unwrap()
    };
    s.synchronize().unwrap();
    dtype.decode(&bytes)
}

/// Issues `comm`'s part of an in-place sum all-reduce of `count` values at `x` on `s`.
fn sum_in_place(
    s: &SimStream,
    comm: &SimComm,
    x: DevicePtr,
    count: u64,
    dtype: DType,
    label: &str,
) -> Result<(), HalError> {
    SimBackend::launch_collective(
        s,
        comm,
        &CollectiveCall::new(SUM, x, x, count, dtype),
        label,
    )
}

/// Per rank: a stream, and `values[r]` uploaded.
fn setup(
    devs: &[SimDevice],
    dtype: DType,
    values: impl Fn(usize) -> Vec<f32>,
) -> Vec<(SimStream, DevicePtr)> {
    devs.iter()
        .enumerate()
        .map(|(r, d)| {
            let s = d.create_stream(0).unwrap();
            let x = put(d, &s, dtype, &values(r));
            (s, x)
        })
        .collect()
}

fn all_reduce_f16(n_devices: u32) {
    let devs = one_thread_node(n_devices);
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let n = 6;
    let ranks = setup(&devs, DType::F16, |r| {
        (0..n).map(|i| (r * 10 + i) as f32 * 0.5).collect()
    });
    let outs: Vec<DevicePtr> = devs
        .iter()
        .map(|d| d.alloc(n as u64 * 2).unwrap())
        .collect();
    for (r, ((s, x), comm)) in ranks.iter().zip(&comms).enumerate() {
        SimBackend::launch_collective(
            s,
            comm,
            &CollectiveCall::new(SUM, *x, outs[r], n as u64, DType::F16),
            "allreduce(sum)",
        )
        .unwrap();
    }
    let expected: Vec<f32> = (0..n)
        .map(|i| {
            (0..n_devices as usize)
                .map(|r| (r * 10 + i) as f32 * 0.5)
                .sum()
        })
        .collect();
    for (r, (s, _)) in ranks.iter().enumerate() {
        assert_eq!(
            get(s, outs[r], DType::F16, n),
            expected,
            "rank {r} of {n_devices}"
        );
    }
}

#[test]
fn all_reduce_in_f16_on_2_4_and_8_devices() {
    all_reduce_f16(2);
    all_reduce_f16(4);
    all_reduce_f16(8);
}

#[test]
fn all_gather_reduce_scatter_broadcast_and_all_to_all_move_the_right_blocks() {
    let devs = one_thread_node(3);
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let dt = DType::BF16;
    // Rank r holds [3r, 3r+1, 3r+2].
    let ranks = setup(&devs, dt, |r| (0..3).map(|i| (3 * r + i) as f32).collect());
    let out: Vec<DevicePtr> = devs.iter().map(|d| d.alloc(64).unwrap()).collect();
    let run = |op, count, check: &dyn Fn(usize, Vec<f32>)| {
        for (r, ((s, x), comm)) in ranks.iter().zip(&comms).enumerate() {
            SimBackend::launch_collective(
                s,
                comm,
                &CollectiveCall::new(op, *x, out[r], count, dt),
                "c",
            )
            .unwrap();
        }
        for (r, (s, _)) in ranks.iter().enumerate() {
            check(r, get(s, out[r], dt, 9));
        }
    };
    run(CollectiveOp::AllGather, 1, &|_, got| {
        assert_eq!(&got[..3], &[0.0, 3.0, 6.0]);
    });
    run(CollectiveOp::ReduceScatter(ReduceOp::Max), 1, &|r, got| {
        assert_eq!(got[0], (6 + r) as f32);
    });
    run(CollectiveOp::Broadcast { root: 2 }, 3, &|_, got| {
        assert_eq!(&got[..3], &[6.0, 7.0, 8.0]);
    });
    run(CollectiveOp::AllToAll, 1, &|r, got| {
        let expected: Vec<f32> = (0..3).map(|i| (3 * i + r) as f32).collect();
        assert_eq!(&got[..3], &expected[..]);
    });
}

#[test]
fn send_pairs_with_recv_and_other_ranks_are_not_involved() {
    let devs = one_thread_node(3);
    let comms = SimComm::init_all(&[&devs[0], &devs[1], &devs[2]]).unwrap();
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32 + 1.0; 4]);
    let out = devs[2].alloc(16).unwrap();
    SimBackend::launch_collective(
        &ranks[0].0,
        &comms[0],
        &CollectiveCall::new(
            CollectiveOp::Send { peer: 2 },
            ranks[0].1,
            DevicePtr(0),
            4,
            DType::F32,
        ),
        "send",
    )
    .unwrap();
    SimBackend::launch_collective(
        &ranks[2].0,
        &comms[2],
        &CollectiveCall::new(
            CollectiveOp::Recv { peer: 0 },
            DevicePtr(0),
            out,
            4,
            DType::F32,
        ),
        "recv",
    )
    .unwrap();
    assert_eq!(get(&ranks[2].0, out, DType::F32, 4), vec![1.0; 4]);
    ranks[0].0.synchronize().unwrap();
}

#[test]
fn a_mismatched_part_is_refused_naming_rank_call_and_difference() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F16, |_| vec![1.0; 8]);
    sum_in_place(&ranks[0].0, &comms[0], ranks[0].1, 8, DType::F16, "a").unwrap();
    let err = sum_in_place(&ranks[1].0, &comms[1], ranks[1].1, 4, DType::F16, "a").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("rank 1's call 0") && msg.contains("count 8 vs 4"),
        "{msg}"
    );
    // Typed: the matcher's mismatch, naming both ranks and the call.
    match err {
        HalError::CollectiveMismatch(m) => {
            assert_eq!((m.rank, m.expected_rank, m.key.number), (1, 0, 0));
            assert_eq!((m.expected.count, m.found.count), (8, 4));
        }
        other => panic!("expected a collective mismatch, got {other:?}"),
    }
    // Still usable: the matching part completes the call.
    sum_in_place(&ranks[1].0, &comms[1], ranks[1].1, 8, DType::F16, "a").unwrap();
    assert_eq!(get(&ranks[1].0, ranks[1].1, DType::F16, 8), vec![2.0; 8]);
}

#[test]
fn waiting_on_a_collective_a_rank_has_not_issued_is_an_error_not_a_hang() {
    let devs = one_thread_node(3);
    let comms = SimComm::init_all(&[&devs[0], &devs[1], &devs[2]]).unwrap();
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32; 4]);
    sum_in_place(&ranks[0].0, &comms[0], ranks[0].1, 4, DType::F32, "ar").unwrap();
    let err = ranks[0].0.synchronize().unwrap_err().to_string();
    assert!(err.contains("rank(s) 1, 2 have not issued"), "{err}");
    // Ranks 1 and 2 have never submitted a part: another thread might drive them, so the
    // synchronization waited the collective timeout before failing.
    assert!(err.contains("the collective timeout is 20ms"), "{err}");
    assert!(!ranks[0].0.query().unwrap());
    let e = devs[0].create_event(EventFlags::default()).unwrap();
    ranks[0].0.record(&e).unwrap();
    assert!(!e.query().unwrap());
    let err = e.synchronize().unwrap_err().to_string();
    assert!(err.contains("rank(s) 1, 2 have not issued"), "{err}");
    assert!(devs[0].synchronize().is_err());
    for r in [2, 1] {
        sum_in_place(&ranks[r].0, &comms[r], ranks[r].1, 4, DType::F32, "ar").unwrap();
    }
    e.synchronize().unwrap();
    assert_eq!(get(&ranks[0].0, ranks[0].1, DType::F32, 4), vec![3.0; 4]);
}

#[test]
fn work_after_a_pending_part_is_held_back_and_runs_after_the_collective() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32 + 1.0; 4]);
    let (s0, x0) = &ranks[0];
    let y0 = devs[0].alloc(16).unwrap();
    sum_in_place(s0, &comms[0], *x0, 4, DType::F32, "ar").unwrap();
    // Held back: it reads the all-reduce's result.
    s0.launch(
        &Kernel::Scale {
            src: slice(*x0, 4),
            dst: slice(y0, 4),
            factor: 10.0,
        }
        .into(),
        "scale",
    )
    .unwrap();
    // Another stream of device 0 waits on an event recorded after both: deferred too.
    let e = devs[0].create_event(EventFlags::default()).unwrap();
    s0.record(&e).unwrap();
    let other = devs[0].create_stream(0).unwrap();
    other.wait(&e).unwrap();
    let z0 = devs[0].alloc(16).unwrap();
    other
        .launch(
            &Kernel::Scale {
                src: slice(y0, 4),
                dst: slice(z0, 4),
                factor: 2.0,
            }
            .into(),
            "scale2",
        )
        .unwrap();
    let (s1, x1) = &ranks[1];
    sum_in_place(s1, &comms[1], *x1, 4, DType::F32, "ar").unwrap();
    assert_eq!(get(&other, z0, DType::F32, 4), vec![60.0; 4]);
    assert_eq!(get(s0, y0, DType::F32, 4), vec![30.0; 4]);
    let tl = devs[0].timeline();
    let ar = tl.iter().find(|o| o.label == "ar").unwrap();
    let scale = tl.iter().find(|o| o.label == "scale").unwrap();
    let scale2 = tl.iter().find(|o| o.label == "scale2").unwrap();
    assert!(scale.start_ns >= ar.end_ns && scale2.start_ns >= scale.end_ns);
}

#[test]
fn work_after_a_barrier_waits_for_every_rank_to_reach_it() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32 + 1.0; 4]);
    let barrier = CollectiveCall::new(
        CollectiveOp::Barrier,
        DevicePtr(0),
        DevicePtr(0),
        0,
        DType::F32,
    );
    let (s0, x0) = &ranks[0];
    SimBackend::launch_collective(s0, &comms[0], &barrier, "barrier").unwrap();
    let y0 = devs[0].alloc(16).unwrap();
    s0.launch(
        &Kernel::Scale {
            src: slice(*x0, 4),
            dst: slice(y0, 4),
            factor: 10.0,
        }
        .into(),
        "after",
    )
    .unwrap();
    // Rank 1 is busy for a millisecond before it reaches the barrier.
    let (s1, _) = &ranks[1];
    s1.launch(
        &Kernel::Busy {
            duration_ns: 1_000_000,
        }
        .into(),
        "busy",
    )
    .unwrap();
    SimBackend::launch_collective(s1, &comms[1], &barrier, "barrier").unwrap();
    assert_eq!(get(s0, y0, DType::F32, 4), vec![10.0; 4]);
    s1.synchronize().unwrap();
    let busy = devs[1]
        .timeline()
        .into_iter()
        .find(|o| o.label == "busy")
        .unwrap();
    let tl0 = devs[0].timeline();
    let b0 = tl0.iter().find(|o| o.label == "barrier").unwrap();
    let after = tl0.iter().find(|o| o.label == "after").unwrap();
    assert_eq!(b0.kind, "barrier");
    assert!(b0.end_ns >= busy.end_ns, "{b0:?} ended before {busy:?}");
    assert!(after.start_ns >= b0.end_ns);
}

#[test]
fn a_collective_takes_the_cost_models_time_and_is_labelled() {
    let devs = one_thread_node(4);
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let count = 1 << 20;
    let bufs: Vec<(SimStream, DevicePtr)> = devs
        .iter()
        .map(|d| (d.create_stream(0).unwrap(), d.alloc(count * 2).unwrap()))
        .collect();
    for ((s, x), c) in bufs.iter().zip(&comms) {
        sum_in_place(s, c, *x, count, DType::F16, "allreduce(sum)").unwrap();
    }
    bufs[0].0.synchronize().unwrap();
    let bound = collective_bound(SUM, 4, count * 2, &comms[0].link_params(DType::F16));
    for d in &devs {
        let tl = d.timeline();
        let op = tl.iter().find(|o| o.label == "allreduce(sum)").unwrap();
        assert_eq!(op.kind, "allreduce");
        assert_eq!(op.duration_ns(), bound);
    }
    let params = comms[0].link_params(DType::F16);
    assert_eq!(params.wiring, Wiring::FullMesh);
}

#[test]
fn communication_overlaps_compute_on_another_stream() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let count = 1 << 22;
    let mut comm_ns = 0;
    let mut compute_ns = 0;
    for (d, c) in devs.iter().zip(&comms) {
        let compute = d.create_stream(0).unwrap();
        let comm_stream = d.create_stream(0).unwrap();
        let x = d.alloc(count * 2).unwrap();
        compute.launch(&busy(2_000_000).into(), "compute").unwrap();
        sum_in_place(&comm_stream, c, x, count, DType::F16, "allreduce(sum)").unwrap();
        compute_ns = 2_000_000;
        comm_ns = collective_bound(SUM, 2, count * 2, &c.link_params(DType::F16));
    }
    for d in &devs {
        d.synchronize().unwrap();
        let makespan = d.makespan_ns();
        assert!(
            makespan < comm_ns + compute_ns,
            "{makespan} vs {comm_ns} + {compute_ns}"
        );
        assert!(makespan >= comm_ns.max(compute_ns));
    }
}

#[test]
fn a_captured_all_reduce_runs_again_at_each_replay_of_every_rank() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32 + 1.0; 4]);
    let graphs: Vec<_> = ranks
        .iter()
        .zip(&comms)
        .map(|((s, x), c)| {
            s.begin_capture(CaptureMode::ThreadLocal).unwrap();
            sum_in_place(s, c, *x, 4, DType::F32, "allreduce(sum)").unwrap();
            s.end_capture().unwrap()
        })
        .collect();
    // Nothing ran during the capture.
    assert_eq!(get(&ranks[0].0, ranks[0].1, DType::F32, 4), vec![1.0; 4]);
    for _ in 0..2 {
        for (g, (s, _)) in graphs.iter().zip(&ranks) {
            g.launch(s).unwrap();
        }
    }
    // 1 + 2 = 3, then 3 + 3 = 6.
    for (s, x) in &ranks {
        assert_eq!(get(s, *x, DType::F32, 4), vec![6.0; 4]);
    }
    let replayed = devs[1]
        .timeline()
        .iter()
        .filter(|o| o.kind == "allreduce")
        .count();
    assert_eq!(replayed, 2);
}

/// Every rank of `devs` joins `info` from its own thread (joining blocks until all have).
fn join_all(devs: &[SimDevice], info: &braid_stream_core::collective::RootInfo) -> Vec<SimComm> {
    let n = devs.len() as u32;
    std::thread::scope(|scope| {
        let handles: Vec<_> = devs
            .iter()
            .enumerate()
            .rev()
            .map(|(r, d)| scope.spawn(move || SimComm::init_root_info(d, n, r as u32, info)))
            .collect();
        let mut comms: Vec<SimComm> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        comms.reverse();
        comms
    })
}

#[test]
fn ranks_of_one_node_joining_a_root_info_form_a_node_communicator() {
    let devs = one_thread_node(4);
    let info = SimComm::root_info(&devs[0]).unwrap();
    let comms = join_all(&devs, &info);
    assert!(comms.iter().all(SimComm::is_node_local));
    assert_eq!((comms[2].rank(), comms[2].ranks()), (2, 4));
    let ranks = setup(&devs, DType::F16, |r| vec![r as f32; 2]);
    for ((s, x), c) in ranks.iter().zip(&comms) {
        sum_in_place(s, c, *x, 2, DType::F16, "ar").unwrap();
    }
    assert_eq!(get(&ranks[3].0, ranks[3].1, DType::F16, 2), vec![6.0; 2]);
    let foreign = braid_stream_core::collective::RootInfo::from_bytes(&[0u8; 4108]).unwrap();
    assert!(matches!(
        SimComm::init_root_info(&devs[1], 2, 1, &foreign),
        Err(HalError::InvalidArgument(_))
    ));
}

#[test]
fn ranks_on_separate_nodes_exchange_their_parts_over_the_transport() {
    // Two nodes of one device each stand in for two processes.
    let devs: Vec<SimDevice> = (0..2).flat_map(|_| one_thread_node(1)).collect();
    let info = SimComm::root_info(&devs[0]).unwrap();
    let comms = join_all(&devs, &info);
    assert!(!comms[0].is_node_local());
    let ranks = setup(&devs, DType::F16, |r| vec![r as f32 + 1.0; 4]);
    let outs: Vec<DevicePtr> = devs.iter().map(|d| d.alloc(16).unwrap()).collect();
    std::thread::scope(|scope| {
        for (((s, x), c), out) in ranks.iter().zip(&comms).zip(&outs) {
            scope.spawn(move || {
                sum_in_place(s, c, *x, 4, DType::F16, "allreduce(sum)").unwrap();
                SimBackend::launch_collective(
                    s,
                    c,
                    &CollectiveCall::new(CollectiveOp::AllGather, *x, *out, 4, DType::F16),
                    "ag",
                )
                .unwrap();
            });
        }
    });
    for ((s, x), out) in ranks.iter().zip(&outs) {
        assert_eq!(get(s, *x, DType::F16, 4), vec![3.0; 4]);
        assert_eq!(get(s, *out, DType::F16, 8), vec![3.0; 8]);
    }
    // Both ranks start the collective at the same virtual time and take the network's time.
    let bound = collective_bound(SUM, 2, 8, &comms[0].link_params(DType::F16));
    let starts: Vec<u64> = devs
        .iter()
        .map(|d| {
            let op = d
                .timeline()
                .into_iter()
                .find(|o| o.label == "allreduce(sum)")
                .unwrap();
            assert_eq!(op.duration_ns(), bound);
            op.start_ns
        })
        .collect();
    assert_eq!(starts[0], starts[1]);
}

#[test]
fn communicators_and_parts_are_checked() {
    let devs = one_thread_node(2);
    assert!(SimComm::init_all(&[&devs[0], &devs[0]]).is_err());
    let lone = SimDevice::new(SimConfig::new());
    assert!(SimComm::init_all(&[&devs[0], &lone]).is_err());
    assert!(SimComm::init_all(&[]).is_err());
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F32, |_| vec![1.0; 4]);
    let (s0, x0) = &ranks[0];
    let wrong_device = sum_in_place(s0, &comms[1], *x0, 4, DType::F32, "ar");
    assert!(matches!(wrong_device, Err(HalError::InvalidArgument(m)) if m.contains("rank 1")));
    let too_long = sum_in_place(s0, &comms[0], *x0, 1 << 20, DType::F32, "ar");
    assert!(matches!(too_long, Err(HalError::InvalidArgument(m)) if m.contains("not live memory")));
    let root = SimBackend::launch_collective(
        s0,
        &comms[0],
        &CollectiveCall::new(CollectiveOp::Broadcast { root: 2 }, *x0, *x0, 4, DType::F32),
        "b",
    );
    assert!(root.is_err());
    let to_self = SimBackend::launch_collective(
        s0,
        &comms[0],
        &CollectiveCall::new(CollectiveOp::Send { peer: 0 }, *x0, *x0, 4, DType::F32),
        "s",
    );
    assert!(to_self.is_err());
    // Nothing was left pending by the refusals.
    s0.synchronize().unwrap();
}

#[test]
fn ranks_submit_from_their_own_threads() {
    let devs = one_thread_node(4);
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let ranks = setup(&devs, DType::F16, |r| vec![r as f32 + 1.0; 16]);
    std::thread::scope(|scope| {
        for ((s, x), c) in ranks.iter().zip(&comms) {
            scope.spawn(move || {
                for _ in 0..3 {
                    sum_in_place(s, c, *x, 16, DType::F16, "ar").unwrap();
                }
            });
        }
    });
    // 10, then 40, then 160 on every rank.
    for (s, x) in &ranks {
        assert_eq!(get(s, *x, DType::F16, 16), vec![160.0; 16]);
    }
}

#[test]
fn ranks_in_two_servers_use_the_network_and_timing_only_mode_runs_the_same_schedule() {
    let config = SimConfig::new().mode(braid_backend_sim::SimMode::TimingOnly);
    let devs = SimNode::new(
        NodeConfig::new(4)
            .device(config)
            .topology(Topology::two_servers(2)),
    )
    .devices();
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let params = comms[0].link_params(DType::BF16);
    assert_eq!(params.wiring, Wiring::Switched);
    assert_eq!(
        params.link_bytes_per_s,
        braid_backend_sim::LinkSpec::roce_200ge().bytes_per_s
    );
    let one_server = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    assert_eq!(
        one_server[0].link_params(DType::BF16).wiring,
        Wiring::FullMesh
    );
    let count = 1 << 20;
    let streams: Vec<SimStream> = devs.iter().map(|d| d.create_stream(0).unwrap()).collect();
    for ((d, s), c) in devs.iter().zip(&streams).zip(&comms) {
        let x = d.alloc(count * 2).unwrap();
        sum_in_place(s, c, x, count, DType::BF16, "allreduce(sum)").unwrap();
    }
    streams[3].synchronize().unwrap();
    let op = devs[3]
        .timeline()
        .into_iter()
        .find(|o| o.kind == "allreduce")
        .unwrap();
    assert_eq!(
        op.duration_ns(),
        collective_bound(SUM, 4, count * 2, &params)
    );
}

#[test]
fn a_captured_send_of_two_ranks_does_not_shift_a_third_ranks_numbers() {
    let devs = one_thread_node(3);
    let comms = SimComm::init_all(&[&devs[0], &devs[1], &devs[2]]).unwrap();
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32 + 1.0; 2]);
    let tmp = devs[1].alloc(8).unwrap();
    let graphs: Vec<_> = ranks
        .iter()
        .zip(&comms)
        .enumerate()
        .map(|(r, ((s, x), c))| {
            s.begin_capture(CaptureMode::ThreadLocal).unwrap();
            match r {
                0 => SimBackend::launch_collective(
                    s,
                    c,
                    &CollectiveCall::new(CollectiveOp::Send { peer: 1 }, *x, *x, 2, DType::F32),
                    "send",
                )
                .unwrap(),
                1 => SimBackend::launch_collective(
                    s,
                    c,
                    &CollectiveCall::new(CollectiveOp::Recv { peer: 0 }, tmp, tmp, 2, DType::F32),
                    "recv",
                )
                .unwrap(),
                _ => {}
            }
            sum_in_place(s, c, *x, 2, DType::F32, "ar").unwrap();
            s.end_capture().unwrap()
        })
        .collect();
    for (g, (s, _)) in graphs.iter().zip(&ranks) {
        g.launch(s).unwrap();
    }
    assert_eq!(get(&ranks[2].0, ranks[2].1, DType::F32, 2), vec![6.0; 2]);
    assert_eq!(get(&ranks[1].0, tmp, DType::F32, 2), vec![1.0; 2]);
}

#[test]
fn an_eager_record_supersedes_a_held_one_and_releases_its_waiters() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F32, |_| vec![1.0; 2]);
    let (s0, x0) = &ranks[0];
    sum_in_place(s0, &comms[0], *x0, 2, DType::F32, "ar").unwrap();
    let e = devs[0].create_event(EventFlags::default()).unwrap();
    s0.record(&e).unwrap();
    let waiter = devs[0].create_stream(0).unwrap();
    waiter.wait(&e).unwrap();
    assert!(
        waiter.synchronize().is_err(),
        "held back behind the pending record"
    );
    let free = devs[0].create_stream(0).unwrap();
    free.record(&e).unwrap();
    waiter.synchronize().unwrap();
    assert!(
        s0.synchronize().is_err(),
        "rank 1 has still not issued the call"
    );
}

#[test]
fn ranks_issuing_calls_in_crossed_orders_get_an_error_naming_the_call() {
    let devs = one_thread_node(2);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = setup(&devs, DType::F32, |_| vec![1.0; 2]);
    let (s0, x0) = &ranks[0];
    let (s1, x1) = &ranks[1];
    // Rank 0 sends before the all-reduce, rank 1 receives after it: both calls are fully
    // issued, yet each waits for the other behind it.
    let send = CollectiveCall::new(CollectiveOp::Send { peer: 1 }, *x0, *x0, 2, DType::F32);
    SimBackend::launch_collective(s0, &comms[0], &send, "send").unwrap();
    sum_in_place(s0, &comms[0], *x0, 2, DType::F32, "ar").unwrap();
    sum_in_place(s1, &comms[1], *x1, 2, DType::F32, "ar").unwrap();
    let recv = CollectiveCall::new(CollectiveOp::Recv { peer: 0 }, *x1, *x1, 2, DType::F32);
    SimBackend::launch_collective(s1, &comms[1], &recv, "recv").unwrap();
    let err = s0.synchronize().unwrap_err().to_string();
    assert!(
        err.contains("call 0 from rank 0 to rank 1") && err.contains("issued by every rank"),
        "{err}"
    );
}

#[test]
fn a_collective_reading_a_buffer_another_stream_still_writes_is_a_race_naming_both() {
    let devs = one_thread_node(2);
    let refs: Vec<&SimDevice> = devs.iter().collect();
    let comms = SimComm::init_all(&refs).unwrap();
    let n = 64u64;
    let ranks = setup(&devs, DType::F32, |r| vec![r as f32; n as usize]);
    let outs: Vec<DevicePtr> = devs.iter().map(|d| d.alloc(n * 4).unwrap()).collect();
    // Rank 1's input is rewritten on another stream of its device, with no event before the
    // all-reduce that reads it.
    let writer = devs[1].create_stream(0).unwrap();
    let fill = Kernel::Fill {
        dst: braid_stream_core::types::DeviceSlice::new(ranks[1].1, n * 4),
        value: 5.0,
    };
    writer
        .launch(&braid_stream_core::TypedKernel::from(&fill), "writer")
        .unwrap();
    for (r, ((s, x), comm)) in ranks.iter().zip(&comms).enumerate() {
        SimBackend::launch_collective(
            s,
            comm,
            &CollectiveCall::new(SUM, *x, outs[r], n, DType::F32),
            "allreduce(sum)",
        )
        .unwrap();
    }
    let reports = devs[0].sanitizer_reports();
    let race = reports
        .iter()
        .find(|r| r.first.as_ref().is_some_and(|f| f.label == "writer"))
        .unwrap_or_else(|| panic!("no race with the writer: {reports:?}"));
    let first = race.first.as_ref().unwrap();
    assert_eq!((first.device, race.second.device), (1, 1));
    assert_eq!(race.second.label, "allreduce(sum)");
    let text = race.to_string();
    assert!(
        text.contains("writer") && text.contains("allreduce(sum)") && text.contains("device 1"),
        "{text}"
    );
}
