//! A fixed number of front-layer launches on a timing-only simulated device, for counting the
//! host instructions one launch costs with callgrind (`scripts/launch_instructions.sh` runs it
//! twice, with two counts, and divides the difference): the setup of the front-layer bench
//! `launch (timing-only sim)` (`benches/benches/front_layer.rs`), a `Fill` of 1 MiB on the
//! default stream, without its timing loop.
//!
//! `cargo run --release -p braid-backend-sim --example launch_instructions -- COUNT [hal]`:
//! `hal` launches through the hal alone (what the front layer adds is the difference).

use braid_backend_sim::{SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::Stream as _;
use braid_stream_core::{Device, Kernel, TypedKernel};
use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args
        .next()
        .and_then(|n| n.parse().ok())
        .expect("usage: launch_instructions COUNT [hal]");
    let hal_only = args.next().as_deref() == Some("hal");
    let config = SimConfig::new()
        .capacity(64 << 30)
        .mode(SimMode::TimingOnly)
        .record_timeline(false);
    let device: Device<SimBackend> = Device::new(SimDevice::new(config)).expect("simulated device");
    let main = device.default_stream();
    let buffer = device.alloc(1 << 20).expect("alloc");
    let fill = Kernel::Fill {
        dst: buffer.slice(),
        value: 1.0,
    };
    let typed = TypedKernel::from(fill.clone());
    for _ in 0..count {
        if hal_only {
            main.hal()
                .launch(black_box(&typed), "fill")
                .expect("launch");
        } else {
            main.launch(black_box(&fill)).expect("launch");
        }
    }
    main.synchronize().expect("synchronize");
}
