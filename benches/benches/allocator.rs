//! Host cost of the caching allocator on the simulated device (timing-only mode, so no data is
//! stored): the cache-hit alloc+free pair on one stream, a cross-stream free that goes through
//! `record_stream` and event processing, and contention from 8 host threads.

use braid::allocator::{AllocatorConfig, CachingAllocator};
use braid::sim::{SimBackend, SimConfig, SimMode};
use braid::{Device, Kernel};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

fn device() -> Device<SimBackend> {
    braid::sim_device(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    )
    .expect("sim device")
}

fn allocator(device: &Device<SimBackend>) -> CachingAllocator<SimBackend> {
    let config = AllocatorConfig::default().record_history(false);
    CachingAllocator::new(device.clone(), config).expect("allocator")
}

fn cache_hit(c: &mut Criterion) {
    let device = device();
    let alloc = allocator(&device);
    let stream = device.default_stream();
    let mut group = c.benchmark_group("cache-hit alloc+free pair");
    for (name, size) in [("512 B", 512u64), ("1 MiB", 1 << 20), ("64 MiB", 64 << 20)] {
        drop(alloc.alloc(size, &stream).expect("warm-up"));
        group.bench_with_input(BenchmarkId::from_parameter(name), &size, |b, &size| {
            b.iter(|| drop(black_box(alloc.alloc(size, &stream).expect("alloc"))))
        });
    }
    group.finish();
}

fn cross_stream_free(c: &mut Criterion) {
    let device = device();
    let alloc = allocator(&device);
    let main = device.default_stream();
    let side = device.create_stream(0).expect("stream");
    c.bench_function("cross-stream free (record_stream + event)", |b| {
        b.iter(|| {
            let buf = alloc.alloc(4096, &main).expect("alloc");
            side.launch(&Kernel::Fill {
                dst: buf.slice(),
                value: 1.0,
            })
            .expect("use on side");
            buf.record_stream(&side).expect("record_stream");
            drop(buf);
        })
    });
}

fn contention(c: &mut Criterion) {
    const THREADS: usize = 8;
    let device = device();
    let alloc = allocator(&device);
    let streams: Vec<_> = (0..4)
        .map(|_| device.create_stream(0).expect("stream"))
        .collect();
    c.bench_function("8 threads, 4 streams: alloc+free pair", |b| {
        b.iter_custom(|iters| {
            let barrier = Barrier::new(THREADS);
            let elapsed: Vec<Duration> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (alloc, stream, barrier) = (&alloc, &streams[t % 4], &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            let start = Instant::now();
                            for i in 0..iters {
                                let size = 512 << ((t as u64 + i) % 8);
                                drop(black_box(alloc.alloc(size, stream).expect("alloc")));
                            }
                            start.elapsed()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread"))
                    .collect()
            });
            // Per-pair cost as seen by one thread under contention.
            elapsed.into_iter().max().unwrap_or_default()
        })
    });
}

criterion_group!(benches, cache_hit, cross_stream_free, contention);
criterion_main!(benches);
