//! Cross-stream lifetime beyond the conformance suite's cases (`braid_conformance::allocator`:
//! A1, A3, A8, A11, automatic mode and return flow): event polling (A10), manual mode
//! ignoring unrecorded uses, reuse with a stream wait, `erase_stream` (A7), active statistics
//! of pending blocks, and foreign work.

use crate::common;

use braid_allocator::{AllocatorConfig, CrossStreamMode};
use braid_stream_core::Kernel;
use common::*;

const N: u64 = 1024; // floats

/// Three streams each hold a pending 16 MiB block behind long work; then ten 4 MiB
/// allocate/free cycles on main. Event queries stay bounded, and lazy polling queries less.
fn a10_queries(lazy: bool) -> u64 {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new().lazy_event_polling(lazy));
    let main = dev.default_stream();
    let streams: Vec<_> = (0..3).map(|_| dev.create_stream(0).unwrap()).collect();
    for s in &streams {
        let buf = alloc.alloc(16 * MIB, &main).unwrap();
        s.wait_stream(&main).unwrap();
        for _ in 0..50 {
            s.launch(&Kernel::Busy {
                duration_ns: 100_000,
            })
            .unwrap();
        }
        buf.record_stream(s).unwrap();
    }
    alloc.reset_accumulated_stats();
    for _ in 0..10 {
        drop(alloc.alloc(4 * MIB, &main).unwrap());
    }
    let queries = alloc.memory_stats().num_event_queries;
    assert!(
        queries <= 10 * 3,
        "at most one query per stream per allocation: {queries}"
    );
    dev.synchronize().unwrap();
    drop(alloc.alloc(16 * MIB, &main).unwrap());
    drop(alloc.alloc(16 * MIB, &main).unwrap());
    assert_eq!(alloc.pending_free_bytes(), 0);
    queries
}

#[test]
fn a10_event_polling_is_bounded_and_lazy_polls_less() {
    let eager = a10_queries(false);
    let lazy = a10_queries(true);
    assert!(lazy < eager, "lazy {lazy} vs eager {eager}");
    assert!(
        lazy <= 3,
        "lazy polling queried only on the first miss: {lazy}"
    );
}

#[test]
fn manual_mode_ignores_unrecorded_uses() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let a = alloc.alloc(N * 4, &main).unwrap();
    side.launch(&Kernel::Busy {
        duration_ns: LONG_NS,
    })
    .unwrap();
    side.launch(&Kernel::Fill {
        dst: a.slice(),
        value: 1.0,
    })
    .unwrap();
    let p = a.ptr();
    drop(a);
    assert_eq!(alloc.alloc(N * 4, &main).unwrap().ptr(), p);
}

#[test]
fn reuse_pending_with_wait_instead_of_growing() {
    let run = |wait: bool| {
        let config = AllocatorConfig::new()
            .limit_bytes(4 * MIB)
            .reuse_pending_with_wait(wait);
        let (dev, alloc) = setup(64 * MIB, config);
        let main = dev.default_stream();
        let side = dev.create_stream(0).unwrap();
        let r = alloc.alloc(4, &side).unwrap();
        let a1 = alloc.alloc(MIB, &main).unwrap();
        let a2 = alloc.alloc(MIB, &main).unwrap();
        main.launch(&Kernel::Fill {
            dst: a1.slice(),
            value: 1.0,
        })
        .unwrap();
        main.launch(&Kernel::Fill {
            dst: a2.slice(),
            value: 1.0,
        })
        .unwrap();
        side.wait_stream(&main).unwrap();
        side.launch(&Kernel::Busy {
            duration_ns: LONG_NS,
        })
        .unwrap();
        side.launch(&Kernel::ReduceSum {
            src: a1.slice(),
            dst: r.slice(),
        })
        .unwrap();
        a1.record_stream(&side).unwrap();
        a2.record_stream(&side).unwrap();
        let ptrs = [a1.ptr(), a2.ptr()];
        drop((a1, a2));
        let c = alloc.alloc(MIB, &main).unwrap();
        assert!(ptrs.contains(&c.ptr()));
        main.launch(&Kernel::Fill {
            dst: c.slice(),
            value: 9.0,
        })
        .unwrap();
        assert_eq!(read(&side, r.slice()), vec![(MIB / 4) as f32]);
        let stats = alloc.memory_stats();
        assert_eq!(stats.num_ooms, 0);
        alloc.check_invariants().unwrap();
        stats
    };
    let with_wait = run(true);
    assert_eq!(with_wait.num_reuse_with_wait, 1);
    assert_eq!(with_wait.num_sync_all_streams, 0, "no host synchronization");
    let without = run(false);
    assert_eq!(without.num_reuse_with_wait, 0);
    assert!(
        without.num_sync_all_streams >= 1,
        "the ladder synchronized instead"
    );
}

// ----- A7: erase_stream -----

/// Uses `buf` on `user` (after `owner`'s work) and keeps `user` busy for a long time.
fn use_on_busy_stream(
    buf: &braid_allocator::DeviceBuffer<braid_backend_sim::SimBackend>,
    owner: &braid_stream_core::Stream<braid_backend_sim::SimBackend>,
    user: &braid_stream_core::Stream<braid_backend_sim::SimBackend>,
) {
    user.wait_stream(owner).unwrap();
    user.launch(&Kernel::Fill {
        dst: buf.slice(),
        value: 1.0,
    })
    .unwrap();
    user.launch(&Kernel::Busy {
        duration_ns: LONG_NS,
    })
    .unwrap();
}

#[test]
fn a7_erase_stream_cancels_a_recorded_use() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let stream1 = dev.create_stream(0).unwrap();
    let stream2 = dev.create_stream(0).unwrap();
    let t = alloc.alloc(4 * MIB, &stream2).unwrap();
    use_on_busy_stream(&t, &stream2, &stream1);
    t.record_stream(&stream1).unwrap();
    alloc.erase_stream(&t, &stream1).unwrap();
    let ptr = t.ptr();
    drop(t);
    assert_eq!(alloc.pending_free_bytes(), 0);
    assert_eq!(alloc.memory_stats().num_events_recorded, 0);
    let again = alloc.alloc(4 * MIB, &stream2).unwrap();
    assert_eq!(again.ptr(), ptr, "reused at once after erase_stream");
    alloc.check_invariants().unwrap();
}

#[test]
fn a7_erase_stream_keeps_the_other_streams_uses() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let owner = dev.create_stream(0).unwrap();
    let s1 = dev.create_stream(0).unwrap();
    let s2 = dev.create_stream(0).unwrap();
    let t = alloc.alloc(4 * MIB, &owner).unwrap();
    use_on_busy_stream(&t, &owner, &s1);
    use_on_busy_stream(&t, &owner, &s2);
    t.record_stream(&s1).unwrap();
    t.record_stream(&s2).unwrap();
    t.erase_stream(&s1).unwrap();
    // Erasing a stream that never used it, or the owner, changes nothing.
    t.erase_stream(&dev.default_stream()).unwrap();
    t.erase_stream(&owner).unwrap();
    let ptr = t.ptr();
    drop(t);
    assert_eq!(
        alloc.pending_free_bytes(),
        4 * MIB,
        "s2's use still holds it"
    );
    assert_eq!(alloc.memory_stats().num_events_recorded, 1);
    assert_ne!(alloc.alloc(4 * MIB, &owner).unwrap().ptr(), ptr);
    s2.synchronize().unwrap();
    assert_eq!(alloc.alloc(4 * MIB, &owner).unwrap().ptr(), ptr);
    // An empty buffer and a buffer of another allocator.
    let empty = alloc.alloc(0, &owner).unwrap();
    empty.erase_stream(&s1).unwrap();
    let (_, other) = setup(64 * MIB, AllocatorConfig::new());
    let foreign = other.alloc(512, &other.device().default_stream()).unwrap();
    assert!(alloc.erase_stream(&foreign, &s1).is_err());
}

#[test]
fn a7_erase_stream_drops_automatically_noted_uses() {
    let (dev, alloc) = setup(
        64 * MIB,
        AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
    );
    let main = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let t = alloc.alloc(4 * MIB, &main).unwrap();
    use_on_busy_stream(&t, &main, &side); // noted automatically
    t.erase_stream(&side).unwrap();
    let ptr = t.ptr();
    drop(t);
    assert_eq!(alloc.pending_free_bytes(), 0);
    assert_eq!(alloc.alloc(4 * MIB, &main).unwrap().ptr(), ptr);
    // A use after the erase is noted again.
    let u = alloc.alloc(4 * MIB, &main).unwrap();
    use_on_busy_stream(&u, &main, &side);
    u.erase_stream(&side).unwrap();
    use_on_busy_stream(&u, &main, &side);
    let ptr = u.ptr();
    drop(u);
    assert_eq!(alloc.pending_free_bytes(), 4 * MIB);
    assert_ne!(alloc.alloc(4 * MIB, &main).unwrap().ptr(), ptr);
}

#[test]
fn active_stats_count_pending_blocks() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let main = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let a = alloc.alloc(MIB, &main).unwrap();
    let big = alloc.alloc(4 * MIB, &main).unwrap();
    side.wait_stream(&main).unwrap();
    side.launch(&Kernel::Busy {
        duration_ns: 1_000_000,
    })
    .unwrap();
    a.record_stream(&side).unwrap();
    big.record_stream(&side).unwrap();
    alloc.reset_accumulated_stats();
    drop((a, big)); // both pending on the side stream
    let m = alloc.memory_stats_map();
    assert_eq!(m["allocation.all.current"], 0);
    assert_eq!(m["active.all.current"], 2);
    assert_eq!(m["active.small_pool.current"], 1);
    assert_eq!(m["active.large_pool.current"], 1);
    assert_eq!(m["active_bytes.all.current"], 5 * MIB);
    assert_eq!(m["active.all.freed"], 0);
    let b = alloc.alloc(512, &main).unwrap();
    let m = alloc.memory_stats_map();
    assert_eq!(m["active.all.current"], 3);
    assert_eq!(m["active.all.peak"], 3);
    assert_eq!(m["active.small_pool.peak"], 2);
    assert_eq!(m["active_bytes.all.peak"], 5 * MIB + 512);
    assert_eq!(m["allocation.all.peak"], 2);
    assert_eq!(m["active.all.allocated"], 1);
    side.synchronize().unwrap();
    alloc.process_pending();
    let m = alloc.memory_stats_map();
    assert_eq!(m["active.all.current"], 1);
    assert_eq!(m["active.all.freed"], 2);
    assert_eq!(m["active_bytes.all.freed"], 5 * MIB);
    assert_eq!(m["active_bytes.all.current"], 512);
    alloc.reset_peak_stats();
    assert_eq!(alloc.memory_stats_map()["active.all.peak"], 1);
    drop(b);
    let m = alloc.memory_stats_map();
    assert_eq!(m["active.all.current"], 0);
    assert_eq!(m["active.all.peak"], 1);
    assert_eq!(m["active.all.freed"], 3);
    alloc.check_invariants().unwrap();
}

/// Regression: foreign work (enqueued on a stream's native handle behind braid's back) noted
/// with `Stream::note_foreign_work` gets its own position. It used to be attached to braid's
/// last submission on the stream: when the host had already seen that submission complete,
/// automatic mode handed the memory out again while the foreign work still ran.
#[test]
fn foreign_work_noted_after_a_host_sync_keeps_its_memory_until_ordered() {
    use braid_stream_core::hal::Stream as _;
    use braid_stream_core::{Access, TypedKernel};
    for order_with_wait in [true, false] {
        let (dev, alloc) = setup(
            64 * MIB,
            AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
        );
        let a = dev.default_stream();
        let b = dev.create_stream(0).unwrap();
        // Earlier braid work on B, seen complete by the host.
        let scratch = alloc.alloc(N * 4, &b).unwrap();
        b.launch(&Kernel::Fill {
            dst: scratch.slice(),
            value: 1.0,
        })
        .unwrap();
        b.synchronize().unwrap();

        let buf = alloc.alloc(N * 4, &a).unwrap();
        a.launch(&Kernel::Fill {
            dst: buf.slice(),
            value: 2.0,
        })
        .unwrap();
        b.wait_stream(&a).unwrap();
        // Foreign work on B's native stream: long, then it writes `buf`.
        b.hal()
            .launch(
                &TypedKernel::from(Kernel::Busy {
                    duration_ns: LONG_NS,
                }),
                "foreign busy",
            )
            .unwrap();
        b.hal()
            .launch(
                &TypedKernel::from(Kernel::Fill {
                    dst: buf.slice(),
                    value: 5.0,
                }),
                "foreign write",
            )
            .unwrap();
        b.note_foreign_work(&[(buf.slice(), Access::Write)])
            .unwrap();
        let buf_ptr = buf.ptr();
        drop(buf); // freed on A, no record_stream

        let c = alloc.alloc(N * 4, &a).unwrap();
        assert_ne!(
            c.ptr(),
            buf_ptr,
            "handed out while B's foreign work may still write it"
        );
        if order_with_wait {
            a.wait_stream(&b).unwrap();
        } else {
            b.synchronize().unwrap();
        }
        let d = alloc.alloc(N * 4, &a).unwrap();
        assert_eq!(
            d.ptr(),
            buf_ptr,
            "reused once B's foreign work is ordered before A (wait: {order_with_wait})"
        );
        a.launch(&Kernel::Fill {
            dst: d.slice(),
            value: 9.0,
        })
        .unwrap();
        assert_eq!(read(&a, d.slice()), vec![9.0; N as usize]);
        drop((c, d, scratch));
        dev.synchronize().unwrap();
        alloc.check_invariants().unwrap();
    }
}
