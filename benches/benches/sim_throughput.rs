//! Simulator throughput in timing-only mode with the timeline off: how many device ops per
//! second of wall-clock time the discrete-event engine places (kernels on four streams with an
//! event record/wait pair every eight ops), with the sanitizer off and on.
//!
//! `cargo bench -p braid-benches --bench sim_throughput -- --quick`
//!
//! It measures the simulator itself, so it always runs on it, whatever `BRAID_BENCH_BACKEND`
//! or the `acl` feature select.

use braid::core::hal::{Device as _, Stream as _};
use braid::core::types::{DeviceSlice, EventFlags};
use braid::sim::{SanitizerMode, SimConfig, SimDevice, SimMode, SimStream};
use braid::Kernel;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

/// Ops per iteration (kernels; the record/wait pairs come on top).
const OPS: u64 = 10_000;

struct Bench {
    dev: SimDevice,
    streams: Vec<SimStream>,
    kernels: Vec<Kernel>,
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
            Kernel::Add { a, b: a, out: b }
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

criterion_group!(benches, sim_throughput);
criterion_main!(benches);
