//! Host cost of the front layer: what one enqueue, one record/wait pair and one cross-stream
//! ordering query cost in wall-clock time (a simulator's own virtual time is not measured
//! here). `launch (..)` against `launch through the hal alone (..)` is what the front layer
//! (validation, the happens-before model, use notifications) adds to a kernel launch; on the
//! simulator, `launch_op with a host body` times a user operator through the front layer.
//!
//! Runs on the backend `braid_benches::selected` picks: a timing-only simulated device by
//! default, ACL with `--features acl` or `BRAID_BENCH_BACKEND=acl` (on an Ascend machine: the
//! hardware's launch path). On ACL (built with `--features acl`) two more figures: a built-in
//! kernel that asks for workspace (`ReduceSum` as `aclnnReduceSum`, its workspace from the
//! caching allocator) and a user operator whose native-stream closure calls `aclnnMuls`.
//! `BRAID_ACL_LIB=<target>/release/deps/libbraid_acl_sim.so` measures them on
//! `braid-acl-sim`.

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

/// Built-in kernel and user operator launches through aclnn, when ACL is the selected backend.
#[cfg(feature = "acl")]
fn acl_launches(c: &mut Criterion) {
    use braid::DType;
    if braid_benches::selected() != Ok(braid_benches::BenchBackend::Acl) {
        return;
    }
    let device = match braid::acl_device(0) {
        Ok(device) => device,
        Err(err) => return eprintln!("note: acl_launches: ACL unavailable ({err}); skipped"),
    };
    let alloc = braid::allocator::CachingAllocator::new(
        device.clone(),
        braid::allocator::AllocatorConfig::new(),
    )
    .expect("allocator");
    let stream = device.create_stream(0).expect("stream");
    let elements = 1024u64;
    let bytes = elements * DType::F16.size();
    let (x, y, sum) = (
        alloc.alloc(bytes, &stream).expect("alloc"),
        alloc.alloc(bytes, &stream).expect("alloc"),
        alloc.alloc(DType::F16.size(), &stream).expect("alloc"),
    );
    let reduce = Kernel::ReduceSum {
        src: x.slice(),
        dst: sum.slice(),
    }
    .typed(DType::F16);
    c.bench_function(
        "aclnnReduceSum launch, f16, workspace from the allocator (acl)",
        |b| b.iter(|| stream.launch(black_box(&reduce)).expect("launch")),
    );
    let op = CustomOp::new("muls")
        .dtype(DType::F16)
        .read(x.slice())
        .write(y.slice())
        .body(muls_body(x.slice(), y.slice(), elements));
    c.bench_function("launch_op with a native aclnnMuls body, f16 (acl)", |b| {
        b.iter(|| stream.launch_op(black_box(&op)).expect("launch_op"))
    });
    stream.synchronize().expect("synchronize");
}

/// `y = 2x` in f16 through `aclnnMuls`, enqueued by a native-stream closure.
#[cfg(feature = "acl")]
fn muls_body(
    x: braid::DeviceSlice,
    y: braid::DeviceSlice,
    elements: u64,
) -> std::sync::Arc<braid::acl::NativeOpFn> {
    use braid::acl::aclnn::{self, Executor, Scalar, Tensor};
    use braid::DType;
    let api = aclnn::api().expect("aclnn loads");
    let dims = [elements as i64];
    let body =
        move |stream: braid::acl::ffi::aclrtStream| -> Result<(), braid::core::hal::HalError> {
            let (xt, yt) = (
                Tensor::new(api, &dims, DType::F16, x.ptr)?,
                Tensor::new(api, &dims, DType::F16, y.ptr)?,
            );
            let two = Scalar::new(api, 2.0)?;
            let ops = api.operators();
            let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
                // SAFETY: live descriptors and out pointers.
                unsafe {
                    (ops.aclnnMulsGetWorkspaceSize)(xt.as_ptr(), two.as_ptr(), yt.as_ptr(), ws, ex)
                }
            })?;
            if executor.workspace_size() > 0 {
                return Err(braid::core::hal::HalError::InvalidArgument(
                    "this bench's aclnnMuls takes no workspace".to_string(),
                ));
            }
            // SAFETY: the executor planned for aclnnMuls, on the live stream braid hands over.
            unsafe {
                executor.launch(ops.aclnnMuls, "aclnnMuls", std::ptr::null_mut(), 0, stream)
            }?;
            Ok(())
        };
    // SAFETY: enqueues only on the stream it is handed, touches only x and y, never waits.
    unsafe { braid::acl::native_op(body) }
}

#[cfg(feature = "acl")]
criterion_group!(benches, front_layer, custom_op_launch, acl_launches);
#[cfg(not(feature = "acl"))]
criterion_group!(benches, front_layer, custom_op_launch);
criterion_main!(benches);
