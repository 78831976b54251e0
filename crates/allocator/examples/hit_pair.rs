//! The cache-hit alloc+free pair in a loop, for instruction counts under
//! `valgrind --tool=callgrind` (load-independent, unlike wall-clock benches):
//!
//! ```text
//! cargo build --release -p braid-allocator --example hit_pair
//! valgrind --tool=callgrind target/release/examples/hit_pair 1048576 1000
//! valgrind --tool=callgrind target/release/examples/hit_pair 1048576 11000
//! ```
//!
//! The difference of the two totals divided by 10,000 is the cost of one pair. The device is
//! the timing-only simulator with its sanitizer off, as in `benches/benches/allocator.rs`; a
//! third argument `sanitizer` turns the sanitizer on (its block-lifetime notes included).

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{SanitizerMode, SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::Device;
use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1);
    let size: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 20);
    let pairs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let sanitizer = match args.next().as_deref() {
        Some("sanitizer") => SanitizerMode::Report,
        _ => SanitizerMode::Off,
    };
    let device = Device::<SimBackend>::new(SimDevice::new(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(sanitizer),
    ))
    .expect("device");
    let alloc = CachingAllocator::new(
        device.clone(),
        AllocatorConfig::default().record_history(false),
    )
    .expect("allocator");
    let stream = device.default_stream();
    drop(alloc.alloc(size, &stream).expect("warm-up"));
    for _ in 0..pairs {
        drop(black_box(alloc.alloc(size, &stream).expect("alloc")));
    }
}
