//! Soak under injected faults: random multi-stream programs (allocations, frees, cross-stream
//! uses with `record_stream`, event records and waits, synchronizations, captures and
//! replays, `empty_cache`) run on a simulated device where 1% of every kind of backend call
//! fails, and some kernels fail on the device after their launch. After each failed call the
//! program goes on; at the end everything is dropped and the device must be back to nothing
//! reserved, no live segment, no sanitizer report, and the allocator's invariants hold
//! throughout.
//!
//! The program only issues work whose ordering it has established: a buffer last touched on
//! stream `a` is touched on stream `b` only after `b.wait_stream(a)` succeeded, and then
//! `record_stream(b)` tells the allocator. So a sanitizer report would be a real bug in a
//! layer, never the program's.

use braid::allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid::graph_capture::{
    CaptureSession, CapturedGraph, GraphError, GraphRunner, InputKind, RunContext, RunnerConfig,
};
use braid::sim::{CallKind, FaultPlan, SimBackend, SimConfig, SimMode};
use braid::{Device, DeviceSlice, Kernel, Stream};

type B = SimBackend;

/// The runner's model: `y = x + x` in a fresh buffer.
type Model = fn(&RunContext<'_, B>, &[DeviceSlice]) -> Result<Vec<DeviceBuffer<B>>, GraphError>;

fn double(
    ctx: &RunContext<'_, B>,
    inputs: &[DeviceSlice],
) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
    let y = ctx.alloc(inputs[0].len)?;
    ctx.current_stream().launch(&Kernel::Add {
        a: inputs[0],
        b: inputs[0],
        out: y.slice(),
    })?;
    Ok(vec![y])
}

/// SplitMix64: the program's own deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A live buffer and the stream that touched it last.
struct Buf {
    buf: DeviceBuffer<B>,
    last: usize,
}

/// What a soak run did.
#[derive(Debug, Default)]
struct Outcome {
    ops: u64,
    /// Calls of the program that returned an error (injected or consequent).
    failed_ops: u64,
    /// Backend calls the simulator made fail synchronously.
    injected: u64,
    /// Kernels that failed on the device after their launch.
    injected_async: u64,
    captures: u64,
    replays: u64,
    /// Successful calls of the graph runner.
    model_runs: u64,
}

struct Soak {
    device: Device<B>,
    alloc: CachingAllocator<B>,
    /// The default stream first.
    streams: Vec<Stream<B>>,
    buffers: Vec<Buf>,
    graphs: Vec<CapturedGraph<B>>,
    events: Vec<braid::Event<B>>,
    runner: GraphRunner<B, Model>,
    rng: Rng,
    out: Outcome,
}

/// Sizes: mostly small blocks, some large ones, a few past a large segment.
fn size(rng: &mut Rng) -> u64 {
    let words = match rng.below(10) {
        0..=5 => 1 + rng.below(1 << 16),
        6..=8 => (1 << 18) + rng.below(1 << 20),
        _ => (6 << 20) + rng.below(4 << 20),
    };
    words as u64 * 4
}

impl Soak {
    fn new(seed: u64, expandable: bool) -> Soak {
        let plan = FaultPlan::new()
            .rate(
                seed,
                std::env::var("SOAK_RATE").map_or(0.01, |v| v.parse().unwrap()),
                CallKind::ALL,
            )
            .async_rate(seed ^ 0x5eed, 0.002);
        let config = SimConfig::new()
            .capacity(512 << 20)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .faults(plan);
        let device = braid::sim_device(config).unwrap();
        let alloc_config = AllocatorConfig::new().expandable_segments(expandable);
        let alloc = CachingAllocator::new(device.clone(), alloc_config).unwrap();
        // Streams are created with faults on too: retry until three exist.
        let mut streams = vec![device.default_stream()];
        while streams.len() < 4 {
            if let Ok(s) = device.create_stream(0) {
                streams.push(s);
            }
        }
        let runner_config = RunnerConfig::new(vec![InputKind::User]).warmup_calls(1);
        let runner = loop {
            // Its capture stream is created with faults on too.
            if let Ok(r) = GraphRunner::new(&alloc, runner_config.clone(), double as Model) {
                break r;
            }
        };
        Soak {
            device,
            alloc,
            runner,
            streams,
            buffers: Vec::new(),
            graphs: Vec::new(),
            events: Vec::new(),
            rng: Rng(seed),
            out: Outcome::default(),
        }
    }

    fn note<T, E: std::fmt::Display>(&mut self, r: Result<T, E>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(_) => {
                self.out.failed_ops += 1;
                None
            }
        }
    }

    /// Orders stream `s` after the last use of buffer `i`; false when the wait failed.
    fn order(&mut self, i: usize, s: usize) -> bool {
        let last = self.buffers[i].last;
        if last == s {
            return true;
        }
        let r = self.streams[s].wait_stream(&self.streams[last]);
        self.note(r).is_some()
    }

    /// Buffer `i` is used on stream `s` from now on.
    fn used_on(&mut self, i: usize, s: usize) {
        self.buffers[i].last = s;
        if self.buffers[i].buf.stream() != self.streams[s].id() {
            let r = self.buffers[i].buf.record_stream(&self.streams[s]);
            self.note(r);
        }
    }

    fn fill(&mut self, i: usize, s: usize) {
        if !self.order(i, s) {
            return;
        }
        let dst = self.buffers[i].buf.slice();
        let r = self.streams[s].launch(&Kernel::Fill { dst, value: 1.0 });
        if self.note(r).is_some() {
            self.used_on(i, s);
        }
    }

    fn step(&mut self) {
        self.out.ops += 1;
        let n = self.buffers.len();
        let s = self.rng.below(self.streams.len());
        let op = self.rng.below(100);
        match op {
            // Frees: also instead of an allocation past 48 live buffers (the program's
            // working set stays bounded, so it does not drift into running out of memory).
            0..=34 if n > 48 || (n > 0 && op >= 20) => {
                let i = self.rng.below(n);
                self.buffers.swap_remove(i);
            }
            0..=19 => {
                let size = size(&mut self.rng);
                let r = self.alloc.alloc(size, &self.streams[s]);
                if let Some(buf) = self.note(r) {
                    self.buffers.push(Buf { buf, last: s });
                }
            }
            35..=54 if n > 0 => {
                let i = self.rng.below(n);
                let s = self.buffers[i].last;
                self.fill(i, s);
            }
            55..=64 if n > 0 => {
                let i = self.rng.below(n);
                self.fill(i, s);
            }
            65..=67 if n > 1 => {
                let (a, b) = (self.rng.below(n), self.rng.below(n));
                if a != b && self.order(a, s) && self.order(b, s) {
                    let len = (self.buffers[a].buf.requested_size())
                        .min(self.buffers[b].buf.requested_size());
                    let src = self.buffers[a].buf.range(0, len).unwrap();
                    let dst = self.buffers[b].buf.range(0, len).unwrap();
                    let r = self.streams[s].copy_d2d(src, dst);
                    if self.note(r).is_some() {
                        self.used_on(a, s);
                        self.used_on(b, s);
                    }
                }
            }
            68..=71 => {
                let r = self.streams[s].record_event();
                if let Some(e) = self.note(r) {
                    self.events.push(e);
                    if self.events.len() > 16 {
                        self.events.remove(0);
                    }
                }
            }
            72..=74 if !self.events.is_empty() => {
                let e = self.rng.below(self.events.len());
                let r = self.streams[s].wait(&self.events[e]);
                self.note(r);
            }
            75..=76 => {
                let t = self.rng.below(self.streams.len());
                let r = self.streams[s].wait_stream(&self.streams[t]);
                self.note(r);
            }
            77..=78 => {
                let r = self.streams[s].synchronize();
                self.note(r);
            }
            79 => {
                let r = self.streams[s].query();
                self.note(r);
            }
            80 => {
                let r = self.device.synchronize();
                self.note(r);
            }
            81..=83 => self.capture(),
            84..=90 if !self.graphs.is_empty() => {
                let g = self.rng.below(self.graphs.len());
                let r = self.graphs[g].launch(&self.streams[s]);
                if self.note(r).is_some() {
                    self.out.replays += 1;
                }
            }
            91..=92 if !self.graphs.is_empty() => {
                let g = self.rng.below(self.graphs.len());
                self.graphs.swap_remove(g);
            }
            93 => self.alloc.empty_cache(),
            97..=98 if n > 0 => self.run_model(s),
            94..=95 => self.alloc.process_pending(),
            96 if !self.events.is_empty() => {
                let e = self.rng.below(self.events.len());
                let r = self.events[e].synchronize();
                self.note(r);
            }
            _ => {}
        }
    }

    /// Captures a small graph on a side stream: a few allocations of its pool, filled and
    /// copied, freed at the end of the capture.
    fn capture(&mut self) {
        let s = 1 + self.rng.below(self.streams.len() - 1);
        let words = 1 + self.rng.below(4096) as u64;
        let count = 1 + self.rng.below(3);
        let side = self.rng.below(2) == 0;
        let stream = self.streams[s].clone();
        let r = CaptureSession::new(&self.alloc, &stream).run(|ctx| {
            let mut bufs = Vec::new();
            for _ in 0..count {
                let b = ctx.alloc(words * 4)?;
                ctx.stream().launch(&Kernel::Fill {
                    dst: b.slice(),
                    value: 2.0,
                })?;
                bufs.push(b);
            }
            if let [a, b, ..] = bufs.as_slice() {
                ctx.stream().copy_d2d(a.slice(), b.slice())?;
            }
            if side {
                // Work on a tagged side stream, joined back at the end of the capture.
                let c = ctx.alloc(words * 4)?;
                let _switch = ctx.stream_switch("soak side", 0)?;
                ctx.current_stream().launch(&Kernel::Fill {
                    dst: c.slice(),
                    value: 3.0,
                })?;
                c.record_stream(&ctx.current_stream())?;
            }
            Ok(())
        });
        if let Some((graph, ())) = self.note(r) {
            self.out.captures += 1;
            self.graphs.push(graph);
            if self.graphs.len() > 8 {
                self.graphs.remove(0);
            }
        }
    }

    /// One call of the graph runner on a live buffer (warm-up, capture or replay by shape),
    /// its output checked when the call succeeded.
    fn run_model(&mut self, s: usize) {
        let i = self.rng.below(self.buffers.len());
        if !self.order(i, s) {
            return;
        }
        let words = [64, 256, 1024][self.rng.below(3)];
        if self.buffers[i].buf.requested_size() < words * 4 {
            return;
        }
        let x = self.buffers[i].buf.range(0, words * 4).unwrap();
        let stream = self.streams[s].clone();
        // A fill first, so the output is known: 2 * 1.0.
        let r = stream.launch(&Kernel::Fill { dst: x, value: 1.0 });
        if self.note(r).is_none() {
            return;
        }
        self.used_on(i, s);
        let ran = self.runner.run(&stream, &[x]).map(|out| out.len());
        if self.note(ran) == Some(1) {
            self.out.model_runs += 1;
        }
    }

    /// Drops everything with faults off and checks the device is back to zero.
    fn finish(mut self) -> Outcome {
        let sim = self.device.hal().clone();
        sim.set_fault_plan(&FaultPlan::new());
        let counts = sim.fault_counts();
        self.out.injected = counts.total_injected();
        self.out.injected_async = counts.async_injected();
        self.alloc.check_invariants().unwrap();
        drop(self.runner);
        self.graphs.clear();
        self.buffers.clear();
        self.events.clear();
        // Pending asynchronous failures surface here (once); the second call is clean.
        let _ = self.device.synchronize();
        self.device.synchronize().unwrap();
        self.alloc.empty_cache();
        self.alloc.check_invariants().unwrap();
        assert_eq!(self.alloc.memory_allocated(), 0);
        assert_eq!(self.alloc.memory_reserved(), 0, "{:?}", self.alloc);
        drop(self.alloc);
        let stats = sim.stats();
        assert_eq!(stats.bytes_allocated, 0, "{stats:?}");
        assert_eq!(stats.allocations, stats.frees, "{stats:?}");
        assert_eq!(
            sim.sanitizer_report_count(),
            0,
            "{:#?}",
            sim.sanitizer_reports().first()
        );
        self.out
    }
}

/// Runs `ops` operations of the program of `seed`; prints and returns what it survived, in a
/// line.
fn soak(seed: u64, ops: u64, expandable: bool) -> String {
    let mut soak = Soak::new(seed, expandable);
    for i in 0..ops {
        soak.step();
        if i % 1000 == 999 {
            soak.alloc.check_invariants().unwrap();
        }
    }
    let out = soak.finish();
    let line = format!(
        "fault soak (seed {seed}, expandable segments {expandable}): {} operations, {} backend \
         faults injected and {} asynchronous kernel failures, all survived; {} operations \
         returned an error; {} captures, {} replays, {} graph runner calls",
        out.ops,
        out.injected,
        out.injected_async,
        out.failed_ops,
        out.captures,
        out.replays,
        out.model_runs
    );
    println!("{line}");
    assert!(
        out.injected > 0 && out.captures > 0 && out.replays > 0 && out.model_runs > 0,
        "{out:?}"
    );
    line
}

/// The sample output of the guide's chapter on fault injection: the `text` block that starts
/// with the first seed's line.
fn guide_sample() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/guide/08-fault-injection.md"
    );
    let chapter = std::fs::read_to_string(path).expect("the guide's chapter");
    let start = chapter
        .find("```text\nfault soak (seed 1,")
        .expect("the chapter's sample")
        + "```text\n".len();
    let len = chapter[start..].find("```").expect("the sample's end");
    chapter[start..start + len].to_string()
}

#[test]
fn ten_thousand_operations_survive_one_percent_faults() {
    let n: u64 = std::env::var("SOAK_SEEDS").map_or(1, |v| v.parse().unwrap());
    let mut lines = Vec::new();
    for k in 0..n {
        lines.push(soak(1 + 2 * k, 5_000, false));
        lines.push(soak(2 + 2 * k, 5_000, true));
    }
    // The guide shows what the first two programs survived: the run must say the same.
    let run = format!("{}\n{}\n", lines[0], lines[1]);
    assert_eq!(
        guide_sample(),
        run,
        "docs/guide/08-fault-injection.md's sample differs from this run; replace it with:\n{run}"
    );
}

#[test]
#[ignore = "a million operations: run with --release -- --ignored"]
fn a_million_operations_survive_one_percent_faults() {
    soak(3, 500_000, false);
    soak(4, 500_000, true);
}
