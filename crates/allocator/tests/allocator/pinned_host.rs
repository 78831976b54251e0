//! The pinned host allocator beyond the conformance suite's cases (`braid_conformance::pinned`:
//! A12, PyTorch's `test_caching_pinned_memory`, and a round trip): data round trips through a
//! kernel, cross-stream records, `empty_cache`, statistics, errors, threads and a model-based
//! proptest.

use crate::common;

use braid_allocator::{AllocError, PinnedBuffer, PinnedHostAllocator};
use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{
    f32_bytes, CaptureMode, Device, Kernel, SizeOverflow, Stream, StreamError, StreamPosition,
};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

type Pinned = PinnedHostAllocator<SimBackend>;

const GIB: u64 = 1 << 30;

fn pinned_device(host_capacity: u64) -> Dev {
    Device::new(SimDevice::new(
        SimConfig::new()
            .capacity(64 * MIB)
            .host_capacity(host_capacity)
            .record_timeline(false),
    ))
    .unwrap()
}

fn busy(stream: &Stream<SimBackend>) {
    stream
        .launch(&Kernel::Busy {
            duration_ns: LONG_NS,
        })
        .unwrap();
}

fn addr(buf: &PinnedBuffer<SimBackend>) -> usize {
    buf.host_ptr().unwrap().addr()
}

/// Host → device → host through pinned buffers, in data mode, with a kernel in between.
#[test]
fn data_round_trip_through_pinned_buffers() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let s = dev.create_stream(0).unwrap();
    let n = 1000;
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let mut src = pinned.alloc(4 * n as u64).unwrap();
    src.as_mut_slice()
        .unwrap()
        .copy_from_slice(&f32_bytes(&values));
    let a = dev.alloc(4 * n as u64).unwrap();
    let b = dev.alloc(4 * n as u64).unwrap();
    src.copy_to_device(&s, a.slice()).unwrap();
    s.launch(&Kernel::Scale {
        src: a.slice(),
        dst: b.slice(),
        factor: 2.0,
    })
    .unwrap();
    let mut out = pinned.alloc(4 * n as u64).unwrap();
    out.copy_from_device(&s, b.slice()).unwrap();
    assert!(matches!(
        out.as_slice(),
        Err(AllocError::PinnedBusy { stream, .. }) if stream == s.id()
    ));
    s.synchronize().unwrap();
    let got = braid_stream_core::f32s_from_bytes(out.as_slice().unwrap());
    let want: Vec<f32> = values.iter().map(|v| v * 2.0).collect();
    assert_eq!(got, want);
    // Reading `src` while its H2D copy runs is fine; writing it is refused until it is done.
    busy(&s);
    src.copy_to_device(&s, a.slice()).unwrap();
    assert!(src.as_slice().is_ok());
    assert!(matches!(
        src.as_mut_slice(),
        Err(AllocError::PinnedBusy { .. })
    ));
    s.synchronize().unwrap();
    assert!(src.as_mut_slice().is_ok());
}

/// A use on another stream, declared with `record_stream`, holds the block until that stream's
/// work completed: synchronizing the copying stream alone is not enough.
#[test]
fn record_stream_on_another_stream_holds_the_block() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let main = dev.default_stream();
    let side = dev.create_stream(0).unwrap();
    let dst = dev.alloc(64).unwrap();
    let buf = pinned.alloc(64).unwrap();
    let ptr = addr(&buf);
    buf.copy_to_device(&main, dst.slice()).unwrap();
    busy(&side);
    buf.record_stream(&side).unwrap();
    assert!(
        matches!(buf.as_slice(), Err(AllocError::PinnedBusy { stream, .. }) if stream == side.id()),
        "a recorded stream may write the buffer"
    );
    drop(buf);
    main.synchronize().unwrap();
    let other = pinned.alloc(64).unwrap();
    assert_ne!(addr(&other), ptr, "the side stream may still use the block");
    side.synchronize().unwrap();
    drop(other);
    // Both blocks are idle now; the most recently reclaimed one comes first.
    let a = pinned.alloc(64).unwrap();
    let b = pinned.alloc(64).unwrap();
    let mut got = [addr(&a), addr(&b)];
    got.sort_unstable();
    let mut want = [ptr, got.iter().copied().find(|p| *p != ptr).unwrap()];
    want.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(pinned.stats().num_host_alloc, 2);
}

/// A buffer whose copies the host already saw complete goes straight back to the cache: no
/// event is recorded.
#[test]
fn completed_copies_need_no_event() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let s = dev.default_stream();
    let dst = dev.alloc(16).unwrap();
    let buf = pinned.alloc(16).unwrap();
    buf.copy_to_device(&s, dst.slice()).unwrap();
    s.synchronize().unwrap();
    drop(buf);
    let stats = pinned.stats();
    assert_eq!((stats.num_events_recorded, stats.pending_blocks), (0, 0));
    assert_eq!(stats.cached_bytes(), 16);
}

/// `empty_cache` returns idle blocks to the device and keeps live and pending ones.
#[test]
fn empty_cache_returns_idle_blocks_only() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let s = dev.default_stream();
    let dst = dev.alloc(KIB).unwrap();
    let live = pinned.alloc(100).unwrap();
    let idle = pinned.alloc(3000).unwrap();
    let pending = pinned.alloc(KIB).unwrap();
    busy(&s);
    pending.copy_to_device(&s, dst.slice()).unwrap();
    drop(idle);
    drop(pending);
    assert_eq!(dev.hal().stats().host_bytes_allocated, 128 + 4096 + 1024);
    pinned.empty_cache().unwrap();
    let stats = pinned.stats();
    assert_eq!(stats.num_host_free, 1);
    assert_eq!(stats.reserved_bytes, 128 + 1024);
    assert_eq!(stats.pending_bytes, 1024);
    assert_eq!(dev.hal().stats().host_bytes_allocated, 128 + 1024);
    s.synchronize().unwrap();
    pinned.empty_cache().unwrap();
    assert_eq!(pinned.stats().reserved_bytes, 128);
    drop(live);
    pinned.empty_cache().unwrap();
    let stats = pinned.stats();
    assert_eq!((stats.reserved_bytes, stats.num_host_free), (0, 3));
    assert_eq!(dev.hal().stats().host_bytes_allocated, 0);
}

/// Statistics: size classes, requested bytes, peaks, cache hits, host allocs and frees.
#[test]
fn stats_track_classes_peaks_and_hits() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let a = pinned.alloc(1000).unwrap();
    let b = pinned.alloc(5).unwrap();
    assert_eq!((a.len(), a.capacity(), b.capacity()), (1000, 1024, 8));
    let s = pinned.stats();
    assert_eq!((s.allocated_bytes, s.requested_bytes), (1032, 1005));
    assert_eq!((s.reserved_bytes, s.live_buffers), (1032, 2));
    drop(a);
    let c = pinned.alloc(513).unwrap();
    assert_eq!(c.capacity(), 1024);
    let s = pinned.stats();
    assert_eq!(
        (s.num_allocations, s.num_cache_hits, s.num_host_alloc),
        (3, 1, 2)
    );
    assert_eq!((s.allocated_bytes, s.peak_allocated_bytes), (1032, 1032));
    drop((b, c));
    let d = pinned.alloc(2048).unwrap();
    let s = pinned.stats();
    assert_eq!((s.allocated_bytes, s.reserved_bytes), (2048, 3080));
    assert_eq!((s.peak_reserved_bytes, s.cached_bytes()), (3080, 1032));
    assert_eq!((s.requested_bytes, s.live_buffers), (2048, 1));
    drop(d);
    assert_eq!(pinned.stats().allocated_bytes, 0);
}

/// Typed errors, each leaving the allocator usable.
#[test]
fn errors_are_typed_and_leave_the_allocator_usable() {
    let dev = pinned_device(8 * KIB);
    let pinned = Pinned::new(dev.clone());
    let empty = pinned.alloc(0).unwrap();
    assert!(empty.is_empty() && empty.host_ptr().is_none());
    assert_eq!(empty.as_slice().unwrap(), &[] as &[u8]);
    assert_eq!(pinned.stats().live_buffers, 0);
    assert_eq!(
        pinned.alloc(u64::MAX).unwrap_err(),
        AllocError::SizeOverflow(SizeOverflow {
            call: "PinnedHostAllocator::alloc",
            what: format!(
                "{} bytes rounded to a power of two in host memory",
                u64::MAX
            ),
        })
    );
    // Out of memory after the retry: the report names what the allocator holds.
    let live = pinned.alloc(6 * KIB).unwrap();
    match pinned.alloc(4 * KIB).unwrap_err() {
        e @ AllocError::PinnedOutOfMemory {
            requested,
            rounded,
            reserved,
            allocated,
            pending,
        } => {
            assert_eq!((requested, rounded), (4 * KIB, 4 * KIB));
            assert_eq!((reserved, allocated, pending), (8 * KIB, 8 * KIB, 0));
            assert!(
                e.to_string().contains("pinned host memory exhausted"),
                "{e}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    drop(live);
    // The idle 8 KiB block is returned to make room for a 4 KiB one.
    let small = pinned.alloc(4 * KIB).unwrap();
    let s = pinned.stats();
    assert_eq!(
        (s.num_ooms, s.num_alloc_retries, s.num_host_free),
        (1, 2, 1)
    );
    // A copy of the wrong length, on another device's stream, or on a capturing stream.
    let dst = dev.alloc(8).unwrap();
    assert!(matches!(
        small.copy_to_device(&dev.default_stream(), dst.slice()),
        Err(AllocError::Stream(StreamError::OutOfBounds { .. }))
    ));
    let other = pinned_device(GIB);
    assert!(matches!(
        small.copy_to_device(&other.default_stream(), dst.slice()),
        Err(AllocError::InvalidArgument(_))
    ));
    assert!(matches!(
        small.record_stream(&other.default_stream()),
        Err(AllocError::InvalidArgument(_))
    ));
    let cap = dev.create_stream(0).unwrap();
    cap.begin_capture(CaptureMode::Global).unwrap();
    let eight = pinned.alloc(8).unwrap();
    assert!(matches!(
        eight.copy_to_device(&cap, dst.slice()),
        Err(AllocError::Stream(
            StreamError::ForbiddenDuringCapture { .. }
        ))
    ));
    // empty_cache does nothing during a capture.
    drop(eight);
    let reserved = pinned.stats().reserved_bytes;
    pinned.empty_cache().unwrap();
    assert_eq!(pinned.stats().reserved_bytes, reserved);
    cap.end_capture().unwrap();
    // Everything still works.
    let mut ok = pinned.alloc(8).unwrap();
    ok.as_mut_slice()
        .unwrap()
        .copy_from_slice(&f32_bytes(&[3.0, 4.0]));
    let s = dev.default_stream();
    ok.copy_to_device(&s, dst.slice()).unwrap();
    assert_eq!(read(&s, dst.slice()), vec![3.0, 4.0]);
    assert_eq!(
        pinned.stats().num_host_free,
        1,
        "nothing freed during the capture"
    );
}

/// Dropping the last handle waits for pending blocks and returns every block: no leak.
#[test]
fn dropping_the_allocator_returns_everything() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let s = dev.default_stream();
    let dst = dev.alloc(KIB).unwrap();
    let idle = pinned.alloc(KIB).unwrap();
    let pending = pinned.alloc(KIB).unwrap();
    drop(idle);
    busy(&s);
    pending.copy_to_device(&s, dst.slice()).unwrap();
    let clone = pinned.clone();
    drop(pinned);
    drop(pending);
    assert_eq!(clone.stats().pending_blocks, 1);
    assert_eq!(dev.hal().stats().host_bytes_allocated, 2 * KIB);
    drop(clone);
    let stats = dev.hal().stats();
    assert_eq!((stats.host_bytes_allocated, stats.host_frees), (0, 2));
}

/// Eight threads allocate, write, copy and free concurrently; no two live buffers overlap and
/// the books balance at the end.
#[test]
fn eight_threads_allocate_and_free_concurrently() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let live = std::sync::Mutex::new(BTreeMap::<usize, usize>::new());
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (dev, pinned, live) = (&dev, &pinned, &live);
            scope.spawn(move || {
                let stream = dev.create_stream(0).unwrap();
                let dst = dev.alloc(4 * KIB).unwrap();
                for i in 0..60u64 {
                    let size = 1 + (t * 131 + i * 977) % (4 * KIB);
                    let mut buf = pinned.alloc(size).unwrap();
                    let start = addr(&buf);
                    let end = start + buf.capacity() as usize;
                    {
                        let mut map = live.lock().unwrap();
                        let before = map.range(..end).next_back();
                        assert!(
                            before.is_none_or(|(_, e)| *e <= start),
                            "overlapping live pinned buffers"
                        );
                        map.insert(start, end);
                    }
                    buf.as_mut_slice().unwrap().fill(t as u8);
                    if i % 3 == 0 {
                        let len = buf.len() as u64;
                        buf.copy_to_device(&stream, dst.range(0, len).unwrap())
                            .unwrap();
                    }
                    assert!(buf.as_slice().unwrap().iter().all(|b| *b == t as u8));
                    live.lock().unwrap().remove(&start);
                    drop(buf);
                    if i % 20 == 19 {
                        stream.synchronize().unwrap();
                    }
                }
            });
        }
    });
    dev.synchronize().unwrap();
    pinned.empty_cache().unwrap();
    let s = pinned.stats();
    assert_eq!(
        (s.allocated_bytes, s.live_buffers, s.pending_blocks),
        (0, 0, 0)
    );
    assert_eq!(s.reserved_bytes, 0);
    assert_eq!(s.num_allocations, 480);
    assert_eq!(s.num_host_alloc, s.num_host_free);
    assert_eq!(dev.hal().stats().host_bytes_allocated, 0);
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(u64),
    Free(usize),
    CopyIn { buf: usize, stream: usize },
    CopyOut { buf: usize, stream: usize },
    Busy(usize),
    Sync(usize),
    EmptyCache,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u64..5000).prop_map(Op::Alloc),
        2 => any::<usize>().prop_map(Op::Free),
        2 => (any::<usize>(), 0usize..2).prop_map(|(buf, stream)| Op::CopyIn { buf, stream }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(buf, stream)| Op::CopyOut { buf, stream }),
        1 => (0usize..2).prop_map(Op::Busy),
        1 => (0usize..2).prop_map(Op::Sync),
        1 => Just(Op::EmptyCache),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random allocations, frees, copies both ways, busy work, synchronizes and empty_cache:
    /// live buffers never overlap, a block is never handed out while a copy of a freed buffer
    /// may still use it, each buffer keeps the bytes written to it, and once everything is
    /// dropped and the cache emptied nothing is reserved.
    #[test]
    fn model_random_ops(ops in proptest::collection::vec(op(), 1..60)) {
        let dev = pinned_device(GIB);
        let pinned = Pinned::new(dev.clone());
        let streams = [dev.default_stream(), dev.create_stream(0).unwrap()];
        // One scratch range per stream, so copies on different streams do not race.
        let scratch = [dev.alloc(8 * KIB).unwrap(), dev.alloc(8 * KIB).unwrap()];
        // Live buffers with their tag and their last copy on each stream.
        let mut live: Vec<(PinnedBuffer<SimBackend>, u8, [Option<StreamPosition>; 2])> = Vec::new();
        // Freed blocks and the last position of each stream that copied them: a block may only
        // come back once the host has observed those positions complete.
        let mut freed: Vec<(usize, StreamPosition)> = Vec::new();
        let mut tag = 0u8;
        for op in ops {
            match op {
                Op::Alloc(size) => {
                    let mut buf = pinned.alloc(size).unwrap();
                    let a = addr(&buf);
                    prop_assert!(
                        freed.iter().all(|(p, pos)| *p != a || dev.is_complete(*pos)),
                        "reused while a copy may still use it"
                    );
                    freed.retain(|(p, _)| *p != a);
                    let end = a + buf.capacity() as usize;
                    for (other, _, _) in &live {
                        let o = addr(other);
                        prop_assert!(end <= o || o + other.capacity() as usize <= a);
                    }
                    tag = tag.wrapping_add(1);
                    buf.as_mut_slice().unwrap().fill(tag);
                    live.push((buf, tag, [None; 2]));
                }
                Op::Free(i) if !live.is_empty() => {
                    let (buf, t, used) = live.swap_remove(i % live.len());
                    if let Ok(bytes) = buf.as_slice() {
                        prop_assert!(bytes.iter().all(|b| *b == t));
                    }
                    let a = addr(&buf);
                    freed.extend(used.into_iter().flatten().map(|pos| (a, pos)));
                }
                Op::CopyIn { buf, stream } if !live.is_empty() => {
                    let n = live.len();
                    let (b, _, used) = &mut live[buf % n];
                    let range = scratch[stream].range(0, b.len() as u64).unwrap();
                    used[stream] = Some(b.copy_to_device(&streams[stream], range).unwrap());
                }
                Op::CopyOut { buf, stream } if !live.is_empty() => {
                    let n = live.len();
                    let (b, t, used) = &mut live[buf % n];
                    let range = scratch[stream].range(0, b.len() as u64).unwrap();
                    // Write the buffer's own tag to the device first, so the readback keeps it.
                    let s = &streams[stream];
                    s.memset(range, *t).unwrap();
                    used[stream] = Some(b.copy_from_device(s, range).unwrap());
                }
                Op::Busy(s) => busy(&streams[s]),
                Op::Sync(s) => streams[s].synchronize().unwrap(),
                Op::EmptyCache => pinned.empty_cache().unwrap(),
                _ => {}
            }
        }
        dev.synchronize().unwrap();
        for (buf, t, _) in &live {
            prop_assert!(buf.as_slice().unwrap().iter().all(|b| b == t));
        }
        drop(live);
        pinned.empty_cache().unwrap();
        let s = pinned.stats();
        prop_assert_eq!((s.reserved_bytes, s.allocated_bytes, s.pending_blocks), (0, 0, 0));
        prop_assert_eq!(dev.hal().stats().host_bytes_allocated, 0);
    }
}

/// A buffer copied eagerly on a stream that has begun capturing by the time it is dropped:
/// no event is recorded into the capture; the block waits until the host observes the eager
/// copy complete after the capture.
#[test]
fn a_block_freed_while_its_stream_captures_waits_for_the_eager_copy() {
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev.clone());
    let s = dev.create_stream(0).unwrap();
    let dst = dev.alloc(64).unwrap();
    let buf = pinned.alloc(64).unwrap();
    let ptr = addr(&buf);
    busy(&s);
    buf.copy_to_device(&s, dst.slice()).unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    buf.record_stream(&s).unwrap();
    drop(buf);
    let stats = pinned.stats();
    assert_eq!((stats.pending_blocks, stats.num_events_recorded), (1, 0));
    let other = pinned.alloc(64).unwrap();
    assert_ne!(addr(&other), ptr);
    drop(other);
    s.end_capture().unwrap();
    s.synchronize().unwrap();
    assert_eq!(addr(&pinned.alloc(64).unwrap()), ptr);
}

#[test]
fn handles_and_buffers_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Pinned>();
    send_sync::<PinnedBuffer<SimBackend>>();
    let dev = pinned_device(GIB);
    let pinned = Pinned::new(dev);
    let buf = pinned.alloc(10).unwrap();
    let len = std::thread::spawn(move || buf.len()).join().unwrap();
    assert_eq!(len, 10);
    assert_eq!(pinned.stats().live_buffers, 0);
}
