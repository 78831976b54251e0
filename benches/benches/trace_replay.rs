//! Replay throughput of braid's caching allocator on the real PyTorch snapshots in
//! `shared/traces`: wall time to replay each trace's prologue and window through the allocator
//! on a timing-only simulated device (parsing, planning, device setup and the final drop of
//! live buffers are not timed).
//! Files that are absent are skipped.
//!
//! The replay runs on a timing-only simulated device (models far larger than host memory), so
//! it always runs on the simulator, whatever `BRAID_BENCH_BACKEND` or the `acl` feature select.

use braid_trace::{ReplayPlan, SimReplay, Snapshot};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

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
        // Times only the replay loop (`ReplayStats::replay_ns`): device and allocator setup
        // and dropping the buffers still live at the end are left out.
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let replay =
                        SimReplay::new(&plan, Default::default(), None).expect("sim device");
                    let stats = replay.run(&plan).expect("replay");
                    total += Duration::from_nanos(stats.replay_ns);
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, trace_replay);
criterion_main!(benches);
