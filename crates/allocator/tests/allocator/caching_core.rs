//! Caching allocator core beyond the conformance suite (`braid_conformance::allocator`, where
//! C23–C27, C30, splitting and coalescing, size and configuration errors live): parsing
//! every configuration key, oversize rules, garbage collection, snapshot and history,
//! out-of-memory observers, accumulated totals.

use crate::common;

use braid_allocator::{AllocError, AllocatorConfig, BlockState, CachingAllocator};
use braid_stream_core::Kernel;
use common::*;

/// Every key of the configuration string, parsed. (Unknown keys and bad values are the
/// conformance case `allocator::config_errors_are_typed`.)
#[test]
fn config_parsing() {
    let c = AllocatorConfig::parse(
        " max_split_size_mb:128, garbage_collection_threshold:0.8,roundup_power2_divisions:4,cross_stream:automatic,\
         reuse_pending_with_wait:true,lazy_event_polling:True,record_history:true,history_size:5,limit_mb:100,\
         large_segment_size_mb:32,max_non_split_rounding_mb:64,expandable_segments:false,",
    )
    .unwrap();
    assert_eq!(c.max_split_size, 128 * MIB);
    assert_eq!(c.garbage_collection_threshold, 0.8);
    assert_eq!(c.roundup_power2_divisions, [4; 16]);
    assert_eq!(c.cross_stream, braid_allocator::CrossStreamMode::Automatic);
    assert!(c.reuse_pending_with_wait && c.lazy_event_polling && c.record_history);
    assert_eq!(c.history_size, 5);
    assert_eq!(c.limit_bytes, Some(100 * MIB));
    assert_eq!(c.large_segment_size, 32 * MIB);
    assert_eq!(c.max_non_split_rounding, 64 * MIB);
    assert_eq!(AllocatorConfig::parse("").unwrap(), AllocatorConfig::new());
}

#[test]
fn from_env_reads_braid_alloc_conf() {
    // The only test touching the variable.
    std::env::set_var("BRAID_ALLOC_CONF", "max_split_size_mb:64");
    let c = AllocatorConfig::from_env().unwrap();
    std::env::remove_var("BRAID_ALLOC_CONF");
    assert_eq!(c.max_split_size, 64 * MIB);
    assert_eq!(AllocatorConfig::from_env().unwrap(), AllocatorConfig::new());
    // Set to nothing: an error naming the variable, never the defaults.
    std::env::set_var("BRAID_ALLOC_CONF", "");
    let err = AllocatorConfig::from_env().unwrap_err();
    std::env::remove_var("BRAID_ALLOC_CONF");
    match &err {
        AllocError::InvalidConfigValue { key, reason, .. } => {
            assert_eq!(key, "BRAID_ALLOC_CONF");
            assert!(reason.contains("set but empty"), "{err}");
        }
        other => panic!("{other:?}"),
    }
}

/// Rounding a size near `u64::MAX` overflows to `None`, with and without power-of-two
/// divisions (the allocator then refuses the request as `ExceedsMaxAllocation`: the
/// conformance case `allocator::size_errors_leave_the_allocator_usable`).
#[test]
fn rounding_near_the_top_overflows_to_none() {
    assert_eq!(AllocatorConfig::new().round_size(u64::MAX - 3), None);
    let odd = AllocatorConfig::new().roundup_power2_divisions(4);
    assert_eq!(odd.round_size(u64::MAX - 3), None);
}

#[test]
fn max_split_size_oversize_rules() {
    let (dev, alloc) = setup(
        512 * MIB,
        AllocatorConfig::parse("max_split_size_mb:40").unwrap(),
    );
    let main = dev.default_stream();
    let big = alloc.alloc(50 * MIB, &main).unwrap();
    let p = big.ptr();
    drop(big);
    // An oversize request takes a cached oversize block smaller than request + 20 MiB, unsplit.
    let b = alloc.alloc(45 * MIB, &main).unwrap();
    assert_eq!(b.ptr(), p);
    assert_eq!(b.size(), 50 * MIB);
    drop(b);
    // Too small a request for the oversize block.
    let small = alloc.alloc(20 * MIB, &main).unwrap();
    assert_ne!(small.ptr(), p);
    // Too large a difference (>= 20 MiB more).
    drop(small);
    let b = alloc.alloc(41 * MIB, &main).unwrap();
    assert_eq!(b.ptr(), p, "50 < 41 + 20");
    drop(b);
    let stats = alloc.memory_stats();
    assert!(stats.oversize_segments.current >= 1);
    assert_eq!(stats.oversize_allocations.current, 0);
    assert_eq!(stats.max_split_size, 40 * MIB);
    alloc.check_invariants().unwrap();
}

#[test]
fn garbage_collection_frees_old_cached_segments() {
    let (dev, alloc) = setup(
        128 * MIB,
        AllocatorConfig::parse("garbage_collection_threshold:0.5,max_split_size_mb:30").unwrap(),
    );
    let main = dev.default_stream();
    drop((
        alloc.alloc(40 * MIB, &main).unwrap(),
        alloc.alloc(40 * MIB, &main).unwrap(),
    ));
    assert_eq!(alloc.memory_reserved(), 80 * MIB);
    let _small = alloc.alloc(12 * MIB, &main).unwrap();
    let stats = alloc.memory_stats();
    assert!(stats.num_device_free >= 1, "GC released a cached segment");
    assert!(alloc.memory_reserved() <= 64 * MIB);
    assert_eq!(stats.num_ooms, 0);
    alloc.check_invariants().unwrap();
}

#[test]
fn snapshot_and_history() {
    let (dev, alloc) = setup(
        64 * MIB,
        AllocatorConfig::new()
            .record_history(true)
            .history_size(100),
    );
    let main = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let a = alloc.alloc(4096, &main).unwrap();
    let b = alloc.alloc(4096, &main).unwrap();
    side.launch(&Kernel::Busy {
        duration_ns: LONG_NS,
    })
    .unwrap();
    b.record_stream(&side).unwrap();
    let b_ptr = b.ptr();
    drop(b);
    let snap = alloc.snapshot();
    let states: Vec<_> = snap.segments[0].blocks.iter().map(|b| b.state).collect();
    assert_eq!(
        states,
        [
            BlockState::ActiveAllocated,
            BlockState::ActivePendingFree,
            BlockState::Inactive
        ]
    );
    assert_eq!(snap.segments[0].blocks[0].requested_size, 4096);
    assert_eq!(snap.segments[0].stream, main.id());
    assert_eq!(snap.segments[0].pool_id, braid_allocator::PoolId(0));
    assert_eq!(snap.segments[0].allocated_size, 4096);
    assert_eq!(snap.segments[0].active_size, 8192);
    assert_eq!(
        BlockState::ActivePendingFree.as_str(),
        "active_pending_free"
    );
    drop(a);
    alloc.empty_cache();
    let actions: Vec<&str> = alloc.history().iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "segment_alloc",
            "alloc",
            "alloc",
            "free_requested",
            "free_requested",
            "free_completed",
            "free_completed",
            "segment_free"
        ]
    );
    let h = alloc.history();
    assert!(h.windows(2).all(|w| w[0].time < w[1].time));
    assert_eq!(h[2].addr, b_ptr.0);
    assert_eq!(h[2].size, 4096);
    assert!(alloc.snapshot().segments.is_empty());
    alloc.record_history(false);
    drop(alloc.alloc(1, &main).unwrap());
    assert_eq!(alloc.history().len(), h.len());
    alloc.clear_history();
    assert!(alloc.history().is_empty());
}

/// `alloc_current` allocates on the thread's current stream; the allocator and its buffers
/// cross threads. (A buffer's ranges and `record_stream` misuse are the conformance case
/// `allocator::invalid_arguments_refused`.)
#[test]
fn alloc_current_uses_the_current_stream() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let side = dev.create_stream(0).unwrap();
    let guard = dev.use_stream(&side).unwrap();
    let buf = alloc.alloc_current(100).unwrap();
    drop(guard);
    assert_eq!(buf.stream(), side.id());
    assert_eq!(buf.size(), 512);
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Alloc>();
    assert_send_sync::<braid_allocator::DeviceBuffer<braid_backend_sim::SimBackend>>();
}

// ----- C32: out-of-memory observers -----

#[test]
fn c32_oom_observer_is_called_once_with_the_report() {
    use braid_allocator::OutOfMemoryReport;
    use std::sync::{Arc, Mutex};
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let seen: Arc<Mutex<Vec<OutOfMemoryReport>>> = Arc::default();
    let sink = seen.clone();
    alloc.attach_oom_observer(move |report| sink.lock().unwrap().push(report.clone()));
    let keep = alloc.alloc(40 * MIB, &main).unwrap();
    assert!(seen.lock().unwrap().is_empty(), "no OOM, no call");
    let err = alloc.alloc(30 * MIB, &main).unwrap_err();
    let AllocError::OutOfMemory(returned) = &err else {
        panic!("expected OOM, got {err:?}")
    };
    let seen_now = seen.lock().unwrap().clone();
    assert_eq!(seen_now.len(), 1, "called once per OOM");
    let r = &seen_now[0];
    assert_eq!(r, &**returned, "the observer sees the returned report");
    assert_eq!(r.requested, 30 * MIB);
    assert_eq!(r.rounded, 30 * MIB);
    assert_eq!(r.segment_size, 30 * MIB);
    assert_eq!(r.device_total, 64 * MIB);
    assert_eq!(r.device_free, 24 * MIB);
    assert_eq!(r.allocated, 40 * MIB);
    assert_eq!(r.reserved, 40 * MIB);
    assert_eq!(r.stream, main.id());
    // Errors other than out of memory are not reported; a second OOM is.
    assert!(alloc.alloc(1 << 61, &main).is_err());
    assert!(alloc.alloc(u64::MAX - 10, &main).is_err());
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(alloc.alloc(50 * MIB, &main).is_err());
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert_eq!(seen.lock().unwrap()[1].requested, 50 * MIB);
    // Every observer is called, in the order attached.
    let order: Arc<Mutex<Vec<u32>>> = Arc::default();
    for i in 0..2 {
        let order = order.clone();
        alloc.attach_oom_observer(move |_| order.lock().unwrap().push(i));
    }
    assert!(alloc.alloc(50 * MIB, &main).is_err());
    assert_eq!(*order.lock().unwrap(), vec![0, 1]);
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(alloc.memory_stats().num_ooms, 3);
    drop(keep);
}

#[test]
fn c32_oom_observer_may_call_back_into_the_allocator() {
    use braid_allocator::DeviceBuffer;
    use braid_backend_sim::SimBackend;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    let dev = device(64 * MIB);
    let total = dev.mem_info().unwrap().free;
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    let main = dev.default_stream();
    // A buffer the application could give up under memory pressure.
    let spare: Arc<Mutex<Option<DeviceBuffer<SimBackend>>>> = Arc::default();
    *spare.lock().unwrap() = Some(alloc.alloc(40 * MIB, &main).unwrap());
    let allocated_seen = Arc::new(AtomicU64::new(0));
    let weak = alloc.downgrade();
    let (held, seen) = (spare.clone(), allocated_seen.clone());
    alloc.attach_oom_observer(move |_| {
        let Some(alloc) = weak.upgrade() else { return };
        // Statistics, freeing a buffer and emptying the cache from inside the observer.
        seen.store(
            alloc.memory_stats().allocated_bytes.all.current,
            Ordering::SeqCst,
        );
        drop(held.lock().unwrap().take());
        alloc.empty_cache();
        assert_eq!(alloc.memory_reserved(), 0);
    });
    let err = alloc.alloc(30 * MIB, &main).unwrap_err();
    assert!(matches!(err, AllocError::OutOfMemory(_)));
    assert_eq!(allocated_seen.load(Ordering::SeqCst), 40 * MIB);
    // The observer made room: the retry succeeds.
    let buf = alloc.alloc(30 * MIB, &main).unwrap();
    drop(buf);
    alloc.check_invariants().unwrap();
    // The observer's weak handle does not keep the allocator (and its cache) alive.
    drop(alloc);
    assert_eq!(dev.mem_info().unwrap().free, total);
}

#[test]
fn accumulated_totals_count_from_the_reset_with_blocks_live_across_it() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.default_stream();
    let a = alloc.alloc(1024, &s).unwrap();
    let big = alloc.alloc(2 * MIB, &s).unwrap();
    alloc.reset_accumulated_stats();
    let b = alloc.alloc(2048, &s).unwrap();
    drop(a);
    let m = alloc.memory_stats_map();
    for name in ["allocation", "active"] {
        assert_eq!(m[&format!("{name}.small_pool.current")], 1, "{name}");
        assert_eq!(m[&format!("{name}.small_pool.allocated")], 1, "{name}");
        assert_eq!(m[&format!("{name}.small_pool.freed")], 1, "{name}");
        assert_eq!(m[&format!("{name}.large_pool.allocated")], 0, "{name}");
        assert_eq!(m[&format!("{name}.large_pool.freed")], 0, "{name}");
        assert_eq!(m[&format!("{name}.all.current")], 2, "{name}");
        assert_eq!(m[&format!("{name}.all.allocated")], 1, "{name}");
        assert_eq!(m[&format!("{name}.all.freed")], 1, "{name}");
    }
    for name in ["allocated_bytes", "active_bytes", "requested_bytes"] {
        let requested = name == "requested_bytes";
        assert_eq!(m[&format!("{name}.all.allocated")], 2048, "{name}");
        assert_eq!(m[&format!("{name}.all.freed")], 1024, "{name}");
        assert_eq!(
            m[&format!("{name}.all.current")],
            2048 + 2 * MIB,
            "{name} (requested: {requested})"
        );
        assert_eq!(m[&format!("{name}.large_pool.freed")], 0, "{name}");
    }
    assert_eq!(m["segment.all.allocated"], 0);
    assert_eq!(m["segment.all.freed"], 0);
    drop((b, big));
    let m = alloc.memory_stats_map();
    assert_eq!(m["allocation.all.freed"], 3);
    assert_eq!(m["allocation.large_pool.freed"], 1);
    assert_eq!(m["allocated_bytes.all.freed"], 1024 + 2048 + 2 * MIB);
    assert_eq!(m["allocated_bytes.all.current"], 0);
}
