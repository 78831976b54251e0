//! The caching allocator as the device's workspace provider (`Stream::workspace`): registered
//! when it is created, workspace blocks reused in stream order (no device allocation per
//! launch), an out-of-memory request a typed error after which everything works.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator};
use braid_backend_sim::{host_op, SimBackend};
use braid_stream_core::{CustomOp, DType, Stream, StreamError};
use common::{read, setup, KIB, MIB};

/// A user operator `y = 2x` over `n` f32 that also declares `scratch` (its workspace) written.
fn double_with_scratch(
    x: braid_stream_core::DeviceSlice,
    y: braid_stream_core::DeviceSlice,
    scratch: braid_stream_core::DeviceSlice,
) -> CustomOp<SimBackend> {
    CustomOp::new("double")
        .read(x)
        .write(y)
        .write(scratch)
        .body(host_op(|inputs, outputs| {
            let doubled: Vec<f32> = DType::F32
                .decode(inputs[0])
                .iter()
                .map(|v| 2.0 * v)
                .collect();
            outputs[0].copy_from_slice(&DType::F32.encode(&doubled));
            outputs[1].fill(0xAB);
        }))
}

fn launch_with_workspace(
    s: &Stream<SimBackend>,
    x: braid_stream_core::DeviceSlice,
    y: braid_stream_core::DeviceSlice,
    bytes: u64,
) -> braid_stream_core::DeviceSlice {
    let workspace = s.workspace(bytes).unwrap();
    let slice = workspace.slice();
    s.launch_op(&double_with_scratch(x, y, slice)).unwrap();
    drop(workspace);
    slice
}

#[test]
fn allocator_registers_itself_and_workspace_is_one_of_its_blocks() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    assert!(dev.has_workspace_provider());
    let s = dev.create_stream(0).unwrap();
    let before = alloc.memory_stats();
    let workspace = s.workspace(3 * KIB).unwrap();
    assert_eq!(workspace.len(), 3 * KIB);
    let held = alloc.memory_stats();
    assert_eq!(
        held.allocation.all.current,
        before.allocation.all.current + 1
    );
    assert!(held.allocated_bytes.all.current >= 3 * KIB);
    drop(workspace);
    assert_eq!(
        alloc.memory_stats().allocation.all.current,
        before.allocation.all.current,
        "the block goes back when the workspace drops"
    );
    alloc.check_invariants().unwrap();
}

#[test]
fn workspace_is_reused_in_stream_order_without_device_allocations() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let (x, y) = (
        alloc.alloc(4 * KIB, &s).unwrap(),
        alloc.alloc(4 * KIB, &s).unwrap(),
    );
    s.copy_h2d(x.slice(), braid_stream_core::f32_bytes(&[1.5; 1024]))
        .unwrap();
    let first = launch_with_workspace(&s, x.slice(), y.slice(), 8 * KIB);
    let device_allocs = alloc.memory_stats().num_device_alloc;
    let sim_allocs = dev.hal().stats().allocations;
    for _ in 0..50 {
        // No launch is waited for: the stream's order makes the same block safe to hand out
        // again to the stream's next launch.
        let again = launch_with_workspace(&s, x.slice(), y.slice(), 8 * KIB);
        assert_eq!(again, first, "the same block, reused on the same stream");
    }
    assert_eq!(alloc.memory_stats().num_device_alloc, device_allocs);
    assert_eq!(
        dev.hal().stats().allocations,
        sim_allocs,
        "no device malloc per launch"
    );
    assert_eq!(read(&s, y.slice()), vec![3.0; 1024]);
    // Another stream does not get the block while it is only free in `s`'s order.
    let other = dev.create_stream(0).unwrap();
    let theirs = other.workspace(8 * KIB).unwrap();
    assert_ne!(theirs.slice().ptr, first.ptr);
    drop(theirs);
    alloc.check_invariants().unwrap();
}

#[test]
fn a_later_allocator_takes_over_and_dropping_it_unregisters() {
    let (dev, first) = setup(64 * MIB, AllocatorConfig::new());
    let second = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let s = dev.create_stream(0).unwrap();
    let workspace = s.workspace(KIB).unwrap();
    assert_eq!(second.memory_stats().allocation.all.current, 1);
    assert_eq!(first.memory_stats().allocation.all.current, 0);
    drop(workspace);
    first.provide_workspace();
    let workspace = s.workspace(KIB).unwrap();
    assert_eq!(first.memory_stats().allocation.all.current, 1);
    drop(workspace);
    drop(first);
    assert!(
        !dev.has_workspace_provider(),
        "the device holds its provider weakly"
    );
    drop(second);
}

#[test]
fn out_of_memory_workspace_is_a_typed_error_and_nothing_is_enqueued() {
    let (dev, alloc) = setup(8 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let before = s.position();
    let err = s.workspace(64 * MIB).expect_err("more than the device has");
    match &err {
        StreamError::Workspace { bytes, reason } => {
            assert_eq!(*bytes, 64 * MIB);
            assert!(reason.contains("out of memory"), "{reason}");
        }
        other => panic!("not a workspace error: {other:?}"),
    }
    assert_eq!(s.position(), before, "nothing enqueued");
    // The allocator and the device go on.
    let (x, y) = (
        alloc.alloc(4 * KIB, &s).unwrap(),
        alloc.alloc(4 * KIB, &s).unwrap(),
    );
    s.copy_h2d(x.slice(), braid_stream_core::f32_bytes(&[2.0; 1024]))
        .unwrap();
    launch_with_workspace(&s, x.slice(), y.slice(), KIB);
    assert_eq!(read(&s, y.slice()), vec![4.0; 1024]);
    alloc.check_invariants().unwrap();
}
