//! Host cost of the front layer: what one enqueue, one record/wait pair and one cross-stream
//! ordering query cost in wall-clock time (a simulator's own virtual time is not measured
//! here).
//!
//! Runs on the backend `braid_benches::selected` picks: a timing-only simulated device by
//! default, ACL with `--features acl` or `BRAID_BENCH_BACKEND=acl` (on an Ascend machine: the
//! hardware's launch path).

use braid::core::hal::Backend;
use braid::Device;
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

criterion_group!(benches, front_layer);
criterion_main!(benches);
