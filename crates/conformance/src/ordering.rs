//! The happens-before model as users query it: `Device::is_ordered_before`, `is_complete`, and
//! the data race it predicts.

use crate::support::{all_equal, alloc_f32, download, fill, long_work};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{EventFlags, Kernel};

/// Ordering model: work on one stream is ordered before later work on the same stream only;
/// without a wait or a host observation it is not ordered before another stream.
pub fn not_ordered_without_sync<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    let u = fill(&s1, mem.slice(), 1.0)?;
    ensure!(
        device.is_ordered_before(u, &s1),
        "work is ordered before later work on its stream"
    );
    ensure!(
        !device.is_ordered_before(u, &s2),
        "no sync: s1's work is ordered before s2"
    );
    ensure!(
        !device.is_ordered_before(u, &device.default_stream()),
        "no sync: s1's work is ordered before the default stream"
    );
    ensure!(
        !device.is_complete(u),
        "no host observation yet, but is_complete is true"
    );
    let nothing = device.create_stream(0)?.position();
    ensure_eq!(nothing.seq, 0, "position of a stream with no work");
    ensure!(
        device.is_ordered_before(nothing, &s2),
        "\"no work\" is ordered before everything"
    );
    Ok(())
}

/// Ordering model: `wait_stream` orders everything submitted so far on the other stream.
pub fn ordered_after_wait_stream<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2, s3) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let mem = alloc_f32(&device, 64)?;
    long_work(&s1)?;
    let u = fill(&s1, mem.slice(), 1.0)?;
    s2.wait_stream(&s1)?;
    ensure!(device.is_ordered_before(u, &s2), "after s2.wait_stream(s1)");
    ensure!(!device.is_ordered_before(u, &s3), "s3 did not wait");
    ensure!(
        !device.is_complete(u),
        "a device-side wait is not a host observation"
    );
    Ok(())
}

/// Ordering model: a wait on an event orders the work before its record.
pub fn ordered_after_event_wait<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2, s3) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let mem = alloc_f32(&device, 64)?;
    long_work(&s1)?;
    let u = fill(&s1, mem.slice(), 1.0)?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    ev.record(&s1)?;
    ensure!(!device.is_ordered_before(u, &s2), "before the wait");
    s2.wait(&ev)?;
    ensure!(
        device.is_ordered_before(u, &s2),
        "after s2 waited on the event"
    );
    ensure!(!device.is_ordered_before(u, &s3), "s3 did not wait");
    Ok(())
}

/// Ordering model: a host synchronize of the stream, of an event after the work, or of the
/// device orders the work before every stream.
pub fn ordered_after_host_synchronize<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    for what in [
        "Stream::synchronize",
        "Event::synchronize",
        "Device::synchronize",
    ] {
        long_work(&s1)?;
        let u = fill(&s1, mem.slice(), 1.0)?;
        ensure!(!device.is_ordered_before(u, &s2), "before {what}");
        match what {
            "Stream::synchronize" => s1.synchronize()?,
            "Event::synchronize" => {
                ev.record(&s1)?;
                ev.synchronize()?;
            }
            _ => device.synchronize()?,
        }
        ensure!(
            device.is_complete(u),
            "{what} did not make the work complete for the host"
        );
        ensure!(
            device.is_ordered_before(u, &s2),
            "{what} did not order the work before s2"
        );
        ensure!(
            device.is_ordered_before(u, &device.default_stream()),
            "{what} did not order the work before the default stream"
        );
    }
    Ok(())
}

/// Ordering model: a `query()` that answers "complete" is a host observation, like a
/// synchronize. (The work is let finish by synchronizing an unrelated, longer stream, which
/// itself orders nothing.)
pub fn ordered_after_completed_query<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2, clock) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let mem = alloc_f32(&device, 64)?;
    for via_event in [true, false] {
        let u = fill(&s1, mem.slice(), 1.0)?;
        let ev = s1.record_event()?;
        let mut done = false;
        for _ in 0..1000 {
            // Let time pass without observing s1.
            long_work(&clock)?;
            clock.synchronize()?;
            ensure!(
                !device.is_ordered_before(u, &s2),
                "synchronizing an unrelated stream ordered s1's work"
            );
            done = if via_event { ev.query()? } else { s1.query()? };
            if done {
                break;
            }
        }
        let how = if via_event {
            "Event::query"
        } else {
            "Stream::query"
        };
        ensure!(done, "{how} never reported the work complete");
        ensure!(
            device.is_complete(u),
            "{how} returned true but the work is not complete for the host"
        );
        ensure!(
            device.is_ordered_before(u, &s2),
            "{how} returned true but the work is not ordered before s2"
        );
    }
    Ok(())
}

/// Ordering model: ordering is transitive through chains of waits (s1 → s2 → s3), by events
/// and by `wait_stream`.
pub fn ordering_is_transitive<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s: Vec<_> = (0..4)
        .map(|_| device.create_stream(0))
        .collect::<Result<_, _>>()?;
    let (a, b) = (alloc_f32(&device, 64)?, alloc_f32(&device, 64)?);
    long_work(&s[0])?;
    let u = fill(&s[0], a.slice(), 3.0)?;
    let e1 = s[0].record_event()?;
    s[1].wait(&e1)?;
    long_work(&s[1])?;
    let e2 = s[1].record_event()?;
    s[2].wait(&e2)?;
    ensure!(device.is_ordered_before(u, &s[2]), "s0 → s1 → s2 by events");
    ensure!(
        !device.is_ordered_before(u, &s[3]),
        "s3 is not in the chain yet"
    );
    s[3].wait_stream(&s[2])?;
    ensure!(
        device.is_ordered_before(u, &s[3]),
        "s0 → s1 → s2 → s3 with wait_stream"
    );
    s[3].launch(&Kernel::Scale {
        src: a.slice(),
        dst: b.slice(),
        factor: 2.0,
    })?;
    all_equal(
        &download(&s[3], b.slice())?,
        6.0,
        "data at the end of the chain",
    )?;
    Ok(())
}

/// Ordering model: a wait covers the work before the record, not work submitted after it.
pub fn work_after_record_is_not_ordered<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    let before = fill(&s1, mem.slice(), 1.0)?;
    let ev = s1.record_event()?;
    long_work(&s1)?;
    let after = fill(&s1, mem.slice(), 2.0)?;
    s2.wait(&ev)?;
    ensure!(
        device.is_ordered_before(before, &s2),
        "work before the record"
    );
    ensure!(
        !device.is_ordered_before(after, &s2),
        "work after the record is ordered before s2"
    );
    ensure!(
        after.seq > before.seq,
        "positions increase: {before:?} then {after:?}"
    );
    Ok(())
}

/// Ordering model, shown on data: without a wait, a side stream reading what a busy main stream
/// writes sees the stale value; with the wait it sees the new one.
pub fn race_without_wait_reads_stale_data<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (main, side) = (device.create_stream(0)?, device.create_stream(0)?);
    let n = 256;
    let (buf, out) = (alloc_f32(&device, n)?, alloc_f32(&device, n)?);
    fill(&main, buf.slice(), 1.0)?;
    main.synchronize()?;

    // Unordered: main writes 2.0 after long work, side reads at once.
    long_work(&main)?;
    let write = fill(&main, buf.slice(), 2.0)?;
    ensure!(
        !device.is_ordered_before(write, &side),
        "the model must call this read unordered"
    );
    side.launch(&Kernel::Copy {
        src: buf.slice(),
        dst: out.slice(),
    })?;
    device.synchronize()?;
    all_equal(
        &download(&side, out.slice())?,
        1.0,
        "unordered read sees the stale value",
    )?;

    // Ordered: the same, with side waiting on main.
    long_work(&main)?;
    let write = fill(&main, buf.slice(), 3.0)?;
    side.wait_stream(&main)?;
    ensure!(
        device.is_ordered_before(write, &side),
        "the model must call this read ordered"
    );
    side.launch(&Kernel::Copy {
        src: buf.slice(),
        dst: out.slice(),
    })?;
    all_equal(
        &download(&side, out.slice())?,
        3.0,
        "ordered read sees the new value",
    )?;
    Ok(())
}
