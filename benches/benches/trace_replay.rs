//! Replay throughput of braid's caching allocator on the real PyTorch snapshots in
//! the repository's `traces/`: wall time to replay each trace's prologue and window through the allocator
//! on a timing-only simulated device (parsing, planning, device setup and the final drop of
//! live buffers are not timed), with the default configuration and with the lowest-waste one
//! (expandable segments with 2 MiB pages and lifetime placement, which maps and unmaps many
//! pages). Benchmarks are named `<trace>/<configuration>`.
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
