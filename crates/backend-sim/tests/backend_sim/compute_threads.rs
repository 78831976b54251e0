//! Kernels compute outside the engine lock, on as many threads as the configuration allows
//! (`SimConfig::compute_threads`, `BRAID_SIM_THREADS`), with numbers that do not depend on
//! them; another device's synchronize still sees the kernels before its time. (That one
//! device computing holds up no other work: `busy_device`.)

use crate::common;

use braid_backend_sim::{NodeConfig, SimConfig, SimDevice, SimNode, SimStream, Topology};
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::ops;
use braid_stream_core::types::{DeviceSlice, EventFlags};
use braid_stream_core::{DType, Tensor};
use common::*;

/// An `n`×`n` float32 tensor on `dev` holding `f(i)` at element `i`.
fn matrix(dev: &SimDevice, s: &SimStream, n: usize, f: impl Fn(usize) -> f32) -> Tensor {
    let values: Vec<f32> = (0..n * n).map(f).collect();
    let ptr = upload(dev, s, &values);
    Tensor::new(
        DeviceSlice::new(ptr, (n * n * 4) as u64),
        DType::F32,
        &[n, n],
    )
    .unwrap()
}

/// The bytes of `t` (synchronizing `s`).
fn bytes(s: &SimStream, t: &Tensor) -> Vec<u8> {
    let mut out = vec![0u8; t.range().len as usize];
    // SAFETY: `out` is not touched until the synchronize below has observed the copy.
    unsafe {
        s.memcpy_d2h(out.as_mut_ptr(), t.ptr(), t.range().len)
            .unwrap()
    };
    s.synchronize().unwrap();
    out
}

#[test]
fn matmul_results_do_not_depend_on_the_thread_count() {
    let n = 192;
    let mut results = Vec::new();
    for threads in [1, 2, 3] {
        let dev = SimDevice::new(unit_config().compute_threads(threads));
        let s = dev.create_stream(0).unwrap();
        let a = matrix(&dev, &s, n, |i| ((i * 7919) % 1000) as f32 / 997.0 - 0.5);
        let b = matrix(&dev, &s, n, |i| ((i * 104_729) % 1000) as f32 / 991.0 - 0.5);
        let out = matrix(&dev, &s, n, |_| 0.0);
        let mm = ops::matmul(&a, &b, &out).unwrap();
        s.launch(&TypedKernel::from(&mm), "mm").unwrap();
        results.push(bytes(&s, &out));
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
    assert!(results[0].iter().any(|&b| b != 0), "it computed");
}

#[test]
fn zero_compute_threads_are_refused_by_name_at_a_kernel_launch() {
    let dev = SimDevice::new(unit_config().compute_threads(0));
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    let fill = Kernel::Fill {
        dst: slice(x, 4),
        value: 1.0,
    };
    let err = s.launch(&TypedKernel::from(&fill), "fill").unwrap_err();
    assert!(
        matches!(&err, HalError::InvalidArgument(m) if m.contains("SimConfig::compute_threads")),
        "{err}"
    );
    // Copies still run; only computing needs threads.
    s.memset(x, 1, 16).unwrap();
    s.synchronize().unwrap();
}

/// A node of two data-mode devices with a large memory.
fn two_devices() -> (SimDevice, SimDevice) {
    let node = SimNode::new(NodeConfig {
        devices: 2,
        device: SimConfig::new().capacity(1 << 30).profile(unit_profile()),
        topology: Topology::atlas_800_a2(2),
    });
    (node.device(0).unwrap(), node.device(1).unwrap())
}

#[test]
fn a_synchronize_of_another_device_waits_for_the_kernels_before_its_time() {
    // Device 1's host clock runs past device 0's product: its synchronize applies every
    // effect up to its time, the product's among them (computed by whichever thread comes
    // first), and device 1 then reads device 0's result through a peer copy.
    let (d0, d1) = two_devices();
    let (s0, s1) = (d0.create_stream(0).unwrap(), d1.create_stream(0).unwrap());
    let n = 256;
    let a = matrix(&d0, &s0, n, |i| (i % 7) as f32);
    let out = matrix(&d0, &s0, n, |_| 0.0);
    s0.launch(
        &TypedKernel::from(&ops::matmul(&a, &a, &out).unwrap()),
        "mm",
    )
    .unwrap();
    let ev = d0.create_event(EventFlags::ORDERING).unwrap();
    s0.record(&ev).unwrap();
    d1.enable_peer_access(&d0).unwrap();
    s1.wait(&ev).unwrap();
    let copy = d1.alloc(out.range().len).unwrap();
    s1.memcpy_d2d(copy, out.ptr(), out.range().len).unwrap();
    s1.synchronize().unwrap();
    let want: f32 = (0..n).map(|k| ((k % 7) * ((k * n) % 7)) as f32).sum();
    assert_eq!(download(&s1, copy, 1), vec![want]);
}
