//! A5: reuse of a freed block inside a capture, decided by the ordering model of the
//! capture's streams (joins, transitive joins, automatic uses), with no event recorded or
//! queried during the capture.

use super::N;
use crate::support::{allocator, allocator_works, capture_id, download, fill};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, CrossStreamMode, PoolFilter, PoolOptions};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, Kernel, Stream};

/// A5 with `readers` side streams, inside a capture whose allocations go to a private pool:
/// `data1` is allocated on the origin, read on every reader (recorded there in manual mode)
/// and freed. `joins` lists (waiting stream, awaited stream) pairs by index (0 = origin, i =
/// reader i); after each join an allocation on the origin says whether it got `data1`'s
/// pointer. The replay must compute the right sums (a reuse not ordered after the reads would
/// clobber them), and no event is recorded or queried during the capture.
fn in_capture_reuse<B: Backend>(
    h: &Harness<B>,
    readers: usize,
    joins: &[(usize, usize)],
    mode: CrossStreamMode,
) -> Result<Vec<bool>, CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new().cross_stream(mode))?;
    let default = device.default_stream();
    let origin = device.create_stream(0)?;
    let sides = (0..readers)
        .map(|_| device.create_stream(0))
        .collect::<Result<Vec<_>, _>>()?;
    let all: Vec<&Stream<B>> = std::iter::once(&origin).chain(sides.iter()).collect();
    let pool = alloc.create_pool(PoolOptions::new());
    // Results live outside the pool so they can be read after the replay.
    let sums = (0..readers)
        .map(|_| alloc.alloc(4, &default))
        .collect::<Result<Vec<_>, _>>()?;
    let outs = (0..joins.len())
        .map(|_| alloc.alloc(4, &default))
        .collect::<Result<Vec<_>, _>>()?;
    origin.wait_stream(&default)?;

    origin.begin_capture(CaptureMode::Global)?;
    let diversion =
        alloc.begin_allocate_to_pool(&pool, PoolFilter::Capture(capture_id(&origin)?))?;
    let data1 = alloc.alloc(N * 4, &origin)?;
    fill(&origin, data1.slice(), 1.0)?;
    for (side, sum) in sides.iter().zip(&sums) {
        side.wait_stream(&origin)?;
        side.launch(&Kernel::Busy {
            duration_ns: 100_000,
        })?;
        side.launch(&Kernel::ReduceSum {
            src: data1.slice(),
            dst: sum.slice(),
        })?;
        if mode == CrossStreamMode::Manual {
            data1.record_stream(side)?;
        }
    }
    let data1_ptr = data1.ptr();
    drop(data1);
    let mut answers = Vec::new();
    let first = alloc.alloc(N * 4, &origin)?;
    ensure!(first.ptr() != data1_ptr, "data1 was reused before any join");
    let mut held = vec![first];
    for (&(waiter, awaited), out) in joins.iter().zip(&outs) {
        all[waiter].wait_stream(all[awaited])?;
        let buf = alloc.alloc(N * 4, &origin)?;
        answers.push(buf.ptr() == data1_ptr);
        // Overwrite the memory: a reuse not ordered after the reads would race with them.
        fill(&origin, buf.slice(), 7.0)?;
        origin.launch(&Kernel::ReduceSum {
            src: buf.slice(),
            dst: out.slice(),
        })?;
        held.push(buf);
    }
    drop(held);
    for side in &sides {
        origin.wait_stream(side)?;
    }
    let graph = origin.end_capture()?;
    drop(diversion);
    let stats = alloc.memory_stats();
    ensure_eq!(
        stats.num_event_queries,
        0,
        "event queries during the capture"
    );
    ensure_eq!(
        stats.num_events_recorded,
        0,
        "events recorded during the capture"
    );

    graph.launch(&origin)?;
    origin.synchronize()?;
    for (i, sum) in sums.iter().enumerate() {
        ensure_eq!(
            download(&origin, sum.slice())?,
            vec![N as f32],
            "reader {}'s sum of data1 after the replay",
            i + 1
        );
    }
    for (i, out) in outs.iter().enumerate() {
        ensure_eq!(
            download(&origin, out.slice())?,
            vec![7.0 * N as f32],
            "the sum after join {i}"
        );
    }
    drop(graph);
    allocator_works(&alloc)?;
    Ok(answers)
}

/// A5 (PyTorch's `graph_capture_record_stream_reuse`): inside a capture, `data1` is read on a
/// fork, `record_stream`ed and freed: an allocation before the origin waits on the fork gets
/// another pointer, one after the join gets `data1`'s; the replay is correct.
pub fn in_capture_reuse_after_a_join<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let answers = in_capture_reuse(h, 1, &[(0, 1)], CrossStreamMode::Manual)?;
    ensure_eq!(answers, vec![true], "reuse after the join");
    Ok(())
}

/// One A5 scenario: readers, joins (waiting, awaited), mode, and the expected reuse answers.
type ReuseScenario = (
    usize,
    &'static [(usize, usize)],
    CrossStreamMode,
    &'static [bool],
);

/// A5 with more streams and automatic mode: with two readers, joining either one is not
/// enough and joining both (directly, or transitively through the other reader) is; a join
/// between readers alone orders nothing before the origin; in automatic mode the uses the
/// front layer saw gate reuse the same way without `record_stream`.
pub fn in_capture_reuse_waits_for_every_reader<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    use CrossStreamMode::{Automatic, Manual};
    let table: [ReuseScenario; 6] = [
        (2, &[(0, 1), (0, 2)], Manual, &[false, true]),
        (2, &[(0, 2), (0, 1)], Manual, &[false, true]),
        (2, &[(2, 1), (0, 2)], Manual, &[false, true]),
        (2, &[(1, 2), (0, 1)], Manual, &[false, true]),
        (1, &[(0, 1)], Automatic, &[true]),
        (2, &[(0, 1), (0, 2)], Automatic, &[false, true]),
    ];
    for (readers, joins, mode, expected) in table {
        let answers = in_capture_reuse(h, readers, joins, mode)?;
        ensure_eq!(
            answers,
            expected.to_vec(),
            "{readers} readers, joins {joins:?}, {mode:?} mode"
        );
    }
    Ok(())
}
