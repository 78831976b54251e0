//! Virtual time: host costs, stream FIFO order, event waits, resource contention, determinism.

use crate::common;

use braid_backend_sim::{ComputeUnit, OpRecord, SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, DeviceSlice, EventFlags};
use common::*;

fn by_label(dev: &SimDevice, label: &str) -> OpRecord {
    dev.timeline()
        .into_iter()
        .find(|r| r.label == label)
        .unwrap_or_else(|| panic!("no op {label}"))
}

fn matmul(dev: &SimDevice) -> Kernel {
    let a = dev.alloc(400).unwrap();
    let b = dev.alloc(400).unwrap();
    let c = dev.alloc(400).unwrap();
    Kernel::Matmul {
        a: slice(a, 100),
        b: slice(b, 100),
        c: slice(c, 100),
        m: 10,
        k: 10,
        n: 10,
    }
}

fn add(dev: &SimDevice, n: u64) -> Kernel {
    let x = dev.alloc(n * 4).unwrap();
    Kernel::Add {
        a: slice(x, n),
        b: slice(x, n),
        out: slice(x, n),
    }
}

#[test]
fn host_clock_charges_each_call() {
    let dev = unit_device();
    assert_eq!(dev.host_time_ns(), 0);
    let s = dev.create_stream(0).unwrap(); // cheap call: 1
    assert_eq!(dev.host_time_ns(), 1);
    s.launch(&TypedKernel::from(&busy(1000)), "b").unwrap(); // eager: 10, runs 11..1011
    assert_eq!(dev.host_time_ns(), 11);
    assert_eq!(by_label(&dev, "b").start_ns, 11);
    assert!(!s.query().unwrap()); // 12
    assert_eq!(dev.host_time_ns(), 12);
    s.synchronize().unwrap(); // up to 1011, plus 1
    assert_eq!(dev.host_time_ns(), 1012);
    assert!(s.query().unwrap());
    assert_eq!(dev.host_time_ns(), 1013);
    assert_eq!(dev.makespan_ns(), 1011);
}

#[test]
fn stream_is_fifo_and_busy_polling_terminates() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    s.launch(&TypedKernel::from(&busy(5_000)), "first").unwrap();
    s.launch(&TypedKernel::from(&busy(10)), "second").unwrap();
    let (first, second) = (by_label(&dev, "first"), by_label(&dev, "second"));
    assert_eq!(second.start_ns, first.end_ns);
    let mut polls = 0;
    while !s.query().unwrap() {
        polls += 1;
    }
    assert!(
        polls > 100 && dev.host_time_ns() >= second.end_ns,
        "{polls}"
    );
}

#[test]
fn event_wait_orders_other_stream() {
    let dev = unit_device();
    let (s1, s2) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let e = dev.create_event(EventFlags::ORDERING).unwrap();
    // waiting on a never-recorded event is a no-op, and it counts as complete
    s2.wait(&e).unwrap();
    assert!(e.query().unwrap());
    s1.launch(&TypedKernel::from(&busy(1000)), "producer")
        .unwrap();
    s1.record(&e).unwrap();
    assert!(!e.query().unwrap());
    s2.wait(&e).unwrap();
    s2.launch(&TypedKernel::from(&busy(10)), "consumer")
        .unwrap();
    s2.launch(&TypedKernel::from(&busy(10)), "unordered")
        .unwrap();
    let (p, c) = (by_label(&dev, "producer"), by_label(&dev, "consumer"));
    assert_eq!(c.start_ns, p.end_ns);
    // without the wait the other stream starts right away
    let s3 = dev.create_stream(0).unwrap();
    s3.launch(&TypedKernel::from(&busy(10)), "free").unwrap();
    assert!(by_label(&dev, "free").start_ns < p.end_ns);
    e.synchronize().unwrap();
    assert!(dev.host_time_ns() > p.end_ns);
    assert!(e.query().unwrap());
    // re-recording on an idle stream moves the event to the current host time
    s3.synchronize().unwrap();
    s3.record(&e).unwrap();
    assert!(e.query().unwrap());
}

#[test]
fn device_synchronize_waits_for_every_stream() {
    let dev = unit_device();
    let streams: Vec<_> = (0..3).map(|_| dev.create_stream(0).unwrap()).collect();
    for (i, s) in streams.iter().enumerate() {
        s.launch(
            &TypedKernel::from(&busy(1000 * (i as u64 + 1))),
            &format!("w{i}"),
        )
        .unwrap();
    }
    dev.synchronize().unwrap();
    assert_eq!(dev.host_time_ns(), by_label(&dev, "w2").end_ns + 1);
    assert!(streams.iter().all(|s| s.query().unwrap()));
}

#[test]
fn matmuls_serialize_on_the_cube_while_vector_and_copy_overlap() {
    let dev = unit_device();
    let (mm1, mm2, v, v2) = (matmul(&dev), matmul(&dev), add(&dev, 1000), add(&dev, 1000));
    let x = dev.alloc(100_000).unwrap();
    let y = dev.alloc(100_000).unwrap();
    let s: Vec<_> = (0..5).map(|_| dev.create_stream(0).unwrap()).collect();
    s[0].launch(&TypedKernel::from(&mm1), "mm1").unwrap();
    s[1].launch(&TypedKernel::from(&mm2), "mm2").unwrap();
    s[2].launch(&TypedKernel::from(&v), "vec").unwrap();
    s[3].memcpy_d2d(y, x, 10_000).unwrap();
    s[4].launch(&TypedKernel::from(&v2), "vec2").unwrap();
    let (a, b, vec, vec2) = (
        by_label(&dev, "mm1"),
        by_label(&dev, "mm2"),
        by_label(&dev, "vec"),
        by_label(&dev, "vec2"),
    );
    let copy = by_label(&dev, "memcpy_d2d");
    assert_eq!(
        (a.unit, vec.unit, copy.unit),
        (ComputeUnit::Cube, ComputeUnit::Vector, ComputeUnit::Copy)
    );
    assert_eq!(a.duration_ns(), 2000);
    assert_eq!(b.start_ns, a.end_ns, "two matmuls share the cube");
    assert!(
        vec.start_ns < a.end_ns && vec.end_ns > a.start_ns,
        "vector op overlaps the matmul"
    );
    assert!(
        copy.start_ns < a.end_ns && copy.end_ns > a.start_ns,
        "copy overlaps compute"
    );
    assert_eq!(
        vec2.start_ns, vec.end_ns,
        "two vector ops share the vector unit"
    );
    // a later, short op fills an earlier gap only if it fits there
    assert_eq!(
        dev.makespan_ns(),
        b.end_ns.max(vec2.end_ns).max(copy.end_ns)
    );
}

#[test]
fn elapsed_time_between_timing_events() {
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let (start, end) = (
        dev.create_event(EventFlags::TIMING).unwrap(),
        dev.create_event(EventFlags::TIMING).unwrap(),
    );
    let plain = dev.create_event(EventFlags::ORDERING).unwrap();
    assert!(start.elapsed_ms(&end).is_err(), "never recorded");
    s.record(&start).unwrap();
    s.launch(&TypedKernel::from(&busy(2_000_000)), "2ms")
        .unwrap();
    s.record(&end).unwrap();
    s.record(&plain).unwrap();
    let err = start.elapsed_ms(&end).unwrap_err();
    assert!(err.to_string().contains("not completed"), "{err}");
    end.synchronize().unwrap();
    let ms = start.elapsed_ms(&end).unwrap();
    assert!((ms - 2.00001).abs() < 1e-5, "{ms}");
    let err = start.elapsed_ms(&plain).unwrap_err();
    assert!(err.to_string().contains("without timing"), "{err}");
    assert!(err.to_string().contains("EventFlags::TIMING"), "{err}");
    let other = SimDevice::new(SimConfig::new());
    let foreign = other.create_event(EventFlags::TIMING).unwrap();
    assert!(start.elapsed_ms(&foreign).is_err());
    assert!(s.record(&foreign).is_err());
}

/// A multi-stream program with events, copies, a graph and data.
fn program(mode: SimMode) -> (Vec<OpRecord>, u64) {
    let dev = SimDevice::new(SimConfig::new().capacity(1 << 30).mode(mode));
    let streams: Vec<_> = (0..4).map(|_| dev.create_stream(0).unwrap()).collect();
    let events: Vec<_> = (0..4)
        .map(|_| dev.create_event(EventFlags::ORDERING).unwrap())
        .collect();
    let bufs: Vec<_> = (0..6).map(|_| dev.alloc(64 * 64 * 4).unwrap()).collect();
    let whole = |i: usize| DeviceSlice::new(bufs[i], 64 * 64 * 4);
    for round in 0..5 {
        for (i, s) in streams.iter().enumerate() {
            s.launch(
                &TypedKernel::from(&Kernel::Fill {
                    dst: whole(i),
                    value: round as f32,
                }),
                "fill",
            )
            .unwrap();
            s.launch(
                &TypedKernel::from(&Kernel::Matmul {
                    a: whole(i),
                    b: whole((i + 1) % 4),
                    c: whole(4 + i % 2),
                    m: 64,
                    k: 64,
                    n: 64,
                }),
                "mm",
            )
            .unwrap();
            s.record(&events[i]).unwrap();
            streams[(i + 1) % 4].wait(&events[i]).unwrap();
            s.memcpy_d2d(bufs[5], bufs[4], 1024).unwrap();
        }
    }
    let cap = &streams[1];
    cap.begin_capture(CaptureMode::Global).unwrap();
    cap.launch(
        &TypedKernel::from(&Kernel::Scale {
            src: whole(0),
            dst: whole(1),
            factor: 2.0,
        }),
        "g-scale",
    )
    .unwrap();
    cap.launch(&TypedKernel::from(&busy(777)), "g-busy")
        .unwrap();
    let g = cap.end_capture().unwrap();
    g.launch(&streams[2]).unwrap();
    g.launch(&streams[3]).unwrap();
    dev.synchronize().unwrap();
    (dev.timeline(), dev.host_time_ns())
}

#[test]
fn same_program_same_timeline() {
    let (t1, h1) = program(SimMode::Data);
    let (t2, h2) = program(SimMode::Data);
    assert_eq!(t1, t2);
    assert_eq!(h1, h2);
    assert!(t1.len() == 64 && t1.iter().any(|r| r.from_graph));
    // timing does not depend on whether data is computed
    let (t3, h3) = program(SimMode::TimingOnly);
    assert_eq!(t1, t3);
    assert_eq!(h1, h3);
}

#[test]
fn timeline_can_be_turned_off() {
    let dev = SimDevice::new(SimConfig::new().record_timeline(false));
    let s = dev.create_stream(0).unwrap();
    s.launch(&TypedKernel::from(&busy(10)), "x").unwrap();
    assert!(dev.timeline().is_empty());
    assert_eq!(dev.stats().ops_executed, 1);
    assert!(dev.makespan_ns() > 0);
}
