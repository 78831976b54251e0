//! braid's caching allocator beside two single-stream range allocators, on the same replayed
//! size sequence: each PyTorch trace of the repository's `traces/`
//! becomes its alloc/free sequence (`braid_trace::ReplayPlan`: prologue, then window), which
//! is replayed with every allocation on one stream through
//!
//! - braid's `CachingAllocator` (PyTorch's defaults) on a timing-only simulated device with
//!   its sanitizer off;
//! - `offset-allocator` (Sebastian Aaltonen's O(1) two-level bitfield allocator), in 512-byte
//!   units;
//! - `range-alloc` (best fit over a sorted list of free ranges, with merging), sizes rounded
//!   up to 512 bytes.
//!
//! Criterion reports the time per event (alloc or free) of the replay loop alone; allocator
//! and device setup, and dropping the buffers still live at the end, are not timed. The peak
//! footprint of each is printed once per trace: braid's peak reserved bytes (segments held
//! from the device; also with `release_before_grow`, untimed), the peers' highest end offset
//! handed out (what a bump-mapped device would need), next to the trace's peak live bytes
//! (sizes rounded up to 512).

use braid::allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid::sim::{SanitizerMode, SimBackend, SimConfig, SimMode};
use braid::{Device, Stream};
use braid_trace::{Op, ReplayPlan, Snapshot};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The peers' allocation unit (PyTorch's smallest block).
const UNIT: u64 = 512;

/// Units of 512 bytes for a request of `size` bytes (at least one).
fn units(size: u64) -> u64 {
    size.max(1).div_ceil(UNIT)
}

/// The address space handed to the peers: 4 × the trace's peak live bytes, at least 1 GiB.
fn peer_capacity(plan: &ReplayPlan) -> u64 {
    plan.summary
        .peak_live_bytes
        .saturating_mul(4)
        .max(1 << 30)
        .next_multiple_of(UNIT)
}

struct Braid {
    allocator: CachingAllocator<SimBackend>,
    stream: Stream<SimBackend>,
}

impl Braid {
    fn new(plan: &ReplayPlan) -> Self {
        Self::with_config(plan, AllocatorConfig::new())
    }

    fn with_config(plan: &ReplayPlan, allocator_config: AllocatorConfig) -> Self {
        let config = SimConfig::new()
            .capacity(plan.summary.peak_live_bytes.saturating_mul(4).max(64 << 30))
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(SanitizerMode::Off);
        let device: Device<SimBackend> = braid::sim_device(config).expect("sim device");
        let allocator = CachingAllocator::new(device.clone(), allocator_config).expect("allocator");
        Braid {
            allocator,
            stream: device.default_stream(),
        }
    }

    /// Replays `plan` on one stream; returns the loop's wall time and the peak reserved bytes.
    fn replay(&self, plan: &ReplayPlan) -> (Duration, u64) {
        let mut live: Vec<Option<DeviceBuffer<SimBackend>>> = Vec::new();
        live.resize_with(plan.buffer_count as usize, || None);
        let start = Instant::now();
        for op in &plan.ops {
            match *op {
                Op::Alloc { id, size, .. } => {
                    let buffer = self
                        .allocator
                        .alloc(size, &self.stream)
                        .expect("braid alloc");
                    live[id as usize] = Some(buffer);
                }
                Op::Free { id } => drop(black_box(live[id as usize].take())),
            }
        }
        let elapsed = start.elapsed();
        let peak = self.allocator.max_memory_reserved();
        drop(live);
        (elapsed, peak)
    }
}

/// Replays `plan` through offset-allocator; returns the loop's wall time and the peak end.
fn offset_allocator(plan: &ReplayPlan) -> (Duration, u64) {
    let capacity = u32::try_from(peer_capacity(plan) / UNIT).expect("offset-allocator units");
    let mut alloc = offset_allocator::Allocator::<u32>::new(capacity);
    let mut live: Vec<Option<(offset_allocator::Allocation<u32>, u32)>> =
        vec![None; plan.buffer_count as usize];
    let mut peak_end = 0u64;
    let start = Instant::now();
    for op in &plan.ops {
        match *op {
            Op::Alloc { id, size, .. } => {
                let n = u32::try_from(units(size)).expect("size in units");
                let a = alloc.allocate(n).expect("offset-allocator out of space");
                peak_end = peak_end.max(u64::from(a.offset) + u64::from(n));
                live[id as usize] = Some((a, n));
            }
            Op::Free { id } => {
                if let Some((a, _)) = live[id as usize].take() {
                    alloc.free(black_box(a));
                }
            }
        }
    }
    (start.elapsed(), peak_end * UNIT)
}

/// Replays `plan` through range-alloc; returns the loop's wall time and the peak end.
fn range_alloc(plan: &ReplayPlan) -> (Duration, u64) {
    let mut alloc = range_alloc::RangeAllocator::new(0..peer_capacity(plan));
    let mut live: Vec<Option<std::ops::Range<u64>>> = vec![None; plan.buffer_count as usize];
    let mut peak_end = 0u64;
    let start = Instant::now();
    for op in &plan.ops {
        match *op {
            Op::Alloc { id, size, .. } => {
                let r = alloc
                    .allocate_range(units(size) * UNIT)
                    .expect("range-alloc out of space");
                peak_end = peak_end.max(r.end);
                live[id as usize] = Some(r);
            }
            Op::Free { id } => {
                if let Some(r) = live[id as usize].take() {
                    alloc.free_range(black_box(r));
                }
            }
        }
    }
    (start.elapsed(), peak_end)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn peers(c: &mut Criterion) {
    for path in braid_benches::trace_files() {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let plan = match Snapshot::from_path(&path).and_then(|s| ReplayPlan::from_snapshot(&s, 0)) {
            Ok(plan) => plan,
            Err(e) => {
                eprintln!("note: skipping {name}: {e}");
                continue;
            }
        };
        let live = plan.summary.peak_live_bytes;
        let (_, braid_peak) = Braid::new(&plan).replay(&plan);
        let low_frag = AllocatorConfig::new().release_before_grow(true);
        let (_, braid_low_frag_peak) = Braid::with_config(&plan, low_frag).replay(&plan);
        let (_, offset_peak) = offset_allocator(&plan);
        let (_, range_peak) = range_alloc(&plan);
        println!(
            "{name}: {} events, peak live {:.2} MiB; peak footprint: braid {:.2} MiB (reserved; {:.2} MiB with \
             release_before_grow), \
             offset-allocator {:.2} MiB, range-alloc {:.2} MiB (end offset)",
            plan.ops.len(),
            mib(live),
            mib(braid_peak),
            mib(braid_low_frag_peak),
            mib(offset_peak),
            mib(range_peak),
        );

        let mut group = c.benchmark_group(format!("allocator_peers/{name}"));
        group.throughput(Throughput::Elements(plan.ops.len() as u64));
        group.bench_function("braid", |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| Braid::new(&plan).replay(&plan).0)
                    .sum::<Duration>()
            })
        });
        group.bench_function("offset-allocator", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| offset_allocator(&plan).0).sum())
        });
        group.bench_function("range-alloc", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| range_alloc(&plan).0).sum())
        });
        group.finish();
    }
}

criterion_group!(benches, peers);
criterion_main!(benches);
