//! User-defined operators and data types on the simulator, through the front layer: host
//! bodies compute on exactly the declared ranges, the sanitizer, capture, timelines and the
//! cost model treat them like built-in kernels, and built-in kernels round to their type.

use braid_backend_sim::{host_op, DeviceProfile, SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::{
    Access, ComputeUnit, CustomOp, DType, Device, Kernel, OpCost, Stream, StreamError,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn device() -> Device<SimBackend> {
    Device::new(SimDevice::new(SimConfig::new().capacity(1 << 30))).unwrap()
}

fn upload(
    s: &Stream<SimBackend>,
    dtype: DType,
    values: &[f32],
) -> braid_stream_core::DeviceMemory<SimBackend> {
    let mem = s
        .device()
        .alloc(values.len() as u64 * dtype.size())
        .unwrap();
    s.copy_h2d(mem.slice(), dtype.encode(values)).unwrap();
    mem
}

fn download(
    s: &Stream<SimBackend>,
    dtype: DType,
    mem: &braid_stream_core::DeviceMemory<SimBackend>,
) -> Vec<f32> {
    dtype.decode(&s.copy_d2h(mem.slice()).unwrap().wait().unwrap())
}

/// RMSNorm over rows of `cols` elements: `y = x / sqrt(mean(x²) + eps) * w`.
fn rms_norm_reference(x: &[f32], w: &[f32], cols: usize, dtype: DType) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f32>() / cols as f32;
            let inv = 1.0 / (ms + 1e-6).sqrt();
            row.iter()
                .zip(w)
                .map(move |(v, g)| dtype.round(v * inv * g))
        })
        .collect()
}

fn rms_norm(
    x: &braid_stream_core::DeviceMemory<SimBackend>,
    w: &braid_stream_core::DeviceMemory<SimBackend>,
    y: &braid_stream_core::DeviceMemory<SimBackend>,
    rows: u64,
    cols: u64,
    dtype: DType,
) -> CustomOp<SimBackend> {
    let c = cols as usize;
    CustomOp::new("rms_norm")
        .dtype(dtype)
        .supports(&[DType::F32, DType::F16, DType::BF16])
        .read_shaped(x.slice(), &[rows, cols])
        .read_shaped(w.slice(), &[cols])
        .write_shaped(y.slice(), &[rows, cols])
        .cost(OpCost::Work {
            unit: ComputeUnit::Vector,
            flops: 4 * rows * cols,
            bytes: x.len() + w.len() + y.len(),
        })
        .body(host_op(move |inputs, outputs| {
            let (x, w) = (dtype.decode(inputs[0]), dtype.decode(inputs[1]));
            let mut out = Vec::with_capacity(outputs[0].len());
            for v in rms_norm_reference(&x, &w, c, dtype) {
                dtype.push(&mut out, v);
            }
            outputs[0].copy_from_slice(&out);
        }))
}

#[test]
fn a_host_body_computes_rms_norm_in_each_data_type() {
    for dtype in DType::FLOATS {
        let dev = device();
        let s = dev.create_stream(0).unwrap();
        let xs: Vec<f32> = (0..32).map(|i| (i as f32 - 10.0) * 0.37).collect();
        let ws: Vec<f32> = (0..8).map(|i| 0.5 + i as f32 * 0.25).collect();
        let x = upload(&s, dtype, &xs);
        let w = upload(&s, dtype, &ws);
        let y = dev.alloc(32 * dtype.size()).unwrap();
        s.launch_op(&rms_norm(&x, &w, &y, 4, 8, dtype)).unwrap();
        let rounded_x: Vec<f32> = xs.iter().map(|&v| dtype.round(v)).collect();
        let rounded_w: Vec<f32> = ws.iter().map(|&v| dtype.round(v)).collect();
        let want = rms_norm_reference(&rounded_x, &rounded_w, 8, dtype);
        assert_eq!(download(&s, dtype, &y), want, "{dtype}");
        assert!(dev.hal().sanitizer_reports().is_empty());
    }
}

#[test]
fn a_body_sees_only_its_ranges_and_partial_writes_keep_the_rest() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let buf = upload(&s, DType::F32, &[1.0, 2.0, 3.0, 4.0]);
    let seen = Arc::new(AtomicUsize::new(0));
    let seen_in = seen.clone();
    // In place: reads the whole buffer, writes its first element only.
    let op = CustomOp::<SimBackend>::new("first_to_sum")
        .read(buf.slice())
        .write(buf.slice())
        .in_place()
        .body(host_op(move |inputs, outputs| {
            seen_in.store(inputs.len() * 100 + inputs[0].len(), Ordering::SeqCst);
            let sum: f32 = DType::F32.decode(inputs[0]).iter().sum();
            outputs[0][..4].copy_from_slice(&sum.to_le_bytes());
        }));
    s.launch_op(&op).unwrap();
    assert_eq!(download(&s, DType::F32, &buf), [10.0, 2.0, 3.0, 4.0]);
    assert_eq!(seen.load(Ordering::SeqCst), 116, "one input of 16 bytes");
}

#[test]
fn a_panicking_body_writes_nothing_and_the_device_goes_on() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let buf = upload(&s, DType::F32, &[7.0; 4]);
    let op = CustomOp::<SimBackend>::new("broken")
        .write(buf.slice())
        .body(host_op(|_, _| panic!("the body failed")));
    s.launch_op(&op).unwrap();
    // Reported by the next synchronize (tests/backend_sim/op_failures.rs), then the device goes on.
    assert!(s.synchronize().is_err());
    assert_eq!(download(&s, DType::F32, &buf), [7.0; 4]);
    assert_eq!(dev.hal().stats().failed_ops, 1);
    s.launch(&Kernel::Fill {
        dst: buf.slice(),
        value: 1.0,
    })
    .unwrap();
    assert_eq!(download(&s, DType::F32, &buf), [1.0; 4]);
}

#[test]
fn the_sanitizer_reports_a_user_operator_racing_a_kernel() {
    let dev = device();
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = upload(&a, DType::F32, &[1.0; 64]);
    let w = upload(&a, DType::F32, &[1.0; 8]);
    let y = dev.alloc(256).unwrap();
    a.synchronize().unwrap();
    a.launch(&Kernel::Fill {
        dst: x.slice(),
        value: 2.0,
    })
    .unwrap();
    // No wait: the norm on b reads x while a may still write it.
    b.launch_op(&rms_norm(&x, &w, &y, 8, 8, DType::F32))
        .unwrap();
    let reports = dev.hal().sanitizer_reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].second.label, "rms_norm");
    assert_eq!(reports[0].second.kind, "custom");
    // With the wait, silent.
    dev.hal().clear_sanitizer_reports();
    b.wait_stream(&a).unwrap();
    b.launch_op(&rms_norm(&x, &w, &y, 8, 8, DType::F32))
        .unwrap();
    assert!(dev.hal().sanitizer_reports().is_empty());
}

#[test]
fn a_user_operator_is_captured_and_replayed() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let x = upload(&s, DType::F16, &[3.0; 16]);
    let w = upload(&s, DType::F16, &[1.0; 4]);
    let y = dev.alloc(32).unwrap();
    s.begin_capture(braid_stream_core::CaptureMode::Global)
        .unwrap();
    s.launch_op(&rms_norm(&x, &w, &y, 4, 4, DType::F16))
        .unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.node_count(), 1);
    assert_eq!(download(&s, DType::F16, &y), [0.0; 16], "captured, not run");
    graph.launch(&s).unwrap();
    assert_eq!(download(&s, DType::F16, &y), [DType::F16.round(1.0); 16]);
    s.copy_h2d(x.slice(), DType::F16.encode(&[-2.0; 16]))
        .unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(download(&s, DType::F16, &y), [-1.0; 16]);
    let replayed = dev
        .hal()
        .timeline()
        .into_iter()
        .filter(|r| r.label == "rms_norm" && r.from_graph)
        .count();
    assert_eq!(replayed, 2, "each replay is a timeline slice");
}

#[test]
fn costs_follow_the_declaration_and_the_data_type() {
    let mut p = DeviceProfile::ascend_910b();
    p.min_kernel_ns = 0;
    let dev = Device::new(SimDevice::new(
        SimConfig::new()
            .mode(SimMode::TimingOnly)
            .capacity(64 << 30)
            .profile(p.clone()),
    ))
    .unwrap();
    let s = dev.create_stream(0).unwrap();
    let buf = dev.alloc(1 << 20).unwrap();
    let fixed = CustomOp::<SimBackend>::new("fixed")
        .write(buf.slice())
        .cost(OpCost::Fixed { ns: 12_345 });
    s.launch_op(&fixed).unwrap();
    let work = |dtype| {
        CustomOp::<SimBackend>::new("cube")
            .dtype(dtype)
            .read(buf.slice())
            .cost(OpCost::Work {
                unit: ComputeUnit::Cube,
                flops: 1 << 40,
                bytes: 0,
            })
    };
    s.launch_op(&work(DType::F16)).unwrap();
    s.launch_op(&work(DType::F32)).unwrap();
    // A matmul in f32 and in bf16 of the same shape.
    let (m, k, n) = (2048u32, 2048u32, 2048u32);
    for dtype in [DType::F32, DType::BF16] {
        let a = dev.alloc(m as u64 * k as u64 * dtype.size()).unwrap();
        let b = dev.alloc(k as u64 * n as u64 * dtype.size()).unwrap();
        let c = dev.alloc(m as u64 * n as u64 * dtype.size()).unwrap();
        s.launch(
            Kernel::Matmul {
                a: a.slice(),
                b: b.slice(),
                c: c.slice(),
                m,
                k,
                n,
            }
            .typed(dtype),
        )
        .unwrap();
    }
    s.synchronize().unwrap();
    let tl = dev.hal().timeline();
    let durations: Vec<u64> = tl.iter().map(|r| r.end_ns - r.start_ns).collect();
    assert_eq!(durations[0], 12_345);
    assert_eq!(tl[0].unit, ComputeUnit::None);
    // 2^40 flops take milliseconds: past the efficiency curve's last point, at full rate.
    let f16_ns = (1u128 << 40) * 1_000_000_000 / p.cube_flops_per_s as u128;
    assert!(durations[1].abs_diff(f16_ns as u64) <= 1, "{durations:?}");
    let f32_ns = (1u128 << 40) * 1_000_000_000 / p.cube_f32_flops_per_s as u128;
    assert!(
        durations[2].abs_diff(f32_ns as u64) <= 1,
        "f32 at the profile's f32 rate (a quarter of f16's on the 910B): {durations:?}"
    );
    assert!(durations[2] > 3 * durations[1], "{durations:?}");
    assert!(
        durations[3] > durations[4] * 19 / 10,
        "f32 matmul slower than bf16: {durations:?}"
    );
}

#[test]
fn built_in_kernels_round_to_their_data_type() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    // 1 + 2^-9 survives f32 and f16 but rounds to 1 in bf16.
    let x = 1.0 + 2f32.powi(-9);
    for (dtype, want) in [
        (DType::F32, x + x),
        (DType::F16, 2.0 * x),
        (DType::BF16, 2.0),
    ] {
        let a = upload(&s, dtype, &[x; 4]);
        let out = dev.alloc(4 * dtype.size()).unwrap();
        s.launch(
            Kernel::Add {
                a: a.slice(),
                b: a.slice(),
                out: out.slice(),
            }
            .typed(dtype),
        )
        .unwrap();
        assert_eq!(download(&s, dtype, &out), [want; 4], "{dtype}");
    }
    // f16 overflows where bf16 does not.
    for (dtype, finite) in [(DType::F16, false), (DType::BF16, true)] {
        let a = upload(&s, dtype, &[300.0; 2]);
        let out = dev.alloc(2 * dtype.size()).unwrap();
        s.launch(
            Kernel::Scale {
                src: a.slice(),
                dst: out.slice(),
                factor: 300.0,
            }
            .typed(dtype),
        )
        .unwrap();
        assert_eq!(download(&s, dtype, &out)[0].is_finite(), finite, "{dtype}");
    }
    // A matmul accumulates in f32 and rounds once.
    let (m, k, n) = (2u32, 3u32, 2u32);
    let av = [0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6];
    let bv = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let a = upload(&s, DType::F16, &av);
    let b = upload(&s, DType::F16, &bv);
    let c = dev.alloc(8).unwrap();
    s.launch(
        Kernel::Matmul {
            a: a.slice(),
            b: b.slice(),
            c: c.slice(),
            m,
            k,
            n,
        }
        .typed(DType::F16),
    )
    .unwrap();
    let r = |v: f32| DType::F16.round(v);
    let want: Vec<f32> = (0..4)
        .map(|idx| {
            let (i, j) = (idx / 2, idx % 2);
            r((0..3).map(|p| r(av[i * 3 + p]) * bv[p * 2 + j]).sum())
        })
        .collect();
    assert_eq!(download(&s, DType::F16, &c), want);
}

#[test]
fn foreign_work_gets_its_own_position() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let buf = dev.alloc(64).unwrap();
    let before = s
        .launch(&Kernel::Fill {
            dst: buf.slice(),
            value: 1.0,
        })
        .unwrap();
    s.synchronize().unwrap();
    assert!(dev.is_complete(before));
    // Work enqueued behind braid's back after the host saw the stream idle: until the host
    // observes it, it is not complete, so memory it uses must not be handed out again.
    let foreign = s
        .note_foreign_work(&[(buf.slice(), Access::Write)])
        .unwrap();
    assert!(foreign.seq > before.seq, "{foreign:?} after {before:?}");
    assert!(!dev.is_complete(foreign));
    s.synchronize().unwrap();
    assert!(dev.is_complete(foreign));
}

#[test]
fn work_on_memory_that_is_not_live_is_refused() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let buf = dev.alloc(64).unwrap();
    let stale = buf.slice();
    drop(buf);
    let err = s
        .launch(&Kernel::Fill {
            dst: stale,
            value: 1.0,
        })
        .unwrap_err();
    assert!(
        matches!(err, StreamError::RangeNotLive { range, .. } if range == stale),
        "{err}"
    );
    let op = CustomOp::<SimBackend>::new("late").read(stale);
    let err = s.launch_op(&op).unwrap_err();
    assert!(err.to_string().contains("late uses"), "{err}");
    assert_eq!(
        dev.hal().stats().ops_executed,
        0,
        "nothing reached the device"
    );
}

#[test]
fn a_race_on_a_tagged_stream_names_it_and_suggests_a_tagged_event() {
    let dev = device();
    let main = dev.default_stream();
    let x = dev.alloc(256).unwrap();
    let y = dev.alloc(256).unwrap();
    main.synchronize().unwrap();
    main.launch(&Kernel::Fill {
        dst: x.slice(),
        value: 1.0,
    })
    .unwrap();
    {
        // The tagged stream reads x without waiting for main's fill.
        let _switch = dev.stream_switch("1", 0).unwrap();
        dev.current_stream()
            .launch(&Kernel::Copy {
                src: x.slice(),
                dst: y.slice(),
            })
            .unwrap();
    }
    let reports = dev.hal().sanitizer_reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r.second.stream_tag.as_deref(), Some("1"));
    assert_eq!(r.first.as_ref().unwrap().stream_tag, None);
    let text = r.to_string();
    assert!(text.contains("(tagged \"1\")"), "{text}");
    assert!(
        text.contains("hint:") && text.contains("tagged event"),
        "{text}"
    );
}
