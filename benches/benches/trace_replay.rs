//! Replay throughput of braid's caching allocator on the real PyTorch snapshots in the
//! repository's `traces/`: wall time to replay each trace's prologue and window through the
//! allocator on a timing-only simulated device (parsing, planning, device setup and the final
//! drop of live buffers are not timed), with the default configuration and with the
//! lowest-waste one (expandable segments with 2 MiB pages and lifetime placement, which maps
//! and unmaps many pages). Benchmarks are named `<trace>/<configuration>`.
//!
//! Figures, in million events per second (criterion medians on the 2-core development VM;
//! each cell is the range over two runs, one with the other core busy and one without, since
//! the VM's speed drifts by up to a quarter from one run to the next):
//!
//! | configuration | inference | training | bf16 | SketchKV2 |
//! |---|---|---|---|---|
//! | defaults | 18.2–19.0 | 12.4–13.4 | 16.1–20.2 | 7.1–7.6 |
//! | `expandable_segments:true,expandable_large_page_mb:2,lifetime_placement:true` | 10.2–10.4 | 9.0–10.0 | 7.3–8.0 | 5.4–6.7 |
//!
//! The lowest-waste row maps and unmaps 2 MiB pages (7,812 of them for SketchKV2's 839
//! blocks). It went from 2.2–3.5 million events per second (0.1–0.3 on SketchKV2) to these
//! figures once pages were mapped in runs and growth planning stopped walking every block
//! (`braid_allocator`'s expandable segments, "Cost of a miss"): under callgrind, from 1,763 /
//! 2,400 / 1,850 / 34,635 instructions per event of the replay loop to 618 / 690 / 789 /
//! 1,441, then, with the leaner miss path of lifetime placement, from 610 / 690 / 782 / 1,424
//! to 590 / 656 / 747 / 1,199.
//!
//! The replay runs on a timing-only simulated device (models far larger than host memory), so
//! it always runs on the simulator, whatever `BRAID_BENCH_BACKEND` or the `acl` feature select.

use braid_trace::{parse_conf, AllocatorConfig, ReplayPlan, SimReplay, Snapshot};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

/// The configurations measured: (name, `PYTORCH_ALLOC_CONF`-style string).
const CONFIGS: [(&str, Option<&str>); 2] = [
    ("default", None),
    (
        "lowest_waste",
        Some("expandable_segments:true,expandable_large_page_mb:2,lifetime_placement:true"),
    ),
];

fn trace_replay(c: &mut Criterion) {
    let mut group = c.benchmark_group("trace_replay");
    for path in braid_benches::trace_files() {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let plan = match Snapshot::from_path(&path).and_then(|s| ReplayPlan::from_snapshot(&s, 0)) {
            Ok(plan) => plan,
            Err(e) => {
                eprintln!("note: skipping {name}: {e}");
                continue;
            }
        };
        group.throughput(Throughput::Elements(plan.ops.len() as u64));
        for (conf_name, conf) in CONFIGS {
            let config = parse_conf(conf).expect("the configurations parse");
            group.bench_function(format!("{name}/{conf_name}"), |b| {
                b.iter_custom(|iters| replay_time(&plan, &config, iters))
            });
        }
    }
    group.finish();
}

/// Total time of `iters` replays of `plan`, each on a fresh device and allocator: only the
/// replay loop (`ReplayStats::replay_ns`) counts, not the setup nor dropping the buffers
/// still live at the end.
fn replay_time(plan: &ReplayPlan, config: &AllocatorConfig, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let replay = SimReplay::new(plan, config.clone(), None).expect("sim device");
        let stats = replay.run(plan).expect("replay");
        total += Duration::from_nanos(stats.replay_ns);
    }
    total
}

criterion_group!(benches, trace_replay);
criterion_main!(benches);
