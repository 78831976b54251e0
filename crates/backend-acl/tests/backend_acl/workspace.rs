//! Workspace and aclnn errors through `braid-acl-sim`: the built-in kernels' aclnn workspace
//! (the simulator's `aclnnReduceSum` asks for some) comes from the caching allocator in stream
//! order, inside a capture from the graph's pool; a workspace that cannot be had refuses the
//! launch before anything is enqueued; an aclnn refusal inside a user operator leaves the
//! device, the allocator and a capture in progress usable.

use crate::common;

use braid_acl_sim::aclnn::REDUCE_SUM_WORKSPACE;
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_backend_acl::aclnn::{self, AclnnApi, Executor, Scalar, Tensor};
use braid_backend_acl::ffi::aclrtStream;
use braid_backend_acl::{native_op, AclBackend};
use braid_graph_capture::CaptureSession;
use braid_stream_core::hal::HalError;
use braid_stream_core::{
    f32_bytes, CaptureMode, CustomOp, DType, DeviceSlice, Kernel, Stream, StreamError,
};

type B = AclBackend;

fn aclnn_api() -> &'static AclnnApi {
    AclnnApi::load_for(common::api()).expect("braid-acl-sim exports aclnn")
}

fn read(s: &Stream<B>, slice: DeviceSlice) -> Vec<f32> {
    s.copy_d2h(slice).unwrap().wait_f32().unwrap()
}

fn reduce(s: &Stream<B>, src: &DeviceBuffer<B>, dst: &DeviceBuffer<B>) -> Result<(), StreamError> {
    s.launch(&Kernel::ReduceSum {
        src: src.slice(),
        dst: dst.slice(),
    })
    .map(drop)
}

#[test]
fn builtin_workspace_comes_from_the_allocator_without_device_mallocs() {
    let dev = common::device(0).unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    assert!(dev.has_workspace_provider());
    let s = dev.create_stream(0).unwrap();
    let (src, dst) = (alloc.alloc(4096, &s).unwrap(), alloc.alloc(4, &s).unwrap());
    s.copy_h2d(src.slice(), f32_bytes(&[0.5; 1024])).unwrap();
    reduce(&s, &src, &dst).unwrap();
    let stats = alloc.memory_stats();
    assert!(
        stats.allocation.all.allocated >= 3,
        "the workspace was one of the allocator's blocks"
    );
    for _ in 0..30 {
        reduce(&s, &src, &dst).unwrap();
    }
    let after = alloc.memory_stats();
    assert_eq!(
        after.num_device_alloc, stats.num_device_alloc,
        "no aclrtMalloc per launch"
    );
    assert_eq!(after.allocation.all.current, 2, "each workspace went back");
    assert_eq!(read(&s, dst.slice()), vec![512.0]);
    alloc.check_invariants().unwrap();
}

#[test]
fn captured_builtin_workspace_lives_in_the_graph_pool() {
    let dev = common::device(0).unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let s = dev.create_stream(0).unwrap();
    let (src, dst) = (alloc.alloc(4096, &s).unwrap(), alloc.alloc(4, &s).unwrap());
    let (graph, ()) = CaptureSession::new(&alloc, &s)
        .run(|ctx| Ok(reduce(ctx.stream(), &src, &dst)?))
        .unwrap();
    assert!(graph.pool().stats().reserved_bytes >= REDUCE_SUM_WORKSPACE);
    alloc.empty_cache();
    let eager = alloc.alloc(4096, &s).unwrap();
    s.copy_h2d(eager.slice(), f32_bytes(&[7.0; 1024])).unwrap();
    for value in [1.0f32, 3.0] {
        s.copy_h2d(src.slice(), f32_bytes(&[value; 1024])).unwrap();
        graph.launch(&s).unwrap();
        assert_eq!(read(&s, dst.slice()), vec![1024.0 * value]);
        assert_eq!(read(&s, eager.slice()), vec![7.0; 1024]);
    }
    alloc.check_invariants().unwrap();
}

#[test]
fn workspace_out_of_memory_refuses_the_launch_before_enqueuing() {
    let dev = common::device(0).unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let api = aclnn_api();
    let live = api.live_objects().expect("counted");
    let s = dev.create_stream(0).unwrap();
    let (src, dst) = (alloc.alloc(4096, &s).unwrap(), alloc.alloc(4, &s).unwrap());
    s.copy_h2d(src.slice(), f32_bytes(&[1.0; 1024])).unwrap();
    s.synchronize().unwrap();
    // Cap the allocator at what it has reserved and fill its segments: the next small block
    // (the workspace) cannot be had.
    let total = dev.mem_info().unwrap().total;
    alloc
        .set_memory_fraction(alloc.memory_reserved() as f64 / total as f64)
        .unwrap();
    let mut hog = Vec::new();
    for size in [64 << 10, 512] {
        while let Ok(buf) = alloc.alloc(size, &s) {
            hog.push(buf);
        }
    }
    let before = s.position();
    let err = reduce(&s, &src, &dst).expect_err("no memory left for the workspace");
    assert!(
        matches!(err, StreamError::Workspace { bytes, .. } if bytes == REDUCE_SUM_WORKSPACE),
        "{err:?}"
    );
    assert_eq!(s.position(), before, "nothing enqueued");
    assert_eq!(
        api.live_objects(),
        Some(live),
        "the planned executor was released"
    );
    drop(hog);
    alloc.set_memory_fraction(1.0).unwrap();
    reduce(&s, &src, &dst).unwrap();
    assert_eq!(read(&s, dst.slice()), vec![1024.0]);
    alloc.check_invariants().unwrap();
}

/// A user operator `y = 2x` in float16 through `aclnnMuls` whose output tensor is described
/// with `y_elements` elements: as many as the input works, another count is refused by
/// `aclnnMulsGetWorkspaceSize` (the shapes differ).
fn muls_op(x: DeviceSlice, y: DeviceSlice, y_elements: i64) -> CustomOp<B> {
    let api = aclnn::api().expect("braid-acl-sim exports aclnn");
    let n = [(x.len / 2) as i64];
    let body = move |stream: aclrtStream| -> Result<(), HalError> {
        let xt = Tensor::new(api, &n, DType::F16, x.ptr)?;
        let yt = Tensor::new(api, &[y_elements], DType::F16, y.ptr)?;
        let two = Scalar::new(api, 2.0)?;
        let ops = api.operators();
        let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors and out pointers.
            unsafe {
                (ops.aclnnMulsGetWorkspaceSize)(xt.as_ptr(), two.as_ptr(), yt.as_ptr(), ws, ex)
            }
        })?;
        // SAFETY: the executor planned for aclnnMuls, the live stream braid hands over, no
        // workspace (the simulator's aclnnMuls asks for none).
        unsafe { executor.launch(ops.aclnnMuls, "aclnnMuls", std::ptr::null_mut(), 0, stream) }?;
        Ok(())
    };
    CustomOp::new("muls")
        .dtype(DType::F16)
        .read(x)
        .write(y)
        // SAFETY: enqueues only on the stream handed over, touches only x and y.
        .body(unsafe { native_op(body) })
}

#[test]
fn an_aclnn_refusal_leaves_device_allocator_and_capture_usable() {
    let dev = common::device(0).unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let api = aclnn_api();
    let live = api.live_objects().expect("counted");
    let s = dev.create_stream(0).unwrap();
    let (x, y) = (
        alloc.alloc(2048, &s).unwrap(),
        alloc.alloc(2048, &s).unwrap(),
    );
    s.copy_h2d(x.slice(), DType::F16.encode(&[1.5; 1024]))
        .unwrap();
    let expect_refusal = |s: &Stream<B>| {
        let before = s.position();
        let err = s
            .launch_op(&muls_op(x.slice(), y.slice(), 512))
            .expect_err("shapes that differ");
        match &err {
            StreamError::Backend(HalError::Native {
                code,
                name,
                message,
            }) => {
                assert_eq!((*code, *name), (161_002, "ACLNN_ERR_PARAM_INVALID"));
                assert!(message.contains("aclnnMulsGetWorkspaceSize"), "{message}");
            }
            other => panic!("not a typed aclnn error: {other:?}"),
        }
        assert_eq!(s.position(), before, "a refused operator takes no position");
        assert_eq!(
            api.live_objects(),
            Some(live),
            "descriptors destroyed on the error path"
        );
    };
    expect_refusal(&s);
    // The device and the allocator go on eagerly.
    s.launch_op(&muls_op(x.slice(), y.slice(), 1024)).unwrap();
    assert_eq!(
        s.copy_d2h(y.slice()).unwrap().wait_as(DType::F16).unwrap(),
        vec![3.0; 1024]
    );
    let z = alloc.alloc(4096, &s).unwrap();
    s.launch(&Kernel::Fill {
        dst: z.slice(),
        value: 2.0,
    })
    .unwrap();
    assert_eq!(read(&s, z.slice()), vec![2.0; 1024]);
    // A capture in progress survives the refusal: it captures what comes after and replays.
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    expect_refusal(&s);
    assert!(s.is_capturing());
    s.launch_op(&muls_op(x.slice(), y.slice(), 1024)).unwrap();
    let graph = s.end_capture().unwrap();
    s.copy_h2d(x.slice(), DType::F16.encode(&[-0.25; 1024]))
        .unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(
        s.copy_d2h(y.slice()).unwrap().wait_as(DType::F16).unwrap(),
        vec![-0.5; 1024]
    );
    alloc.check_invariants().unwrap();
    assert_eq!(api.live_objects(), Some(live));
}
