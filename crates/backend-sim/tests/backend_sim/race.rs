//! Data effects follow virtual time: a missing wait gives a deterministic wrong answer.

use crate::common;

use braid_backend_sim::{SimConfig, SimDevice};

use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::EventFlags;
use common::*;

const N: u64 = 1024;

/// Stream A spins, then fills X with 1.0; stream B reduce-sums X, waiting on A or not.
fn run(wait: bool) -> f32 {
    let dev = unit_device();
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let x = dev.alloc(N * 4).unwrap();
    let sum = dev.alloc(4).unwrap();
    a.launch(&TypedKernel::from(&busy(1_000_000)), "long")
        .unwrap();
    a.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(x, N),
            value: 1.0,
        }),
        "fill x",
    )
    .unwrap();
    if wait {
        let e = dev.create_event(EventFlags::ORDERING).unwrap();
        a.record(&e).unwrap();
        b.wait(&e).unwrap();
    }
    b.launch(
        &TypedKernel::from(&Kernel::ReduceSum {
            src: slice(x, N),
            dst: slice(sum, 1),
        }),
        "sum x",
    )
    .unwrap();
    let result = download(&b, sum, 1)[0];
    // whatever B read, X itself ends up filled once A is done
    dev.synchronize().unwrap();
    assert_eq!(download(&a, x, N as usize), vec![1.0; N as usize]);
    result
}

#[test]
fn missing_wait_reads_the_old_value() {
    assert_eq!(run(false), 0.0);
    // deterministic: every run gives the same wrong answer
    assert_eq!(run(false), 0.0);
}

#[test]
fn wait_on_event_reads_the_new_value() {
    assert_eq!(run(true), N as f32);
}

#[test]
fn a_reader_that_starts_as_the_writer_ends_sees_the_write() {
    // Ops ending at t are applied before ops starting at t.
    let dev = unit_device();
    let s = dev.create_stream(0).unwrap();
    let x = dev.alloc(16).unwrap();
    let y = dev.alloc(16).unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Fill {
            dst: slice(x, 4),
            value: 3.0,
        }),
        "w",
    )
    .unwrap();
    s.launch(
        &TypedKernel::from(&Kernel::Scale {
            src: slice(x, 4),
            dst: slice(y, 4),
            factor: 2.0,
        }),
        "r",
    )
    .unwrap();
    let t = dev.timeline();
    assert_eq!(t[1].start_ns, t[0].end_ns);
    assert_eq!(download(&s, y, 4), vec![6.0; 4]);
}

/// A kernel the data queue reaches the end of before any thread has computed it writes its
/// output in place: a reader that starts while it runs still reads the old bytes, even one
/// that has not read them yet when the writer's end comes (they move to a copy first), and
/// the writer's bytes are all there afterwards.
#[test]
fn a_reader_racing_a_kernel_that_writes_in_place_reads_the_old_bytes() {
    let mut profile = unit_profile();
    // Two vector units: the writer and the reader run side by side.
    profile.vector_units = 2;
    let dev = SimDevice::new(SimConfig::new().capacity(1 << 30).profile(profile));
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let n = 1024;
    let z = upload(&dev, &a, &vec![5.0; n]);
    let x = upload(&dev, &a, &vec![1.0; n]);
    let y = dev.alloc(n as u64 * 4).unwrap();
    let scale = |src, dst, factor| {
        TypedKernel::from(&Kernel::Scale {
            src: slice(src, n as u64),
            dst: slice(dst, n as u64),
            factor,
        })
    };
    // A: X = 2·Z. B, without waiting for A: from half-way through A's kernel, Y = 3·X.
    a.launch(&scale(z, x, 2.0), "write x").unwrap();
    let writer = dev.timeline().last().unwrap().clone();
    b.launch(
        &TypedKernel::from(&busy((writer.end_ns - writer.start_ns) / 2)),
        "wait",
    )
    .unwrap();
    b.launch(&scale(x, y, 3.0), "read x").unwrap();
    let reader = dev.timeline().last().unwrap().clone();
    assert!(writer.start_ns < reader.start_ns && reader.start_ns < writer.end_ns);
    assert!(writer.end_ns < reader.end_ns);
    dev.synchronize().unwrap();
    assert_eq!(download(&b, y, n), vec![3.0; n]);
    assert_eq!(download(&a, x, n), vec![10.0; n]);
}
