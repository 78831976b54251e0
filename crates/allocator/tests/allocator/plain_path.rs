//! The plain cache-hit path (taken when no optional feature is on) decides exactly as the
//! general path: a differential proptest runs the same operations on an allocator that stays
//! plain and on one whose history recording is switched on and off, which moves it between
//! the two paths.

use crate::common;

use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_backend_sim::SimBackend;
use braid_stream_core::{Device, Kernel, Stream};
use common::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        stream: usize,
        size: u64,
    },
    Free {
        index: usize,
    },
    RecordStream {
        index: usize,
        stream: usize,
    },
    Sync,
    EmptyCache,
    /// Switches history recording of the second allocator.
    History(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..2usize, prop_oneof![1u64..4096, 4096u64..(2 << 20), (2u64 << 20)..(24 << 20)])
            .prop_map(|(stream, size)| Op::Alloc { stream, size }),
        4 => (0..12usize).prop_map(|index| Op::Free { index }),
        1 => (0..12usize, 0..2usize).prop_map(|(index, stream)| Op::RecordStream { index, stream }),
        1 => Just(Op::Sync),
        1 => Just(Op::EmptyCache),
        2 => any::<bool>().prop_map(Op::History),
    ]
}

struct Side {
    dev: Device<SimBackend>,
    alloc: CachingAllocator<SimBackend>,
    streams: Vec<Stream<SimBackend>>,
    live: Vec<DeviceBuffer<SimBackend>>,
}

impl Side {
    fn new(config: AllocatorConfig) -> Side {
        let dev = timing_device(128 * MIB);
        let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
        let streams = vec![dev.default_stream(), dev.create_stream(0).unwrap()];
        Side {
            dev,
            alloc,
            streams,
            live: Vec::new(),
        }
    }

    /// Applies `op`; returns the address handed out by an allocation.
    fn apply(&mut self, op: &Op) -> Option<u64> {
        match *op {
            Op::Alloc { stream, size } => {
                let buf = self.alloc.alloc(size, &self.streams[stream]).ok()?;
                let ptr = buf.ptr().0;
                self.live.push(buf);
                return Some(ptr);
            }
            Op::Free { index } if index < self.live.len() => {
                self.live.swap_remove(index);
            }
            Op::RecordStream { index, stream } if index < self.live.len() => {
                let s = &self.streams[stream];
                s.launch(&Kernel::Busy {
                    duration_ns: 100_000,
                })
                .unwrap();
                self.live[index].record_stream(s).unwrap();
            }
            Op::Sync => self.dev.synchronize().unwrap(),
            Op::EmptyCache => self.alloc.empty_cache(),
            _ => {}
        }
        None
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut plain = Side::new(AllocatorConfig::new());
    let mut switched = Side::new(AllocatorConfig::new());
    for op in &ops {
        if let Op::History(on) = *op {
            switched.alloc.record_history(on);
            continue;
        }
        let a = plain.apply(op);
        let b = switched.apply(op);
        prop_assert_eq!(a, b, "different placement for {:?}", op);
        prop_assert_eq!(plain.alloc.memory_stats(), switched.alloc.memory_stats());
        prop_assert_eq!(plain.alloc.check_invariants(), Ok(()));
        prop_assert_eq!(switched.alloc.check_invariants(), Ok(()));
    }
    prop_assert_eq!(
        plain.alloc.snapshot().segments,
        switched.alloc.snapshot().segments
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn plain_and_general_paths_decide_alike(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}

/// Switching history on after plain cache hits records the hits that follow.
#[test]
fn history_switched_on_records_later_hits() {
    let (dev, alloc) = setup(64 * MIB, AllocatorConfig::new());
    let s = dev.default_stream();
    drop(alloc.alloc(4096, &s).unwrap());
    drop(alloc.alloc(4096, &s).unwrap());
    assert!(alloc.history().is_empty());
    alloc.record_history(true);
    drop(alloc.alloc(4096, &s).unwrap());
    let actions: Vec<_> = alloc.history().iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["alloc", "free_requested", "free_completed"]);
    alloc.record_history(false);
    drop(alloc.alloc(4096, &s).unwrap());
    assert_eq!(alloc.history().len(), 3);
}
