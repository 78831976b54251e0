//! Cross-stream lifetime (A1, A3, A8, A11, MindSpore's automatic mode and return flow): a
//! block freed while another stream may use it is handed out again only once that use is
//! ordered before the next user, whether the use was declared (`record_stream`,
//! `record_tagged_stream`) or seen by the front layer (automatic mode).

use super::N;
use crate::support::{all_equal, allocator, allocator_works, download, fill, long_work, MIB};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, CrossStreamMode, PoolOptions};
use braid_stream_core::hal::Backend;
use braid_stream_core::Kernel;

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

/// `empty_cache` after every free and a synchronize leaves nothing pending nor cached: a
/// block freed while another stream used it (recorded with `record_stream`) is processed
/// first — its events, as PyTorch's `emptyCache` synchronizes them — so its segment goes back
/// to the device at once, for the allocator's `empty_cache` and a private pool's
/// (`MemPool::empty_cache`, PyTorch's `empty_cache(mempool_id)`) alike.
pub fn empty_cache_after_frees_and_a_synchronize_releases_pending_blocks<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    for from_pool in [false, true] {
        let device = h.device()?;
        let alloc = allocator(&device, AllocatorConfig::new())?;
        let (main, side) = (device.create_stream(0)?, device.create_stream(0)?);
        let pool = alloc.create_pool(PoolOptions::new());
        let buf = {
            let _into_pool = pool.use_on_current_thread()?;
            alloc.alloc(4 * MIB, &main)?
        };
        side.wait_stream(&main)?;
        long_work(&side)?;
        fill(&side, buf.slice(), 1.0)?;
        buf.record_stream(&side)?;
        drop(buf);
        ensure_eq!(
            alloc.pending_free_bytes(),
            4 * MIB,
            "pending after the free"
        );
        device.synchronize()?;
        if from_pool {
            pool.empty_cache();
        } else {
            alloc.empty_cache(); // keeps the segments of the pool, which is in use
            pool.empty_cache();
        }
        ensure_eq!(
            alloc.pending_free_bytes(),
            0,
            "pending bytes after empty_cache (the pool's: {from_pool})"
        );
        ensure_eq!(
            pool.reserved_bytes(),
            0,
            "the pool's reserved bytes after empty_cache (the pool's: {from_pool})"
        );
        drop(pool);
        allocator_works(&alloc)?;
    }
    Ok(())
}
