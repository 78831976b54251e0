//! The cost model with the public device profiles: contended cube, vector and copy units with
//! capacities, and host costs of eager and graph launches.

use braid_backend_sim::{DeviceProfile, OpRecord, SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::{Device as _, Graph as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, DevicePtr, DeviceSlice};

fn device(profile: DeviceProfile) -> SimDevice {
    SimDevice::new(
        SimConfig::new()
            .capacity(64 << 30)
            .mode(SimMode::TimingOnly)
            .profile(profile),
    )
}

fn f32s(dev: &SimDevice, n: u64) -> DeviceSlice {
    DeviceSlice::new(dev.alloc(n * 4).unwrap(), n * 4)
}

fn matmul(dev: &SimDevice, dim: u32) -> Kernel {
    matmul_mkn(dev, dim, dim, dim)
}

fn matmul_mkn(dev: &SimDevice, m: u32, k: u32, n: u32) -> Kernel {
    let (m64, k64, n64) = (m as u64, k as u64, n as u64);
    Kernel::Matmul {
        a: f32s(dev, m64 * k64),
        b: f32s(dev, k64 * n64),
        c: f32s(dev, m64 * n64),
        m,
        k,
        n,
    }
}

fn op(dev: &SimDevice, label: &str) -> OpRecord {
    dev.timeline()
        .into_iter()
        .find(|r| r.label == label)
        .unwrap_or_else(|| panic!("no op {label}"))
}

fn overlap(a: &OpRecord, b: &OpRecord) -> bool {
    a.start_ns < b.end_ns && b.start_ns < a.end_ns
}

fn profiles() -> [DeviceProfile; 2] {
    [DeviceProfile::ascend_910b(), DeviceProfile::generic_gpu()]
}

#[test]
fn two_matmuls_that_fill_the_cube_take_twice_one() {
    for p in profiles() {
        let single = {
            let dev = device(p.clone());
            let s = dev.create_stream(0).unwrap();
            s.launch(&TypedKernel::from(&matmul(&dev, 4096)), "mm")
                .unwrap();
            op(&dev, "mm").duration_ns()
        };
        let dev = device(p.clone());
        let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
        let (k1, k2) = (matmul(&dev, 4096), matmul(&dev, 4096));
        s1.launch(&TypedKernel::from(&k1), "mm1").unwrap();
        s2.launch(&TypedKernel::from(&k2), "mm2").unwrap();
        let (a, b) = (op(&dev, "mm1"), op(&dev, "mm2"));
        let span = a.end_ns.max(b.end_ns) - a.start_ns.min(b.start_ns);
        let ratio = span as f64 / single as f64;
        assert!((1.95..=2.05).contains(&ratio), "{}: {ratio}", p.name);
        assert!(!overlap(&a, &b), "{}", p.name);
    }
}

#[test]
fn small_matmuls_share_the_cube_units() {
    for p in profiles() {
        let dev = device(p.clone());
        let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
        // 384x384 outputs: 9 tiles of 128x128 each, so two fit in 24 (or 108) units; a long
        // reduction dimension makes them last far longer than a launch
        let (k1, k2) = (
            matmul_mkn(&dev, 384, 1 << 16, 384),
            matmul_mkn(&dev, 384, 1 << 16, 384),
        );
        s1.launch(&TypedKernel::from(&k1), "mm1").unwrap();
        s2.launch(&TypedKernel::from(&k2), "mm2").unwrap();
        let (a, b) = (op(&dev, "mm1"), op(&dev, "mm2"));
        assert!(overlap(&a, &b), "{}", p.name);
        assert_eq!(a.duration_ns(), b.duration_ns());
        // a matmul on 9 of the units runs at their share of the peak
        let flops = 2.0 * 384.0 * 65536.0 * 384.0;
        let full = flops / p.cube_f32_flops_per_s as f64 * 1e9;
        let share = p.cube_units as f64 / 9.0;
        let ratio = a.duration_ns() as f64 / (full * share);
        assert!((0.99..1.01).contains(&ratio), "{}: {ratio}", p.name);
    }
}

#[test]
fn a_vector_op_and_a_copy_overlap_a_matmul() {
    for p in profiles() {
        let dev = device(p.clone());
        let s: Vec<_> = (0..4).map(|_| dev.create_stream(0).unwrap()).collect();
        let mm = matmul(&dev, 8192);
        let n = 16 << 20;
        let (x, y) = (f32s(&dev, n), f32s(&dev, n));
        s[0].launch(&TypedKernel::from(&mm), "mm").unwrap();
        s[1].launch(
            &TypedKernel::from(&Kernel::Add { a: x, b: x, out: y }),
            "vec",
        )
        .unwrap();
        let host = vec![0u8; 1 << 20];
        // SAFETY: timing-only mode never reads host memory; `host` outlives the device calls.
        unsafe { s[2].memcpy_h2d(x.ptr, host.as_ptr(), 1 << 20).unwrap() };
        s[3].memcpy_d2d(DevicePtr(y.ptr.0), x.ptr, 64 << 20)
            .unwrap();
        let mm = op(&dev, "mm");
        for other in ["vec", "memcpy_h2d", "memcpy_d2d"] {
            assert!(overlap(&mm, &op(&dev, other)), "{}: {other}", p.name);
        }
        // the two copies use the two copy engines at once
        assert!(overlap(&op(&dev, "memcpy_h2d"), &op(&dev, "memcpy_d2d")));
    }
}

#[test]
fn a_graph_launch_costs_far_less_host_time_than_eager_launches() {
    const N: usize = 100;
    for p in profiles() {
        let dev = device(p.clone());
        let s = dev.create_stream(0).unwrap();
        let x = f32s(&dev, 1024);
        let k = Kernel::Scale {
            src: x,
            dst: f32s(&dev, 1024),
            factor: 2.0,
        };
        let t0 = dev.host_time_ns();
        for _ in 0..N {
            s.launch(&TypedKernel::from(&k), "eager").unwrap();
        }
        let eager = dev.host_time_ns() - t0;
        s.begin_capture(CaptureMode::Global).unwrap();
        for _ in 0..N {
            s.launch(&TypedKernel::from(&k), "node").unwrap();
        }
        let g = s.end_capture().unwrap();
        let t1 = dev.host_time_ns();
        g.launch(&s).unwrap();
        let graph = dev.host_time_ns() - t1;
        assert_eq!(eager, N as u64 * p.eager_launch_ns);
        assert_eq!(graph, p.graph_launch_ns + N as u64 * p.graph_node_ns);
        assert!(
            graph * 5 < eager,
            "{}: graph {graph} ns vs eager {eager} ns",
            p.name
        );
    }
}
