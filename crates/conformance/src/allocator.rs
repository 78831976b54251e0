//! The caching allocator ([`braid_allocator`]) on every backend: cross-stream lifetime (A1,
//! A3, A5, A8, A11, MindSpore's automatic mode and return flow), core accounting (C23–C27,
//! C30), private pools (E50, E54, E55, PyTorch's `use_on_oom` lending), and every typed error followed by proof that the
//! allocator and its device stay usable.
//!
//! Requests are sized from the device's `mem_info` where the scenario is about the device's
//! capacity (C25–C27), so the cases run on a device of any size; everything else stays small.

use crate::support::{
    all_equal, allocator, allocator_works, capture_id, download, fill, long_work, KIB, MIB,
};
use crate::{CaseError, Harness};
use braid_allocator::{
    format_size, AllocError, AllocatorConfig, BlockState, CachingAllocator, CrossStreamMode,
    HistoryAction, PoolFilter, PoolId, PoolOptions, SegmentType,
};
use braid_stream_core::hal::Backend;
use braid_stream_core::{CaptureMode, DevicePtr, Error, Kernel, Stream};

/// Floats in the buffers of the cross-stream cases.
const N: u64 = 1024;

// ----- A: cross-stream lifetime -----

/// A1: `record_stream` gates reuse. `tmp` is allocated on a side stream, used by the default
/// stream (which waited on the side stream) behind long work, recorded there and freed: a
/// same-size allocation on the side stream must not get its pointer; once the default stream
/// synchronized, it must.
pub fn record_stream_gates_reuse<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let s = device.create_stream(0)?;
    let tmp = alloc.alloc(50 * MIB, &s)?;
    let ptr = tmp.ptr();
    main.wait_stream(&s)?;
    tmp.record_stream(&main)?;
    long_work(&main)?;
    drop(tmp);
    ensure_eq!(
        alloc.pending_free_bytes(),
        50 * MIB,
        "the freed block waits on the default stream"
    );
    let b = alloc.alloc(50 * MIB, &s)?;
    ensure!(
        b.ptr() != ptr,
        "the block was reused while the default stream may still use it"
    );
    drop(b);
    main.synchronize()?;
    let c = alloc.alloc(50 * MIB, &s)?;
    ensure_eq!(
        c.ptr(),
        ptr,
        "the block comes back once the default stream is done"
    );
    // record_stream on the allocation stream itself is a no-op.
    c.record_stream(&s)?;
    drop(c);
    ensure_eq!(alloc.pending_free_bytes(), 0, "nothing pending at the end");
    allocator_works(&alloc)
}

/// A8: a block freed with a recorded use behind long work on another stream is not reused by
/// repeated allocations (one event recorded, queried), and is reused once that stream
/// synchronized.
pub fn pending_block_waits_for_its_stream<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let busy = device.create_stream(0)?;
    long_work(&busy)?;
    let buf = alloc.alloc(4 * MIB, &main)?;
    busy.wait_stream(&main)?;
    fill(&busy, buf.slice(), 1.0)?;
    buf.record_stream(&busy)?;
    let ptr = buf.ptr();
    drop(buf);
    ensure_eq!(alloc.pending_free_bytes(), 4 * MIB, "pending bytes");
    for round in 0..3 {
        let again = alloc.alloc(4 * MIB, &main)?;
        ensure!(
            again.ptr() != ptr,
            "round {round}: reused while the busy stream may still write it"
        );
    }
    let stats = alloc.memory_stats();
    ensure_eq!(stats.num_events_recorded, 1, "events recorded for the free");
    ensure!(
        stats.num_event_queries >= 1,
        "the pending event was never queried"
    );
    busy.synchronize()?;
    let again = alloc.alloc(4 * MIB, &main)?;
    ensure_eq!(again.ptr(), ptr, "reused once the busy stream finished");
    ensure_eq!(alloc.pending_free_bytes(), 0, "nothing pending at the end");
    drop(again);
    allocator_works(&alloc)
}

/// A3: blocks pending behind long work on a side stream are reclaimed by the out-of-memory
/// ladder (it synchronizes pending events) instead of failing: 40 × 16 MiB allocations under a
/// 64 MiB limit, each used on the side stream, never run out of memory.
pub fn pending_blocks_reclaimed_before_oom<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new().limit_bytes(64 * MIB))?;
    let main = device.default_stream();
    let side = device.create_stream(0)?;
    for _ in 0..40 {
        let buf = alloc.alloc(16 * MIB, &main)?;
        side.wait_stream(&main)?;
        long_work(&side)?;
        buf.record_stream(&side)?;
    }
    let stats = alloc.memory_stats();
    ensure_eq!(stats.num_ooms, 0, "out-of-memory errors");
    ensure!(
        stats.num_sync_all_streams > 0,
        "the ladder never synchronized pending events"
    );
    ensure!(
        stats.num_pending_frees >= 40,
        "only {} pending frees",
        stats.num_pending_frees
    );
    ensure!(
        alloc.memory_reserved() <= 64 * MIB,
        "reserved {} above the limit",
        alloc.memory_reserved()
    );
    allocator_works(&alloc)
}

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

/// A5 with more streams and automatic mode: with two readers, joining one is not enough and
/// joining both (directly, or transitively through the other reader) is; a join between
/// readers alone orders nothing before the origin; in automatic mode the uses the front layer
/// saw gate reuse the same way without `record_stream`.
pub fn in_capture_reuse_waits_for_every_reader<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    use CrossStreamMode::{Automatic, Manual};
    let table: [ReuseScenario; 5] = [
        (2, &[(0, 1), (0, 2)], Manual, &[false, true]),
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

/// A11 (TorchAir's `npu_record_tagged_stream`): A is read on the tagged stream behind long
/// work (B = A + A) while the default stream frees A and fills a new buffer C. With the
/// record, C does not take A's memory and B is computed from intact A; without it C takes A's
/// address (the hazard the compiler-inserted record prevents; the data is then racy and not
/// checked).
pub fn record_tagged_stream_protects_data<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    for record in [true, false] {
        let device = h.device()?;
        let alloc = allocator(&device, AllocatorConfig::new())?;
        let main = device.default_stream();
        let second = device.tagged_stream("second_stream", 0)?;
        let a = alloc.alloc(N * 4, &main)?;
        fill(&main, a.slice(), 1.0)?;
        second.wait_stream(&main)?;
        long_work(&second)?;
        let b = alloc.alloc(N * 4, &second)?;
        second.launch(&Kernel::Add {
            a: a.slice(),
            b: a.slice(),
            out: b.slice(),
        })?;
        if record {
            a.record_tagged_stream("second_stream")?;
        }
        let a_ptr = a.ptr();
        drop(a);
        let c = alloc.alloc(N * 4, &main)?;
        fill(&main, c.slice(), 5.0)?;
        let reused = c.ptr() == a_ptr;
        main.wait_stream(&second)?;
        let values = download(&main, b.slice())?;
        if record {
            ensure!(!reused, "C took A's memory although A was recorded");
            all_equal(&values, 2.0, "B = A + A with the record")?;
        } else {
            ensure!(
                reused,
                "without the record C should take A's address (the allocator knows no other use)"
            );
        }
        drop((b, c));
        allocator_works(&alloc)?;
    }
    Ok(())
}

/// MindSpore's return flow (automatic mode): A is read on a side stream behind long work and
/// the owner then waits on an event recorded after the read. Freeing A releases it at once,
/// with no event recorded; the next allocation reuses it and the side stream's sum is intact.
pub fn return_flow_releases_without_event<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(
        &device,
        AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
    )?;
    let main = device.default_stream();
    let side = device.create_stream(0)?;
    let a = alloc.alloc(N * 4, &main)?;
    let r = alloc.alloc(4, &side)?;
    fill(&main, a.slice(), 2.0)?;
    side.wait_stream(&main)?;
    long_work(&side)?;
    side.launch(&Kernel::ReduceSum {
        src: a.slice(),
        dst: r.slice(),
    })?;
    let done = side.record_event()?;
    main.wait(&done)?; // the owner waited on the user: return flow
    let a_ptr = a.ptr();
    drop(a);
    let stats = alloc.memory_stats();
    ensure_eq!(stats.num_events_recorded, 0, "events recorded for the free");
    ensure_eq!(
        stats.num_released_without_event,
        1,
        "frees released by the ordering model"
    );
    ensure_eq!(stats.pending_free_bytes.current, 0, "pending bytes");
    let c = alloc.alloc(N * 4, &main)?;
    ensure_eq!(c.ptr(), a_ptr, "A's memory is reused at once");
    fill(&main, c.slice(), 9.0)?;
    ensure_eq!(
        download(&side, r.slice())?,
        vec![2.0 * N as f32],
        "the side stream's sum of A"
    );
    drop((c, r));
    allocator_works(&alloc)
}

/// Automatic mode (MindSpore): a buffer used on another stream without `record_stream` stays
/// pending (one event) while that use may run; the next allocation gets other memory, the
/// use reads intact data, and once the use completed the memory comes back.
pub fn automatic_mode_defers_reuse<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(
        &device,
        AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
    )?;
    let main = device.default_stream();
    let side = device.create_stream(0)?;
    let b = alloc.alloc(N * 4, &side)?; // the side stream is known to the allocator
    let a = alloc.alloc(N * 4, &main)?;
    fill(&main, a.slice(), 3.0)?;
    side.wait_stream(&main)?;
    long_work(&side)?;
    side.launch(&Kernel::Add {
        a: a.slice(),
        b: a.slice(),
        out: b.slice(),
    })?;
    let a_ptr = a.ptr();
    drop(a); // no record_stream
    ensure_eq!(alloc.pending_free_bytes(), N * 4, "pending bytes");
    ensure_eq!(
        alloc.memory_stats().num_events_recorded,
        1,
        "events recorded for the free"
    );
    let c = alloc.alloc(N * 4, &main)?;
    ensure!(
        c.ptr() != a_ptr,
        "A was reused while the side stream may read it"
    );
    fill(&main, c.slice(), 7.0)?;
    side.synchronize()?;
    all_equal(&download(&side, b.slice())?, 6.0, "B = A + A")?;
    let d = alloc.alloc(N * 4, &main)?;
    ensure_eq!(
        d.ptr(),
        a_ptr,
        "A's memory comes back once the use completed"
    );
    ensure_eq!(alloc.pending_free_bytes(), 0, "pending bytes at the end");
    drop((b, c, d));
    allocator_works(&alloc)
}

/// Automatic mode with a stream the allocator never allocated on: the use is still seen, the
/// block stays alive (correct data, other memory for the next allocation), and it is released
/// through the ordering model once the owner waits on that stream. A use of a sub-range keeps
/// the block pending too, until the device synchronized.
pub fn automatic_mode_sees_unknown_streams<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(
        &device,
        AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
    )?;
    let main = device.default_stream();
    let side = device.create_stream(0)?;
    let a = alloc.alloc(N * 4, &main)?;
    let r = alloc.alloc(4, &main)?;
    fill(&main, a.slice(), 1.0)?;
    side.wait_stream(&main)?;
    long_work(&side)?;
    side.launch(&Kernel::ReduceSum {
        src: a.slice(),
        dst: r.slice(),
    })?;
    let a_ptr = a.ptr();
    drop(a);
    ensure_eq!(alloc.pending_free_bytes(), N * 4, "pending bytes");
    let c = alloc.alloc(N * 4, &main)?;
    ensure!(
        c.ptr() != a_ptr,
        "A was reused while the unseen stream may read it"
    );
    fill(&main, c.slice(), 5.0)?;
    main.wait_stream(&side)?; // return flow through the ordering model
    let d = alloc.alloc(N * 4, &main)?;
    ensure_eq!(d.ptr(), a_ptr, "A's memory comes back after the join");
    ensure_eq!(
        download(&main, r.slice())?,
        vec![N as f32],
        "the unseen stream's sum of A"
    );
    ensure_eq!(
        alloc.memory_stats().num_events_recorded,
        1,
        "one event covers the use"
    );
    // A sub-range use is noted too.
    let e = alloc.alloc(N * 4, &main)?;
    side.wait_stream(&main)?;
    long_work(&side)?;
    fill(&side, e.range(64, 64)?, 1.0)?;
    drop(e);
    ensure_eq!(
        alloc.pending_free_bytes(),
        N * 4,
        "pending bytes after a sub-range use"
    );
    device.synchronize()?;
    alloc.process_pending();
    ensure_eq!(alloc.pending_free_bytes(), 0, "pending bytes at the end");
    drop((c, d, r));
    allocator_works(&alloc)
}

// ----- C: allocator core -----

/// C23: allocating 1 byte raises `memory_allocated` by one 512-byte block; freeing restores it
/// exactly.
pub fn one_byte_alloc_and_free_restore_allocated<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let before = alloc.memory_allocated();
    let buf = alloc.alloc(1, &device.default_stream())?;
    ensure_eq!(buf.size(), 512, "block size of a 1-byte request");
    ensure_eq!(buf.requested_size(), 1, "requested size");
    ensure_eq!(alloc.memory_allocated(), before + 512, "allocated bytes");
    drop(buf);
    ensure_eq!(
        alloc.memory_allocated(),
        before,
        "allocated bytes after free"
    );
    allocator_works(&alloc)
}

/// C24: the statistics of one 256-float allocation (PyTorch's keys), after free and
/// `empty_cache`, and after a peak reset.
pub fn stats_of_256_floats<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    alloc.empty_cache();
    alloc.reset_peak_stats();
    alloc.reset_accumulated_stats();
    let prev_max_alloc = alloc.max_memory_allocated();
    let prev_max_reserved = alloc.max_memory_reserved();
    let prev_active = alloc.memory_stats().active_bytes.all.current;
    let tmp = alloc.alloc(256 * 4, &device.default_stream())?;
    let m = alloc.memory_stats_map();
    let expected_live: [(&str, u64); 9] = [
        ("active_bytes.all.current", prev_active + 1024),
        ("active_bytes.all.freed", 0),
        ("active_bytes.small_pool.current", 1024),
        ("active_bytes.large_pool.current", 0),
        ("requested_bytes.all.current", 1024),
        ("segment.all.current", 1),
        ("reserved_bytes.small_pool.current", 2 * MIB),
        ("inactive_split.all.current", 1),
        ("inactive_split_bytes.all.current", 2 * MIB - 1024),
    ];
    for (key, want) in expected_live {
        ensure_eq!(m.get(key).copied(), Some(want), "{key} while allocated");
    }
    drop(tmp);
    alloc.empty_cache();
    let m = alloc.memory_stats_map();
    let expected_freed: [(&str, u64); 6] = [
        ("active_bytes.all.current", prev_active),
        ("active_bytes.all.freed", 1024),
        ("reserved_bytes.all.current", 0),
        ("inactive_split.all.current", 0),
        ("num_device_alloc", 1),
        ("num_device_free", 1),
    ];
    for (key, want) in expected_freed {
        ensure_eq!(
            m.get(key).copied(),
            Some(want),
            "{key} after free and empty_cache"
        );
    }
    ensure!(
        alloc.max_memory_allocated() >= 1024,
        "peak allocated {}",
        alloc.max_memory_allocated()
    );
    alloc.reset_peak_stats();
    ensure_eq!(
        alloc.max_memory_allocated(),
        prev_max_alloc,
        "peak allocated after reset"
    );
    ensure_eq!(
        alloc.max_memory_reserved(),
        prev_max_reserved,
        "peak reserved after reset"
    );
    allocator_works(&alloc)
}

/// C25: a request larger than the device is `AllocError::OutOfMemory` whose report and
/// message state the request, the device's total and free memory, what is allocated and
/// where to look; over 1 EiB is "more than 1EB"; kernels still work afterwards.
pub fn oom_message_and_healthy_device_after<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let total = device.mem_info()?.total;
    let keep = alloc.alloc(12 * MIB, &main)?;
    let ask = total;
    let err = match alloc.alloc(ask, &main) {
        Err(err @ AllocError::OutOfMemory(_)) => err,
        other => {
            return Err(CaseError::new(format!(
                "allocating the device's total ({ask} bytes) with 12 MiB in use: expected \
                 OutOfMemory, got {other:?}"
            )))
        }
    };
    let free_now = device.mem_info()?.free;
    let AllocError::OutOfMemory(report) = &err else {
        unreachable!("matched above")
    };
    ensure_eq!(report.requested, ask, "report.requested");
    ensure!(
        report.segment_size >= ask && report.rounded >= ask,
        "report rounds {ask} down: {report:?}"
    );
    ensure_eq!(report.device_total, total, "report.device_total");
    ensure_eq!(report.device_free, free_now, "report.device_free");
    ensure_eq!(report.allocated, 12 * MIB, "report.allocated");
    ensure_eq!(report.reserved, 12 * MIB, "report.reserved");
    ensure_eq!(report.stream, main.id(), "report.stream");
    ensure_eq!(report.device, device.ordinal(), "report.device");
    let msg = err.to_string();
    for needle in [
        "out of memory".to_string(),
        format!("Tried to allocate {}", format_size(report.segment_size)),
        format!("requested {ask} bytes"),
        format!("total capacity of {}", format_size(total)),
        format!("{} is free", format_size(free_now)),
        "12.00 MiB is allocated".to_string(),
        "allocated in private pools".to_string(),
        "reserved by braid but unallocated".to_string(),
        "pending on other streams".to_string(),
        // Nothing is cached: no fragmentation, so the hint is the batch size alone.
        "fragmentation 0.0%".to_string(),
        "Hint: reduce the batch size.".to_string(),
    ] {
        ensure!(msg.contains(&needle), "the message lacks {needle:?}: {msg}");
    }
    ensure!(!msg.contains("expandable_segments"), "{msg}");
    match alloc.alloc(1 << 61, &main) {
        Err(huge @ AllocError::ExceedsMaxAllocation { .. }) => {
            ensure!(huge.to_string().contains("more than 1EB"), "{huge}");
        }
        other => {
            return Err(CaseError::new(format!(
                "allocating 2^61 bytes: expected ExceedsMaxAllocation, got {other:?}"
            )))
        }
    }
    let stats = alloc.memory_stats();
    ensure_eq!(stats.num_ooms, 1, "num_ooms");
    ensure!(
        stats.num_alloc_retries >= 1,
        "the ladder never retried: {stats:?}"
    );
    drop(keep);
    allocator_works(&alloc)
}

/// C26: two allocations of half the device: the second runs out of memory (recorded in the
/// history); once the first is freed the second succeeds, the ladder releasing the first's
/// cached segment. Sized from the device's free memory, so any capacity works.
pub fn oom_then_retry_after_free<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new().record_history(true))?;
    let main = device.default_stream();
    let info = device.mem_info()?;
    ensure!(
        info.free >= 64 * MIB,
        "the device needs at least 64 MiB free: {info:?}"
    );
    let half = info.free / 2;
    let first = alloc.alloc(half + MIB, &main)?;
    expect_err!(
        alloc.alloc(half + 3 * MIB, &main),
        AllocError::OutOfMemory(_),
        "the second half-device allocation"
    );
    ensure!(
        alloc
            .history()
            .iter()
            .any(|e| e.action == HistoryAction::Oom),
        "no oom entry in the history"
    );
    drop(first);
    let second = alloc.alloc(half + 3 * MIB, &main)?;
    ensure_eq!(second.requested_size(), half + 3 * MIB, "requested size");
    ensure_eq!(alloc.memory_stats().num_ooms, 1, "num_ooms");
    ensure_eq!(
        alloc.memory_reserved(),
        second.size(),
        "only the second segment is reserved"
    );
    drop(second);
    allocator_works(&alloc)
}

/// C27: invalid memory fractions are `AllocError::InvalidMemoryFraction` (builder, setter) or a
/// parse error; a 0.5 cap allows 0.499 × total and refuses 0.5 × total with a report naming
/// the limit; once freed, a half-device allocation fits the cap. `limit_bytes` caps too.
pub fn memory_fraction_caps_reserved<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let total = device.mem_info()?.total;
    for bad in [-0.1, 0.0, 2.0, f64::NAN] {
        expect_err!(
            CachingAllocator::new(device.clone(), AllocatorConfig::new().memory_fraction(bad))
                .map(|_| ()),
            AllocError::InvalidMemoryFraction(_),
            "memory fraction {bad}"
        );
    }
    for text in [
        "per_process_memory_fraction:1.5",
        "per_process_memory_fraction:abc",
    ] {
        ensure!(
            AllocatorConfig::parse(text).is_err(),
            "{text:?} parsed without error"
        );
    }
    let alloc = allocator(&device, AllocatorConfig::new())?;
    expect_err!(
        alloc.set_memory_fraction(2.0),
        AllocError::InvalidMemoryFraction(f) if f == 2.0,
        "set_memory_fraction(2.0)"
    );
    ensure_eq!(
        alloc.memory_limit(),
        None,
        "a refused fraction sets no limit"
    );
    alloc.set_memory_fraction(0.5)?;
    let limit = (0.5 * total as f64) as u64;
    ensure_eq!(
        alloc.memory_limit(),
        Some(limit),
        "the limit of fraction 0.5"
    );
    let main = device.default_stream();
    let ok = alloc.alloc(
        (total as f64 * 0.499) as u64 - alloc.max_memory_reserved(),
        &main,
    )?;
    let err = match alloc.alloc(total / 2, &main) {
        Err(err @ AllocError::OutOfMemory(_)) => err,
        other => {
            return Err(CaseError::new(format!(
                "half the device under a 0.5 cap with 0.499 in use: expected OutOfMemory, got \
                 {other:?}"
            )))
        }
    };
    if let AllocError::OutOfMemory(report) = &err {
        ensure_eq!(report.allowed, Some(limit), "report.allowed");
    }
    let needle = format!("limited to {}", format_size(limit));
    ensure!(
        err.to_string().contains(&needle),
        "the message lacks {needle:?}: {err}"
    );
    drop(ok);
    // Once freed, the cached segment is released and a half-device allocation fits the cap.
    // A real device's total is no round number (a 910B reports 60.97 GiB): ask for the
    // largest block whose segment, in 2 MiB granules, stays under the cap.
    let half = alloc.alloc(limit / (2 * MIB) * (2 * MIB), &main)?;
    ensure!(
        half.size() <= limit,
        "a block of {} above the limit {limit}",
        half.size()
    );
    drop(half);
    allocator_works(&alloc)?;
    drop(alloc);

    let capped = allocator(&device, AllocatorConfig::new().limit_bytes(32 * MIB))?;
    expect_err!(
        capped.alloc(40 * MIB, &main),
        AllocError::OutOfMemory(ref r) if r.allowed == Some(32 * MIB),
        "40 MiB under a 32 MiB limit"
    );
    drop(capped.alloc(30 * MIB, &main)?);
    allocator_works(&capped)
}

/// C30: size rounding. 84 MiB is allocated exactly by default, as 96 MiB with
/// `roundup_power2_divisions:4` and 88 MiB with the per-size table
/// `[64:8,128:2,256:2,512:2,1024:1,>:1]` (requested bytes stay 84 MiB); invalid settings are
/// `AllocError::InvalidConfigValue` naming the key.
pub fn size_rounding_settings<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let nbytes = 84 * MIB;
    let table =
        AllocatorConfig::parse("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]")?;
    ensure_eq!(
        table.roundup_power2_divisions[..8],
        [8, 8, 8, 8, 8, 8, 8, 2],
        "the table's first intervals"
    );
    ensure_eq!(table.roundup_power2_divisions[10], 1, "interval 10");
    ensure_eq!(table.roundup_power2_divisions[15], 1, "interval 15");
    ensure_eq!(table.round_size(200 * MIB), Some(256 * MIB), "200 MiB");
    ensure_eq!(table.round_size(2000 * MIB), Some(2000 * MIB), "2000 MiB");
    for (config, expect, what) in [
        (AllocatorConfig::new(), 84 * MIB, "default"),
        (
            AllocatorConfig::parse("roundup_power2_divisions:4")?,
            96 * MIB,
            "roundup_power2_divisions:4",
        ),
        (table, 88 * MIB, "the per-size table"),
    ] {
        let alloc = allocator(&device, config)?;
        let buf = alloc.alloc(nbytes, &device.default_stream())?;
        ensure_eq!(buf.size(), expect, "block size with {what}");
        ensure_eq!(alloc.memory_allocated(), expect, "allocated with {what}");
        ensure_eq!(
            alloc.memory_stats().requested_bytes.all.current,
            nbytes,
            "requested with {what}"
        );
        drop(buf);
        allocator_works(&alloc)?;
    }
    for bad in [
        "roundup_power2_divisions:3",
        "roundup_power2_divisions:[64:3]",
        "roundup_power2_divisions:[63:2]",
        "roundup_power2_divisions:[64:2",
        "roundup_power2_divisions:x",
    ] {
        expect_err!(
            AllocatorConfig::parse(bad),
            AllocError::InvalidConfigValue { ref key, .. } if key == "roundup_power2_divisions",
            "{bad:?}"
        );
    }
    still_works_after_config_errors(h)
}

/// Opens a device and proves an allocator with the default configuration works on it.
fn still_works_after_config_errors<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    allocator_works(&alloc)
}

/// Blocks and segments: small requests are packed into one 2 MiB segment and split, a freed
/// hole is reused by best fit, everything coalesces; 1–10 MiB requests come from 20 MiB
/// segments, larger ones get their own rounded to 2 MiB; a freed block is reused only by its
/// own stream; `empty_cache` returns every segment.
pub fn blocks_split_coalesce_and_stay_on_their_stream<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let a = alloc.alloc(1000, &main)?;
    let b = alloc.alloc(1000, &main)?;
    let c = alloc.alloc(1000, &main)?;
    ensure_eq!(b.ptr().0, a.ptr().0 + 1024, "b follows a");
    ensure_eq!(c.ptr().0, b.ptr().0 + 1024, "c follows b");
    let snap = alloc.snapshot();
    ensure_eq!(snap.segments.len(), 1, "segments");
    ensure_eq!(
        snap.segments[0].segment_type,
        SegmentType::Small,
        "segment type"
    );
    ensure_eq!(snap.segments[0].total_size, 2 * MIB, "segment size");
    ensure_eq!(snap.segments[0].blocks.len(), 4, "blocks in the segment");
    let b_ptr = b.ptr();
    drop(b);
    let stats = alloc.memory_stats();
    ensure_eq!(stats.inactive_split.all.current, 2, "inactive split blocks");
    ensure_eq!(
        stats.inactive_split_bytes.all.current,
        2 * MIB - 2048,
        "inactive split bytes"
    );
    let b2 = alloc.alloc(600, &main)?;
    ensure_eq!(b2.ptr(), b_ptr, "best fit reuses the hole");
    fill(&main, b2.slice(), 4.0)?;
    all_equal(
        &download(&main, b2.slice())?,
        4.0,
        "data in the reused hole",
    )?;
    drop((a, b2, c));
    let snap = alloc.snapshot();
    ensure_eq!(snap.segments[0].blocks.len(), 1, "blocks after coalescing");
    ensure_eq!(
        snap.segments[0].blocks[0].state,
        BlockState::Inactive,
        "the coalesced block"
    );

    let big = alloc.alloc(11 * MIB + 1, &main)?;
    let mid = alloc.alloc(5 * MIB, &main)?;
    let snap = alloc.snapshot();
    let segment_of = |p: DevicePtr| {
        snap.segments
            .iter()
            .find(|s| s.address <= p.0 && p.0 < s.address + s.total_size)
            .map(|s| (s.total_size, s.segment_type))
    };
    ensure_eq!(
        segment_of(mid.ptr()),
        Some((20 * MIB, SegmentType::Large)),
        "segment of a 5 MiB block"
    );
    ensure_eq!(
        segment_of(big.ptr()),
        Some((12 * MIB, SegmentType::Large)),
        "segment of an 11 MiB block"
    );
    let mid2 = alloc.alloc(5 * MIB, &main)?;
    ensure_eq!(
        mid2.ptr().0,
        mid.ptr().0 + 5 * MIB,
        "a second 5 MiB block is split from the same segment"
    );
    alloc.check_invariants()?;

    let side = device.create_stream(0)?;
    let p = mid2.ptr();
    drop(mid2);
    let on_side = alloc.alloc(5 * MIB, &side)?;
    ensure!(
        on_side.ptr() != p,
        "a block freed on main was given to side"
    );
    ensure_eq!(on_side.stream(), side.id(), "the buffer's stream");
    let again = alloc.alloc(5 * MIB, &main)?;
    ensure_eq!(again.ptr(), p, "main gets its freed block back");
    drop((mid, big, on_side, again));
    alloc.empty_cache();
    ensure_eq!(alloc.memory_reserved(), 0, "reserved after empty_cache");
    allocator_works(&alloc)
}

// ----- E: private pools -----

/// E50: a pool's use count is 1, 2 inside a diversion, 1 after; three 1 MiB allocations pack
/// into 2 MiB segments (1, 1, then 2 segments); allocations outside the diversion or on another
/// stream go to the default pool; a pool takes one diversion at a time
/// (`AllocError::PoolBusy`).
pub fn pool_use_counts_and_packing<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = alloc.create_pool(PoolOptions::new());
    ensure_eq!(pool.use_count(), 1, "use count of a new pool");
    let segments_of = |pool: PoolId| {
        alloc
            .snapshot()
            .segments
            .iter()
            .filter(|seg| seg.pool_id == pool)
            .count()
    };
    let (a, b, c) = {
        let _in_pool = pool.use_on(&s)?;
        ensure_eq!(pool.use_count(), 2, "use count inside the diversion");
        let a = alloc.alloc(MIB, &s)?;
        ensure_eq!(segments_of(pool.id()), 1, "pool segments after one 1 MiB");
        ensure_eq!(pool.reserved_bytes(), 2 * MIB, "pool reserved bytes");
        let b = alloc.alloc(MIB, &s)?;
        ensure_eq!(segments_of(pool.id()), 1, "pool segments after two 1 MiB");
        let c = alloc.alloc(MIB, &s)?;
        ensure_eq!(segments_of(pool.id()), 2, "pool segments after three 1 MiB");
        (a, b, c)
    };
    ensure_eq!(pool.use_count(), 1, "use count after the diversion");
    for buf in [&a, &b, &c] {
        ensure_eq!(buf.pool(), pool.id(), "pool of a diverted buffer");
    }
    let outside = alloc.alloc(MIB, &s)?;
    ensure_eq!(
        outside.pool(),
        PoolId::DEFAULT,
        "pool outside the diversion"
    );
    ensure_eq!(segments_of(PoolId::DEFAULT), 1, "default pool segments");
    let other = device.create_stream(0)?;
    let diversion = pool.use_on(&s)?;
    ensure_eq!(
        alloc.alloc(MIB, &other)?.pool(),
        PoolId::DEFAULT,
        "pool of another stream's allocation"
    );
    expect_err!(
        pool.use_on(&other),
        AllocError::PoolBusy { pool: p } if p == pool.id().0,
        "a second diversion into the pool"
    );
    drop(diversion);
    fill(&s, a.slice(), 2.0)?;
    all_equal(&download(&s, a.slice())?, 2.0, "data in a pool buffer")?;
    drop((a, b, c, outside));
    allocator_works(&alloc)
}

/// E54: under an 80 MiB limit with 60 MiB cached in the default pool, a 60 MiB allocation
/// diverted into a user pool succeeds: the out-of-memory retry releases the default pool's
/// cache during a plain diversion.
pub fn oom_retry_releases_default_cache_during_diversion<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new().limit_bytes(80 * MIB))?;
    let s = device.create_stream(0)?;
    drop(alloc.alloc(60 * MIB, &s)?);
    ensure_eq!(
        alloc.memory_reserved(),
        60 * MIB,
        "cached in the default pool"
    );
    let pool = alloc.create_pool(PoolOptions::new());
    let diversion = pool.use_on(&s)?;
    let big = alloc.alloc(60 * MIB, &s)?;
    ensure_eq!(big.pool(), pool.id(), "pool of the diverted allocation");
    ensure_eq!(alloc.memory_stats().num_alloc_retries, 1, "retries");
    ensure_eq!(
        alloc.memory_reserved(),
        60 * MIB,
        "reserved after the retry"
    );
    drop((big, diversion, pool));
    allocator_works(&alloc)
}

/// E55: a large block of a user pool survives `empty_cache` while the pool lives; dropping the
/// pool releases it (reserved drops below half) and the pool disappears. The block is 1 GiB,
/// or an eighth of a smaller device.
pub fn pool_destruction_releases_memory<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let total = device.mem_info()?.total;
    let size = (total / 8).min(1 << 30) / (2 * MIB) * (2 * MIB);
    ensure!(size >= 16 * MIB, "the device is too small: {total} bytes");
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = alloc.create_pool(PoolOptions::new());
    {
        let _diversion = pool.use_on(&s)?;
        drop(alloc.alloc(size, &s)?);
    }
    alloc.empty_cache();
    ensure_eq!(
        alloc.memory_reserved(),
        size,
        "the live pool keeps its cache"
    );
    let id = pool.id();
    drop(pool);
    ensure!(
        alloc.memory_reserved() < size / 2,
        "reserved {} after dropping the pool",
        alloc.memory_reserved()
    );
    ensure_eq!(alloc.pool_stats(id), None, "stats of the dropped pool");
    ensure!(
        alloc.private_pools().is_empty(),
        "private pools left: {:?}",
        alloc.private_pools()
    );
    allocator_works(&alloc)
}

/// PyTorch's `MemPool(use_on_oom=True)`: under a 64 MiB limit, a pool caching one free 20 MiB
/// segment and 40 MiB allocated in the default pool, an 8 MiB default-pool request that
/// cannot grow borrows the marked pool's free block (no new memory, the block counted in the
/// pool and written and read back correctly) and it returns to the pool when freed; the same
/// request against an unmarked pool is out of memory and leaves the pool's cache untouched.
pub fn pools_marked_use_on_oom_lend_at_out_of_memory<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    for lends in [true, false] {
        let alloc = allocator(&device, AllocatorConfig::new().limit_bytes(64 * MIB))?;
        let s = device.create_stream(0)?;
        let pool = alloc.create_pool(PoolOptions::new().use_on_oom(lends));
        {
            let _in_pool = pool.use_on(&s)?;
            drop(alloc.alloc(8 * MIB, &s)?);
        }
        ensure_eq!(pool.reserved_bytes(), 20 * MIB, "the pool's cached segment");
        let held = alloc.alloc(40 * MIB, &s)?;
        ensure_eq!(
            alloc.memory_reserved(),
            60 * MIB,
            "reserved before the request"
        );
        let request = alloc.alloc(8 * MIB, &s);
        if lends {
            let borrowed = request?;
            ensure_eq!(borrowed.pool(), pool.id(), "pool of the borrowed block");
            ensure_eq!(alloc.memory_stats().num_ooms, 0, "out-of-memory count");
            ensure_eq!(alloc.memory_reserved(), 60 * MIB, "reserved after lending");
            ensure_eq!(
                pool.stats().allocated_bytes,
                8 * MIB,
                "allocated in the pool"
            );
            fill(&s, borrowed.slice(), 3.0)?;
            all_equal(&download(&s, borrowed.slice())?, 3.0, "the borrowed block")?;
            drop(borrowed);
            ensure_eq!(pool.stats().allocated_bytes, 0, "allocated after the free");
            ensure_eq!(
                pool.reserved_bytes(),
                20 * MIB,
                "the block is back in the pool"
            );
        } else {
            expect_err!(
                request,
                AllocError::OutOfMemory(_),
                "an unmarked pool never lends"
            );
            ensure_eq!(pool.reserved_bytes(), 20 * MIB, "the unmarked pool's cache");
            ensure_eq!(
                pool.stats().allocated_bytes,
                0,
                "allocated in the unmarked pool"
            );
        }
        alloc.check_invariants()?;
        drop((held, pool));
        allocator_works(&alloc)?;
    }
    Ok(())
}

/// A pool nobody uses any more returns its free segments at once but lives while an output
/// block of it does: the output stays valid, and once it is freed the pool disappears.
pub fn freeable_pool_lives_while_an_output_does<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let pool = alloc.create_pool(PoolOptions::new());
    let (kept, scratch) = {
        let _diversion = pool.use_on(&s)?;
        (alloc.alloc(4 * KIB, &s)?, alloc.alloc(4 * MIB, &s)?)
    };
    drop(scratch);
    let id = pool.id();
    drop(pool);
    ensure_eq!(
        alloc.memory_reserved(),
        2 * MIB,
        "only the output's small segment is left"
    );
    ensure_eq!(
        alloc.pool_stats(id).map(|p| p.use_count),
        Some(0),
        "the pool is freeable but alive"
    );
    fill(&s, kept.slice(), 3.0)?;
    all_equal(&download(&s, kept.slice())?, 3.0, "the output")?;
    drop(kept);
    alloc.empty_cache();
    ensure_eq!(alloc.memory_reserved(), 0, "reserved after the output died");
    ensure_eq!(alloc.pool_stats(id), None, "the pool is gone");
    allocator_works(&alloc)
}

// ----- typed errors, each followed by a working allocator -----

/// Size errors: a request beyond the device is `OutOfMemory` (counted in `num_ooms`), one at
/// or above 1 EiB is `ExceedsMaxAllocation` (not counted), a private-pool allocation shows in
/// the report; a zero-byte request is an empty buffer at the null pointer holding no memory.
/// After each error the allocator and the device work.
pub fn size_errors_leave_the_allocator_usable<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let main = device.default_stream();
    let total = device.mem_info()?.total;
    expect_err!(
        alloc.alloc(total.saturating_mul(2), &main),
        AllocError::OutOfMemory(ref r) if r.device_total == total,
        "twice the device"
    );
    allocator_works(&alloc)?;
    for size in [u64::MAX, 1 << 60] {
        expect_err!(
            alloc.alloc(size, &main),
            AllocError::ExceedsMaxAllocation { requested } if requested == size,
            "{size} bytes"
        );
        allocator_works(&alloc)?;
    }
    ensure_eq!(alloc.memory_stats().num_ooms, 1, "num_ooms");

    let empty = alloc.alloc(0, &main)?;
    ensure!(
        empty.is_empty() && empty.size() == 0 && empty.slice().len == 0,
        "a zero-byte buffer: {empty:?}"
    );
    ensure_eq!(
        empty.ptr(),
        DevicePtr::NULL,
        "pointer of a zero-byte buffer"
    );
    empty.record_stream(&device.create_stream(0)?)?;
    drop(empty);

    // An out-of-memory report counts bytes allocated in private pools.
    let capped = allocator(&device, AllocatorConfig::new().limit_bytes(32 * MIB))?;
    let s = device.create_stream(0)?;
    let pool = capped.create_pool(PoolOptions::new());
    let held = {
        let _diversion = pool.use_on(&s)?;
        capped.alloc(3 * MIB, &s)?
    };
    match capped.alloc(30 * MIB, &s) {
        Err(AllocError::OutOfMemory(report)) => {
            ensure_eq!(report.private_pools, 3 * MIB, "report.private_pools");
            ensure!(
                report
                    .to_string()
                    .contains("3.00 MiB allocated in private pools"),
                "{report}"
            );
        }
        other => {
            return Err(CaseError::new(format!(
                "30 MiB under a 32 MiB limit with a 20 MiB pool segment: expected \
                 OutOfMemory, got {other:?}"
            )))
        }
    }
    drop((held, pool));
    allocator_works(&capped)?;
    allocator_works(&alloc)
}

/// Configuration errors: an unknown key is `UnknownConfigKey`, a bad value
/// `InvalidConfigValue` naming key and value (in the message too), an invalid builder value
/// is refused by `CachingAllocator::new`; an allocator with a valid configuration then works.
pub fn config_errors_are_typed<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    expect_err!(
        AllocatorConfig::parse("foo:1"),
        AllocError::UnknownConfigKey { ref key } if key == "foo",
        "an unknown key"
    );
    for (text, key, value) in [
        ("max_split_size_mb:abc", "max_split_size_mb", "abc"),
        ("max_split_size_mb:10", "max_split_size_mb", "10"),
        (
            "garbage_collection_threshold:1.5",
            "garbage_collection_threshold",
            "1.5",
        ),
        ("cross_stream:sometimes", "cross_stream", "sometimes"),
        ("expandable_segments:maybe", "expandable_segments", "maybe"),
    ] {
        match AllocatorConfig::parse(text) {
            Err(err @ AllocError::InvalidConfigValue { .. }) => {
                if let AllocError::InvalidConfigValue {
                    key: k, value: v, ..
                } = &err
                {
                    ensure_eq!((k.as_str(), v.as_str()), (key, value), "{text:?}");
                }
                let msg = err.to_string();
                ensure!(
                    msg.contains(key) && msg.contains(value),
                    "{text:?}: the message names neither key nor value: {msg}"
                );
            }
            other => {
                return Err(CaseError::new(format!(
                    "{text:?}: expected InvalidConfigValue, got {other:?}"
                )))
            }
        }
    }
    ensure!(
        AllocatorConfig::parse("novalue").is_err(),
        "a key without a value parsed"
    );
    let device = h.device()?;
    expect_err!(
        CachingAllocator::new(
            device.clone(),
            AllocatorConfig::new().garbage_collection_threshold(1.5)
        )
        .map(|_| ()),
        AllocError::InvalidConfigValue { ref key, .. } if key == "garbage_collection_threshold",
        "a builder threshold of 1.5"
    );
    let parsed = AllocatorConfig::parse(
        "max_split_size_mb:128,garbage_collection_threshold:0.8,cross_stream:automatic",
    )?;
    let alloc = allocator(&device, parsed)?;
    allocator_works(&alloc)
}

/// Invalid arguments: a stream of another device is `WrongDevice` naming both devices (for
/// `alloc`, `record_stream` and `erase_stream`); a buffer or pool of another allocator, a
/// range outside the buffer are `InvalidArgument`; a second diversion is `PoolBusy`; a tagged
/// stream with another priority is `AllocError::Stream(TagPriorityMismatch)`. After each the
/// allocator works.
pub fn invalid_arguments_refused<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;

    // A second device handle, even with the same ordinal, is another device: allocating on
    // its stream, or recording or erasing a use of a buffer there, names both devices.
    let twin = h.device()?;
    let twin_stream = twin.create_stream(0)?;
    expect_err!(
        alloc.alloc(16, &twin_stream),
        AllocError::WrongDevice { call: "alloc", .. },
        "a stream of another device"
    );
    allocator_works(&alloc)?;

    let buf = alloc.alloc(100, &s)?;
    let err = buf.record_stream(&twin_stream);
    expect_err!(
        &err,
        AllocError::WrongDevice {
            call: "record_stream",
            ..
        },
        "record_stream on a stream of another device"
    );
    let text = err.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        text.contains(&twin.id().to_string()) && text.contains(&device.id().to_string()),
        "the error names both devices: {text}"
    );
    expect_err!(
        buf.erase_stream(&twin_stream),
        AllocError::WrongDevice {
            call: "erase_stream",
            ..
        },
        "erase_stream on a stream of another device"
    );
    allocator_works(&alloc)?;
    ensure_eq!(buf.slice().len, 100, "length of a buffer's slice");
    ensure_eq!(
        buf.range(10, 20)?.ptr.0,
        buf.ptr().0 + 10,
        "address of a range"
    );
    expect_err!(
        buf.range(90, 20),
        AllocError::InvalidArgument(_),
        "a range past the end"
    );
    expect_err!(
        buf.record_stream_range(90, 20, &device.default_stream()),
        AllocError::InvalidArgument(_),
        "record_stream_range past the end"
    );
    buf.record_stream_range(0, 50, &device.default_stream())?;
    allocator_works(&alloc)?;

    let other = allocator(&device, AllocatorConfig::new())?;
    expect_err!(
        other.record_stream(&buf, &device.default_stream()),
        AllocError::InvalidArgument(_),
        "record_stream of another allocator's buffer"
    );
    let foreign = other.create_pool(PoolOptions::new());
    expect_err!(
        alloc
            .begin_allocate_to_pool(&foreign, PoolFilter::AllStreams)
            .map(|_| ()),
        AllocError::InvalidArgument(_),
        "a diversion into another allocator's pool"
    );
    drop(foreign);
    allocator_works(&alloc)?;

    let pool = alloc.create_pool(PoolOptions::new());
    let diversion = pool.use_on(&s)?;
    expect_err!(
        pool.allocate_to(PoolFilter::AllStreams).map(|_| ()),
        AllocError::PoolBusy { pool: p } if p == pool.id().0,
        "a second diversion"
    );
    drop(diversion);
    allocator_works(&alloc)?;

    device.tagged_stream("alloc_prio", -1)?;
    expect_err!(
        buf.record_tagged_stream("alloc_prio"),
        AllocError::Stream(Error::TagPriorityMismatch { ref tag, .. }) if tag == "alloc_prio",
        "record_tagged_stream on a tag of another priority"
    );
    drop((buf, pool));
    allocator_works(&other)?;
    allocator_works(&alloc)
}

/// C28/C29 groundwork: expandable segments. On a backend with virtual memory, one stream's
/// large requests share one segment that grows by 20 MiB pages (a block continues the free
/// space at the end, across mappings, with its data intact), reserved memory is what the
/// device has mapped, and `empty_cache` unmaps the free pages at the end, then a free page
/// between live blocks (a hole a later request maps again), and finally the whole segment. On a backend without it, asking for expandable segments is a typed error and the
/// allocator stays usable.
pub fn expandable_segments_grow_and_shrink<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    if braid_stream_core::hal::Device::vmm_granularity(device.hal()).is_none() {
        expect_err!(
            alloc.set_expandable_segments(true),
            AllocError::ExpandableSegmentsUnsupported { .. },
            "expandable segments without virtual memory"
        );
        return allocator_works(&alloc);
    }
    alloc.set_expandable_segments(true)?;
    let used = || -> Result<u64, CaseError> {
        let info = device.mem_info()?;
        Ok(info.total - info.free)
    };
    let before = used()?;
    let s = device.create_stream(0)?;
    let a = alloc.alloc(8 * MIB, &s)?;
    let b = alloc.alloc(30 * MIB, &s)?;
    ensure_eq!(
        b.ptr().0,
        a.ptr().0 + 8 * MIB,
        "the block continues the segment"
    );
    ensure_eq!(alloc.memory_reserved(), 40 * MIB, "two 20 MiB pages");
    ensure_eq!(
        used()? - before,
        40 * MIB,
        "the device mapped what is reserved"
    );
    let snapshot = alloc.snapshot();
    ensure_eq!(snapshot.segments.len(), 1, "one segment");
    ensure!(
        snapshot.segments[0].is_expandable,
        "the segment is expandable"
    );
    fill(&s, a.slice(), 1.5)?;
    fill(&s, b.slice(), 2.5)?;
    all_equal(
        &download(&s, b.slice())?,
        2.5,
        "a block across two mappings",
    )?;
    drop(b);
    alloc.empty_cache();
    ensure_eq!(
        alloc.memory_reserved(),
        20 * MIB,
        "the free page at the end is unmapped"
    );
    ensure_eq!(used()? - before, 20 * MIB, "and its memory freed");
    all_equal(&download(&s, a.slice())?, 1.5, "live data after the unmap")?;
    // A free block between live ones: the whole page inside it is unmapped (a hole), and a
    // request that fits the hole maps it again.
    let b = alloc.alloc(44 * MIB, &s)?;
    let c = alloc.alloc(8 * MIB, &s)?;
    ensure_eq!(c.ptr().0, a.ptr().0 + 52 * MIB, "c follows b");
    fill(&s, c.slice(), 3.5)?;
    drop(b);
    alloc.empty_cache();
    ensure_eq!(
        alloc.memory_reserved(),
        40 * MIB,
        "the page [20, 40) MiB is unmapped"
    );
    ensure_eq!(used()? - before, 40 * MIB, "and its memory freed");
    ensure_eq!(
        alloc.snapshot().segments.len(),
        2,
        "one segment per mapped range"
    );
    all_equal(&download(&s, a.slice())?, 1.5, "data before the hole")?;
    all_equal(&download(&s, c.slice())?, 3.5, "data after the hole")?;
    let d = alloc.alloc(44 * MIB, &s)?;
    ensure_eq!(d.ptr().0, a.ptr().0 + 8 * MIB, "the hole is mapped again");
    ensure_eq!(used()? - before, 60 * MIB, "the device mapped the hole");
    fill(&s, d.slice(), 4.5)?;
    all_equal(
        &download(&s, d.slice())?,
        4.5,
        "a block across the filled hole",
    )?;
    all_equal(&download(&s, c.slice())?, 3.5, "data after the filled hole")?;
    drop((c, d));
    drop(a);
    alloc.empty_cache();
    ensure_eq!(alloc.memory_reserved(), 0, "everything unmapped");
    ensure_eq!(used()?, before, "the device has its memory back");
    ensure!(alloc.snapshot().segments.is_empty(), "no segment left");
    allocator_works(&alloc)
}
