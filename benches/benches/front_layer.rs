//! Host cost of the front layer: what one enqueue, one record/wait pair and one cross-stream
//! ordering query cost in wall-clock time (a simulator's own virtual time is not measured
//! here). `launch (..)` against `launch through the hal alone (..)` is what the front layer
//! (validation, the happens-before model, use notifications) adds to a kernel launch; on the
//! simulator, `launch_op with a host body` times a user operator through the front layer.
//!
//! Runs on the backend `braid_benches::selected` picks: a timing-only simulated device by
//! default, ACL with `--features acl` or `BRAID_BENCH_BACKEND=acl` (on an Ascend machine: the
//! hardware's launch path).

use braid::core::hal::{Backend, Stream as _};
use braid::{CustomOp, Device, Kernel, OpCost, TypedKernel};
use braid_benches::{on_selected_backend, BenchOn, Work};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

struct FrontLayer<'a>(&'a mut Criterion);

impl BenchOn for FrontLayer<'_> {
    fn run<B: Backend>(&mut self, device: Device<B>, label: &'static str) {
        let c = &mut *self.0;
        let main = device.default_stream();
        let side = device.create_stream(0).expect("stream");
        let buf = device.alloc(1 << 20).expect("alloc");
        let work = Work::probe(&main, buf.slice()).expect("device work");
        let name = match work {
            Work::Fill => format!("launch ({label})"),
            Work::Memset => {
                eprintln!("note: {label} refuses braid's kernels; timing a memset enqueue");
                format!("memset enqueue ({label})")
            }
        };
        c.bench_function(&name, |b| {
            b.iter(|| {
                work.enqueue(&main, black_box(buf.slice()))
                    .expect("enqueue")
            })
        });
        if work == Work::Fill {
            let fill = TypedKernel::from(Kernel::Fill {
                dst: buf.slice(),
                value: 1.0,
            });
            c.bench_function(&format!("launch through the hal alone ({label})"), |b| {
                b.iter(|| main.hal().launch(black_box(&fill), "fill").expect("launch"))
            });
        }
        c.bench_function("record + wait across streams", |b| {
            b.iter(|| side.wait_stream(black_box(&main)).expect("wait"))
        });
        let pos = main.position();
        c.bench_function("is_ordered_before query", |b| {
            b.iter(|| device.is_ordered_before(black_box(pos), &side))
        });
        main.synchronize().expect("synchronize");
    }
}

fn front_layer(c: &mut Criterion) {
    on_selected_backend("front_layer", &mut FrontLayer(c));
}

/// A user operator with a host body, launched through the front layer on the timing-only
/// simulator (which schedules it by its declared cost and does not run the body).
fn custom_op_launch(c: &mut Criterion) {
    let device = braid_benches::sim_device().expect("simulated device");
    let stream = device.default_stream();
    let (x, y) = (
        device.alloc(1 << 20).expect("alloc"),
        device.alloc(1 << 20).expect("alloc"),
    );
    let op = CustomOp::new("scale_by_two")
        .read(x.slice())
        .write(y.slice())
        .cost(OpCost::Fixed { ns: 1_000 })
        .body(braid::sim::host_op(|inputs, outputs| {
            for (o, i) in outputs[0].iter_mut().zip(inputs[0]) {
                *o = i.wrapping_mul(2);
            }
        }));
    c.bench_function("launch_op with a host body (timing-only sim)", |b| {
        b.iter(|| stream.launch_op(black_box(&op)).expect("launch_op"))
    });
    stream.synchronize().expect("synchronize");
}

criterion_group!(benches, front_layer, custom_op_launch);
criterion_main!(benches);
