//! Randomized tests: a data-mode fuzz oracle (C31), a model-based proptest, and host threads.

use crate::common;

use braid_allocator::{AllocatorConfig, CrossStreamMode, DeviceBuffer};
use braid_backend_sim::SimBackend;
use braid_stream_core::{Kernel, Stream, StreamPosition};
use common::*;
use proptest::prelude::*;
use std::sync::Arc;

/// Deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct LiveBuf {
    id: u32,
    buf: DeviceBuffer<SimBackend>,
}

/// C31: random allocations on three streams, each filled with its id at both ends. A quarter
/// of them are also read late by another stream (behind busy work) into a scratch buffer,
/// declared with `record_stream` in manual mode and observed in automatic mode. On free the
/// owner's data is checked on the owner's stream only (so the late read keeps the block
/// pending); the scratch copies are checked in batches after a device synchronize. Reusing a
/// block before the late read ran shows up as a wrong id in its scratch copy.
fn fuzz(ops: usize, seed: u64, mode: CrossStreamMode) {
    let (dev, alloc) = setup(256 * MIB, AllocatorConfig::new().cross_stream(mode));
    let streams: Vec<Stream<SimBackend>> = (0..3)
        .map(|i| {
            if i == 0 {
                dev.default_stream()
            } else {
                dev.create_stream(0).unwrap()
            }
        })
        .collect();
    let mut rng = Rng(seed);
    let mut live: Vec<LiveBuf> = Vec::new();
    let mut scratch: Vec<(u32, DeviceBuffer<SimBackend>)> = Vec::new();
    let mut live_bytes = 0u64;
    let mut next_id = 1u32;
    let check_scratch = |scratch: &mut Vec<(u32, DeviceBuffer<SimBackend>)>| {
        dev.synchronize().unwrap();
        for (id, s) in scratch.drain(..) {
            let own = streams.iter().find(|x| x.id() == s.stream()).unwrap();
            let values = read(own, s.slice());
            assert!(
                values.iter().all(|&v| v == id as f32),
                "late read of buffer {id} saw {:?}",
                values[0]
            );
        }
    };
    for _ in 0..ops {
        let r = rng.below(100);
        if r < 50 && live_bytes < 16 * MIB {
            let size = match rng.below(20) {
                0 => 4 * (1 + rng.below(3 * MIB)), // up to 12 MiB (large pool, own segments)
                1..=4 => 4 * (1 + rng.below(256 * KIB)), // up to 1 MiB
                _ => 4 * (1 + rng.below(4 * KIB)),
            };
            let own = rng.below(3) as usize;
            let s = &streams[own];
            let buf = alloc.alloc(size, s).unwrap();
            let id = next_id;
            next_id += 1;
            // Fill a window at each end (the whole buffer when small).
            let window = size.min(16 * KIB);
            let head = buf.range(0, window).unwrap();
            let tail = buf.range(size - window, window).unwrap();
            s.launch(&Kernel::Fill {
                dst: head,
                value: id as f32,
            })
            .unwrap();
            s.launch(&Kernel::Fill {
                dst: tail,
                value: id as f32,
            })
            .unwrap();
            if rng.below(4) == 0 {
                let other = &streams[(own + 1 + rng.below(2) as usize) % 3];
                let copy = alloc.alloc(window, other).unwrap();
                other.wait_stream(s).unwrap();
                other
                    .launch(&Kernel::Busy {
                        duration_ns: 1_000_000,
                    })
                    .unwrap();
                other
                    .launch(&Kernel::Copy {
                        src: head,
                        dst: copy.slice(),
                    })
                    .unwrap();
                if mode == CrossStreamMode::Manual {
                    buf.record_stream(other).unwrap();
                }
                scratch.push((id, copy));
                if scratch.len() >= 64 {
                    check_scratch(&mut scratch);
                }
            }
            live_bytes += buf.size();
            live.push(LiveBuf { id, buf });
        } else if r < 95 && !live.is_empty() {
            let i = rng.below(live.len() as u64) as usize;
            let LiveBuf { id, buf } = live.swap_remove(i);
            live_bytes -= buf.size();
            let own = streams.iter().find(|s| s.id() == buf.stream()).unwrap();
            let n = buf.slice().len;
            let window = n.min(16 * KIB);
            let head = read(own, buf.range(0, window).unwrap());
            let tail = read(own, buf.range(n - window, window).unwrap());
            assert!(
                head.iter().chain(tail.iter()).all(|&v| v == id as f32),
                "buffer {id} corrupted"
            );
            drop(buf);
        } else if rng.below(10) == 0 {
            alloc.empty_cache();
        }
    }
    check_scratch(&mut scratch);
    drop(live);
    dev.synchronize().unwrap();
    alloc.empty_cache();
    assert_eq!(alloc.memory_allocated(), 0);
    assert_eq!(alloc.memory_reserved(), 0);
    assert!(
        alloc.memory_stats().num_pending_frees > 0,
        "the fuzz exercised pending frees"
    );
    alloc.check_invariants().unwrap();
}

#[test]
fn c31_fuzz_10k_ops_manual() {
    fuzz(10_000, 123, CrossStreamMode::Manual);
}

#[test]
fn c31_fuzz_automatic() {
    fuzz(3_000, 321, CrossStreamMode::Automatic);
}

#[test]
#[ignore = "soak: 1,000,000 operations"]
fn c31_soak_1m_ops() {
    fuzz(1_000_000, 7, CrossStreamMode::Manual);
}

// ----- model-based property test -----

#[derive(Clone, Debug)]
enum Op {
    Alloc { stream: usize, size: u64 },
    Free { index: usize },
    RecordStream { index: usize, stream: usize },
    Use { index: usize, stream: usize },
    Wait { waiter: usize, waited: usize },
    SyncStream { stream: usize },
    SyncDevice,
    EmptyCache,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, prop_oneof![1u64..4096, 4096u64..(2 << 20), (2u64 << 20)..(24 << 20)])
            .prop_map(|(stream, size)| Op::Alloc { stream, size }),
        3 => (0..16usize).prop_map(|index| Op::Free { index }),
        2 => (0..16usize, 0..3usize).prop_map(|(index, stream)| Op::RecordStream { index, stream }),
        2 => (0..16usize, 0..3usize).prop_map(|(index, stream)| Op::Use { index, stream }),
        1 => (0..3usize, 0..3usize).prop_map(|(waiter, waited)| Op::Wait { waiter, waited }),
        1 => (0..3usize).prop_map(|stream| Op::SyncStream { stream }),
        1 => Just(Op::SyncDevice),
        1 => Just(Op::EmptyCache),
    ]
}

struct ModelBuf {
    buf: DeviceBuffer<SimBackend>,
    /// Uses on other streams that the allocator must respect: positions of launches (all in
    /// automatic mode; recorded streams' positions at free time in manual mode).
    uses: Vec<StreamPosition>,
    recorded: Vec<usize>,
}

struct Freed {
    start: u64,
    end: u64,
    stream: braid_stream_core::StreamId,
    uses: Vec<StreamPosition>,
}

fn run_model(ops: Vec<Op>, mode: CrossStreamMode) -> Result<(), TestCaseError> {
    let dev = timing_device(96 * MIB);
    let alloc = braid_allocator::CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::new().cross_stream(mode),
    )
    .unwrap();
    let streams: Vec<_> = (0..3)
        .map(|i| {
            if i == 0 {
                dev.default_stream()
            } else {
                dev.create_stream(0).unwrap()
            }
        })
        .collect();
    let mut live: Vec<ModelBuf> = Vec::new();
    let mut freed: Vec<Freed> = Vec::new();
    for op in ops {
        match op {
            Op::Alloc { stream, size } => {
                let s = &streams[stream];
                let Ok(buf) = alloc.alloc(size, s) else {
                    continue;
                };
                let (start, end) = (buf.ptr().0, buf.ptr().0 + buf.size());
                // Memory reused: on the same stream, and only once every use is ordered.
                freed.retain(|f| {
                    if f.start < end && start < f.end {
                        assert_eq!(f.stream, s.id(), "reused on another stream");
                        for &u in &f.uses {
                            assert!(
                                dev.is_ordered_before(u, s),
                                "reused before a use was ordered: {u:?}"
                            );
                        }
                        false
                    } else {
                        true
                    }
                });
                live.push(ModelBuf {
                    buf,
                    uses: Vec::new(),
                    recorded: Vec::new(),
                });
            }
            Op::Free { index } if index < live.len() => {
                let mut m = live.swap_remove(index);
                for &r in &m.recorded {
                    m.uses.push(streams[r].position());
                }
                freed.push(Freed {
                    start: m.buf.ptr().0,
                    end: m.buf.ptr().0 + m.buf.size(),
                    stream: m.buf.stream(),
                    uses: m.uses.clone(),
                });
            }
            Op::RecordStream { index, stream } if index < live.len() => {
                let m = &mut live[index];
                // The recorded stream uses the buffer for a while.
                streams[stream]
                    .launch(&Kernel::Busy {
                        duration_ns: 200_000,
                    })
                    .unwrap();
                m.buf.record_stream(&streams[stream]).unwrap();
                if streams[stream].id() != m.buf.stream() {
                    m.recorded.push(stream);
                }
            }
            Op::Use { index, stream } if index < live.len() => {
                let m = &mut live[index];
                let s = &streams[stream];
                s.launch(&Kernel::Busy {
                    duration_ns: 200_000,
                })
                .unwrap();
                let pos = s.memset(m.buf.slice(), 1).unwrap();
                if mode == CrossStreamMode::Automatic && s.id() != m.buf.stream() {
                    m.uses.push(pos);
                }
            }
            Op::Wait { waiter, waited } => streams[waiter].wait_stream(&streams[waited]).unwrap(),
            Op::SyncStream { stream } => streams[stream].synchronize().unwrap(),
            Op::SyncDevice => dev.synchronize().unwrap(),
            Op::EmptyCache => {
                alloc.empty_cache();
                // Released segments never come back (the simulator never reuses addresses).
            }
            _ => {}
        }
        // No two live buffers overlap; stats match the model.
        let mut ranges: Vec<(u64, u64)> = live
            .iter()
            .map(|m| (m.buf.ptr().0, m.buf.ptr().0 + m.buf.size()))
            .collect();
        ranges.sort();
        prop_assert!(
            ranges.windows(2).all(|w| w[0].1 <= w[1].0),
            "overlapping live buffers"
        );
        let sum: u64 = live.iter().map(|m| m.buf.size()).sum();
        prop_assert_eq!(alloc.memory_allocated(), sum);
        prop_assert_eq!(alloc.check_invariants(), Ok(()));
    }
    drop(live);
    dev.synchronize().unwrap();
    alloc.empty_cache();
    prop_assert_eq!(alloc.memory_reserved(), 0);
    prop_assert_eq!(alloc.memory_stats().active_bytes.all.current, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn model_manual(ops in proptest::collection::vec(op(), 1..80)) {
        run_model(ops, CrossStreamMode::Manual)?;
    }

    #[test]
    fn model_automatic(ops in proptest::collection::vec(op(), 1..80)) {
        run_model(ops, CrossStreamMode::Automatic)?;
    }
}

// ----- host threads -----

#[test]
fn eight_threads_on_four_streams() {
    let dev = timing_device(1 << 30);
    let alloc = braid_allocator::CachingAllocator::new(
        dev.clone(),
        AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
    )
    .unwrap();
    let streams: Arc<Vec<_>> = Arc::new((0..4).map(|_| dev.create_stream(0).unwrap()).collect());
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let alloc = alloc.clone();
            let streams = streams.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9 + t);
                let mine = &streams[(t % 4) as usize];
                let mut held: Vec<DeviceBuffer<SimBackend>> = Vec::new();
                for _ in 0..400 {
                    if held.len() < 8 && rng.below(2) == 0 {
                        let limit = if rng.below(4) == 0 {
                            12 * MIB
                        } else {
                            64 * KIB
                        };
                        let size = 1 + rng.below(limit);
                        let buf = alloc.alloc(size, mine).unwrap();
                        mine.memset(buf.slice(), 1).unwrap();
                        if rng.below(3) == 0 {
                            let other = &streams[rng.below(4) as usize];
                            other.memset(buf.slice(), 2).unwrap();
                            buf.record_stream(other).unwrap();
                        }
                        held.push(buf);
                    } else if !held.is_empty() {
                        let i = rng.below(held.len() as u64) as usize;
                        held.swap_remove(i);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
    dev.synchronize().unwrap();
    alloc.empty_cache();
    assert_eq!(alloc.memory_reserved(), 0);
    assert_eq!(alloc.pending_free_bytes(), 0);
    alloc.check_invariants().unwrap();
}
