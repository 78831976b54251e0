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
//!
//! On ACL, each figure of work the simulator models (a launch, a record + wait pair, an
//! aclnn launch) is printed with the simulator's prediction for the same work under the
//! loaded profile (`BRAID_BENCH_PROFILE`, else the shipped Atlas 800T A2 one) and the ratio
//! measured / predicted (`braid_benches::predict`).

use braid::core::hal::{Backend, Stream as _};
use braid::sim::profile::Profile;
use braid::{CustomOp, Device, Kernel, OpCost, TypedKernel};
use braid_benches::predict::{bench_with_prediction, simulated_host_ns};
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
        let profile = prediction_profile(label);
        let predicted = profile.as_ref().map(|p| {
            (
                p,
                simulated_host_ns(p, 100, |sim| {
                    let (stream, buf) = (sim.create_stream(0)?, sim.alloc(1 << 20)?);
                    Ok(move || work.enqueue(&stream, buf.slice()))
                })
                .expect("the simulator runs the launch"),
            )
        });
        bench_with_prediction(c, &name, predicted, || {
            work.enqueue(&main, black_box(buf.slice()))
                .expect("enqueue")
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
        let predicted = profile.as_ref().map(|p| {
            (
                p,
                simulated_host_ns(p, 100, |sim| {
                    let (main, side) = (sim.create_stream(0)?, sim.create_stream(0)?);
                    Ok(move || side.wait_stream(&main))
                })
                .expect("the simulator runs the record and wait"),
            )
        });
        bench_with_prediction(c, "record + wait across streams", predicted, || {
            side.wait_stream(black_box(&main)).expect("wait")
        });
        let pos = main.position();
        c.bench_function("is_ordered_before query", |b| {
            b.iter(|| device.is_ordered_before(black_box(pos), &side))
        });
        main.synchronize().expect("synchronize");
    }
}

/// The profile predictions are made under, on ACL only (on the simulator the figures are
/// the simulator's own host cost, which it does not predict). A `BRAID_BENCH_PROFILE` that
/// does not load stops the bench, naming it.
fn prediction_profile(label: &str) -> Option<Profile> {
    (label == "acl").then(|| braid_benches::predict::profile().unwrap_or_else(|e| panic!("{e}")))
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
    let profile = prediction_profile("acl").expect("on ACL");
    let predicted = simulated_host_ns(&profile, 100, |sim| {
        let stream = sim.create_stream(0)?;
        let (src, dst) = (sim.alloc(bytes)?, sim.alloc(DType::F16.size())?);
        let reduce = Kernel::ReduceSum {
            src: src.slice(),
            dst: dst.slice(),
        }
        .typed(DType::F16);
        Ok(move || {
            // The buffers live as long as the work that launches on them.
            let _live = (&src, &dst);
            stream.launch(&reduce).map(drop)
        })
    })
    .expect("the simulator runs the launch");
    bench_with_prediction(
        c,
        "aclnnReduceSum launch, f16, workspace from the allocator (acl)",
        Some((&profile, predicted)),
        || {
            stream.launch(black_box(&reduce)).expect("launch");
        },
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
