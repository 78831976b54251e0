//! The device's stream pool (`braid_stream_core::stream_pool`): leases reuse idle streams of
//! their priority, tagged streams take idle ones first, and leases from many threads never
//! share a stream while both are held.

use crate::support::{all_equal, alloc_f32, download, fill, still_works};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, StreamId};
use std::collections::BTreeSet;

/// A dropped lease's stream serves the next lease of its priority; a lease of another
/// priority, or one taken while the first is held, gets another stream; a tagged stream
/// takes an idle pooled one; a lease dropped while capturing is not reused.
pub fn leases_reuse_idle_streams<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let before = device.stream_pool_stats();
    let first = device.lease_stream(0)?;
    let first_id = first.id();
    let mem = alloc_f32(&device, 16)?;
    fill(&first, mem.slice(), 4.0)?;
    let second = device.lease_stream(0)?;
    ensure!(second.id() != first_id, "two held leases share a stream");
    let other_priority = device.lease_stream(-1)?;
    ensure!(
        other_priority.id() != first_id && other_priority.priority() == -1,
        "a lease of another priority"
    );
    drop(first);
    let again = device.lease_stream(0)?;
    ensure!(again.id() == first_id, "the idle stream is reused");
    all_equal(
        &download(&again, mem.slice())?,
        4.0,
        "work of the earlier lease",
    )?;
    drop(again);
    let tagged = device.tagged_stream("pool-case", 0)?;
    ensure!(
        tagged.id() == first_id,
        "a tagged stream takes an idle pooled stream"
    );
    let stats = device.stream_pool_stats();
    ensure!(
        stats.created - before.created == 3 && stats.reused - before.reused == 2,
        "pool counters {stats:?} (from {before:?})"
    );
    let capturing = device.lease_stream(0)?;
    let capturing_id = capturing.id();
    capturing.begin_capture(CaptureMode::Global)?;
    let handle = (*capturing).clone();
    drop(capturing);
    let next = device.lease_stream(0)?;
    ensure!(
        next.id() != capturing_id,
        "a capturing stream went back to the pool"
    );
    handle.end_capture()?;
    drop((second, other_priority, next));
    still_works(&device)
}

/// Eight threads lease, use and give back streams at once: no two concurrent leases share a
/// stream, every thread's data is right, and the pool ends with the streams it made idle.
pub fn leases_from_many_threads<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let created_before = device.stream_pool_stats().created;
    let ids = braid_stream_core::sync::GlobalMutex::new(Vec::new());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (device, ids) = (&device, &ids);
                scope.spawn(move || -> Result<(), CaseError> {
                    let mem = alloc_f32(device, 32)?;
                    for round in 0..4 {
                        let lease = device.lease_stream(0)?;
                        let value = (t * 10 + round) as f32;
                        fill(&lease, mem.slice(), value)?;
                        all_equal(&download(&lease, mem.slice())?, value, "thread's data")?;
                        ids.lock().push(lease.id());
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(CaseError::new("a thread panicked")))
        })
    })?;
    let stats = device.stream_pool_stats();
    let distinct: BTreeSet<StreamId> = ids.into_inner().into_iter().collect();
    ensure!(
        (stats.created - created_before) as usize == distinct.len() && distinct.len() <= 8,
        "at most one stream per concurrent lease: {distinct:?}, {stats:?}"
    );
    ensure!(
        stats.idle >= distinct.len(),
        "every leased stream is idle again"
    );
    still_works(&device)
}
