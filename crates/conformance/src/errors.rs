//! Misuse reported with typed errors, each followed by a check that the device still works.

use crate::support::{alloc_f32, fill, still_works, wrong_device};
use crate::{CaseError, Harness};
use braid_stream_core::hal::{Backend, HalError};
use braid_stream_core::{
    f32_bytes, CaptureMode, DeviceSlice, EventFlags, Kernel, KernelError, StreamError,
};

/// Validation: streams, events and graphs of another device (ordinal 1, or a second device
/// with the same ordinal) are refused with `StreamError::WrongDevice` where an object must be the
/// device's own (recording an event, the current stream, elapsed time, graph launches), naming
/// both devices. Waits across devices are passed to the backend (CUDA and ACL allow them): a
/// backend whose two devices cannot see each other's events refuses with its own error, and
/// then the model learns nothing; one that accepts orders the waiter after the record.
pub fn objects_of_another_device_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let d0 = h.device()?;
    let d1 = h.device_with_ordinal(1)?;
    let (s0, s1) = (d0.create_stream(0)?, d1.create_stream(0)?);
    let e0 = d0.create_event(EventFlags::TIMING)?;
    let e1 = d1.create_event(EventFlags::TIMING)?;
    e0.record(&s0)?;
    let mem1 = alloc_f32(&d1, 16)?;
    let on_d1 = fill(&s1, mem1.slice(), 1.0)?;
    e1.record(&s1)?;
    cross_device_wait(
        &d0,
        &s0,
        s0.wait(&e1),
        on_d1,
        "waiting on an event of device 1",
    )?;
    expect_err!(
        e1.record(&s0),
        StreamError::WrongDevice(w) if w == wrong_device("Event::record", "stream", &d1, &d0),
        "recording an event of device 1 on a stream of device 0"
    );
    let on_d1 = fill(&s1, mem1.slice(), 2.0)?;
    cross_device_wait(
        &d0,
        &s0,
        s0.wait_stream(&s1),
        on_d1,
        "wait_stream across devices",
    )?;
    expect_err!(
        d0.use_stream(&s1),
        StreamError::WrongDevice(w) if w == wrong_device("Device::use_stream", "stream", &d0, &d1),
        "use_stream with a stream of device 1"
    );
    d0.synchronize()?;
    d1.synchronize()?;
    expect_err!(
        e0.elapsed_ms(&e1),
        StreamError::WrongDevice(w) if w == wrong_device("Event::elapsed_ms", "event", &d0, &d1),
        "elapsed_ms across devices"
    );
    ensure_eq!(
        d0.current_stream(),
        d0.default_stream(),
        "a refused use_stream changes nothing"
    );

    // A second device with the same ordinal is still another device.
    let twin = h.device()?;
    let twin_event = twin.create_event(EventFlags::ORDERING)?;
    let err = twin_event.record(&s0);
    expect_err!(
        &err,
        StreamError::WrongDevice(w) if *w == wrong_device("Event::record", "stream", &twin, &d0),
        "recording an event of another device with the same ordinal"
    );
    // Their identities differ, and the message names both.
    ensure!(d0.id() != twin.id(), "two devices, two identities");
    let text = err.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        text.contains(&twin.id().to_string()) && text.contains(&d0.id().to_string()),
        "the message names both devices: {text}"
    );

    // Graphs launch only on their own device.
    let mem = alloc_f32(&d0, 16)?;
    s0.begin_capture(CaptureMode::Global)?;
    fill(&s0, mem.slice(), 1.0)?;
    let graph = s0.end_capture()?;
    expect_err!(
        graph.launch(&s1),
        StreamError::WrongDevice(w) if w == wrong_device("Graph::launch", "stream", &d0, &d1),
        "launching a graph of device 0 on device 1"
    );
    graph.launch(&s0)?;
    still_works(&d0)?;
    still_works(&d1)?;
    still_works(&twin)
}

/// Checks the outcome of a wait of `stream` (on `device`) on work of another device up to
/// `other_work`: accepted, the stream is ordered after it; refused by the backend, nothing is.
fn cross_device_wait<B: Backend>(
    device: &braid_stream_core::Device<B>,
    stream: &braid_stream_core::Stream<B>,
    outcome: braid_stream_core::Result<()>,
    other_work: braid_stream_core::StreamPosition,
    what: &str,
) -> Result<(), CaseError> {
    match outcome {
        Ok(()) => {
            ensure!(
                device.is_ordered_before(other_work, stream),
                "{what}: accepted, but the stream is not ordered after the work"
            );
        }
        Err(StreamError::Backend(_)) => {
            ensure!(
                !device.is_ordered_before(other_work, stream),
                "{what}: refused by the backend, but the model learnt an order"
            );
        }
        Err(other) => {
            ensure!(
                false,
                "{what}: the front layer refused a cross-device wait: {other}"
            );
        }
    }
    Ok(())
}

/// C25: allocating more than the device's total memory is `StreamError::Backend(OutOfMemory)` with
/// what was asked and the capacity; the device works afterwards.
pub fn allocation_beyond_capacity_is_oom<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let info = device.mem_info()?;
    ensure!(
        info.total > 0 && info.free <= info.total,
        "implausible mem_info {info:?}"
    );
    let ask = info.total + 1;
    expect_err!(
        device.alloc(ask),
        StreamError::Backend(HalError::OutOfMemory { requested, total, .. }) if requested >= ask && total == info.total,
        "allocating total + 1 bytes"
    );
    expect_err!(
        device.alloc(info.total.saturating_mul(2)),
        StreamError::Backend(HalError::OutOfMemory { .. }),
        "allocating twice the capacity"
    );
    ensure!(
        device.alloc(u64::MAX).is_err(),
        "allocating u64::MAX bytes succeeded"
    );
    let after = device.mem_info()?;
    ensure_eq!(after.total, info.total, "total after failed allocations");
    ensure!(
        after.free >= info.free,
        "failed allocations leaked memory: {info:?} then {after:?}"
    );
    let small = device.alloc(4096)?;
    drop(small);
    still_works(&device)
}

/// Validation: kernels whose ranges do not fit their shape are `StreamError::Kernel` and never reach
/// the stream.
pub fn invalid_kernel_shapes_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = device.alloc(4096)?;
    let at =
        |offset: u64, len: u64| -> Result<DeviceSlice, CaseError> { Ok(mem.range(offset, len)?) };
    let before = s.position();
    let cases: Vec<(&str, Kernel)> = vec![
        (
            "add",
            Kernel::Add {
                a: at(0, 64)?,
                b: at(64, 60)?,
                out: at(128, 64)?,
            },
        ),
        (
            "add",
            Kernel::Add {
                a: at(0, 6)?,
                b: at(64, 6)?,
                out: at(128, 6)?,
            },
        ),
        (
            "scale",
            Kernel::Scale {
                src: at(0, 64)?,
                dst: at(64, 32)?,
                factor: 2.0,
            },
        ),
        (
            "fill",
            Kernel::Fill {
                dst: at(0, 6)?,
                value: 1.0,
            },
        ),
        (
            "copy",
            Kernel::Copy {
                src: at(0, 64)?,
                dst: at(64, 68)?,
            },
        ),
        (
            "reduce_sum",
            Kernel::ReduceSum {
                src: at(0, 64)?,
                dst: at(64, 8)?,
            },
        ),
        (
            "reduce_sum",
            Kernel::ReduceSum {
                src: at(0, 62)?,
                dst: at(64, 4)?,
            },
        ),
        (
            "matmul",
            Kernel::Matmul {
                a: at(0, 31)?,
                b: at(64, 32)?,
                c: at(128, 16)?,
                m: 2,
                k: 4,
                n: 2,
            },
        ),
        (
            "matmul",
            Kernel::Matmul {
                a: at(0, 32)?,
                b: at(64, 32)?,
                c: at(128, 12)?,
                m: 2,
                k: 4,
                n: 2,
            },
        ),
        (
            "matmul",
            Kernel::Matmul {
                a: at(0, 32)?,
                b: at(64, 32)?,
                c: at(0, 16)?,
                m: 2,
                k: 4,
                n: 2,
            },
        ),
        (
            "matmul",
            Kernel::Matmul {
                a: at(0, 32)?,
                b: at(64, 32)?,
                c: at(128, 16)?,
                m: 0,
                k: 4,
                n: 2,
            },
        ),
    ];
    for (name, kernel) in &cases {
        expect_err!(
            s.launch(kernel),
            StreamError::Kernel(KernelError { kernel, .. }) if kernel == *name,
            "launching {kernel:?}"
        );
    }
    ensure_eq!(
        s.position(),
        before,
        "refused kernels must not be submitted"
    );
    drop(mem);
    still_works(&device)
}

/// Validation: a host-to-device copy whose length differs from the destination, a
/// device-to-device copy of different lengths, and a range outside its segment are
/// `StreamError::OutOfBounds`.
pub fn copy_length_mismatch_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = alloc_f32(&device, 16)?;
    let before = s.position();
    expect_err!(
        s.copy_h2d(mem.slice(), f32_bytes(&[1.0; 15])),
        StreamError::OutOfBounds {
            what: "host-to-device copy",
            len: 60,
            capacity: 64,
            ..
        },
        "host-to-device copy of 60 bytes into 64"
    );
    expect_err!(
        s.copy_h2d(mem.slice(), f32_bytes(&[1.0; 17])),
        StreamError::OutOfBounds {
            len: 68,
            capacity: 64,
            ..
        },
        "host-to-device copy of 68 bytes into 64"
    );
    expect_err!(
        s.copy_d2d(mem.range(0, 32)?, mem.range(32, 16)?),
        StreamError::OutOfBounds {
            what: "device-to-device copy",
            ..
        },
        "device-to-device copy of different lengths"
    );
    expect_err!(
        mem.range(60, 8),
        StreamError::OutOfBounds {
            offset: 60,
            len: 8,
            capacity: 64,
            ..
        },
        "a range past the end of the segment"
    );
    expect_err!(
        mem.range(u64::MAX, 2),
        StreamError::OutOfBounds { .. },
        "an overflowing range"
    );
    ensure_eq!(s.position(), before, "refused copies must not be submitted");
    still_works(&device)
}
