//! Graphs holding collectives on a simulated node: a replay keeps the captured streams'
//! concurrency (communication beside compute) and computes the same data.

use crate::common;

use braid_backend_sim::{
    collective_bound, SimBackend, SimComm, SimDevice, SimGraph, SimMode, SimStream,
};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{CollectiveBackend, Device as _, Graph as _, Stream as _};
use braid_stream_core::types::{CaptureMode, DevicePtr, EventFlags};
use common::*;
use std::time::{Duration, Instant};

const SUM: CollectiveOp = CollectiveOp::AllReduce(ReduceOp::Sum);

fn node(devices: u32, mode: SimMode) -> Vec<SimDevice> {
    let config = unit_config()
        .mode(mode)
        .collective_timeout(Duration::from_secs(60));
    server_devices(devices, config)
}

/// A two-device node computing data, its communicators, and what `rank` makes of each rank
/// (its index, device and communicator).
fn two_data_ranks<T>(
    rank: impl Fn(usize, &SimDevice, &SimComm) -> T,
) -> (Vec<SimDevice>, Vec<SimComm>, Vec<T>) {
    let devs = node(2, SimMode::Data);
    let comms = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
    let ranks = devs
        .iter()
        .zip(&comms)
        .enumerate()
        .map(|(r, (d, c))| rank(r, d, c))
        .collect();
    (devs, comms, ranks)
}

fn all_reduce(x: DevicePtr, count: u64, dtype: DType) -> CollectiveCall {
    CollectiveCall::new(SUM, x, x, count, dtype)
}

/// One rank's step, captured from `compute`: `compute_ns` of compute on `compute`, and an
/// all-reduce of `x` on `comm`, forked from and joined back into `compute` by events.
fn capture_step(
    dev: &SimDevice,
    compute: &SimStream,
    comm: &SimComm,
    call: &CollectiveCall,
    compute_ns: u64,
) -> SimGraph {
    let comm_stream = dev.create_stream(0).unwrap();
    let fork = dev.create_event(EventFlags::ORDERING).unwrap();
    let join = dev.create_event(EventFlags::ORDERING).unwrap();
    compute.begin_capture(CaptureMode::ThreadLocal).unwrap();
    compute.record(&fork).unwrap();
    comm_stream.wait(&fork).unwrap();
    SimBackend::launch_collective(&comm_stream, comm, call, "allreduce(sum)").unwrap();
    compute.launch(&busy(compute_ns).into(), "compute").unwrap();
    comm_stream.record(&join).unwrap();
    compute.wait(&join).unwrap();
    compute.end_capture().unwrap()
}

/// The time from the first replayed node's start to the last one's end on `dev`.
fn replay_span(dev: &SimDevice) -> u64 {
    let nodes: Vec<_> = dev
        .timeline()
        .into_iter()
        .filter(|o| o.from_graph)
        .collect();
    assert_eq!(nodes.len(), 2, "the compute node and the all-reduce");
    let start = nodes.iter().map(|o| o.start_ns).min().unwrap();
    let end = nodes.iter().map(|o| o.end_ns).max().unwrap();
    end - start
}

#[test]
fn a_replayed_graph_runs_its_all_reduce_beside_its_compute() {
    for devices in [2, 4] {
        let devs = node(devices, SimMode::TimingOnly);
        let refs: Vec<&SimDevice> = devs.iter().collect();
        let comms = SimComm::init_all(&refs).unwrap();
        let count = 1 << 22;
        let comm_ns = collective_bound(SUM, devices, count * 2, &comms[0].link_params(DType::F16));
        let compute_ns = comm_ns;
        let ranks: Vec<_> = devs
            .iter()
            .zip(&comms)
            .map(|(d, c)| {
                let compute = d.create_stream(0).unwrap();
                let x = d.alloc(count * 2).unwrap();
                let call = all_reduce(x, count, DType::F16);
                let graph = capture_step(d, &compute, c, &call, compute_ns);
                (compute, graph)
            })
            .collect();
        for (s, g) in &ranks {
            g.launch(s).unwrap();
        }
        for (d, (s, _)) in devs.iter().zip(&ranks) {
            s.synchronize().unwrap();
            let span = replay_span(d);
            let longer = comm_ns.max(compute_ns);
            assert!(
                span >= longer,
                "{devices} devices: {span} ns vs {longer} ns"
            );
            // Serially it would take comm_ns + compute_ns.
            assert!(
                span < longer + compute_ns.min(comm_ns) / 4,
                "{devices} devices: {span} ns, comm {comm_ns} ns, compute {compute_ns} ns"
            );
        }
    }
}

#[test]
fn a_replayed_graph_with_an_all_reduce_beside_compute_sums_every_rank() {
    let (_, _, ranks) = two_data_ranks(|r, d, c| {
        let compute = d.create_stream(0).unwrap();
        let bytes = DType::F32.encode(&[r as f32 + 1.0; 4]);
        let x = d.alloc(bytes.len() as u64).unwrap();
        // SAFETY: `bytes` outlives the synchronize that observes the copy.
        unsafe { compute.memcpy_h2d(x, bytes.as_ptr(), bytes.len() as u64) }.unwrap();
        compute.synchronize().unwrap();
        let graph = capture_step(d, &compute, c, &all_reduce(x, 4, DType::F32), 1_000);
        (compute, x, graph)
    });
    // Twice: 1 + 2 = 3, then 3 + 3 = 6.
    for _ in 0..2 {
        for (s, _, g) in ranks.iter().rev() {
            g.launch(s).unwrap();
        }
    }
    for (s, x, _) in &ranks {
        let mut bytes = vec![0u8; 16];
        // SAFETY: `bytes` is not touched until the synchronize observes the copy.
        unsafe { s.memcpy_d2h(bytes.as_mut_ptr(), *x, 16) }.unwrap();
        s.synchronize().unwrap();
        assert_eq!(DType::F32.decode(&bytes), vec![6.0; 4]);
    }
}

#[test]
fn a_single_thread_syncing_on_a_replay_waiting_for_a_rank_it_drives_fails_at_once() {
    let (_, _, ranks) = two_data_ranks(|_, d, c| {
        let compute = d.create_stream(0).unwrap();
        let x = d.alloc(16).unwrap();
        let graph = capture_step(d, &compute, c, &all_reduce(x, 4, DType::F32), 1_000);
        (compute, graph)
    });
    for (s, g) in &ranks {
        g.launch(s).unwrap();
    }
    ranks[0].0.synchronize().unwrap();
    // This thread launched rank 1's replay too: nobody else will, so rank 0's next replay
    // waits forever and its synchronization fails at once (not after the 60 s timeout).
    let (s0, g0) = &ranks[0];
    g0.launch(s0).unwrap();
    let begin = Instant::now();
    let err = s0.synchronize().unwrap_err().to_string();
    assert!(err.contains("rank(s) 1 have not issued"), "{err}");
    assert!(
        begin.elapsed() < Duration::from_secs(30),
        "{:?}",
        begin.elapsed()
    );
    let (s1, g1) = &ranks[1];
    g1.launch(s1).unwrap();
    s0.synchronize().unwrap();
}

/// A task update re-issuing a captured all-reduce (as HCCL's callers do between
/// `aclmdlRICaptureTaskUpdateBegin`/`End`): with another count it is refused naming the
/// difference and the replay reduces what it did; with new buffers of the same count the next
/// replay reduces those on every rank.
#[test]
fn a_task_update_reissues_a_captured_all_reduce_and_refuses_another_count() {
    let (devs, comms, ranks) = two_data_ranks(|r, d, c| {
        let s = d.create_stream(0).unwrap();
        let first = upload(d, &s, &[r as f32 + 1.0; 4]);
        let second = upload(d, &s, &[10.0 * (r as f32 + 1.0); 4]);
        s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        s.begin_task_group().unwrap();
        SimBackend::launch_collective(&s, c, &all_reduce(first, 4, DType::F32), "allreduce(sum)")
            .unwrap();
        let group = s.end_task_group().unwrap();
        let graph = s.end_capture().unwrap();
        (s, first, second, group, graph)
    });
    let update = |r: usize, count: u64| {
        let (s, _, second, group, _) = &ranks[r];
        let u = devs[r].create_stream(0).unwrap();
        u.begin_task_update(*group).unwrap();
        let call = all_reduce(*second, count, DType::F32);
        SimBackend::launch_collective(&u, &comms[r], &call, "allreduce(sum)").unwrap();
        let ended = u.end_task_update(true);
        s.synchronize().unwrap();
        ended
    };
    for r in 0..2 {
        let refused = update(r, 2).unwrap_err().to_string();
        assert!(refused.contains("count 4 vs 2"), "{refused}");
        assert!(refused.contains("nothing changed"), "{refused}");
    }
    for (s, _, _, _, g) in &ranks {
        g.launch(s).unwrap();
    }
    for (s, first, ..) in &ranks {
        assert_eq!(download(s, *first, 4), vec![3.0; 4]);
    }
    for r in 0..2 {
        update(r, 4).unwrap();
    }
    for (s, _, _, _, g) in &ranks {
        g.launch(s).unwrap();
    }
    for (s, first, second, ..) in &ranks {
        assert_eq!(download(s, *second, 4), vec![30.0; 4]);
        assert_eq!(download(s, *first, 4), vec![3.0; 4], "no longer reduced");
    }
}
