//! Sleep mode: sleepable pools whose memory is offloaded or discarded, whose pages are
//! released and whose addresses are kept, and the wake that maps them again (vLLM's sleep
//! mode, vllm-ascend's camem allocator).

use crate::common;

use braid_allocator::{
    AllocError, AllocatorConfig, CachingAllocator, DeviceBuffer, MemPool, PoolOptions, SleepMode,
};
use braid_backend_sim::{CallKind, FaultPlan, SimBackend, SimConfig, SimDevice};
use braid_stream_core::{CaptureMode, Device, Kernel, Stream, StreamError};
use common::*;

const TAG: &str = "weights";

fn sim(config: SimConfig) -> (Dev, Alloc) {
    let dev = Device::new(SimDevice::new(config.record_timeline(false))).unwrap();
    let alloc = CachingAllocator::new(dev.clone(), AllocatorConfig::new()).unwrap();
    (dev, alloc)
}

/// `n` buffers of `bytes` each in a new sleepable pool tagged `tag`, filled with 1, 2, ...
fn weights(
    alloc: &Alloc,
    s: &Stream<SimBackend>,
    tag: &str,
    n: usize,
    bytes: u64,
) -> (MemPool<SimBackend>, Vec<DeviceBuffer<SimBackend>>) {
    let pool = alloc
        .create_sleepable_pool(tag, PoolOptions::new())
        .unwrap();
    let bufs: Vec<_> = {
        let _under_tag = pool.use_on_current_thread().unwrap();
        (0..n).map(|_| alloc.alloc(bytes, s).unwrap()).collect()
    };
    for (i, b) in bufs.iter().enumerate() {
        assert_eq!(b.pool(), pool.id());
        s.launch(&Kernel::Fill {
            dst: b.slice(),
            value: (i + 1) as f32,
        })
        .unwrap();
    }
    (pool, bufs)
}

fn used(dev: &Dev) -> u64 {
    let info = dev.mem_info().unwrap();
    info.total - info.free
}

#[test]
fn offload_releases_the_pages_and_wake_restores_the_same_bytes_at_the_same_addresses() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, TAG, 3, 3 * MIB);
    let plain = alloc.alloc(MIB, &s).unwrap(); // the default pool does not sleep
    let (awake, device_awake) = (alloc.memory_reserved(), used(&dev));
    let pool_bytes = pool.reserved_bytes();
    assert!(pool_bytes >= 9 * MIB);
    let addresses: Vec<_> = bufs.iter().map(|b| b.ptr()).collect();

    let report = alloc.sleep(TAG, SleepMode::Offload).unwrap();
    assert_eq!(report.released_bytes, pool_bytes);
    assert_eq!(report.offloaded_bytes, 3 * 3 * MIB);
    assert_eq!((report.pools, report.kept_bytes), (1, 0));
    assert!(alloc.is_asleep(TAG));
    assert_eq!(alloc.memory_reserved(), awake - pool_bytes);
    assert_eq!(used(&dev), device_awake - pool_bytes);
    let stats = pool.stats();
    assert!(stats.asleep);
    assert_eq!((stats.reserved_bytes, stats.asleep_bytes), (0, pool_bytes));
    alloc.check_invariants().unwrap();

    let woken = alloc.wake(TAG).unwrap();
    assert_eq!(woken.mapped_bytes, pool_bytes);
    assert_eq!(woken.restored_bytes, 3 * 3 * MIB);
    assert!(!alloc.is_asleep(TAG));
    assert_eq!(alloc.memory_reserved(), awake);
    assert_eq!(used(&dev), device_awake);
    for (i, b) in bufs.iter().enumerate() {
        assert_eq!(b.ptr(), addresses[i]);
        let values = read(&s, b.slice());
        assert!(values.iter().all(|&v| v == (i + 1) as f32), "buffer {i}");
    }
    assert_eq!(dev.hal().sanitizer_report_count(), 0);
    drop(plain);
    alloc.check_invariants().unwrap();
}

#[test]
fn discard_copies_nothing_and_the_memory_comes_back_with_other_contents() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, "kv_cache", 2, 4 * MIB);
    let report = alloc.sleep("kv_cache", SleepMode::Discard).unwrap();
    assert_eq!(report.offloaded_bytes, 0);
    assert_eq!(report.released_bytes, pool.stats().asleep_bytes);
    let woken = alloc.wake("kv_cache").unwrap();
    assert_eq!(woken.restored_bytes, 0);
    for b in &bufs {
        assert!(read(&s, b.slice()).iter().all(|&v| v == 0.0));
    }
    // Usable as before.
    s.launch(&Kernel::Fill {
        dst: bufs[0].slice(),
        value: 5.0,
    })
    .unwrap();
    assert!(read(&s, bufs[0].slice()).iter().all(|&v| v == 5.0));
}

#[test]
fn a_sleeping_pool_refuses_allocations_and_its_buffers_are_refused_by_launches() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, TAG, 1, MIB);
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    {
        let _under_tag = pool.use_on_current_thread().unwrap();
        let err = alloc.alloc(MIB, &s).unwrap_err();
        assert_eq!(
            err,
            AllocError::PoolAsleep {
                pool: pool.id().0,
                tag: TAG.to_string()
            }
        );
        assert!(err.to_string().contains("wake(\"weights\")"), "{err}");
    }
    // The memory is not mapped: the front layer refuses work on it.
    let refused = s
        .launch(&Kernel::Fill {
            dst: bufs[0].slice(),
            value: 9.0,
        })
        .unwrap_err();
    assert!(
        matches!(refused, StreamError::RangeNotLive { .. }),
        "{refused}"
    );
    // Other pools allocate as usual.
    assert!(alloc.alloc(MIB, &s).is_ok());
    alloc.wake(TAG).unwrap();
    let _under_tag = pool.use_on_current_thread().unwrap();
    assert_eq!(alloc.alloc(MIB, &s).unwrap().pool(), pool.id());
    assert!(read(&s, bufs[0].slice()).iter().all(|&v| v == 1.0));
    alloc.check_invariants().unwrap();
}

#[test]
fn bad_sleep_and_wake_calls_are_typed_errors_that_change_nothing() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (_pool, bufs) = weights(&alloc, &s, TAG, 1, MIB);
    let reserved = alloc.memory_reserved();
    let err = alloc.wake(TAG).unwrap_err();
    assert_eq!(
        err,
        AllocError::NotAsleep {
            tag: TAG.to_string()
        }
    );
    assert!(err.to_string().contains("call sleep(\"weights\""), "{err}");
    assert_eq!(
        alloc.sleep("nope", SleepMode::Discard).unwrap_err(),
        AllocError::UnknownSleepTag {
            tag: "nope".to_string()
        }
    );
    assert_eq!(
        alloc.wake("nope").unwrap_err(),
        AllocError::UnknownSleepTag {
            tag: "nope".to_string()
        }
    );
    assert_eq!(alloc.memory_reserved(), reserved);
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    assert_eq!(
        alloc.sleep(TAG, SleepMode::Discard).unwrap_err(),
        AllocError::AlreadyAsleep {
            tag: TAG.to_string()
        }
    );
    alloc.wake(TAG).unwrap();
    assert!(read(&s, bufs[0].slice()).iter().all(|&v| v == 1.0));
    alloc.check_invariants().unwrap();
}

#[test]
fn sleep_needs_virtual_memory() {
    let (_dev, alloc) = sim(SimConfig::new().virtual_memory(false));
    let err = alloc
        .create_sleepable_pool(TAG, PoolOptions::new())
        .unwrap_err();
    assert_eq!(err, AllocError::SleepUnsupported { backend: "sim" });
    assert!(
        err.to_string().contains("SimConfig::virtual_memory"),
        "{err}"
    );
}

#[test]
fn sleep_and_wake_are_refused_during_a_capture() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (_pool, bufs) = weights(&alloc, &s, TAG, 1, MIB);
    let cap = dev.create_stream(0).unwrap();
    cap.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(
        alloc.sleep(TAG, SleepMode::Offload).unwrap_err(),
        AllocError::SleepDuringCapture { call: "sleep" }
    );
    cap.end_capture().unwrap();
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    cap.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(
        alloc.wake(TAG).unwrap_err(),
        AllocError::SleepDuringCapture { call: "wake" }
    );
    cap.end_capture().unwrap();
    alloc.wake(TAG).unwrap();
    assert!(read(&s, bufs[0].slice()).iter().all(|&v| v == 1.0));
}

#[test]
fn a_wake_without_room_leaves_the_pool_asleep_with_its_data_until_memory_is_freed() {
    let (dev, alloc) = sim(SimConfig::new().capacity(64 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, TAG, 1, 20 * MIB);
    let pool_bytes = pool.reserved_bytes();
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    // The released memory is used by someone else meanwhile.
    let hog = alloc.alloc(50 * MIB, &s).unwrap();
    let err = alloc.wake(TAG).unwrap_err();
    assert!(
        matches!(&err, AllocError::WakeOutOfMemory { tag, needed, .. } if tag == TAG && *needed == pool_bytes),
        "{err:?}"
    );
    assert!(err.to_string().contains("wake again"), "{err}");
    assert!(alloc.is_asleep(TAG));
    assert_eq!(pool.stats().asleep_bytes, pool_bytes);
    alloc.check_invariants().unwrap();
    // Once the hog is dropped, the wake releases its cached segment and fits.
    drop(hog);
    let woken = alloc.wake(TAG).unwrap();
    assert_eq!(woken.mapped_bytes, pool_bytes);
    assert!(read(&s, bufs[0].slice()).iter().all(|&v| v == 1.0));
    alloc.check_invariants().unwrap();
}

#[test]
fn a_failed_offload_leaves_the_pool_awake_and_untouched() {
    // The pinned allocator retries once after emptying its cache: fail both tries.
    let faults = FaultPlan::new()
        .fail_nth(CallKind::HostAlloc, 1)
        .fail_nth(CallKind::HostAlloc, 2);
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB).faults(faults));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, TAG, 2, MIB);
    let reserved = alloc.memory_reserved();
    let err = alloc.sleep(TAG, SleepMode::Offload).unwrap_err();
    assert!(
        matches!(
            err,
            AllocError::PinnedOutOfMemory { .. } | AllocError::Backend(_)
        ),
        "{err:?}"
    );
    assert!(!alloc.is_asleep(TAG));
    assert_eq!(alloc.memory_reserved(), reserved);
    {
        let _under_tag = pool.use_on_current_thread().unwrap();
        assert!(alloc.alloc(MIB, &s).is_ok());
    }
    for (i, b) in bufs.iter().enumerate() {
        assert!(read(&s, b.slice()).iter().all(|&v| v == (i + 1) as f32));
    }
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    alloc.wake(TAG).unwrap();
    for (i, b) in bufs.iter().enumerate() {
        assert!(read(&s, b.slice()).iter().all(|&v| v == (i + 1) as f32));
    }
    alloc.check_invariants().unwrap();
}

#[test]
fn a_failed_map_at_wake_leaves_the_pool_asleep_and_a_later_wake_restores_it() {
    // Two 3 MiB buffers share one 20 MiB segment: its first mapping is the pool's growth,
    // the second the wake's, the third the wake's retry after releasing cached segments.
    let faults = FaultPlan::new()
        .fail_nth(CallKind::Map, 2)
        .fail_nth(CallKind::Map, 3);
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB).faults(faults));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, TAG, 2, 3 * MIB);
    assert_eq!(pool.stats().segments, 1);
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    let err = alloc.wake(TAG).unwrap_err();
    assert!(
        matches!(
            err,
            AllocError::WakeOutOfMemory { .. } | AllocError::Backend(_)
        ),
        "{err:?}"
    );
    assert_eq!(dev.hal().fault_counts().injected(CallKind::Map), 2);
    assert!(alloc.is_asleep(TAG));
    assert_eq!(pool.stats().reserved_bytes, 0);
    alloc.check_invariants().unwrap();
    alloc.wake(TAG).unwrap();
    for (i, b) in bufs.iter().enumerate() {
        assert!(read(&s, b.slice()).iter().all(|&v| v == (i + 1) as f32));
    }
}

#[test]
fn buffers_freed_while_asleep_are_not_restored_and_pools_released_asleep_give_their_memory_back() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (pool, mut bufs) = weights(&alloc, &s, TAG, 2, MIB);
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    bufs.pop();
    let woken = alloc.wake(TAG).unwrap();
    assert_eq!(woken.restored_bytes, MIB);
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    drop(bufs);
    drop(pool); // the last user: its sleeping segments go back (addresses only)
    assert_eq!(
        alloc.wake(TAG).unwrap_err(),
        AllocError::UnknownSleepTag {
            tag: TAG.to_string()
        }
    );
    assert_eq!(alloc.memory_reserved(), 0);
    assert!(alloc.private_pools().is_empty());
    alloc.check_invariants().unwrap();
    drop(alloc);
    assert_eq!(used(&dev), 0);
}

#[test]
fn an_allocator_dropped_while_its_pools_sleep_leaves_nothing_behind() {
    let (dev, alloc) = sim(SimConfig::new().capacity(256 * MIB));
    let s = dev.create_stream(0).unwrap();
    let (pool, bufs) = weights(&alloc, &s, TAG, 2, 5 * MIB);
    alloc.sleep(TAG, SleepMode::Offload).unwrap();
    drop((pool, bufs, alloc));
    assert_eq!(used(&dev), 0);
}

#[test]
fn pools_sleep_and_wake_while_other_threads_allocate() {
    let (dev, alloc) = sim(SimConfig::new().capacity(1 << 30));
    let s = dev.create_stream(0).unwrap();
    let (_pool, bufs) = weights(&alloc, &s, TAG, 4, 2 * MIB);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (alloc, dev) = (&alloc, &dev);
            scope.spawn(move || {
                let own = dev.create_stream(0).unwrap();
                let pool = alloc
                    .create_sleepable_pool(&format!("t{t}"), PoolOptions::new())
                    .unwrap();
                for round in 0..10 {
                    let buf = {
                        let _under_tag = pool.use_on_current_thread().unwrap();
                        alloc.alloc((round + 1) * 256 * KIB, &own).unwrap()
                    };
                    assert_eq!(buf.pool(), pool.id());
                    let plain = alloc.alloc(64 * KIB, &own).unwrap();
                    assert_ne!(plain.pool(), pool.id());
                }
            });
        }
        for _ in 0..5 {
            alloc.sleep(TAG, SleepMode::Offload).unwrap();
            alloc.wake(TAG).unwrap();
        }
    });
    for (i, b) in bufs.iter().enumerate() {
        assert!(read(&s, b.slice()).iter().all(|&v| v == (i + 1) as f32));
    }
    alloc.check_invariants().unwrap();
}
