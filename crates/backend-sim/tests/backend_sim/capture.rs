//! Graph capture and replay.

use crate::common;

use braid_backend_sim::{SimConfig, SimDevice};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, CaptureStatus, EventFlags};
use common::*;

#[test]
fn capture_records_instead_of_running_and_replays_correctly_twice() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = upload(&dev, &s, &[1.0, 2.0, 3.0, 4.0]);
    let (y, z) = (dev.alloc(16).unwrap(), dev.alloc(16).unwrap());
    let ops_before = dev.stats().ops_executed;
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::None);
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::Active);
    let host = dev.host_time_ns();
    s.launch(
        &TypedKernel::from(&Kernel::Scale {
            src: slice(x, 4),
            dst: slice(y, 4),
            factor: 2.0,
        }),
        "scale",
    )
    .unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Add {
            a: slice(y, 4),
            b: slice(y, 4),
            out: slice(z, 4),
        }),
        "add",
    )
    .unwrap();
    assert_eq!(
        dev.host_time_ns(),
        host + 20,
        "captured calls cost an eager launch each"
    );
    let g = s.end_capture().unwrap();
    assert_eq!(g.node_count(), 2);
    assert_eq!(
        g.dependencies(),
        vec![("scale".to_string(), vec![]), ("add".to_string(), vec![0])]
    );
    assert_eq!(
        dev.stats().ops_executed,
        ops_before,
        "nothing ran during capture"
    );
    assert_eq!(download(&s, z, 4), vec![0.0; 4]);

    g.launch(&s).unwrap();
    assert_eq!(download(&s, z, 4), vec![4.0, 8.0, 12.0, 16.0]);
    let x2 = [10.0f32, 20.0, 30.0, 40.0];
    let bytes: Vec<u8> = x2.iter().flat_map(|v| v.to_le_bytes()).collect();
    // SAFETY: `bytes` outlives the synchronize below.
    unsafe { s.memcpy_h2d(x, bytes.as_ptr(), 16).unwrap() };
    g.launch(&s).unwrap();
    assert_eq!(download(&s, z, 4), vec![40.0, 80.0, 120.0, 160.0]);
    let stats = dev.stats();
    assert_eq!(stats.graph_launches, 2);
    assert_eq!(dev.timeline().iter().filter(|r| r.from_graph).count(), 4);
}

#[test]
fn captured_h2d_reads_host_memory_at_replay_time() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    let mut host = [0u8; 16];
    host[..4].copy_from_slice(&5.0f32.to_le_bytes());
    s.begin_capture(CaptureMode::Global).unwrap();
    // SAFETY: `host` stays alive and is only changed between replays (after synchronizing).
    unsafe { s.memcpy_h2d(x, host.as_ptr(), 16).unwrap() };
    let g = s.end_capture().unwrap();
    host[..4].copy_from_slice(&9.0f32.to_le_bytes());
    g.launch(&s).unwrap();
    assert_eq!(download(&s, x, 1), vec![9.0]);
    drop(g); // `host` must outlive the graph
}

#[test]
fn multi_stream_capture_forks_and_joins() {
    let dev = unit_device();
    let (s0, s1) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let (fork, join) = (
        dev.create_event(EventFlags::ORDERING).unwrap(),
        dev.create_event(EventFlags::ORDERING).unwrap(),
    );
    s0.begin_capture(CaptureMode::Global).unwrap();
    s0.launch(&TypedKernel::from(&busy(100)), "A").unwrap();
    s0.record(&fork).unwrap();
    s1.wait(&fork).unwrap();
    assert_eq!(
        s1.capture_status().unwrap(),
        CaptureStatus::Active,
        "waiting joins the capture"
    );
    s1.launch(&TypedKernel::from(&busy(300)), "B").unwrap();
    s0.launch(&TypedKernel::from(&busy(200)), "C").unwrap();
    s1.record(&join).unwrap();
    s0.wait(&join).unwrap();
    s0.launch(&TypedKernel::from(&busy(50)), "D").unwrap();
    assert!(
        s1.end_capture().is_err(),
        "only the origin ends the capture"
    );
    let g = s0.end_capture().unwrap();
    assert_eq!(s1.capture_status().unwrap(), CaptureStatus::None);
    let deps: Vec<Vec<usize>> = g.dependencies().into_iter().map(|(_, d)| d).collect();
    assert_eq!(deps, vec![vec![], vec![0], vec![0], vec![1, 2]]);

    let s2 = dev.create_stream(0).unwrap();
    s2.launch(&TypedKernel::from(&busy(1000)), "before")
        .unwrap();
    g.launch(&s2).unwrap();
    s2.launch(&TypedKernel::from(&busy(10)), "after").unwrap();
    let t = dev.timeline();
    let get = |l: &str| t.iter().find(|r| r.label == l).unwrap().clone();
    let (before, a, b, c, d, after) = (
        get("before"),
        get("A"),
        get("B"),
        get("C"),
        get("D"),
        get("after"),
    );
    assert_eq!(
        a.start_ns, before.end_ns,
        "graph waits for the launch stream's earlier work"
    );
    assert_eq!(
        (b.start_ns, c.start_ns),
        (a.end_ns, a.end_ns),
        "branches run concurrently"
    );
    assert_eq!(d.start_ns, b.end_ns.max(c.end_ns));
    assert_eq!(
        after.start_ns, d.end_ns,
        "later work waits for the whole graph"
    );
    assert_eq!((a.stream, b.stream), (s0.index(), s1.index()));
    // events recorded in an ended capture cannot be waited on
    assert!(s2.wait(&fork).is_err());
}

#[test]
fn capture_misuse_is_an_error() {
    let dev = unit_device();
    let (s0, s1) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    assert!(s0.end_capture().is_err());
    s0.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(s0.begin_capture(CaptureMode::Relaxed).is_err());
    s1.begin_capture(CaptureMode::Relaxed).unwrap();
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    s0.record(&e).unwrap();
    assert!(s1.wait(&e).is_err(), "events do not cross captures");
    let g1 = s1.end_capture().unwrap();
    let g0 = s0.end_capture().unwrap();
    assert_eq!((g0.node_count(), g1.node_count()), (0, 0));
    g0.launch(&s0).unwrap();
    let other = SimDevice::new(SimConfig::new());
    assert!(g0.launch(&other.create_stream(0).unwrap()).is_err());
}

#[test]
fn graph_launched_into_a_capture_is_spliced_in() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(&TypedKernel::from(&busy(10)), "x").unwrap();
    s.launch(&TypedKernel::from(&busy(10)), "y").unwrap();
    let inner = s.end_capture().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch(&TypedKernel::from(&busy(10)), "first").unwrap();
    inner.launch(&s).unwrap();
    inner.launch(&s).unwrap();
    s.launch(&TypedKernel::from(&busy(10)), "last").unwrap();
    let outer = s.end_capture().unwrap();
    assert_eq!(outer.node_count(), 6);
    let deps: Vec<Vec<usize>> = outer.dependencies().into_iter().map(|(_, d)| d).collect();
    assert_eq!(
        deps,
        vec![vec![], vec![0], vec![1], vec![2], vec![3], vec![4]]
    );
    assert_eq!(dev.stats().graph_launches, 0);
}

/// Captures `busy(work_ns)` on `s`, with `before` run inside the capture first.
fn busy_graph(
    s: &braid_backend_sim::SimStream,
    work_ns: u64,
    before: impl FnOnce(),
    after: impl FnOnce(),
) -> braid_backend_sim::SimGraph {
    s.begin_capture(CaptureMode::Global).unwrap();
    before();
    s.launch(&TypedKernel::from(&busy(work_ns)), "work")
        .unwrap();
    after();
    s.end_capture().unwrap()
}

#[test]
fn external_record_and_wait_nodes_order_graphs_captured_separately() {
    for external in [true, false] {
        let dev = unit_device();
        let (s0, s1) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
        let flags = if external {
            EventFlags::EXTERNAL
        } else {
            EventFlags::ORDERING
        };
        let e = dev.create_event(flags).unwrap();
        let producer = busy_graph(&s0, 1000, || {}, || s0.record(&e).unwrap());
        // A record inside a capture does not count until the graph launches.
        assert!(e.query().unwrap());
        s1.begin_capture(CaptureMode::Global).unwrap();
        let waited = s1.wait(&e);
        if !external {
            // Without the opt-in the wait crosses captures: refused, typed.
            assert!(matches!(waited, Err(HalError::CaptureRefused(_))));
            s1.end_capture().unwrap();
            continue;
        }
        waited.unwrap();
        s1.launch(&TypedKernel::from(&busy(1000)), "work").unwrap();
        let consumer = s1.end_capture().unwrap();
        let start = dev.makespan_ns();
        producer.launch(&s0).unwrap();
        assert!(!e.query().unwrap(), "recorded by the launch");
        consumer.launch(&s1).unwrap();
        // The consumer ran after the producer: 2000 ns of work, not 1000 side by side.
        assert!(dev.makespan_ns() >= start + 2000, "{}", dev.makespan_ns());
        s1.synchronize().unwrap();
        assert!(e.query().unwrap());
        assert_eq!(dev.sanitizer_report_count(), 0);
    }
}

#[test]
fn external_nodes_of_a_graph_launched_into_a_capture_are_kept() {
    let dev = unit_device();
    let (s0, s1) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let e = dev.create_event(EventFlags::EXTERNAL).unwrap();
    let inner = busy_graph(&s0, 1000, || {}, || s0.record(&e).unwrap());
    s0.begin_capture(CaptureMode::Global).unwrap();
    inner.launch(&s0).unwrap();
    let outer = s0.end_capture().unwrap();
    let consumer = busy_graph(&s1, 1000, || s1.wait(&e).unwrap(), || {});
    outer.launch(&s0).unwrap();
    consumer.launch(&s1).unwrap();
    assert!(dev.makespan_ns() >= 2000, "{}", dev.makespan_ns());
}
