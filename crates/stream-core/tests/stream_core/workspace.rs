//! Workspace without a provider (`Stream::workspace`'s fallback): one segment per stream,
//! reused in stream order and grown when a launch needs more; inside a capture a segment per
//! launch that outlives eager reuse, so replays stay correct; out of memory is a typed error.

use braid_backend_sim::{host_op, SimBackend, SimConfig, SimDevice};
use braid_stream_core::hal::HalError;
use braid_stream_core::{CaptureMode, CustomOp, DType, Device, DeviceSlice, Stream, StreamError};

type Dev = Device<SimBackend>;

fn device(capacity: u64) -> Dev {
    Device::new(SimDevice::new(SimConfig::new().capacity(capacity))).unwrap()
}

/// `y = 2x` over f32 that writes its workspace (`scratch`) as it runs.
fn double(x: DeviceSlice, y: DeviceSlice, scratch: DeviceSlice) -> CustomOp<SimBackend> {
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
            outputs[1].fill(0x5A);
        }))
}

fn launch(s: &Stream<SimBackend>, x: DeviceSlice, y: DeviceSlice, bytes: u64) -> DeviceSlice {
    let workspace = s.workspace(bytes).unwrap();
    let slice = workspace.slice();
    s.launch_op(&double(x, y, slice)).unwrap();
    drop(workspace);
    slice
}

fn read(s: &Stream<SimBackend>, slice: DeviceSlice) -> Vec<f32> {
    s.copy_d2h(slice).unwrap().wait_f32().unwrap()
}

#[test]
fn fallback_segment_is_per_stream_reused_and_grown() {
    let dev = device(1 << 26);
    assert!(!dev.has_workspace_provider());
    let (s, other) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let (x, y) = (dev.alloc(4096).unwrap(), dev.alloc(4096).unwrap());
    s.copy_h2d(x.slice(), braid_stream_core::f32_bytes(&[1.25; 1024]))
        .unwrap();
    let first = launch(&s, x.slice(), y.slice(), 2048);
    let allocations = dev.hal().stats().allocations;
    for _ in 0..20 {
        assert_eq!(launch(&s, x.slice(), y.slice(), 1024).ptr, first.ptr);
    }
    assert_eq!(
        dev.hal().stats().allocations,
        allocations,
        "reused, not allocated"
    );
    assert_eq!(read(&s, y.slice()), vec![2.5; 1024]);
    let theirs = other.workspace(1024).unwrap();
    assert_ne!(theirs.ptr(), first.ptr, "each stream has its own segment");
    drop(theirs);
    let grown = launch(&s, x.slice(), y.slice(), 8192);
    assert_ne!(grown.ptr, first.ptr, "a larger need grows the segment");
    assert_eq!(launch(&s, x.slice(), y.slice(), 8192).ptr, grown.ptr);
    assert_eq!(s.workspace(0).unwrap().len(), 0);
    dev.synchronize().unwrap();
}

#[test]
fn captured_workspace_outlives_eager_reuse() {
    let dev = device(1 << 26);
    let s = dev.create_stream(0).unwrap();
    let (x, y) = (dev.alloc(4096).unwrap(), dev.alloc(4096).unwrap());
    let z = dev.alloc(4096).unwrap();
    let eager = launch(&s, x.slice(), y.slice(), 2048);
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    let captured = launch(&s, x.slice(), y.slice(), 2048);
    let graph = s.end_capture().unwrap();
    assert_ne!(
        captured.ptr, eager.ptr,
        "the capture's workspace is its own"
    );
    for value in [1.0f32, -3.0] {
        s.copy_h2d(x.slice(), braid_stream_core::f32_bytes(&[value; 1024]))
            .unwrap();
        // Eager work reuses the stream's segment (and scribbles on it) between replays.
        assert_eq!(launch(&s, x.slice(), z.slice(), 2048).ptr, eager.ptr);
        graph.launch(&s).unwrap();
        assert_eq!(read(&s, y.slice()), vec![2.0 * value; 1024]);
    }
}

#[test]
fn fallback_out_of_memory_is_typed_and_leaves_the_stream_usable() {
    let dev = device(1 << 20);
    let s = dev.create_stream(0).unwrap();
    let before = s.position();
    let err = s.workspace(1 << 30).expect_err("more than the device has");
    assert!(
        matches!(err, StreamError::Backend(HalError::OutOfMemory { .. })),
        "{err:?}"
    );
    assert_eq!(s.position(), before, "nothing enqueued");
    let (x, y) = (dev.alloc(4096).unwrap(), dev.alloc(4096).unwrap());
    s.copy_h2d(x.slice(), braid_stream_core::f32_bytes(&[4.0; 1024]))
        .unwrap();
    launch(&s, x.slice(), y.slice(), 1024);
    assert_eq!(read(&s, y.slice()), vec![8.0; 1024]);
}
