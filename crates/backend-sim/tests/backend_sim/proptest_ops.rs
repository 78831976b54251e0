//! Random programs never panic and keep memory accounting consistent.

use braid_backend_sim::{SimConfig, SimDevice, SimEvent, SimGraph, SimMode, SimStream};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, DevicePtr, DeviceSlice, EventFlags};
use proptest::prelude::*;

const CAPACITY: u64 = 1 << 20;

#[derive(Clone, Debug)]
enum Step {
    Alloc(u64),
    Free(usize),
    FreeWild(u64),
    Kernel {
        stream: usize,
        kind: u8,
        bufs: (usize, usize, usize),
        len: u64,
        offset: u64,
    },
    Copy {
        stream: usize,
        dir: u8,
        bufs: (usize, usize),
        len: u64,
    },
    Record {
        stream: usize,
        event: usize,
    },
    Wait {
        stream: usize,
        event: usize,
    },
    Sync(Option<usize>),
    Query {
        stream: usize,
        event: usize,
    },
    Elapsed(usize, usize),
    BeginCapture(usize),
    EndCapture(usize),
    LaunchGraph {
        graph: usize,
        stream: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u64..300_000).prop_map(Step::Alloc),
        2 => (0usize..8).prop_map(Step::Free),
        1 => any::<u64>().prop_map(Step::FreeWild),
        6 => (0usize..3, 0u8..7, (0usize..8, 0usize..8, 0usize..8), 0u64..200, 0u64..64)
            .prop_map(|(stream, kind, bufs, len, offset)| Step::Kernel { stream, kind, bufs, len, offset }),
        2 => (0usize..3, 0u8..4, (0usize..8, 0usize..8), 0u64..1000)
            .prop_map(|(stream, dir, bufs, len)| Step::Copy { stream, dir, bufs, len }),
        2 => (0usize..3, 0usize..3).prop_map(|(stream, event)| Step::Record { stream, event }),
        2 => (0usize..3, 0usize..3).prop_map(|(stream, event)| Step::Wait { stream, event }),
        1 => proptest::option::of(0usize..3).prop_map(Step::Sync),
        1 => (0usize..3, 0usize..3).prop_map(|(stream, event)| Step::Query { stream, event }),
        1 => (0usize..3, 0usize..3).prop_map(|(a, b)| Step::Elapsed(a, b)),
        1 => (0usize..3).prop_map(Step::BeginCapture),
        1 => (0usize..3).prop_map(Step::EndCapture),
        1 => (0usize..3, 0usize..3).prop_map(|(graph, stream)| Step::LaunchGraph { graph, stream }),
    ]
}

struct World {
    dev: SimDevice,
    streams: Vec<SimStream>,
    events: Vec<SimEvent>,
    graphs: Vec<SimGraph>,
    /// Every address ever handed out (freed ones stay, to exercise use after free), and
    /// whether it is live with its size.
    bufs: Vec<(DevicePtr, u64, bool)>,
    host: Vec<u8>,
}

impl World {
    fn buf(&self, i: usize) -> (DevicePtr, u64) {
        self.bufs
            .get(i)
            .map(|&(p, s, _)| (p, s))
            .unwrap_or((DevicePtr(0x1000 * i as u64), 64))
    }

    fn apply(&mut self, step: &Step) {
        let s = |i: usize| &self.streams[i % self.streams.len()];
        let e = |i: usize| &self.events[i % self.events.len()];
        match *step {
            Step::Alloc(size) => match self.dev.alloc(size) {
                Ok(p) => self.bufs.push((p, size, true)),
                Err(HalError::OutOfMemory {
                    requested,
                    free,
                    total,
                }) => {
                    assert_eq!(requested, size);
                    assert_eq!(total, CAPACITY);
                    assert!(size.next_multiple_of(512) > free);
                }
                Err(other) => panic!("unexpected {other}"),
            },
            Step::Free(i) => {
                if let Some(b) = self.bufs.get_mut(i) {
                    // SAFETY: the sim never dereferences device addresses; stale uses are
                    // what this test exercises.
                    let r = unsafe { self.dev.free(b.0) };
                    assert_eq!(r.is_ok(), b.2, "free succeeds exactly for live buffers");
                    b.2 = false;
                }
            }
            Step::FreeWild(addr) => {
                let live = self.bufs.iter().any(|b| b.2 && b.0 .0 == addr);
                // SAFETY: as above.
                let r = unsafe { self.dev.free(DevicePtr(addr)) };
                assert_eq!(r.is_ok(), live);
                if live {
                    self.bufs
                        .iter_mut()
                        .filter(|b| b.0 .0 == addr)
                        .for_each(|b| b.2 = false);
                }
            }
            Step::Kernel {
                stream,
                kind,
                bufs: (a, b, c),
                len,
                offset,
            } => {
                let sl = |(p, _): (DevicePtr, u64)| {
                    DeviceSlice::new(DevicePtr(p.0 + offset * 4), len * 4)
                };
                let (a, b, c) = (sl(self.buf(a)), sl(self.buf(b)), sl(self.buf(c)));
                let k = match kind {
                    0 => Kernel::Fill { dst: a, value: 1.5 },
                    1 => Kernel::Add { a, b, out: c },
                    2 => Kernel::Scale {
                        src: a,
                        dst: b,
                        factor: -2.0,
                    },
                    3 => Kernel::Copy { src: a, dst: b },
                    4 => Kernel::ReduceSum {
                        src: a,
                        dst: DeviceSlice::new(c.ptr, 4),
                    },
                    5 => {
                        let m = (len % 7 + 1) as u32;
                        Kernel::Matmul {
                            a,
                            b,
                            c,
                            m,
                            k: 2,
                            n: m,
                        }
                    }
                    _ => Kernel::Busy {
                        duration_ns: len * 1000,
                    },
                };
                let _ = s(stream).launch(&TypedKernel::from(&k), "k");
            }
            Step::Copy {
                stream,
                dir,
                bufs: (a, b),
                len,
            } => {
                let (a, b) = (self.buf(a).0, self.buf(b).0);
                let len = len.min(self.host.len() as u64);
                // SAFETY: `host` lives as long as the device and is only read by the device;
                // the test never reads it.
                let _ = unsafe {
                    match dir {
                        0 => s(stream).memcpy_h2d(a, self.host.as_ptr(), len),
                        1 => s(stream).memcpy_d2h(self.host.as_mut_ptr(), a, len),
                        2 => s(stream).memcpy_d2d(a, b, len),
                        _ => s(stream).memset(a, 7, len),
                    }
                };
            }
            Step::Record { stream, event } => {
                let _ = s(stream).record(e(event));
            }
            Step::Wait { stream, event } => {
                let _ = s(stream).wait(e(event));
            }
            Step::Sync(None) => self.dev.synchronize().unwrap(),
            Step::Sync(Some(i)) => s(i).synchronize().unwrap(),
            Step::Query { stream, event } => {
                s(stream).query().unwrap();
                e(event).query().unwrap();
            }
            Step::Elapsed(a, b) => {
                let _ = e(a).elapsed_ms(e(b));
            }
            Step::BeginCapture(i) => {
                let _ = s(i).begin_capture(CaptureMode::Global);
            }
            Step::EndCapture(i) => {
                if let Ok(g) = s(i).end_capture() {
                    self.graphs.push(g);
                }
            }
            Step::LaunchGraph { graph, stream } => {
                if let Some(g) = self.graphs.get(graph) {
                    g.launch(s(stream)).unwrap();
                }
            }
        }
    }

    fn check(&self) {
        let info = self.dev.mem_info().unwrap();
        let live: u64 = self
            .bufs
            .iter()
            .filter(|b| b.2)
            .map(|b| b.1.next_multiple_of(512))
            .sum();
        assert_eq!(info.total, CAPACITY);
        assert_eq!(info.free, CAPACITY - live);
        assert_eq!(self.dev.stats().bytes_allocated, live);
        assert!(self.dev.timeline().iter().all(|r| r.start_ns <= r.end_ns));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_never_panic(steps in proptest::collection::vec(step(), 1..60), timing_only in any::<bool>()) {
        let mode = if timing_only { SimMode::TimingOnly } else { SimMode::Data };
        let dev = SimDevice::new(SimConfig::new().capacity(CAPACITY).mode(mode));
        let streams = (0..3).map(|_| dev.create_stream(0).unwrap()).collect();
        let events = (0..3)
            .map(|i| dev.create_event(if i == 0 { EventFlags::ORDERING } else { EventFlags::TIMING }).unwrap())
            .collect();
        let mut world = World { dev, streams, events, graphs: Vec::new(), bufs: Vec::new(), host: vec![0; 1000] };
        for step in &steps {
            world.apply(step);
            world.check();
        }
        world.dev.synchronize().unwrap();
        world.check();
        if timing_only {
            prop_assert_eq!(world.dev.stats().invalid_accesses, 0);
        }
    }
}
