//! Kernels compute outside the engine lock, on as many threads as the configuration allows
//! (`SimConfig::compute_threads`, `BRAID_SIM_THREADS`), with numbers that do not depend on
//! them; a long kernel of one device never holds up another device's thread.

use crate::common;

use braid_backend_sim::{NodeConfig, SimConfig, SimDevice, SimNode, SimStream, Topology};
use braid_stream_core::hal::{Device as _, Event as _, HalError, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::ops;
use braid_stream_core::types::{DeviceSlice, EventFlags};
use braid_stream_core::{DType, Tensor};
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
fn a_long_kernel_of_one_device_does_not_hold_up_another_device_s_calls() {
    let (d0, d1) = two_devices();
    let s0 = d0.create_stream(0).unwrap();
    // 2 · 1536³ flops: about 7 s of simulated time on the unit profile, and long enough on
    // the host to stand well above a loaded machine's scheduling delays.
    let n = 1536;
    let a = matrix(&d0, &s0, n, |i| (i % 13) as f32);
    let out = matrix(&d0, &s0, n, |_| 0.0);
    let mm = TypedKernel::from(&ops::matmul(&a, &a, &out).unwrap());
    // How long one product takes on this machine, computed alone.
    let start = Instant::now();
    s0.launch(&mm, "mm").unwrap();
    s0.synchronize().unwrap();
    let alone = start.elapsed();

    // Device 0's thread computes products back to back; device 1's thread launches,
    // records and queries meanwhile, timing each call.
    let done = Arc::new(AtomicBool::new(false));
    let worker = {
        let (done, d0, mm) = (done.clone(), d0.clone(), mm.clone());
        std::thread::spawn(move || {
            let s = d0.create_stream(0).unwrap();
            let start = Instant::now();
            for _ in 0..2 {
                s.launch(&mm, "mm").unwrap();
                s.synchronize().unwrap();
            }
            done.store(true, Ordering::Release);
            start.elapsed()
        })
    };
    let s1 = d1.create_stream(0).unwrap();
    // Device 1's host clock far ahead of device 0's products: its calls pass their times.
    let hour = TypedKernel::from(&Kernel::Busy {
        duration_ns: 3_600_000_000_000,
    });
    s1.launch(&hour, "an hour").unwrap();
    s1.synchronize().unwrap();
    let x = d1.alloc(64).unwrap();
    let ev = d1.create_event(EventFlags::ORDERING).unwrap();
    let fill = TypedKernel::from(&Kernel::Fill {
        dst: slice(x, 16),
        value: 2.0,
    });
    let (mut calls, mut slowest) = (0u32, Duration::ZERO);
    while !done.load(Ordering::Acquire) {
        let start = Instant::now();
        s1.launch(&fill, "fill").unwrap();
        s1.record(&ev).unwrap();
        let _ = ev.query().unwrap();
        slowest = slowest.max(start.elapsed());
        calls += 1;
    }
    let busy = worker.join().unwrap();
    eprintln!(
        "one product alone: {alone:?}; two on device 0: {busy:?}; {calls} rounds of calls on \
         device 1 meanwhile, the slowest {slowest:?}"
    );
    // Computed under the lock, by whichever thread drained past it first, a product would
    // make some call of device 1 wait for all of it, or compute it: longer than a product
    // alone. (On a loaded machine, calls that do next to nothing still take up to tens of
    // milliseconds now and then, waiting for a core.)
    assert!(calls > 4, "device 1 made {calls} rounds of calls");
    assert!(
        slowest < alone,
        "a call of device 1 took {slowest:?}, a product alone {alone:?}"
    );
    // Device 1's work ran, and device 0's numbers are right.
    assert_eq!(download(&s1, x, 16), vec![2.0; 16]);
    let row0: f32 = (0..n).map(|k| ((k % 13) * ((k * n) % 13)) as f32).sum();
    let got = bytes(&s0, &out);
    assert_eq!(f32::from_le_bytes(got[..4].try_into().unwrap()), row0);
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
