//! Graph memory known before capture, and sleep mode, through ACL on `braid-acl-sim` (loaded
//! by path through the real loading path): the dry run on the simulator predicts exactly what
//! the ACL captures reserve, with the workspace aclnn's `GetWorkspaceSize` asks for; a closure
//! touching the ACL device is refused. (Runs with `cargo test -p braid --features acl`.)
#![cfg(all(feature = "acl", feature = "sim"))]

use braid::allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid::graph_capture::{graph_pool_handle, CaptureSession, RunContext};
use braid::graph_memory::{DryRun, DryRunError};
use braid::hal::Backend;
use braid::scenarios::devices::{self, Role};
use braid::scenarios::graph_memory::{self, LADDER};
use braid::scenarios::memory_reuse::Decoder;
use braid::scenarios::sleep_mode::{self, Shape};
use braid::Kernel;

use crate::common;
use common::{acl_sim, DEVICES};

const MIB: u64 = 1 << 20;

#[test]
fn graph_memory_ladder_through_acl_is_predicted_exactly() {
    let _turn = DEVICES.lock();
    let api = acl_sim();
    let d = Decoder::llama7b_width();
    for conf in ["", "max_split_size_mb:40", "roundup_power2_divisions:4"] {
        let config = AllocatorConfig::parse(conf).unwrap();
        let acl = graph_memory::run(
            &devices::acl_with(api, Role::Timing).unwrap(),
            &config,
            d,
            &LADDER,
        )
        .unwrap();
        assert!(acl.matches(), "{conf:?}: {acl:?}");
        let sim =
            graph_memory::run(&devices::sim(Role::Timing).unwrap(), &config, d, &LADDER).unwrap();
        assert_eq!(acl, sim, "{conf:?}");
    }
}

/// One 20 MiB buffer fills a 20 MiB segment of the pool; `aclnnReduceSum` over it asks for
/// workspace, which then needs a small segment of the pool.
fn reduce_capture<B: Backend>(
    ctx: &RunContext<'_, B>,
    total: &DeviceBuffer<B>,
) -> braid::graph_capture::Result<DeviceBuffer<B>> {
    let big = ctx.alloc(20 * MIB)?;
    ctx.stream().launch(&Kernel::ReduceSum {
        src: big.slice(),
        dst: total.slice(),
    })?;
    Ok(big)
}

#[test]
fn aclnn_workspace_sizes_reach_the_prediction() {
    let _turn = DEVICES.lock();
    let device = devices::acl_with(acl_sim(), Role::Data).unwrap();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let stream = device.create_stream(0).unwrap();
    let predict = |dry: &DryRun| {
        dry.predict_ladder_with(
            |a, s| Ok(a.alloc(4, s)?),
            &[()],
            |ctx, total, ()| reduce_capture(ctx, total),
        )
        .unwrap()
        .reserved_bytes
    };
    let predicted = predict(&DryRun::like(&alloc, &stream).unwrap());
    let total = alloc.alloc(4, &stream).unwrap();
    let pool = graph_pool_handle(&alloc);
    let (_graph, _big) = CaptureSession::new(&alloc, &stream)
        .pool(&pool)
        .run(|ctx| reduce_capture(ctx, &total))
        .unwrap();
    assert_eq!(
        pool.reserved_bytes(),
        22 * MIB,
        "aclnnReduceSum's workspace"
    );
    assert_eq!(predicted, pool.reserved_bytes());
    // Without the backend's workspace sizes the dry run would be wrong: the test can fail.
    let capacity = device.mem_info().unwrap().total;
    assert_eq!(
        predict(&DryRun::new(AllocatorConfig::new(), capacity)),
        20 * MIB
    );
}

#[test]
fn a_dry_run_touching_the_acl_device_is_refused_and_the_device_still_works() {
    let _turn = DEVICES.lock();
    let device = devices::acl_with(acl_sim(), Role::Data).unwrap();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let stream = device.create_stream(0).unwrap();
    let buf = alloc.alloc(4096, &stream).unwrap();
    let position = stream.position();
    let err = DryRun::like(&alloc, &stream)
        .unwrap()
        .predict_pool_bytes(|ctx| {
            stream.launch(&Kernel::Fill {
                dst: buf.slice(),
                value: 1.0,
            })?;
            ctx.alloc(4096)
        })
        .unwrap_err();
    assert!(
        matches!(err, DryRunError::TouchedDevice { call: "Stream::launch", device: d, .. } if d == device.id()),
        "{err:?}"
    );
    assert_eq!(stream.position(), position, "nothing was enqueued");
    stream
        .launch(&Kernel::Fill {
            dst: buf.slice(),
            value: 2.0,
        })
        .unwrap();
    let values = stream.copy_d2h(buf.slice()).unwrap().wait_f32().unwrap();
    assert!(values.iter().all(|&v| v == 2.0));
}

#[test]
fn sleep_mode_through_acl_matches_the_simulator() {
    let _turn = DEVICES.lock();
    let shape = Shape::default();
    let acl = sleep_mode::run(&devices::acl_with(acl_sim(), Role::Data).unwrap(), shape).unwrap();
    assert!(acl.correct && acl.same_addresses, "{acl:?}");
    let sim = sleep_mode::run(&devices::sim(Role::Data).unwrap(), shape).unwrap();
    assert_eq!(
        (acl.reserved_awake, acl.reserved_asleep, acl.offloaded_bytes),
        (sim.reserved_awake, sim.reserved_asleep, sim.offloaded_bytes)
    );
    assert_eq!(
        acl.device_used.0 - acl.device_used.1,
        sim.device_used.0 - sim.device_used.1
    );
}
