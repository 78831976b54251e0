//! Caching allocator core: sizes, pools, split/coalesce, stats, OOM, configuration.

mod common;

use braid_allocator::{
    AllocError, AllocatorConfig, BlockState, CachingAllocator, HistoryAction, SegmentType,
};
use braid_stream_core::{CollectiveBuffer, DevicePtr, Kernel};
use common::*;

#[test]
fn c23_alloc_one_byte_and_free_restores_allocated() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let before = alloc.memory_allocated();
    let buf = alloc.alloc(1, &dev.default_stream()).unwrap();
    assert_eq!(buf.size(), 512);
    assert_eq!(buf.requested_size(), 1);
    // A collective uses the requested bytes, not the rounded block.
    assert_eq!(buf.device_slice(), buf.slice());
    assert_eq!(buf.device_slice().len, 1);
    assert_eq!(alloc.memory_allocated(), before + 512);
    drop(buf);
    assert_eq!(alloc.memory_allocated(), before);
    alloc.check_invariants().unwrap();
}

#[test]
fn c24_stats_of_256_floats() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    alloc.empty_cache();
    alloc.reset_peak_stats();
    alloc.reset_accumulated_stats();
    let prev_max_alloc = alloc.max_memory_allocated();
    let prev_max_reserved = alloc.max_memory_reserved();
    let prev_active = alloc.memory_stats().active_bytes.all.current;
    let tmp = alloc.alloc(256 * 4, &dev.default_stream()).unwrap();
    let m = alloc.memory_stats_map();
    assert_eq!(m["active_bytes.all.current"], prev_active + 1024);
    assert_eq!(m["active_bytes.all.freed"], 0);
    assert_eq!(m["active_bytes.small_pool.current"], 1024);
    assert_eq!(m["active_bytes.large_pool.current"], 0);
    assert_eq!(m["requested_bytes.all.current"], 1024);
    assert_eq!(m["segment.all.current"], 1);
    assert_eq!(m["reserved_bytes.small_pool.current"], 2 * MIB);
    assert_eq!(m["inactive_split.all.current"], 1);
    assert_eq!(m["inactive_split_bytes.all.current"], 2 * MIB - 1024);
    drop(tmp);
    alloc.empty_cache();
    let m = alloc.memory_stats_map();
    assert_eq!(m["active_bytes.all.current"], prev_active);
    assert_eq!(m["active_bytes.all.freed"], 1024);
    assert_eq!(m["reserved_bytes.all.current"], 0);
    assert_eq!(m["inactive_split.all.current"], 0);
    assert_eq!(m["num_device_alloc"], 1);
    assert_eq!(m["num_device_free"], 1);
    assert!(alloc.max_memory_allocated() >= 1024);
    alloc.reset_peak_stats();
    assert_eq!(alloc.max_memory_allocated(), prev_max_alloc);
    assert_eq!(alloc.max_memory_reserved(), prev_max_reserved);
}

#[test]
fn c25_oom_message_and_healthy_device_after() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let keep = alloc.alloc(12 * MIB, &main).unwrap();
    let err = alloc.alloc(1 << 30, &main).unwrap_err();
    let AllocError::OutOfMemory(report) = &err else {
        panic!("expected OOM, got {err:?}")
    };
    assert_eq!(report.requested, 1 << 30);
    assert_eq!(report.device_total, 64 * MIB);
    assert_eq!(report.allocated, 12 * MIB);
    assert_eq!(report.reserved, 12 * MIB);
    let msg = err.to_string();
    for needle in [
        "out of memory",
        "Tried to allocate 1024.00 MiB",
        "requested 1073741824 bytes",
        "total capacity of 64.00 MiB",
        "52.00 MiB is free",
        "12.00 MiB is allocated",
        "allocated in private pools",
        "reserved by braid but unallocated",
        "pending on other streams",
        "fragmentation 0.0%",
        "Hint: reduce the batch size.",
    ] {
        assert!(msg.contains(needle), "message lacks {needle:?}: {msg}");
    }
    // Nothing is cached: the hint does not suggest fighting fragmentation.
    assert!(!msg.contains("expandable_segments"), "{msg}");
    let huge = alloc.alloc(1 << 61, &main).unwrap_err();
    assert!(huge.to_string().contains("more than 1EB"), "{huge}");
    let stats = alloc.memory_stats();
    assert_eq!(stats.num_ooms, 1);
    assert!(stats.num_alloc_retries >= 1);
    // The device and allocator still work.
    let buf = alloc.alloc(4096, &main).unwrap();
    main.launch(&Kernel::Fill {
        dst: buf.slice(),
        value: 3.0,
    })
    .unwrap();
    assert!(read(&main, buf.slice()).iter().all(|&v| v == 3.0));
    drop(keep);
    alloc.check_invariants().unwrap();
}

#[test]
fn c26_oom_then_retry_after_free() {
    let cap = 64 * MIB;
    let (dev, alloc) = setup(cap, AllocatorConfig::new().record_history(true));
    let main = dev.default_stream();
    let first = alloc.alloc(cap / 2 + MIB, &main).unwrap();
    let err = alloc.alloc(cap / 2 + 3 * MIB, &main).unwrap_err();
    assert!(matches!(err, AllocError::OutOfMemory(_)));
    assert!(alloc
        .history()
        .iter()
        .any(|e| e.action == HistoryAction::Oom));
    drop(first);
    // The cached segment of `first` does not fit: the ladder releases it and retries.
    let second = alloc.alloc(cap / 2 + 3 * MIB, &main).unwrap();
    assert_eq!(second.requested_size(), cap / 2 + 3 * MIB);
    assert_eq!(alloc.memory_stats().num_ooms, 1);
    assert_eq!(alloc.memory_reserved(), second.size());
    alloc.check_invariants().unwrap();
}

#[test]
fn c27_memory_fraction_validation_and_cap() {
    let dev = device(256 * MIB);
    for bad in [-0.1, 0.0, 2.0, f64::NAN] {
        let err = CachingAllocator::new(dev.clone(), AllocatorConfig::new().memory_fraction(bad))
            .unwrap_err();
        assert!(
            matches!(err, AllocError::InvalidMemoryFraction(_)),
            "{bad}: {err:?}"
        );
    }
    assert!(AllocatorConfig::parse("per_process_memory_fraction:1.5").is_err());
    assert!(AllocatorConfig::parse("per_process_memory_fraction:abc").is_err());
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    assert!(alloc.set_memory_fraction(2.0).is_err());
    alloc.set_memory_fraction(0.5).unwrap();
    assert_eq!(alloc.memory_limit(), Some(128 * MIB));
    let main = dev.default_stream();
    let total = 256 * MIB;
    let ok = alloc
        .alloc(
            (total as f64 * 0.499) as u64 - alloc.max_memory_reserved(),
            &main,
        )
        .unwrap();
    let err = alloc.alloc(total / 2, &main).unwrap_err();
    let AllocError::OutOfMemory(report) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(report.allowed, Some(128 * MIB));
    assert!(err.to_string().contains("limited to 128.00 MiB"), "{err}");
    drop(ok);
    // Once freed, the cached segment is released and a half-device allocation fits the cap.
    let half = alloc.alloc(total / 2, &main).unwrap();
    assert_eq!(half.size(), 128 * MIB);
    // limit_bytes caps too.
    let dev2 = device(256 * MIB);
    let capped =
        CachingAllocator::new(dev2.clone(), AllocatorConfig::new().limit_bytes(32 * MIB)).unwrap();
    assert!(capped.alloc(40 * MIB, &dev2.default_stream()).is_err());
    assert!(capped.alloc(30 * MIB, &dev2.default_stream()).is_ok());
}

#[test]
fn c30_rounding_settings() {
    let nbytes = 84 * MIB;
    let check = |config: AllocatorConfig, expect: u64| {
        let (dev, alloc) = setup(256 * MIB, config);
        let buf = alloc.alloc(nbytes, &dev.default_stream()).unwrap();
        assert_eq!(alloc.memory_allocated(), expect);
        assert_eq!(buf.size(), expect);
        assert_eq!(alloc.memory_stats().requested_bytes.all.current, nbytes);
    };
    check(AllocatorConfig::new(), 84 * MIB);
    check(
        AllocatorConfig::parse("roundup_power2_divisions:4").unwrap(),
        96 * MIB,
    );
    let table =
        AllocatorConfig::parse("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]")
            .unwrap();
    assert_eq!(
        table.roundup_power2_divisions[..8],
        [8, 8, 8, 8, 8, 8, 8, 2]
    );
    assert_eq!(table.roundup_power2_divisions[10], 1);
    assert_eq!(table.roundup_power2_divisions[15], 1);
    check(table.clone(), 88 * MIB);
    assert_eq!(table.round_size(200 * MIB), Some(256 * MIB));
    assert_eq!(table.round_size(2000 * MIB), Some(2000 * MIB));
    for bad in [
        "roundup_power2_divisions:3",
        "roundup_power2_divisions:[64:3]",
        "roundup_power2_divisions:[63:2]",
        "roundup_power2_divisions:[64:2",
        "roundup_power2_divisions:x",
    ] {
        let err = AllocatorConfig::parse(bad).unwrap_err();
        assert!(
            matches!(err, AllocError::InvalidConfigValue { ref key, .. } if key == "roundup_power2_divisions"),
            "{bad}: {err}"
        );
    }
}

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

    let err = AllocatorConfig::parse("foo:1").unwrap_err();
    assert_eq!(err, AllocError::UnknownConfigKey { key: "foo".into() });
    assert!(err.to_string().contains("'foo'"));
    for (text, key, value) in [
        ("max_split_size_mb:abc", "max_split_size_mb", "abc"),
        ("max_split_size_mb:10", "max_split_size_mb", "10"),
        (
            "garbage_collection_threshold:1.5",
            "garbage_collection_threshold",
            "1.5",
        ),
        ("cross_stream:sometimes", "cross_stream", "sometimes"),
        (
            "reuse_pending_with_wait:maybe",
            "reuse_pending_with_wait",
            "maybe",
        ),
        ("expandable_segments:maybe", "expandable_segments", "maybe"),
    ] {
        let err = AllocatorConfig::parse(text).unwrap_err();
        match &err {
            AllocError::InvalidConfigValue {
                key: k, value: v, ..
            } => {
                assert_eq!((k.as_str(), v.as_str()), (key, value));
                let msg = err.to_string();
                assert!(msg.contains(key) && msg.contains(value), "{msg}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    assert!(AllocatorConfig::parse("novalue").is_err());
}

#[test]
fn from_env_reads_braid_alloc_conf() {
    // The only test touching the variable.
    std::env::set_var("BRAID_ALLOC_CONF", "max_split_size_mb:64");
    let c = AllocatorConfig::from_env().unwrap();
    std::env::remove_var("BRAID_ALLOC_CONF");
    assert_eq!(c.max_split_size, 64 * MIB);
    assert_eq!(AllocatorConfig::from_env().unwrap(), AllocatorConfig::new());
}

#[test]
fn zero_size_and_overflow() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let empty = alloc.alloc(0, &main).unwrap();
    assert_eq!(empty.ptr(), DevicePtr::NULL);
    assert_eq!(empty.size(), 0);
    assert!(empty.is_empty());
    assert_eq!(empty.slice().len, 0);
    empty.record_stream(&dev.create_stream(0).unwrap()).unwrap();
    drop(empty);
    assert_eq!(alloc.memory_reserved(), 0);
    assert!(matches!(
        alloc.alloc(u64::MAX, &main),
        Err(AllocError::ExceedsMaxAllocation { .. })
    ));
    assert_eq!(AllocatorConfig::new().round_size(u64::MAX - 3), None);
    let odd = AllocatorConfig::new().roundup_power2_divisions(4);
    assert_eq!(odd.round_size(u64::MAX - 3), None);
    assert_eq!(alloc.memory_stats().num_ooms, 0);
}

#[test]
fn pools_segments_split_and_coalesce() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let a = alloc.alloc(1000, &main).unwrap();
    let b = alloc.alloc(1000, &main).unwrap();
    let c = alloc.alloc(1000, &main).unwrap();
    assert_eq!(b.ptr().0, a.ptr().0 + 1024);
    assert_eq!(c.ptr().0, b.ptr().0 + 1024);
    let snap = alloc.snapshot();
    assert_eq!(snap.segments.len(), 1);
    assert_eq!(snap.segments[0].segment_type, SegmentType::Small);
    assert_eq!(snap.segments[0].total_size, 2 * MIB);
    assert_eq!(snap.segments[0].blocks.len(), 4);
    let b_ptr = b.ptr();
    drop(b);
    let stats = alloc.memory_stats();
    assert_eq!(stats.inactive_split.all.current, 2);
    assert_eq!(stats.inactive_split_bytes.all.current, 2 * MIB - 2048);
    // Best fit reuses the hole.
    let b2 = alloc.alloc(600, &main).unwrap();
    assert_eq!(b2.ptr(), b_ptr);
    drop((a, b2, c));
    let snap = alloc.snapshot();
    assert_eq!(snap.segments[0].blocks.len(), 1, "everything coalesced");
    assert_eq!(snap.segments[0].blocks[0].state, BlockState::Inactive);
    assert_eq!(alloc.memory_stats().inactive_split.all.current, 0);

    // 1–10 MiB requests come from 20 MiB segments; ≥ 10 MiB get their own, rounded to 2 MiB.
    let big = alloc.alloc(11 * MIB + 1, &main).unwrap();
    let mid = alloc.alloc(5 * MIB, &main).unwrap();
    let snap = alloc.snapshot();
    let seg_of = |p: DevicePtr| {
        snap.segments
            .iter()
            .find(|s| s.address <= p.0 && p.0 < s.address + s.total_size)
            .unwrap()
    };
    assert_eq!(seg_of(mid.ptr()).total_size, 20 * MIB);
    assert_eq!(seg_of(mid.ptr()).segment_type, SegmentType::Large);
    assert_eq!(seg_of(big.ptr()).total_size, 12 * MIB);
    // A second 5 MiB block is split from the same 20 MiB segment (remainder 15 MiB > 1 MiB).
    let mid2 = alloc.alloc(5 * MIB, &main).unwrap();
    assert_eq!(mid2.ptr().0, mid.ptr().0 + 5 * MIB);
    alloc.check_invariants().unwrap();

    // Blocks belong to their stream.
    let side = dev.create_stream(0).unwrap();
    let p = mid2.ptr();
    drop(mid2);
    let on_side = alloc.alloc(5 * MIB, &side).unwrap();
    assert_ne!(on_side.ptr(), p);
    assert_eq!(on_side.stream(), side.id());
    let again = alloc.alloc(5 * MIB, &main).unwrap();
    assert_eq!(again.ptr(), p);
    drop((mid, big, on_side, again));
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    alloc.check_invariants().unwrap();
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

#[test]
fn buffer_api() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let side = dev.create_stream(0).unwrap();
    let guard = dev.use_stream(&side).unwrap();
    let buf = alloc.alloc_current(100).unwrap();
    drop(guard);
    assert_eq!(buf.stream(), side.id());
    assert_eq!(buf.slice().len, 100);
    assert_eq!(buf.range(10, 20).unwrap().ptr.0, buf.ptr().0 + 10);
    assert!(buf.range(90, 20).is_err());
    assert!(buf
        .record_stream_range(90, 20, &dev.default_stream())
        .is_err());
    buf.record_stream_range(0, 50, &dev.default_stream())
        .unwrap();
    let other = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    assert!(other.record_stream(&buf, &dev.default_stream()).is_err());
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
