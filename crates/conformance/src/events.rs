//! Events: query, synchronize, timing, waits from other streams, async waiting.

use crate::support::{
    all_equal, all_match, alloc_f32, download, fill, host_matmul, long_work, ramp, still_works,
    upload,
};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, EventFlags, Kernel, StreamError};

/// B14: an event's `query()` is true before any record, false when recorded behind pending
/// work and true after `synchronize()`; an unrecorded event has no `recorded_at()`.
pub fn event_query_lifecycle<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    ensure!(
        ev.recorded_at().is_none(),
        "an unrecorded event has a position: {:?}",
        ev.recorded_at()
    );
    ensure!(ev.query()?, "query() before record must be true");
    ev.synchronize()?;
    let pos = long_work(&s)?;
    ev.record(&s)?;
    let at = ev
        .recorded_at()
        .ok_or_else(|| CaseError::new("recorded event has no position"))?;
    ensure_eq!(at, pos, "recorded_at is the stream position of the record");
    ensure!(!ev.query()?, "query() behind pending work must be false");
    ev.synchronize()?;
    ensure!(ev.query()?, "query() after synchronize must be true");
    ensure!(
        device.is_complete(pos),
        "event synchronize is a host observation of its work"
    );
    Ok(())
}

/// B14: `elapsed_ms` between timing events around work is positive.
pub fn elapsed_time_is_positive<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let start = device.create_event(EventFlags::TIMING)?;
    let end = device.create_event(EventFlags::TIMING)?;
    ensure!(start.flags().timing, "flags() reports timing");
    start.record(&s)?;
    long_work(&s)?;
    end.record(&s)?;
    end.synchronize()?;
    let ms = start.elapsed_ms(&end)?;
    ensure!(
        ms > 0.0,
        "elapsed_ms over {} ns of work is {ms}",
        crate::LONG_WORK_NS
    );
    Ok(())
}

/// B15: `elapsed_ms` on events created without timing is `StreamError::EventWithoutTiming`.
pub fn elapsed_requires_timing<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let plain_a = device.create_event(EventFlags::ORDERING)?;
    let plain_b = device.create_event(EventFlags::ORDERING)?;
    let timed = device.create_event(EventFlags::TIMING)?;
    plain_a.record(&s)?;
    long_work(&s)?;
    plain_b.record(&s)?;
    timed.record(&s)?;
    s.synchronize()?;
    expect_err!(
        plain_a.elapsed_ms(&plain_b),
        StreamError::EventWithoutTiming,
        "two events without timing"
    );
    expect_err!(
        plain_a.elapsed_ms(&timed),
        StreamError::EventWithoutTiming,
        "start without timing"
    );
    expect_err!(
        timed.elapsed_ms(&plain_b),
        StreamError::EventWithoutTiming,
        "end without timing"
    );
    still_works(&device)
}

/// B15: `elapsed_ms` with an event never recorded is `StreamError::EventNotRecorded`.
pub fn elapsed_requires_record<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let a = device.create_event(EventFlags::TIMING)?;
    let b = device.create_event(EventFlags::TIMING)?;
    expect_err!(
        a.elapsed_ms(&b),
        StreamError::EventNotRecorded,
        "neither event recorded"
    );
    a.record(&s)?;
    s.synchronize()?;
    expect_err!(
        a.elapsed_ms(&b),
        StreamError::EventNotRecorded,
        "end never recorded"
    );
    expect_err!(
        b.elapsed_ms(&a),
        StreamError::EventNotRecorded,
        "start never recorded"
    );
    // Events recorded only inside a capture have no eager record to time.
    let (c_start, c_end) = (
        device.create_event(EventFlags::TIMING)?,
        device.create_event(EventFlags::TIMING)?,
    );
    s.begin_capture(CaptureMode::Global)?;
    c_start.record(&s)?;
    s.launch(&Kernel::Busy { duration_ns: 1_000 })?;
    c_end.record(&s)?;
    expect_err!(
        c_start.elapsed_ms(&c_end),
        StreamError::EventNotRecorded,
        "events recorded in a capture, during it"
    );
    let graph = s.end_capture()?;
    graph.launch(&s)?;
    s.synchronize()?;
    expect_err!(
        c_start.elapsed_ms(&c_end),
        StreamError::EventNotRecorded,
        "events recorded in a capture, after it"
    );
    still_works(&device)
}

/// B17: matmul on s1, an event recorded after it is not complete while the work is pending;
/// s2 waits on the event and runs a matmul on the result; correct after a device synchronize.
pub fn wait_event_matmul_chain<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let (m, k, n, p) = (8usize, 16usize, 12usize, 4usize);
    let a_host = ramp(m * k, 5, -2.0);
    let b_host = ramp(k * n, 3, 0.0);
    let d_host = ramp(n * p, 4, 1.0);
    let a = alloc_f32(&device, m * k)?;
    let b = alloc_f32(&device, k * n)?;
    let c = alloc_f32(&device, m * n)?;
    let d = alloc_f32(&device, n * p)?;
    let e = alloc_f32(&device, m * p)?;
    upload(&s1, a.slice(), &a_host)?;
    upload(&s1, b.slice(), &b_host)?;
    upload(&s2, d.slice(), &d_host)?;
    long_work(&s1)?;
    let (mu, ku, nu, pu) = (m as u32, k as u32, n as u32, p as u32);
    s1.launch(&Kernel::Matmul {
        a: a.slice(),
        b: b.slice(),
        c: c.slice(),
        m: mu,
        k: ku,
        n: nu,
    })?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    ev.record(&s1)?;
    ensure!(
        !ev.query()?,
        "event after a pending matmul: query() must be false"
    );
    s2.wait(&ev)?;
    s2.launch(&Kernel::Matmul {
        a: c.slice(),
        b: d.slice(),
        c: e.slice(),
        m: mu,
        k: nu,
        n: pu,
    })?;
    device.synchronize()?;
    let c_host = host_matmul(&a_host, &b_host, m, k, n);
    let e_host = host_matmul(&c_host, &d_host, m, n, p);
    all_match(&download(&s2, c.slice())?, &c_host, "first matmul")?;
    all_match(&download(&s2, e.slice())?, &e_host, "second matmul, on s2")?;
    ensure!(
        ev.query()?,
        "after device synchronize the event is complete"
    );
    Ok(())
}

/// B18: ev1 recorded on s1 and waited on s2, ev2 recorded on s2 and waited on the current
/// stream; after synchronize both events query true and the data flowed through.
pub fn event_waited_from_another_stream<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let n = 256;
    let (x, y, z) = (
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
    );
    let ev1 = device.create_event(EventFlags::ORDERING)?;
    let ev2 = device.create_event(EventFlags::ORDERING)?;
    long_work(&s1)?;
    fill(&s1, x.slice(), 2.0)?;
    ev1.record(&s1)?;
    s2.wait(&ev1)?;
    long_work(&s2)?;
    s2.launch(&Kernel::Scale {
        src: x.slice(),
        dst: y.slice(),
        factor: 3.0,
    })?;
    ev2.record(&s2)?;
    ev2.wait_on_current_stream()?;
    let current = device.current_stream();
    current.launch(&Kernel::Add {
        a: x.slice(),
        b: y.slice(),
        out: z.slice(),
    })?;
    ensure!(!ev2.query()?, "ev2 sits behind pending work");
    device.synchronize()?;
    ensure!(ev1.query()?, "ev1 after synchronize");
    ensure!(ev2.query()?, "ev2 after synchronize");
    all_equal(
        &download(&current, z.slice())?,
        8.0,
        "z = x + 3x on the current stream",
    )?;
    Ok(())
}

/// B19: an event recorded after long work: `event.query()` and `stream.query()` are false;
/// after `synchronize` both are true and the elapsed time is positive.
pub fn event_sync_and_stream_query<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let (m, k, n) = (64usize, 64usize, 64usize);
    let a = alloc_f32(&device, m * k)?;
    let c = alloc_f32(&device, m * n)?;
    fill(&s, a.slice(), 1.0)?;
    let start = device.create_event(EventFlags::TIMING)?;
    let end = device.create_event(EventFlags::TIMING)?;
    start.record(&s)?;
    long_work(&s)?;
    let (mu, ku, nu) = (m as u32, k as u32, n as u32);
    s.launch(&Kernel::Matmul {
        a: a.slice(),
        b: a.slice(),
        c: c.slice(),
        m: mu,
        k: ku,
        n: nu,
    })?;
    end.record(&s)?;
    ensure!(
        !end.query()?,
        "event after long work: query() must be false"
    );
    ensure!(!s.query()?, "stream with long work: query() must be false");
    end.synchronize()?;
    ensure!(end.query()?, "event query after its synchronize");
    ensure!(
        s.query()?,
        "stream query after the event that ends its work completed"
    );
    let ms = start.elapsed_ms(&end)?;
    ensure!(ms > 0.0, "elapsed over long work and a matmul is {ms}");
    all_equal(&download(&s, c.slice())?, k as f32, "matmul of ones")?;
    Ok(())
}

/// B22: one event recorded once and waited by three streams: all three see the data, and the
/// ordering model orders the recorded work before each of them.
pub fn one_event_waited_by_three_streams<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let producer = device.create_stream(0)?;
    let n = 128;
    let src = alloc_f32(&device, n)?;
    long_work(&producer)?;
    let write = fill(&producer, src.slice(), 5.0)?;
    let ev = producer.record_event()?;
    let mut outs = Vec::new();
    for i in 0..3 {
        let s = device.create_stream(0)?;
        ensure!(
            !device.is_ordered_before(write, &s),
            "stream {i} is ordered before waiting"
        );
        s.wait(&ev)?;
        ensure!(
            device.is_ordered_before(write, &s),
            "stream {i} not ordered after the wait"
        );
        let out = alloc_f32(&device, n)?;
        s.launch(&Kernel::Scale {
            src: src.slice(),
            dst: out.slice(),
            factor: (i + 1) as f32,
        })?;
        outs.push((s, out));
    }
    for (i, (s, out)) in outs.iter().enumerate() {
        all_equal(
            &download(s, out.slice())?,
            5.0 * (i + 1) as f32,
            &format!("stream {i}"),
        )?;
    }
    Ok(())
}

/// B22 (`test_eventwait_before_eventrecord`): waiting on an event before it is recorded is a
/// no-op: the waiting stream is not ordered after work recorded later, and does not wait for it.
pub fn wait_before_record_is_a_no_op<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let n = 64;
    let (buf, out) = (alloc_f32(&device, n)?, alloc_f32(&device, n)?);
    fill(&s1, buf.slice(), 1.0)?;
    s1.synchronize()?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    let before = s2.position();
    s2.wait(&ev)?;
    ensure_eq!(
        s2.position(),
        before,
        "a wait on an unrecorded event submits nothing"
    );
    long_work(&s1)?;
    let write = fill(&s1, buf.slice(), 2.0)?;
    ev.record(&s1)?;
    ensure!(
        !device.is_ordered_before(write, &s2),
        "s2 is ordered after work recorded after its wait"
    );
    s2.launch(&Kernel::Copy {
        src: buf.slice(),
        dst: out.slice(),
    })?;
    all_equal(
        &download(&s2, out.slice())?,
        1.0,
        "s2 did not wait: it read the old data",
    )?;
    ensure!(
        !ev.query()?,
        "the later record still sits behind s1's long work"
    );
    s2.wait(&ev)?;
    s2.launch(&Kernel::Copy {
        src: buf.slice(),
        dst: out.slice(),
    })?;
    all_equal(
        &download(&s2, out.slice())?,
        2.0,
        "a wait after the record orders",
    )?;
    Ok(())
}

/// B14 (re-record): recording an event again moves it; waiters order after the latest record.
pub fn rerecord_moves_the_event<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let mem = alloc_f32(&device, 64)?;
    let ev = device.create_event(EventFlags::ORDERING)?;
    let first = fill(&s1, mem.slice(), 1.0)?;
    ev.record(&s1)?;
    ensure_eq!(ev.recorded_at(), Some(first), "first record");
    long_work(&s1)?;
    let second = fill(&s1, mem.slice(), 2.0)?;
    ev.record(&s1)?;
    ensure_eq!(ev.recorded_at(), Some(second), "second record");
    s2.wait(&ev)?;
    ensure!(
        device.is_ordered_before(second, &s2),
        "waiter is ordered after the latest record"
    );
    all_equal(
        &download(&s2, mem.slice())?,
        2.0,
        "data after the latest record",
    )?;
    Ok(())
}

/// Async: `event.wait_async()` resolves once the work before the record is done (and at once
/// for an event never recorded).
pub fn wait_async_resolves<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = alloc_f32(&device, 64)?;
    let unrecorded = device.create_event(EventFlags::ORDERING)?;
    futures::executor::block_on(unrecorded.wait_async())?;
    long_work(&s)?;
    let pos = fill(&s, mem.slice(), 4.0)?;
    let ev = s.record_event()?;
    ensure!(!ev.query()?, "the event is pending before the async wait");
    futures::executor::block_on(ev.wait_async())?;
    ensure!(ev.query()?, "query after wait_async resolved");
    ensure!(device.is_complete(pos), "wait_async is a host observation");
    all_equal(&download(&s, mem.slice())?, 4.0, "data after wait_async")?;
    Ok(())
}
