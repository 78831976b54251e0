//! Per-thread diversions into private pools: `MemPool::use_on_current_thread` (PyTorch's
//! `use_mem_pool`, `beginAllocateCurrentThreadToPool`) diverts only the calling thread's
//! allocations, while `MemPool::use_on(stream)` diverts every thread's allocations on a stream.

use crate::common;

use braid_allocator::{AllocatorConfig, DeviceBuffer, PoolFilter, PoolId, PoolOptions};
use braid_backend_sim::SimBackend;
use common::*;
use std::sync::{Arc, Barrier};

const THREADS: usize = 8;

#[test]
fn use_on_current_thread_diverts_only_the_calling_thread() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let diverted = Barrier::new(2);
    let other_done = Barrier::new(2);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            diverted.wait();
            // The first thread's guard is alive now: this thread's allocations on the same
            // stream are not diverted.
            let buf = alloc.alloc(MIB, &s).unwrap();
            assert_eq!(buf.pool(), PoolId::DEFAULT);
            let current = alloc.alloc_current(4 * KIB).unwrap();
            assert_eq!(current.pool(), PoolId::DEFAULT);
            other_done.wait();
        });
        let guard = pool.use_on_current_thread().unwrap();
        assert_eq!(pool.use_count(), 2);
        diverted.wait();
        // Every stream of this thread goes to the pool: `s`, the default stream, a new one.
        let on_s = alloc.alloc(MIB, &s).unwrap();
        let on_default = alloc.alloc(MIB, &dev.default_stream()).unwrap();
        let on_new = alloc.alloc(MIB, &dev.create_stream(0).unwrap()).unwrap();
        for buf in [&on_s, &on_default, &on_new] {
            assert_eq!(buf.pool(), pool.id());
        }
        other_done.wait();
        drop(guard);
        assert_eq!(alloc.alloc(MIB, &s).unwrap().pool(), PoolId::DEFAULT);
    });
    assert_eq!(pool.use_count(), 1);
    alloc.check_invariants().unwrap();
}

#[test]
fn use_on_a_stream_diverts_every_thread() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let _all_threads = pool.use_on(&s).unwrap();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| scope.spawn(|| alloc.alloc(MIB, &s).unwrap().pool()))
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), pool.id());
        }
    });
    assert_eq!(
        alloc
            .alloc(MIB, &dev.create_stream(0).unwrap())
            .unwrap()
            .pool(),
        PoolId::DEFAULT
    );
}

#[test]
fn many_threads_each_divert_into_their_own_pool_on_one_stream() {
    let (dev, alloc) = setup(1 << 30, AllocatorConfig::new());
    let shared = dev.create_stream(0).unwrap();
    let pools: Vec<_> = (0..THREADS)
        .map(|_| alloc.create_pool(PoolOptions::new()))
        .collect();
    // Every diverting thread and every plain thread allocates while all guards are alive.
    let start = Barrier::new(2 * THREADS);
    let done = Barrier::new(2 * THREADS);
    std::thread::scope(|scope| {
        for pool in &pools {
            let (alloc, shared, start, done) = (&alloc, &shared, &start, &done);
            scope.spawn(move || {
                let _guard = pool.use_on_current_thread().unwrap();
                start.wait();
                let bufs: Vec<DeviceBuffer<SimBackend>> = (0..32)
                    .map(|i| alloc.alloc((i % 4 + 1) * 64 * KIB, shared).unwrap())
                    .collect();
                assert!(bufs.iter().all(|b| b.pool() == pool.id()));
                done.wait();
            });
        }
        for _ in 0..THREADS {
            let (alloc, shared, start, done) = (&alloc, &shared, &start, &done);
            scope.spawn(move || {
                start.wait();
                let bufs: Vec<DeviceBuffer<SimBackend>> = (0..32)
                    .map(|_| alloc.alloc(64 * KIB, shared).unwrap())
                    .collect();
                assert!(bufs.iter().all(|b| b.pool() == PoolId::DEFAULT));
                done.wait();
            });
        }
    });
    for pool in &pools {
        assert_eq!(pool.use_count(), 1);
        assert_eq!(pool.stats().allocated_bytes, 0);
        assert!(pool.reserved_bytes() > 0);
    }
    alloc.check_invariants().unwrap();
}

#[test]
fn use_on_current_thread_stream_diverts_one_stream_of_the_calling_thread() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let (s, other) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let pool = alloc.create_pool(PoolOptions::new());
    let _guard = pool.use_on_current_thread_stream(&s).unwrap();
    assert_eq!(alloc.alloc(MIB, &s).unwrap().pool(), pool.id());
    assert_eq!(alloc.alloc(MIB, &other).unwrap().pool(), PoolId::DEFAULT);
    std::thread::scope(|scope| {
        let on_s = scope.spawn(|| alloc.alloc(MIB, &s).unwrap().pool());
        assert_eq!(on_s.join().unwrap(), PoolId::DEFAULT);
    });
}

#[test]
fn a_guard_dropped_on_another_thread_ends_its_diversion() {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new());
    let s = dev.create_stream(0).unwrap();
    let pool = alloc.create_pool(PoolOptions::new());
    let guard = pool.use_on_current_thread().unwrap();
    assert_eq!(alloc.alloc(MIB, &s).unwrap().pool(), pool.id());
    std::thread::spawn(move || drop(guard)).join().unwrap();
    assert_eq!(alloc.alloc(MIB, &s).unwrap().pool(), PoolId::DEFAULT);
    assert_eq!(pool.stats().diversions, 0);
    // A diversion may name another thread: allocations that thread makes go to the pool.
    let pool = Arc::new(pool);
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (alloc2, s2) = (alloc.clone(), s.clone());
    let worker = std::thread::spawn(move || {
        tx.send(std::thread::current().id()).unwrap();
        go_rx.recv().unwrap();
        alloc2.alloc(MIB, &s2).unwrap().pool()
    });
    let guard = pool
        .allocate_to(PoolFilter::Thread {
            thread: rx.recv().unwrap(),
            stream: None,
        })
        .unwrap();
    assert_eq!(alloc.alloc(MIB, &s).unwrap().pool(), PoolId::DEFAULT);
    go_tx.send(()).unwrap();
    assert_eq!(worker.join().unwrap(), pool.id());
    drop(guard);
}
