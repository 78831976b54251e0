//! Host cost of the caching allocator: the cache-hit alloc+free pair on one stream, a
//! cross-stream free that goes through `record_stream` and event processing, and contention
//! from 8 host threads.
//!
//! Runs on the backend `braid_benches::selected` picks: a timing-only simulated device by
//! default (no data stored), ACL with `--features acl` or `BRAID_BENCH_BACKEND=acl`.
//!
//! On the simulator the device runs with its sanitizer off: with the sanitizer on, the allocator
//! tells the simulator every block lifetime (`hal::Device::note_sub_alloc` / `note_sub_free`,
//! which hardware backends do not ask for) and the simulator's bookkeeping of those notes costs
//! more than the allocator itself. That cost is measured apart, as
//! `cache-hit alloc+free pair (sim sanitizer on)`.

use braid::allocator::{AllocatorConfig, CachingAllocator};
use braid::core::hal::Backend;
use braid::sim::{SanitizerMode, SimConfig, SimMode};
use braid::Device;
use braid_benches::{on_selected_backend, selected, BenchBackend, BenchOn, Work};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

fn allocator<B: Backend>(device: &Device<B>) -> CachingAllocator<B> {
    let config = AllocatorConfig::default().record_history(false);
    CachingAllocator::new(device.clone(), config).expect("allocator")
}

fn cache_hit<B: Backend>(c: &mut Criterion, device: &Device<B>, group: &str) {
    let alloc = allocator(device);
    let stream = device.default_stream();
    let mut group = c.benchmark_group(group);
    for (name, size) in [("512 B", 512u64), ("1 MiB", 1 << 20), ("64 MiB", 64 << 20)] {
        drop(alloc.alloc(size, &stream).expect("warm-up"));
        group.bench_with_input(BenchmarkId::from_parameter(name), &size, |b, &size| {
            b.iter(|| drop(black_box(alloc.alloc(size, &stream).expect("alloc"))))
        });
    }
    group.finish();
}

fn cross_stream_free<B: Backend>(c: &mut Criterion, device: &Device<B>) {
    let alloc = allocator(device);
    let main = device.default_stream();
    let side = device.create_stream(0).expect("stream");
    let probe = alloc.alloc(4096, &main).expect("alloc");
    let work = Work::probe(&side, probe.slice()).expect("device work");
    probe.record_stream(&side).expect("record_stream");
    drop(probe);
    c.bench_function("cross-stream free (record_stream + event)", |b| {
        b.iter(|| {
            let buf = alloc.alloc(4096, &main).expect("alloc");
            work.enqueue(&side, buf.slice()).expect("use on side");
            buf.record_stream(&side).expect("record_stream");
            drop(buf);
        })
    });
    side.synchronize().expect("synchronize");
}

fn contention<B: Backend>(c: &mut Criterion, device: &Device<B>) {
    const THREADS: usize = 8;
    let alloc = allocator(device);
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

struct Allocator<'a>(&'a mut Criterion);

impl BenchOn for Allocator<'_> {
    fn run<B: Backend>(&mut self, device: Device<B>, label: &'static str) {
        eprintln!("allocator benches on {label}");
        cache_hit(self.0, &device, "cache-hit alloc+free pair");
        cross_stream_free(self.0, &device);
        contention(self.0, &device);
    }
}

/// The timing-only simulated device with its sanitizer `sanitizer`.
fn sim_device(sanitizer: SanitizerMode) -> braid::Result<Device<braid::sim::SimBackend>> {
    braid::sim_device(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(sanitizer),
    )
}

fn benches(c: &mut Criterion) {
    if selected() != Ok(BenchBackend::Sim) {
        on_selected_backend("allocator", &mut Allocator(c));
        return;
    }
    match sim_device(SanitizerMode::Off) {
        Ok(device) => Allocator(c).run(device, "timing-only sim, sanitizer off"),
        Err(err) => eprintln!("note: allocator: no simulated device ({err}); skipped"),
    }
    // What the simulator's lifetime bookkeeping adds when its sanitizer is on.
    match sim_device(SanitizerMode::Report) {
        Ok(device) => cache_hit(c, &device, "cache-hit alloc+free pair (sim sanitizer on)"),
        Err(err) => eprintln!("note: allocator: no simulated device ({err}); skipped"),
    }
}

criterion_group!(allocator_benches, benches);
criterion_main!(allocator_benches);
