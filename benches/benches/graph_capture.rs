//! Host cost of graph capture and replay on the simulator (timing-only, timeline and sanitizer
//! off): capture cost per node, replay (launch) cost per node, and `GraphRunner` dispatch per
//! call (key lookup, the copy of user inputs into static buffers, the launch).
//!
//! `cargo bench -p braid-benches --bench graph_capture -- --quick`
//!
//! The simulator's own work per node is part of the figures (it schedules every replayed node
//! in virtual time), and replays are followed by a stream synchronize (the simulator's
//! schedule grows with unsynchronized work); on real hardware the same code measures the
//! runtime.

use braid::allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid::graph_capture::{CaptureSession, GraphRunner, InputKind, RunnerConfig};
use braid::sim::{SanitizerMode, SimBackend, SimConfig, SimMode};
use braid::{Device, DeviceSlice, Kernel};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const NODES: u64 = 256;

fn device() -> Device<SimBackend> {
    braid::sim_device(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(SanitizerMode::Off),
    )
    .expect("device")
}

fn bench(c: &mut Criterion) {
    let dev = device();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).expect("allocator");
    let s = dev.create_stream(0).expect("stream");
    let buf = alloc.alloc(4096, &s).expect("buffer");
    let kernel = Kernel::Fill {
        dst: buf.slice(),
        value: 1.0,
    };
    let capture = || {
        CaptureSession::new(&alloc, &s)
            .run(|ctx| {
                for _ in 0..NODES {
                    ctx.stream().launch(&kernel)?;
                }
                Ok(())
            })
            .expect("capture")
            .0
    };

    let mut g = c.benchmark_group("graph_capture");
    g.throughput(Throughput::Elements(NODES));
    g.bench_function("capture_256_nodes", |b| b.iter(|| black_box(capture())));
    let graph = capture();
    g.bench_function("replay_256_nodes", |b| {
        b.iter(|| {
            let pos = graph.launch(&s).expect("launch");
            // The simulator's schedule grows with unsynchronized work: keep it short.
            s.synchronize().expect("synchronize");
            black_box(pos)
        })
    });
    g.finish();

    let mut g = c.benchmark_group("graph_runner");
    g.throughput(Throughput::Elements(1));
    let model = |ctx: &braid::graph_capture::RunContext<'_, SimBackend>,
                 inputs: &[DeviceSlice]|
     -> braid::graph_capture::Result<Vec<DeviceBuffer<SimBackend>>> {
        let out = ctx.alloc(inputs[1].len)?;
        ctx.stream().launch(&Kernel::Add {
            a: inputs[0],
            b: inputs[1],
            out: out.slice(),
        })?;
        Ok(vec![out])
    };
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(vec![InputKind::Parameter, InputKind::User]).warmup_calls(0),
        model,
    )
    .expect("runner");
    let w = alloc.alloc(4096, &s).expect("w");
    let x = alloc.alloc(4096, &s).expect("x");
    runner.run(&s, &[w.slice(), x.slice()]).expect("capture");
    g.bench_function("dispatch_per_call", |b| {
        b.iter(|| {
            let n = runner.run(&s, &[w.slice(), x.slice()]).expect("run").len();
            s.synchronize().expect("synchronize");
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
