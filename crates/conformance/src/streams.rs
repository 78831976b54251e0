//! Streams: identity, FIFO order, wait_stream DAGs, record/wait chains, concurrent submitters.

use crate::support::{all_equal, alloc_f32, download, fill, long_work, ramp, upload};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Kernel, StreamId};

/// B13: the default stream has id 0, a user stream does not, and an idle stream's `query()`
/// is true.
pub fn default_stream_is_id_zero<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let default = device.default_stream();
    ensure_eq!(default.id(), StreamId(0), "default stream id");
    ensure!(
        default.is_default(),
        "the default stream must say it is the default"
    );
    let s1 = device.create_stream(0)?;
    let s2 = device.create_stream(-1)?;
    ensure!(
        s1.id() != StreamId(0) && !s1.is_default(),
        "user stream got id {:?}",
        s1.id()
    );
    ensure!(
        s1.id() != s2.id(),
        "two user streams share id {:?}",
        s1.id()
    );
    ensure!(s1 != s2 && s1 == s1.clone(), "stream equality is identity");
    ensure_eq!(s2.priority(), -1, "priority of a stream created with -1");
    ensure_eq!(
        device.default_stream(),
        default,
        "default_stream() is always the same stream"
    );
    ensure!(s1.query()?, "a new stream is idle, query() must be true");
    ensure!(
        default.query()?,
        "an idle default stream's query() must be true"
    );
    Ok(())
}

/// B13 (FIFO): work on one stream runs in submission order without any synchronization.
pub fn same_stream_work_runs_in_order<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = alloc_f32(&device, 128)?;
    let buf = mem.slice();
    long_work(&s)?;
    fill(&s, buf, 1.0)?;
    for _ in 0..5 {
        s.launch(&Kernel::Scale {
            src: buf,
            dst: buf,
            factor: 2.0,
        })?;
    }
    fill(&s, buf.sub(0, 16).expect("in range"), 7.0)?;
    let values = download(&s, buf)?;
    all_equal(&values[..4], 7.0, "last fill of the first elements")?;
    all_equal(&values[4..], 32.0, "five doublings of 1.0")?;
    Ok(())
}

/// B16: leaf work on s0 and s1, `s1.wait_stream(s0)`, `s2.wait_stream(s1)`, consumer on s2 —
/// the consumer sees complete data (a DAG of wait_stream).
pub fn wait_stream_fan_in_dag<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s0, s1, s2) = (
        device.create_stream(0)?,
        device.create_stream(0)?,
        device.create_stream(0)?,
    );
    let n = 1024;
    let (a, b, out) = (
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
        alloc_f32(&device, n)?,
    );
    let sum = alloc_f32(&device, 1)?;
    long_work(&s0)?;
    upload(&s0, a.slice(), &ramp(n, 10, 0.0))?;
    long_work(&s1)?;
    fill(&s1, b.slice(), 100.0)?;
    s1.wait_stream(&s0)?;
    s2.wait_stream(&s1)?;
    s2.launch(&Kernel::Add {
        a: a.slice(),
        b: b.slice(),
        out: out.slice(),
    })?;
    s2.launch(&Kernel::ReduceSum {
        src: out.slice(),
        dst: sum.slice(),
    })?;
    let values = download(&s2, out.slice())?;
    let expected: Vec<f32> = ramp(n, 10, 100.0);
    crate::support::all_match(&values, &expected, "consumer output")?;
    let total = download(&s2, sum.slice())?;
    ensure_eq!(
        total,
        vec![expected.iter().sum::<f32>()],
        "reduce on the consumer"
    );
    Ok(())
}

/// B20 (second half): record/wait chains s1 → s2 give correct results, step after step.
pub fn record_wait_chain_s1_to_s2<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let n = 256;
    let (x, y) = (alloc_f32(&device, n)?, alloc_f32(&device, n)?);
    fill(&s1, x.slice(), 1.0)?;
    for step in 0..4 {
        // s1: x = x * 2 (behind long work); s2 waits, then y = x + x.
        long_work(&s1)?;
        s1.launch(&Kernel::Scale {
            src: x.slice(),
            dst: x.slice(),
            factor: 2.0,
        })?;
        let ev = s1.record_event()?;
        s2.wait(&ev)?;
        s2.launch(&Kernel::Add {
            a: x.slice(),
            b: x.slice(),
            out: y.slice(),
        })?;
        // s1 must not overwrite x before s2 has read it.
        s1.wait_stream(&s2)?;
        let expected = 2f32.powi(step + 1) * 2.0;
        all_equal(
            &download(&s2, y.slice())?,
            expected,
            &format!("y after step {step}"),
        )?;
    }
    Ok(())
}

/// B16 (edge case): `wait_stream` on the stream itself is accepted and changes nothing.
pub fn wait_stream_on_itself_is_a_no_op<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let mem = alloc_f32(&device, 64)?;
    let pos = fill(&s, mem.slice(), 3.0)?;
    s.wait_stream(&s)?;
    ensure_eq!(s.position(), pos, "position after waiting on itself");
    all_equal(&download(&s, mem.slice())?, 3.0, "data")?;
    Ok(())
}

/// Multi-thread: several threads submit work to their own streams of one device at the same
/// time; after a device synchronize every result is correct.
pub fn concurrent_threads_on_own_streams<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    const THREADS: usize = 4;
    const STEPS: usize = 20;
    let n = 512;
    let bufs = (0..THREADS)
        .map(|_| alloc_f32(&device, 2 * n))
        .collect::<Result<Vec<_>, _>>()?;
    let results: Vec<Result<(), CaseError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(t, mem)| {
                let device = device.clone();
                scope.spawn(move || -> Result<(), CaseError> {
                    let s = device.create_stream(0)?;
                    let acc = mem.range(0, n as u64 * 4)?;
                    let one = mem.range(n as u64 * 4, n as u64 * 4)?;
                    fill(&s, acc, t as f32)?;
                    fill(&s, one, 1.0)?;
                    for _ in 0..STEPS {
                        s.launch(&Kernel::Add {
                            a: acc,
                            b: one,
                            out: acc,
                        })?;
                        std::thread::yield_now();
                    }
                    let own = download(&s, acc)?;
                    all_equal(
                        &own,
                        (t + STEPS) as f32,
                        &format!("thread {t}, read on its stream"),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CaseError::new("a submitting thread panicked")))
            })
            .collect()
    });
    for r in results {
        r?;
    }
    device.synchronize()?;
    let reader = device.create_stream(0)?;
    for (t, mem) in bufs.iter().enumerate() {
        let acc = mem.range(0, n as u64 * 4)?;
        all_equal(
            &download(&reader, acc)?,
            (t + STEPS) as f32,
            &format!("thread {t} after device sync"),
        )?;
    }
    Ok(())
}

/// Streams: `Device::stream(id)` finds a live stream by id (the default stream always), and
/// forgets it once every handle is gone; `same_as` tells handles of one device apart from others.
pub fn stream_registry_finds_live_streams<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    ensure!(
        device.stream(StreamId(0)).as_ref() == Some(&device.default_stream()),
        "stream(0) is the default stream"
    );
    let s1 = device.create_stream(0)?;
    let id = s1.id();
    ensure!(
        device.stream(id).as_ref() == Some(&s1),
        "stream({id:?}) finds the live stream"
    );
    ensure!(
        device.stream(StreamId(9_999)).is_none(),
        "an id never handed out finds nothing"
    );
    drop(s1);
    ensure!(device.stream(id).is_none(), "a dropped stream is forgotten");
    ensure!(
        device.same_as(&device.clone()),
        "a clone is the same device"
    );
    let other = h.device_with_ordinal(1)?;
    ensure!(!device.same_as(&other), "another device is not the same");
    crate::check_device_works(&device).map_err(CaseError::from)?;
    Ok(())
}
