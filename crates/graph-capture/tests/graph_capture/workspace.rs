//! Workspace inside a capture session: it comes from the capture's private pool (the caching
//! allocator is the device's workspace provider) and lives as long as the graph, so replays
//! after the eager cache was emptied and reused neither read nor write eager memory.

use crate::common;

use braid_backend_sim::host_op;
use braid_graph_capture::CaptureSession;
use braid_stream_core::{CustomOp, DType, DeviceSlice, Kernel, Stream};
use common::{fill, read, setup, B, KIB, MIB};

/// `y = 2x` through the workspace: a user operator writes `2x` into the workspace, a copy
/// kernel moves it to `y`. Returns the workspace's range.
fn double_through_workspace(s: &Stream<B>, x: DeviceSlice, y: DeviceSlice) -> DeviceSlice {
    let workspace = s.workspace(x.len).unwrap();
    let scratch = workspace.slice();
    let op = CustomOp::<B>::new("double_into_scratch")
        .read(x)
        .write(scratch)
        .body(host_op(|inputs, outputs| {
            let doubled: Vec<f32> = DType::F32
                .decode(inputs[0])
                .iter()
                .map(|v| 2.0 * v)
                .collect();
            outputs[0].copy_from_slice(&DType::F32.encode(&doubled));
        }));
    s.launch_op(&op).unwrap();
    s.launch(&Kernel::Copy {
        src: scratch,
        dst: y,
    })
    .unwrap();
    drop(workspace);
    scratch
}

#[test]
fn captured_workspace_comes_from_the_graph_pool_and_lives_with_the_graph() {
    let (dev, alloc) = setup(256 * MIB);
    let s = dev.create_stream(0).unwrap();
    let x = alloc.alloc(64 * KIB, &s).unwrap();
    let y = alloc.alloc(64 * KIB, &s).unwrap();
    let (graph, scratch) = CaptureSession::new(&alloc, &s)
        .run(|ctx| Ok(double_through_workspace(ctx.stream(), x.slice(), y.slice())))
        .unwrap();
    let pool = graph.pool().stats();
    assert!(
        pool.reserved_bytes >= 64 * KIB,
        "the workspace's block is in the graph's pool: {pool:?}"
    );
    // The eager cache goes back to the device, and new eager buffers of the workspace's size
    // are handed out: none of them is the graph's workspace.
    alloc.empty_cache();
    let eager: Vec<_> = (0..4).map(|_| alloc.alloc(64 * KIB, &s).unwrap()).collect();
    for buf in &eager {
        assert_ne!(buf.slice().ptr, scratch.ptr);
        fill(&s, buf, 99.0);
    }
    for value in [1.5f32, -4.0] {
        fill(&s, &x, value);
        graph.launch(&s).unwrap();
        assert_eq!(read(&s, y.slice()), vec![2.0 * value; 16 * 1024]);
        for buf in &eager {
            assert_eq!(
                read(&s, buf.slice()),
                vec![99.0; 16 * 1024],
                "eager memory untouched"
            );
        }
    }
    // Eager launches take workspace from the default pool, not the graph's.
    let eager_scratch = double_through_workspace(&s, x.slice(), y.slice());
    assert_ne!(eager_scratch.ptr, scratch.ptr);
    alloc.check_invariants().unwrap();
}
