//! Launches per second from 1, 2 and 4 host threads, each launching on its own stream of one
//! device: how well the front layer lets threads overlap their backend calls.
//!
//! Runs on a timing-only simulated device whose every launch burns `WALL_LAUNCH_COST` of
//! wall-clock time on the calling thread outside the simulator's engine lock
//! (`SimConfig::wall_launch_cost`), as a real runtime's launch path costs the host a few
//! microseconds. The `no host cost` group leaves it at zero: what remains is the front layer
//! plus the simulator's engine, whose lock every launch takes, so it shows the serial part
//! that bounds scaling. With N threads and C cores the ideal is min(N, C) times one thread's
//! rate.

use braid::sim::{SanitizerMode, SimConfig, SimMode};
use braid::{Device, Kernel, Stream};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What one launch costs the host on real hardware, roughly (CUDA and ACL: a few µs).
const WALL_LAUNCH_COST: Duration = Duration::from_micros(5);
/// Launches each thread makes per measured batch.
const LAUNCHES: u64 = 200;
const THREADS: [usize; 3] = [1, 2, 4];

fn device(wall_launch_cost: Duration) -> Device<braid::sim::SimBackend> {
    let config = SimConfig::new()
        .mode(SimMode::TimingOnly)
        .sanitizer(SanitizerMode::Off)
        .record_timeline(false)
        .wall_launch_cost(wall_launch_cost);
    braid::sim_device(config).expect("simulated device")
}

/// Wall-clock time for each of `streams.len()` threads to make [`LAUNCHES`] launches on its
/// own stream, all starting together.
fn batch(streams: &[Stream<braid::sim::SimBackend>], kernel: &Kernel) -> Duration {
    let start = Barrier::new(streams.len() + 1);
    std::thread::scope(|scope| {
        for stream in streams {
            let start = &start;
            scope.spawn(move || {
                start.wait();
                for _ in 0..LAUNCHES {
                    stream.launch(kernel).expect("launch");
                }
            });
        }
        start.wait();
        let began = Instant::now();
        // The scope joins every thread before returning.
        began
    })
    .elapsed()
}

fn scaling(c: &mut Criterion, group_name: &str, wall_launch_cost: Duration) {
    let mut group = c.benchmark_group(group_name);
    for threads in THREADS {
        let device = device(wall_launch_cost);
        let buffer = device.alloc(4096).expect("alloc");
        let kernel = Kernel::Fill {
            dst: buffer.slice(),
            value: 1.0,
        };
        let streams: Vec<_> = (0..threads)
            .map(|_| device.create_stream(0).expect("stream"))
            .collect();
        group.throughput(Throughput::Elements(threads as u64 * LAUNCHES));
        group.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += batch(&streams, &kernel);
                    // Keeps the simulator's queues short between batches (not measured).
                    device.synchronize().expect("synchronize");
                }
                total
            })
        });
    }
    group.finish();
}

fn thread_scaling(c: &mut Criterion) {
    scaling(c, "launch, 5 us host cost", WALL_LAUNCH_COST);
    scaling(c, "launch, no host cost", Duration::ZERO);
}

criterion_group!(benches, thread_scaling);
criterion_main!(benches);
