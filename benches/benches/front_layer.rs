//! Host cost of the front layer on the simulated device: what one enqueue, one record/wait pair
//! and one cross-stream ordering query cost in wall-clock time (the simulator's own virtual
//! time is not measured here).

use braid::sim::{SimConfig, SimMode};
use braid::{DeviceSlice, Kernel};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn front_layer(c: &mut Criterion) {
    let device = braid::sim_device(
        SimConfig::new()
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    )
    .expect("sim device");
    let main = device.default_stream();
    let side = device.create_stream(0).expect("stream");
    let buf = device.alloc(1 << 20).expect("alloc");
    let fill = Kernel::Fill {
        dst: DeviceSlice::new(buf.ptr(), 1 << 20),
        value: 1.0,
    };

    c.bench_function("launch (timing-only sim)", |b| {
        b.iter(|| main.launch(black_box(&fill)).expect("launch"))
    });
    c.bench_function("record + wait across streams", |b| {
        b.iter(|| side.wait_stream(black_box(&main)).expect("wait"))
    });
    let pos = main.position();
    c.bench_function("is_ordered_before query", |b| {
        b.iter(|| device.is_ordered_before(black_box(pos), &side))
    });
}

criterion_group!(benches, front_layer);
criterion_main!(benches);
