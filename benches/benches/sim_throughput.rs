//! Simulator throughput in timing-only mode with the timeline off: how many device ops per
//! second of wall-clock time the discrete-event engine places (kernels on four streams with an
//! event record/wait pair every eight ops), with the sanitizer off and on.
//!
//! A second group ("sim backlog") measures the host cost of one call when the device is far
//! ahead of the host (no synchronize, so not-yet-completed work piles up): launching a
//! captured 256-node graph with N launches already queued, and an eager enqueue on eight
//! streams with N long ops already queued on each. The per-call cost should not grow with N.
//! A table of the per-call cost against N is printed first.
//!
//! `cargo bench -p braid-benches --bench sim_throughput -- --quick`
//!
//! It measures the simulator itself, so it always runs on it, whatever `BRAID_BENCH_BACKEND`
//! or the `acl` feature select.

use braid::core::hal::{Device as _, Graph as _, Stream as _};
use braid::core::types::{DeviceSlice, EventFlags};
use braid::sim::{SanitizerMode, SimConfig, SimDevice, SimGraph, SimMode, SimStream};
use braid::{Kernel, TypedKernel};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Ops per iteration (kernels; the record/wait pairs come on top).
const OPS: u64 = 10_000;

struct Bench {
    dev: SimDevice,
    streams: Vec<SimStream>,
    kernels: Vec<TypedKernel>,
}

fn setup(sanitizer: SanitizerMode) -> Bench {
    let dev = SimDevice::new(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(sanitizer),
    );
    let streams: Vec<SimStream> = (0..4)
        .map(|_| dev.create_stream(0).expect("stream"))
        .collect();
    // Each stream works on its own buffers, so the program is race-free.
    let kernels = (0..4)
        .map(|_| {
            let n = 1 << 20;
            let a = DeviceSlice::new(dev.alloc(n).expect("alloc"), n);
            let b = DeviceSlice::new(dev.alloc(n).expect("alloc"), n);
            Kernel::Add { a, b: a, out: b }.into()
        })
        .collect();
    Bench {
        dev,
        streams,
        kernels,
    }
}

fn run(b: &Bench) {
    let event = b.dev.create_event(EventFlags::ORDERING).expect("event");
    for i in 0..OPS as usize {
        let s = i % 4;
        b.streams[s]
            .launch(black_box(&b.kernels[s]), "add")
            .expect("launch");
        if i % 8 == 7 {
            b.streams[s].record(&event).expect("record");
            b.streams[(s + 1) % 4].wait(&event).expect("wait");
        }
    }
    b.dev.synchronize().expect("sync");
}

fn sim_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim timing-only");
    group.throughput(Throughput::Elements(OPS));
    for (name, mode) in [
        ("sanitizer off", SanitizerMode::Off),
        ("sanitizer on", SanitizerMode::Report),
    ] {
        let bench = setup(mode);
        group.bench_function(name, |it| it.iter(|| run(&bench)));
        assert_eq!(bench.dev.sanitizer_report_count(), 0);
    }
    group.finish();
}

/// Nodes of the captured graph of the backlog benches.
const GRAPH_NODES: usize = 256;

/// A timing-only device (timeline off) and a captured graph of [`GRAPH_NODES`] nodes: a
/// layer-like chain of matmuls and vector ops on a main stream, forked every eighth node to a
/// side stream that runs a copy and a small vector op, joined back before the next fork.
fn graph_setup(sanitizer: SanitizerMode) -> (SimDevice, SimStream, SimGraph) {
    let dev = SimDevice::new(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(sanitizer),
    );
    let main = dev.create_stream(0).expect("stream");
    let side = dev.create_stream(0).expect("stream");
    let buf = |n: u64| DeviceSlice::new(dev.alloc(n).expect("alloc"), n);
    let (x, w, y, z) = (buf(4 << 20), buf(8 << 20), buf(4 << 20), buf(4 << 20));
    let (kv, stage) = (buf(1 << 20), buf(1 << 20));
    let fork = dev.create_event(EventFlags::ORDERING).expect("event");
    let join = dev.create_event(EventFlags::ORDERING).expect("event");
    main.begin_capture(braid::core::types::CaptureMode::Global)
        .expect("capture");
    let mut nodes = 0;
    while nodes < GRAPH_NODES {
        if nodes % 8 == 0 && nodes + 2 < GRAPH_NODES {
            main.record(&fork).expect("record");
            side.wait(&fork).expect("wait");
            side.memcpy_d2d(stage.ptr, kv.ptr, kv.len).expect("copy");
            side.launch(
                &TypedKernel::from(&Kernel::Scale {
                    src: stage,
                    dst: stage,
                    factor: 0.5,
                }),
                "scale",
            )
            .expect("launch");
            side.record(&join).expect("record");
            nodes += 2;
        }
        let k = match nodes % 3 {
            0 => Kernel::Matmul {
                a: x,
                b: w,
                c: y,
                m: 256,
                k: 1024,
                n: 2048,
            },
            1 => Kernel::Add { a: y, b: y, out: z },
            _ => Kernel::Copy { src: z, dst: x },
        };
        main.launch(&TypedKernel::from(&k), "layer")
            .expect("launch");
        nodes += 1;
        if nodes % 8 == 7 {
            main.wait(&join).expect("wait");
        }
    }
    main.wait(&join).expect("wait");
    let graph = main.end_capture().expect("end capture");
    (dev, main, graph)
}

/// Eight streams, each with its own buffers: a device for the eager backlog bench.
fn eager_setup() -> (SimDevice, Vec<SimStream>, Vec<TypedKernel>) {
    let dev = SimDevice::new(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(SanitizerMode::Off),
    );
    let streams: Vec<SimStream> = (0..8)
        .map(|_| dev.create_stream(0).expect("stream"))
        .collect();
    let kernels = (0..8)
        .map(|_| {
            let n = 1 << 20;
            let a = DeviceSlice::new(dev.alloc(n).expect("alloc"), n);
            let b = DeviceSlice::new(dev.alloc(n).expect("alloc"), n);
            Kernel::Add { a, b: a, out: b }.into()
        })
        .collect();
    (dev, streams, kernels)
}

/// One round of the eager backlog bench: on each stream a long busy kernel (longer on later
/// streams, so the streams drift apart and new work lands between earlier reservations) and
/// a vector op.
fn eager_round(streams: &[SimStream], kernels: &[TypedKernel], round: usize) {
    for (s, (st, k)) in streams.iter().zip(kernels).enumerate() {
        let busy = Kernel::Busy {
            duration_ns: 20_000 * (1 + s as u64) + (round as u64 % 7) * 1_000,
        };
        st.launch(&TypedKernel::from(&busy), "busy")
            .expect("launch");
        st.launch(black_box(k), "add").expect("launch");
    }
}

/// Host wall time per graph launch with `backlog` launches already queued (the mean of
/// `launches` launches).
fn graph_launch_cost(sanitizer: SanitizerMode, backlog: usize, launches: usize) -> Duration {
    let (_dev, main, graph) = graph_setup(sanitizer);
    for _ in 0..backlog {
        graph.launch(&main).expect("launch");
    }
    let t = Instant::now();
    for _ in 0..launches {
        graph.launch(black_box(&main)).expect("launch");
    }
    t.elapsed() / launches as u32
}

/// Host wall time per eager enqueue with `backlog` rounds already queued.
fn eager_op_cost(backlog: usize, rounds: usize) -> Duration {
    let (_dev, streams, kernels) = eager_setup();
    for r in 0..backlog {
        eager_round(&streams, &kernels, r);
    }
    let t = Instant::now();
    for r in 0..rounds {
        eager_round(&streams, &kernels, backlog + r);
    }
    t.elapsed() / (rounds * 2 * streams.len()) as u32
}

fn sim_backlog(c: &mut Criterion) {
    eprintln!("per-call host cost with N earlier calls queued and no synchronize:");
    for n in [0usize, 64, 256, 1024, 4096] {
        eprintln!(
            "  graph launch ({GRAPH_NODES} nodes), N = {n:>5} launches: sanitizer off {:>10.1?}, on {:>10.1?}",
            graph_launch_cost(SanitizerMode::Off, n, 32),
            graph_launch_cost(SanitizerMode::Report, n, 32),
        );
    }
    for n in [0usize, 1024, 8192, 32768] {
        eprintln!(
            "  eager op (8 streams), N = {n:>5} rounds: {:>8.1?}",
            eager_op_cost(n, 256)
        );
    }
    let mut group = c.benchmark_group("sim backlog");
    group.sample_size(10);
    for n in [16usize, 2048] {
        group.throughput(Throughput::Elements(GRAPH_NODES as u64));
        group.bench_function(format!("graph launch, {n} queued"), |it| {
            it.iter_custom(|iters| {
                let (_dev, main, graph) = graph_setup(SanitizerMode::Off);
                for _ in 0..n {
                    graph.launch(&main).expect("launch");
                }
                let t = Instant::now();
                for _ in 0..iters {
                    graph.launch(black_box(&main)).expect("launch");
                }
                t.elapsed()
            })
        });
    }
    for n in [16usize, 16384] {
        group.throughput(Throughput::Elements(16));
        group.bench_function(format!("eager round (16 ops), {n} queued"), |it| {
            it.iter_custom(|iters| {
                let (_dev, streams, kernels) = eager_setup();
                for r in 0..n {
                    eager_round(&streams, &kernels, r);
                }
                let t = Instant::now();
                for r in 0..iters as usize {
                    eager_round(&streams, &kernels, n + r);
                }
                t.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sim_throughput, sim_backlog);
criterion_main!(benches);
