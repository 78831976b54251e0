//! The sanitizer on generated multi-stream programs, driven through the front layer:
//! no false alarms on correct programs, and (mutation test) a report for every mutant whose
//! result can differ.
//!
//! **Programs.** 2–6 streams share one segment cut into blocks by a little stream-ordered
//! allocator of the test's own (a block freed on stream O goes back to O's pool and is reused
//! by the next allocation on O, as in a caching allocator). Steps: allocate a block on a stream
//! (declared with `sanitizer_note_alloc`, then initialised there), kernels and copies over
//! blocks, frees, extra waits, host synchronizations and busy kernels. The generator inserts a
//! record/wait ("sync") exactly where its own bookkeeping says one is needed: before a stream
//! reads a block last written elsewhere, before it writes a block last written or read
//! elsewhere, and — standing for `record_stream` — before the owner frees a block, from every
//! other stream that used it.
//!
//! **Reference execution.** A race-free program gives the same memory whatever schedule the
//! streams run in, so the correct program's final memory is the reference. Checked here too:
//! running it again with one stream slowed down (a long `Busy` kernel before each of its ops —
//! busy kernels touch no memory, so only the schedule changes) gives the same memory and no
//! reports.
//!
//! **Mutants.** Deleting one sync `from → to`; the mutant runs with stream `from` slowed down
//! as above, so the work before the deleted record lands after the work after the deleted
//! wait — the adversarial schedule for that edge. The simulator only ever runs schedules
//! allowed by the remaining synchronization, so if the mutant's final memory differs from the
//! reference, its result *can* differ (proven, not guessed). Those mutants must all be reported
//! (≥ 99% asserted); mutants whose memory happened not to differ are not counted either way.

use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{Device, DevicePtr, DeviceSlice, Kernel, Stream};
use std::collections::BTreeSet;

/// Blocks of 64 f32 in the program's segment.
const BLOCKS: usize = 12;
const BLOCK_F32: u64 = 64;
const BLOCK_BYTES: u64 = BLOCK_F32 * 4;
/// The slow-down: longer than any program's whole host time.
const DELAY_NS: u64 = 50_000_000;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Add { a: usize, b: usize, out: usize },
    Scale { src: usize, dst: usize },
    Sum { src: usize, dst: usize },
    Matmul { a: usize, b: usize, c: usize },
    CopyD2d { src: usize, dst: usize },
}

impl Op {
    fn reads(&self) -> Vec<usize> {
        match *self {
            Op::Add { a, b, .. } | Op::Matmul { a, b, .. } => vec![a, b],
            Op::Scale { src, .. } | Op::Sum { src, .. } | Op::CopyD2d { src, .. } => vec![src],
        }
    }
    fn write(&self) -> usize {
        match *self {
            Op::Add { out, .. } => out,
            Op::Scale { dst, .. } | Op::Sum { dst, .. } | Op::CopyD2d { dst, .. } => dst,
            Op::Matmul { c, .. } => c,
        }
    }
}

/// Why the generator put a sync there.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Why {
    /// Before a use of a block last written (or read) on another stream.
    Use,
    /// Before a free, from a stream that used the block (what `record_stream` is for).
    RecordStream,
    /// At random, not needed.
    Extra,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Alloc {
        stream: usize,
        block: usize,
        value: f32,
    },
    Free {
        stream: usize,
        block: usize,
    },
    Run {
        stream: usize,
        op: Op,
    },
    Sync {
        from: usize,
        to: usize,
        why: Why,
    },
    Busy {
        stream: usize,
        ns: u64,
    },
    SyncStream(usize),
    SyncDevice,
}

/// The generator's view of one live block.
#[derive(Clone, Debug, Default)]
struct Buf {
    owner: usize,
    writer: usize,
    /// Streams ordered after the last write.
    seen_write: BTreeSet<usize>,
    /// Streams that read since the last write.
    readers: BTreeSet<usize>,
    /// Streams that used the block since it was allocated.
    users: BTreeSet<usize>,
}

struct Program {
    streams: usize,
    steps: Vec<Step>,
}

fn generate(seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let streams = 2 + rng.below(5);
    let mut steps = Vec::new();
    let mut fresh: Vec<usize> = (0..BLOCKS).rev().collect();
    let mut pools: Vec<Vec<usize>> = vec![Vec::new(); streams];
    let mut live: Vec<Option<Buf>> = vec![None; BLOCKS];
    let len = 14 + rng.below(20);
    for _ in 0..len {
        let live_blocks: Vec<usize> = (0..BLOCKS).filter(|&b| live[b].is_some()).collect();
        let choice = rng.below(100);
        if live_blocks.len() < 3 || (choice < 15 && live_blocks.len() < BLOCKS) {
            let s = rng.below(streams);
            let block = match pools[s].pop().or_else(|| fresh.pop()) {
                Some(b) => b,
                None => continue,
            };
            steps.push(Step::Alloc {
                stream: s,
                block,
                value: (1 + rng.below(9)) as f32,
            });
            live[block] = Some(Buf {
                owner: s,
                writer: s,
                seen_write: BTreeSet::from([s]),
                readers: BTreeSet::new(),
                users: BTreeSet::from([s]),
            });
        } else if choice < 25 {
            let block = live_blocks[rng.below(live_blocks.len())];
            let buf = live[block].take().unwrap_or_default();
            for &u in &buf.users {
                if u != buf.owner {
                    steps.push(Step::Sync {
                        from: u,
                        to: buf.owner,
                        why: Why::RecordStream,
                    });
                }
            }
            steps.push(Step::Free {
                stream: buf.owner,
                block,
            });
            pools[buf.owner].push(block);
        } else if choice < 80 {
            let s = rng.below(streams);
            let mut pick = || live_blocks[rng.below(live_blocks.len())];
            let (x, y) = (pick(), pick());
            // outputs never overlap inputs (kernels refuse that)
            let outs: Vec<usize> = live_blocks
                .iter()
                .copied()
                .filter(|&b| b != x && b != y)
                .collect();
            let z = outs[rng.below(outs.len())];
            let op = match rng.below(5) {
                0 => Op::Add { a: x, b: y, out: z },
                1 => Op::Scale { src: x, dst: z },
                2 => Op::Sum { src: x, dst: z },
                3 => Op::Matmul { a: x, b: y, c: z },
                _ => Op::CopyD2d { src: x, dst: z },
            };
            let mut needed = BTreeSet::new();
            for r in op.reads() {
                let buf = live[r].as_ref().expect("live");
                if !buf.seen_write.contains(&s) {
                    needed.insert(buf.writer);
                }
            }
            let w = live[op.write()].as_ref().expect("live");
            if !w.seen_write.contains(&s) {
                needed.insert(w.writer);
            }
            needed.extend(w.readers.iter().copied());
            needed.remove(&s);
            for from in needed {
                steps.push(Step::Sync {
                    from,
                    to: s,
                    why: Why::Use,
                });
            }
            steps.push(Step::Run { stream: s, op });
            for r in op.reads() {
                let buf = live[r].as_mut().expect("live");
                buf.seen_write.insert(s);
                buf.readers.insert(s);
                buf.users.insert(s);
            }
            let buf = live[op.write()].as_mut().expect("live");
            buf.writer = s;
            buf.seen_write = BTreeSet::from([s]);
            buf.readers.clear();
            buf.users.insert(s);
        } else if choice < 88 {
            let (from, to) = (rng.below(streams), rng.below(streams));
            if from != to {
                steps.push(Step::Sync {
                    from,
                    to,
                    why: Why::Extra,
                });
            }
        } else if choice < 95 {
            steps.push(Step::Busy {
                stream: rng.below(streams),
                ns: 1_000 * (1 + rng.below(50) as u64),
            });
        } else if choice < 98 {
            let s = rng.below(streams);
            steps.push(Step::SyncStream(s));
            for buf in live.iter_mut().flatten() {
                if buf.writer == s {
                    buf.seen_write.extend(0..streams);
                }
                buf.readers.remove(&s);
                if s != buf.owner {
                    buf.users.remove(&s);
                }
            }
        } else {
            steps.push(Step::SyncDevice);
            for buf in live.iter_mut().flatten() {
                buf.seen_write.extend(0..streams);
                buf.readers.clear();
                buf.users = BTreeSet::from([buf.owner]);
            }
        }
    }
    Program { streams, steps }
}

/// Final memory (as bits) and the number of sanitizer reports of one run: `skip` deletes one
/// step, `delay` slows one stream down.
fn run(p: &Program, skip: Option<usize>, delay: Option<usize>) -> (Vec<u32>, u64) {
    let sim = SimDevice::new(SimConfig::new().record_timeline(false));
    let device: Device<SimBackend> = Device::new(sim).expect("device");
    let streams: Vec<Stream<SimBackend>> = (0..p.streams)
        .map(|_| device.create_stream(0).expect("stream"))
        .collect();
    let seg = device.alloc(BLOCKS as u64 * BLOCK_BYTES).expect("alloc");
    let block =
        |b: usize| DeviceSlice::new(DevicePtr(seg.ptr().0 + b as u64 * BLOCK_BYTES), BLOCK_BYTES);
    let hal = |s: usize| streams[s].hal().index();
    let slow = |s: usize| {
        if delay == Some(s) {
            streams[s]
                .launch(&Kernel::Busy {
                    duration_ns: DELAY_NS,
                })
                .expect("busy");
        }
    };
    let mut live = [false; BLOCKS];
    for (i, step) in p.steps.iter().enumerate() {
        if skip == Some(i) {
            continue;
        }
        match *step {
            Step::Alloc { block, .. } => live[block] = true,
            Step::Free { block, .. } => live[block] = false,
            _ => {}
        }
        match *step {
            Step::Alloc {
                stream,
                block: b,
                value,
            } => {
                device
                    .hal()
                    .sanitizer_note_alloc(block(b), hal(stream))
                    .expect("note alloc");
                slow(stream);
                streams[stream]
                    .launch(&Kernel::Fill {
                        dst: block(b),
                        value,
                    })
                    .expect("fill");
            }
            Step::Free { stream, block: b } => device
                .hal()
                .sanitizer_note_free(block(b), hal(stream))
                .expect("note free"),
            Step::Run { stream, op } => {
                slow(stream);
                let s = &streams[stream];
                match op {
                    Op::Add { a, b, out } => s.launch(&Kernel::Add {
                        a: block(a),
                        b: block(b),
                        out: block(out),
                    }),
                    Op::Scale { src, dst } => s.launch(&Kernel::Scale {
                        src: block(src),
                        dst: block(dst),
                        factor: 0.5,
                    }),
                    Op::Sum { src, dst } => s.launch(&Kernel::ReduceSum {
                        src: block(src),
                        dst: DeviceSlice::new(block(dst).ptr, 4),
                    }),
                    Op::Matmul { a, b, c } => s.launch(&Kernel::Matmul {
                        a: block(a),
                        b: block(b),
                        c: block(c),
                        m: 8,
                        k: 8,
                        n: 8,
                    }),
                    Op::CopyD2d { src, dst } => s.copy_d2d(block(src), block(dst)),
                }
                .expect("op");
            }
            Step::Sync { from, to, .. } => {
                let e = streams[from].record_event().expect("record");
                streams[to].wait(&e).expect("wait");
            }
            Step::Busy { stream, ns } => {
                streams[stream]
                    .launch(&Kernel::Busy { duration_ns: ns })
                    .expect("busy");
            }
            Step::SyncStream(s) => streams[s].synchronize().expect("sync"),
            Step::SyncDevice => device.synchronize().expect("sync"),
        }
    }
    device.synchronize().expect("sync");
    // The result: the contents of the blocks still allocated at the end.
    let mut bits = Vec::new();
    for b in (0..BLOCKS).filter(|&b| live[b]) {
        let bytes = streams[0]
            .copy_d2h(block(b))
            .expect("d2h")
            .wait()
            .expect("readback");
        bits.extend(
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
    if std::env::var_os("SHOW_REPORTS").is_some() {
        for r in device.hal().sanitizer_reports() {
            eprintln!("{r}");
        }
    }
    (bits, device.hal().sanitizer_report_count())
}

const PROGRAMS: u64 = 1_000;

#[test]
fn correct_programs_have_no_reports_and_mutants_that_differ_are_all_reported() {
    let (mut mutants, mut differing, mut reported_differing, mut reported_same) = (0, 0, 0, 0);
    let (mut record_stream_mutants, mut record_stream_differing) = (0, 0);
    let mut missed = Vec::new();
    for seed in 0..PROGRAMS {
        let p = generate(seed);
        let (reference, reports) = run(&p, None, None);
        assert_eq!(
            reports, 0,
            "seed {seed}: correct program reported: {:?}",
            p.steps
        );
        let slowed = (seed as usize) % p.streams;
        let (again, reports) = run(&p, None, Some(slowed));
        assert_eq!(reports, 0, "seed {seed}: correct program, slowed, reported");
        assert_eq!(
            again, reference,
            "seed {seed}: a race-free program depends on timing?"
        );

        // Mutate a sync the program needs (a use or a record_stream one), not a random extra.
        let syncs: Vec<(usize, usize, Why)> = p
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match *s {
                Step::Sync { from, why, .. } if why != Why::Extra => Some((i, from, why)),
                _ => None,
            })
            .collect();
        if syncs.is_empty() {
            continue;
        }
        let (skip, from, why) = syncs[Rng::new(seed ^ 0xABCD).below(syncs.len())];
        mutants += 1;
        if why == Why::RecordStream {
            record_stream_mutants += 1;
        }
        let (result, reports) = run(&p, Some(skip), Some(from));
        if result != reference {
            differing += 1;
            if why == Why::RecordStream {
                record_stream_differing += 1;
            }
            if reports > 0 {
                reported_differing += 1;
            } else {
                missed.push(seed);
            }
        } else if reports > 0 {
            reported_same += 1;
        }
    }
    let rate = reported_differing as f64 / differing.max(1) as f64;
    println!(
        "{PROGRAMS} correct programs: 0 reports; {mutants} mutants ({record_stream_mutants} \
         without a record_stream sync), {differing} with a differing result \
         ({record_stream_differing} record_stream), {reported_differing} of them reported \
         ({:.2}%); {reported_same} more reported whose result happened not to differ; missed \
         seeds {missed:?}",
        rate * 100.0
    );
    assert!(mutants >= 1_000, "{mutants} mutants");
    assert!(
        differing >= 300,
        "too few mutants differ to measure: {differing}"
    );
    assert!(rate >= 0.99, "detection rate {rate}, missed {missed:?}");
}
