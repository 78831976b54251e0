//! `SimConfig::wall_launch_cost`: each enqueued operation burns wall-clock time on the calling
//! thread, outside the engine lock.

use braid_backend_sim::{SimConfig, SimDevice, SimMode};
use braid_stream_core::{Device, Kernel};
use std::time::{Duration, Instant};

fn device(cost: Duration) -> Device<braid_backend_sim::SimBackend> {
    let config = SimConfig::new()
        .mode(SimMode::TimingOnly)
        .wall_launch_cost(cost);
    Device::new(SimDevice::new(config)).unwrap()
}

#[test]
fn the_default_costs_no_wall_time() {
    assert_eq!(SimConfig::new().wall_launch_cost, Duration::ZERO);
}

#[test]
fn every_enqueued_operation_burns_the_configured_wall_time() {
    let cost = Duration::from_millis(20);
    let device = device(cost);
    let stream = device.create_stream(0).unwrap();
    let buffer = device.alloc(256).unwrap();
    let began = Instant::now();
    stream
        .launch(&Kernel::Fill {
            dst: buffer.slice(),
            value: 1.0,
        })
        .unwrap();
    stream.memset(buffer.slice(), 0).unwrap();
    assert!(began.elapsed() >= 2 * cost, "{:?}", began.elapsed());
}

#[test]
fn the_wall_time_is_burned_outside_the_engine_lock() {
    // While a launch burns its cost, another thread gets the engine (here: its statistics)
    // and sees the launch already enqueued. Were the time burned under the engine lock, the
    // statistics would only come back once the launch had returned.
    let cost = Duration::from_millis(400);
    let device = device(cost);
    let stream = device.create_stream(0).unwrap();
    let buffer = device.alloc(256).unwrap();
    let slice = buffer.slice();
    let launcher = std::thread::spawn(move || {
        stream
            .launch(&Kernel::Fill {
                dst: slice,
                value: 1.0,
            })
            .unwrap();
        Instant::now()
    });
    let seen = loop {
        if device.hal().stats().ops_executed == 1 {
            break Instant::now();
        }
        std::thread::yield_now();
    };
    let returned = launcher.join().unwrap();
    assert!(
        returned.duration_since(seen) >= cost / 2,
        "the launch was visible only {:?} before it returned",
        returned.duration_since(seen)
    );
}
