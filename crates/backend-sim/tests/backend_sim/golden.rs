//! Results of fixed pseudo-random programs are pinned: the timeline, the Chrome trace (host
//! calls, flows, memory samples), the sanitizer reports, the counters, every call's result and
//! the data read back, fingerprinted per configuration. The fingerprints were taken before the
//! engine's data structures were reworked for speed (resource pools, memory map, lifetime
//! tracking), so any change to a simulated result shows up here. The data fingerprints were
//! taken again when kernels moved to `braid-kernels`: matrix products through `gemm` differ
//! from the former i-j-k loop in the last bit of some elements (fused multiply-adds, blocked
//! sums over `k`), and a sum over a range that reads as zeros is +0.0 where it was -0.0 (Rust's
//! sum of no floats); the timing fingerprints did not change.
//!
//! `BRAID_GOLDEN_DUMP=dir` writes the full text of each program's results to `dir` for diffing.

use braid_backend_sim::{
    DeviceProfile, SanitizerMode, SimConfig, SimDevice, SimEvent, SimGraph, SimMode, SimStream,
};
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, DevicePtr, DeviceSlice, EventFlags};
use std::fmt::Write as _;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// FNV-1a over `text`.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A small profile with several units per resource, so ops share and backfill.
fn profile() -> DeviceProfile {
    DeviceProfile {
        name: "golden".to_string(),
        cube_flops_per_s: 4_000_000_000,
        cube_bf16_flops_per_s: 4_000_000_000,
        cube_f32_flops_per_s: 4_000_000_000,
        // Full rate at every size: the fingerprints predate the efficiency curve.
        cube_efficiency: Vec::new(),
        vector_flops_per_s: 2_000_000_000,
        vector_f32_flops_per_s: 2_000_000_000,
        cube_units: 4,
        vector_units: 3,
        copy_engines: 2,
        cube_tile: 4,
        vector_tile_bytes: 256,
        hbm_bytes_per_s: 8_000_000_000,
        hbm_effective_bytes_per_s: 8_000_000_000,
        hbm_bytes: 1 << 30,
        memory_bytes: 1 << 30,
        h2d_bytes_per_s: 1_000_000_000,
        d2h_bytes_per_s: 1_000_000_000,
        min_kernel_ns: 50,
        eager_launch_ns: 7,
        host_call_ns: 1,
        graph_launch_ns: 20,
        graph_node_ns: 1,
    }
}

struct World {
    dev: SimDevice,
    streams: Vec<SimStream>,
    events: Vec<SimEvent>,
    bufs: Vec<Option<(DevicePtr, u64)>>,
    graphs: Vec<SimGraph>,
    blocks: Vec<(DeviceSlice, u32)>,
    host: Vec<Vec<u8>>,
    log: String,
}

impl World {
    fn buf(&self, rng: &mut Rng) -> Option<(DevicePtr, u64)> {
        let live: Vec<(DevicePtr, u64)> = self.bufs.iter().flatten().copied().collect();
        (!live.is_empty()).then(|| live[rng.below(live.len() as u64) as usize])
    }

    /// A kernel over live buffers (lengths in whole f32, possibly out of bounds).
    fn kernel(&self, rng: &mut Rng) -> Option<Kernel> {
        let (a, alen) = self.buf(rng)?;
        let (b, blen) = self.buf(rng)?;
        let n = (alen.min(blen) / 4).max(1) * 4;
        let s = |p: DevicePtr| DeviceSlice::new(p, n);
        Some(match rng.below(7) {
            0 => Kernel::Fill {
                dst: s(a),
                value: rng.below(9) as f32,
            },
            1 => Kernel::Add {
                a: s(a),
                b: s(b),
                out: s(b),
            },
            2 => Kernel::Scale {
                src: s(a),
                dst: s(b),
                factor: 1.5,
            },
            3 => Kernel::Copy {
                src: s(a),
                dst: s(b),
            },
            4 => Kernel::ReduceSum {
                src: s(a),
                dst: DeviceSlice::new(b, 4),
            },
            5 => {
                let m = 1 + rng.below(8) as u32;
                let k = 1 + rng.below(8) as u32;
                let nn = 1 + rng.below(8) as u32;
                let need = |r: u32, c: u32| r as u64 * c as u64 * 4;
                if need(m, k) > alen || need(k, nn) > alen || need(m, nn) > blen {
                    Kernel::Busy {
                        duration_ns: 10 + rng.below(400),
                    }
                } else {
                    Kernel::Matmul {
                        a: DeviceSlice::new(a, need(m, k)),
                        b: DeviceSlice::new(a, need(k, nn)),
                        c: DeviceSlice::new(b, need(m, nn)),
                        m,
                        k,
                        n: nn,
                    }
                }
            }
            _ => Kernel::Busy {
                duration_ns: 10 + rng.below(2_000),
            },
        })
    }

    fn step(&mut self, rng: &mut Rng, i: usize) {
        let ns = self.streams.len() as u64;
        let si = rng.below(ns) as usize;
        let st = self.streams[si].clone();
        let r = match rng.below(24) {
            0 | 1 => {
                let size = 4 * (1 + rng.below(2048));
                let r = self.dev.alloc(size);
                if let Ok(p) = r {
                    self.bufs.push(Some((p, size)));
                }
                format!("{r:?}")
            }
            2 => {
                let j = rng.below(self.bufs.len() as u64) as usize;
                match self.bufs.get_mut(j).and_then(Option::take) {
                    Some((p, _)) => {
                        self.blocks
                            .retain(|(b, _)| b.ptr.0 < p.0 || b.ptr.0 >= p.0 + (2 << 20));
                        // SAFETY: the simulator checks frees; nothing dereferences the pointer.
                        format!("{:?}", unsafe { self.dev.free(p) })
                    }
                    None => "none".to_string(),
                }
            }
            3..=10 => match self.kernel(rng) {
                Some(k) => format!("{:?}", st.launch(&TypedKernel::from(&k), &format!("k{i}"))),
                None => "none".to_string(),
            },
            11 => match (self.buf(rng), self.buf(rng)) {
                (Some((a, la)), Some((b, lb))) => {
                    format!("{:?}", st.memcpy_d2d(a, b, la.min(lb)))
                }
                _ => "none".to_string(),
            },
            12 => match self.buf(rng) {
                Some((a, la)) => {
                    let h = vec![(i % 251) as u8; la as usize];
                    // SAFETY: the source stays alive in `self.host` until the end of the
                    // program, which synchronizes.
                    let r = unsafe { st.memcpy_h2d(a, h.as_ptr(), la) };
                    self.host.push(h);
                    format!("{r:?}")
                }
                None => "none".to_string(),
            },
            13 => match self.buf(rng) {
                Some((a, la)) => format!("{:?}", st.memset(a, (i % 7) as u8, la / 2)),
                None => "none".to_string(),
            },
            14 | 15 => {
                let e = &self.events[rng.below(self.events.len() as u64) as usize];
                format!("{:?}", st.record(e))
            }
            16 | 17 => {
                let e = &self.events[rng.below(self.events.len() as u64) as usize];
                format!("{:?}", st.wait(e))
            }
            18 => match rng.below(5) {
                0 => format!("{:?}", self.dev.synchronize()),
                1 => format!("{:?}", st.synchronize()),
                2 => format!("{:?}", st.query()),
                3 => {
                    let e = &self.events[rng.below(self.events.len() as u64) as usize];
                    format!("{:?}", e.synchronize())
                }
                _ => {
                    let a = &self.events[rng.below(self.events.len() as u64) as usize];
                    let b = &self.events[rng.below(self.events.len() as u64) as usize];
                    format!("{:?} {:?}", a.query(), a.elapsed_ms(b))
                }
            },
            19 => {
                // capture a few ops on this stream (joined by another through an event)
                let other = self.streams[(si + 1) % self.streams.len()].clone();
                let ev = self.events[0].clone();
                let mut out = format!("{:?}", st.begin_capture(CaptureMode::Relaxed));
                for j in 0..(2 + rng.below(6)) {
                    let target = if j % 3 == 2 { &other } else { &st };
                    if j % 3 == 1 {
                        let _ = st.record(&ev);
                        let _ = other.wait(&ev);
                    }
                    if let Some(k) = self.kernel(rng) {
                        let _ = write!(
                            out,
                            " {:?}",
                            target.launch(&TypedKernel::from(&k), &format!("g{i}.{j}"))
                        );
                    }
                }
                let _ = st.record(&ev);
                let _ = other.wait(&ev);
                let _ = st.wait(&ev);
                match st.end_capture() {
                    Ok(g) => {
                        let _ = write!(out, " graph {}", g.node_count());
                        self.graphs.push(g);
                    }
                    Err(e) => {
                        let _ = write!(out, " {e:?}");
                    }
                }
                out
            }
            20 | 21 => match self.graphs.len() {
                0 => "none".to_string(),
                n => {
                    let g = &self.graphs[rng.below(n as u64) as usize];
                    // several launches in a row without a synchronize: a backlog
                    let times = 1 + rng.below(4);
                    (0..times)
                        .map(|_| format!("{:?}", g.launch(&st)))
                        .collect::<Vec<_>>()
                        .join(",")
                }
            },
            22 => match self.buf(rng) {
                Some((a, la)) if la >= 64 => {
                    let off = 4 * rng.below(la / 8);
                    let len = 4 * (1 + rng.below((la - off) / 4));
                    let range = DeviceSlice::new(DevicePtr(a.0 + off), len.min(la - off));
                    let r = self.dev.sanitizer_note_alloc(range, st.index());
                    if r.is_ok() {
                        self.blocks.push((range, st.index()));
                    }
                    format!("{r:?}")
                }
                _ => "none".to_string(),
            },
            _ => match self.blocks.len() {
                0 => format!("{:?}", self.dev.mem_info()),
                n => {
                    let (range, s) = self.blocks.swap_remove(rng.below(n as u64) as usize);
                    format!("{:?}", self.dev.sanitizer_note_free(range, s))
                }
            },
        };
        let _ = writeln!(self.log, "{i} s{si}: {r} @{}", self.dev.host_time_ns());
    }
}

fn run(config: SimConfig, seed: u64, steps: usize) -> String {
    let dev = SimDevice::new(config.profile(profile()));
    let mut world = World {
        streams: (0..4).map(|_| dev.create_stream(0).unwrap()).collect(),
        events: (0..4)
            .map(|i| {
                dev.create_event(if i % 2 == 0 {
                    EventFlags::ORDERING
                } else {
                    EventFlags::TIMING
                })
                .unwrap()
            })
            .collect(),
        dev,
        bufs: Vec::new(),
        graphs: Vec::new(),
        blocks: Vec::new(),
        host: Vec::new(),
        log: String::new(),
    };
    let mut rng = Rng(seed);
    for i in 0..steps {
        world.step(&mut rng, i);
    }
    // read every live buffer back
    let dev = world.dev.clone();
    let s0 = world.streams[0].clone();
    for (p, len) in world.bufs.iter().flatten() {
        let mut out = vec![0u8; *len as usize];
        // SAFETY: `out` outlives the synchronize below.
        let r = unsafe { s0.memcpy_d2h(out.as_mut_ptr(), *p, *len) };
        let _ = s0.synchronize();
        let _ = writeln!(
            world.log,
            "read {p:?}: {r:?} {:016x}",
            fnv(&format!("{out:?}"))
        );
    }
    dev.synchronize().unwrap();
    let mut text = world.log;
    let _ = writeln!(
        text,
        "host {} makespan {}",
        dev.host_time_ns(),
        dev.makespan_ns()
    );
    let _ = writeln!(text, "stats {:?}", dev.stats());
    let _ = writeln!(text, "reports {}", dev.sanitizer_report_count());
    for r in dev.sanitizer_reports() {
        let _ = writeln!(text, "{r:?}");
    }
    for op in dev.timeline() {
        let _ = writeln!(text, "{op:?}");
    }
    text.push_str(&dev.chrome_trace_json());
    text
}

fn configs() -> Vec<(&'static str, SimConfig)> {
    let base = SimConfig::new().capacity(64 << 20);
    vec![
        ("data_report", base.clone()),
        ("data_abort", base.clone().sanitizer(SanitizerMode::Abort)),
        (
            "timing_off_notimeline",
            base.clone()
                .mode(SimMode::TimingOnly)
                .sanitizer(SanitizerMode::Off)
                .record_timeline(false),
        ),
        (
            "timing_off_timeline",
            base.clone()
                .mode(SimMode::TimingOnly)
                .sanitizer(SanitizerMode::Off),
        ),
        (
            "timing_report_notimeline",
            base.mode(SimMode::TimingOnly).record_timeline(false),
        ),
    ]
}

/// Fingerprints of the programs, per configuration, per seed (re-pinned when waits inside a
/// capture on eagerly recorded events became refusals, by braid's one capture rule, when
/// reports gained their stream tags and hints, and when ops and reports gained their device
/// and the trace a process per device: the dumps of the previous engine and of the node
/// engine were compared with those fields and the process metadata taken out, and matched;
/// when the statistics gained `resident_data_bytes`, when the trace gained `otherData`
/// (the timeline's capacity and what it dropped), and when the error of elapsed time without
/// timing came to name `EventFlags::TIMING`: the texts without the change matched the previous
/// fingerprints each time; and when reports gained the rank of a collective's part
/// (`OpInfo::rank`) and uses after free were named as such: only the configurations with
/// reports changed, those without kept their fingerprints).
const GOLDEN: &[(&str, u64, u64)] = &[
    ("data_report", 1, 0xebbb48620dbc761e),
    ("data_report", 2, 0xa3de50a793473e1c),
    ("data_report", 3, 0x98c2c56d5a6116b5),
    ("data_abort", 1, 0x6c8b92a4ffbb282f),
    ("data_abort", 2, 0x4c393b66ed264031),
    ("data_abort", 3, 0x93fd2203311bb0bf),
    ("timing_off_notimeline", 1, 0x9e943220f65d3031),
    ("timing_off_notimeline", 2, 0xef01aa02f9671e48),
    ("timing_off_notimeline", 3, 0x011d3dfc2ca54d0a),
    ("timing_off_timeline", 1, 0x24956819de47d3ac),
    ("timing_off_timeline", 2, 0xc22eaa9b2608d44a),
    ("timing_off_timeline", 3, 0x15e9815482d4666f),
    ("timing_report_notimeline", 1, 0x1995c87c437f6d78),
    ("timing_report_notimeline", 2, 0x1492a120291d6a6f),
    ("timing_report_notimeline", 3, 0x0e6f1771e23267d2),
];

#[test]
fn results_match_the_pinned_fingerprints() {
    let dump = std::env::var_os("BRAID_GOLDEN_DUMP").map(std::path::PathBuf::from);
    let mut got = Vec::new();
    for (name, config) in configs() {
        for seed in [1u64, 2, 3] {
            let text = run(config.clone(), seed, 3_000);
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).unwrap();
                std::fs::write(dir.join(format!("{name}_{seed}.txt")), &text).unwrap();
            }
            got.push((name, seed, fnv(&text)));
        }
    }
    let listing: String = got
        .iter()
        .map(|(n, s, h)| format!("    (\"{n}\", {s}, 0x{h:016x}),\n"))
        .collect();
    assert_eq!(
        got,
        GOLDEN.to_vec(),
        "fingerprints changed; now:\n{listing}"
    );
}
