//! Replay on the simulated device (feature `sim`, on by default).
//!
//! [`SimReplay`] opens a simulated device in timing-only mode (no data, no timeline, no
//! sanitizer, capacity far above the trace's needs), so the numbers are the allocator's alone;
//! [`replay_file`] is `braid trace replay`: parse, plan, replay, report.

use crate::error::{Result, TraceError};
use crate::export::MemoryExport;
use crate::replay::{parse_conf, replay, ReplayStats};
use crate::replay_plan::ReplayPlan;
use crate::report::ReplayReport;
use crate::snapshot::Snapshot;
use braid_allocator::{AllocatorConfig, CachingAllocator, MAX_HISTORY_SIZE};
use braid_backend_sim::{SanitizerMode, SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::{Device, Stream};
use std::path::Path;

/// Replay settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Allocator configuration string (`max_split_size_mb:128,...`); `None` for defaults.
    pub conf: Option<String>,
    /// Times the replay runs, each on a fresh device and allocator; the fastest run gives
    /// the time per event (the memory numbers are the same every run).
    pub runs: usize,
    /// Device index of the trace.
    pub device: usize,
    /// Where to write braid's own memory (segments, blocks and the whole replay's history) as
    /// a snapshot pickle for pytorch.org/memory_viz; `None` writes nothing.
    pub export: Option<std::path::PathBuf>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            conf: None,
            runs: 5,
            device: 0,
            export: None,
        }
    }
}

/// A fresh simulated device (timing only, no timeline, no sanitizer), an allocator with
/// `config` on it, and one stream per trace stream (the first on the default stream).
pub struct SimReplay {
    /// The allocator.
    pub allocator: CachingAllocator<SimBackend>,
    /// Streams, indexed like [`ReplayPlan::streams`].
    pub streams: Vec<Stream<SimBackend>>,
}

impl SimReplay {
    /// Opens the device and allocator for `plan`. `capacity` is the simulated device's
    /// memory; `None` picks 4 × the plan's peak live bytes, at least 64 GiB.
    pub fn new(plan: &ReplayPlan, config: AllocatorConfig, capacity: Option<u64>) -> Result<Self> {
        let capacity = capacity
            .unwrap_or_else(|| plan.summary.peak_live_bytes.saturating_mul(4).max(64 << 30));
        let sim = SimConfig::new()
            .capacity(capacity)
            .mode(SimMode::TimingOnly)
            .record_timeline(false)
            .sanitizer(SanitizerMode::Off);
        let setup = |e: &dyn std::fmt::Display| TraceError::Replay {
            event: 0,
            message: format!("cannot set up the simulated device: {e}"),
        };
        let device = Device::new(SimDevice::new(sim)).map_err(|e| setup(&e))?;
        let allocator = CachingAllocator::new(device.clone(), config).map_err(|e| setup(&e))?;
        let mut streams = Vec::with_capacity(plan.streams.len().max(1));
        streams.push(device.default_stream());
        for _ in 1..plan.streams.len() {
            streams.push(device.create_stream(0).map_err(|e| setup(&e))?);
        }
        Ok(SimReplay { allocator, streams })
    }

    /// Replays `plan` (see [`replay`]).
    pub fn run(&self, plan: &ReplayPlan) -> Result<ReplayStats> {
        replay(plan, &self.allocator, &self.streams)
    }
}

/// Replays `plan` on a fresh simulated device with the allocator configured by `conf` (a
/// `PYTORCH_ALLOC_CONF`-style string; `None` for the defaults).
pub fn replay_on_sim(plan: &ReplayPlan, conf: Option<&str>) -> Result<ReplayStats> {
    SimReplay::new(plan, parse_conf(conf)?, None)?.run(plan)
}

/// Parses `path`, plans its replay and replays it on the simulated device.
pub fn replay_file(path: impl AsRef<Path>, options: &ReplayOptions) -> Result<ReplayReport> {
    let path = path.as_ref();
    let snapshot = Snapshot::from_path(path)?;
    let plan = ReplayPlan::from_snapshot(&snapshot, options.device)?;
    let stats = replay_plan_on_sim(&plan, options)?;
    Ok(ReplayReport::new(
        &path.display().to_string(),
        options.conf.as_deref().unwrap_or(""),
        snapshot.is_state_only(),
        &plan,
        &stats,
    ))
}

/// Replays `plan` `options.runs` times (at least once) on fresh simulated devices and
/// returns the first run's statistics with the fastest run's time.
pub fn replay_plan_on_sim(plan: &ReplayPlan, options: &ReplayOptions) -> Result<ReplayStats> {
    let config = parse_conf(options.conf.as_deref())?;
    let mut best: Option<ReplayStats> = None;
    for run_index in 0..options.runs.max(1) {
        let export = options.export.as_ref().filter(|_| run_index == 0);
        let run_config = match export {
            // Keep every event of the replay: alloc, free and segment events per op, and slack.
            Some(_) => config
                .clone()
                .record_history(true)
                .history_size(export_history_size(plan.ops.len())),
            None => config.clone(),
        };
        let sim = SimReplay::new(plan, run_config, None)?;
        let run = sim.run(plan)?;
        if let Some(path) = export {
            MemoryExport::from_allocator(&sim.allocator).write(path)?;
        }
        best = Some(match best {
            None => run,
            Some(mut first) => {
                first.replay_ns = first.replay_ns.min(run.replay_ns);
                first
            }
        });
    }
    best.ok_or_else(|| TraceError::Format("no replay ran".into()))
}

/// The history ring an exported replay of `ops` operations records into: room for every
/// event (an alloc, a free and segment events per op, and slack), within the allocator's
/// bound [`MAX_HISTORY_SIZE`] (a longer replay keeps its latest events).
fn export_history_size(ops: usize) -> usize {
    ops.saturating_mul(4)
        .saturating_add(1024)
        .min(MAX_HISTORY_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_history_is_within_the_allocators_bound() {
        assert_eq!(export_history_size(10), 1064);
        for ops in [MAX_HISTORY_SIZE / 4, MAX_HISTORY_SIZE, usize::MAX] {
            let size = export_history_size(ops);
            assert_eq!(size, MAX_HISTORY_SIZE, "{ops} ops");
            AllocatorConfig::new()
                .record_history(true)
                .history_size(size)
                .validate()
                .expect("a history the allocator accepts");
        }
    }
    use crate::replay_plan::Op;
    use crate::snapshot::{Action, Segment, TraceEvent};

    fn plan(events: &[(Action, u64, u64, u64)]) -> ReplayPlan {
        let snap = Snapshot {
            device_traces: vec![events
                .iter()
                .map(|(a, addr, size, stream)| TraceEvent::new(a.clone(), *addr, *size, *stream))
                .collect()],
            ..Snapshot::default()
        };
        ReplayPlan::from_snapshot(&snap, 0).unwrap()
    }

    #[test]
    fn replays_reuse_on_one_stream() {
        use Action::{Alloc, FreeRequested};
        let p = plan(&[
            (Alloc, 0x1000, 4 << 20, 0),
            (FreeRequested, 0x1000, 4 << 20, 0),
            (Alloc, 0x1000, 4 << 20, 0),
            (FreeRequested, 0x1000, 4 << 20, 0),
            (FreeRequested, 0x9000, 1000, 0), // prologue block
        ]);
        let stats = replay_on_sim(&p, None).unwrap();
        assert_eq!(stats.events, 5 + 1);
        assert_eq!(
            stats.device_mallocs, 2,
            "one small segment, one 20 MiB segment"
        );
        assert_eq!(stats.peak_reserved_bytes, (2 << 20) + (20 << 20));
        assert_eq!(stats.peak_allocated_bytes, (4 << 20) + 1024);
        assert!(stats.fragmentation() > 0.0 && stats.fragmentation() < 1.0);
        assert!(stats.events_per_second() > 0.0);
    }

    #[test]
    fn streams_get_their_own_blocks() {
        use Action::{Alloc, FreeRequested};
        let p = plan(&[
            (Alloc, 0x1000, 1 << 20, 0),
            (FreeRequested, 0x1000, 1 << 20, 0),
            (Alloc, 0x2000, 1 << 20, 77),
        ]);
        assert_eq!(p.streams, vec![0, 77]);
        let stats = replay_on_sim(&p, None).unwrap();
        assert_eq!(
            stats.device_mallocs, 2,
            "a block freed on stream 0 is not reused on 77"
        );
    }

    #[test]
    fn bad_config_and_bad_plans_are_typed_errors() {
        let p = plan(&[(Action::Alloc, 0x1000, 512, 0)]);
        assert!(matches!(
            replay_on_sim(&p, Some("no_such_key:1")),
            Err(TraceError::Config(_))
        ));
        let mut broken = p.clone();
        broken.ops.push(Op::Free { id: 5 });
        assert!(matches!(
            replay_on_sim(&broken, None),
            Err(TraceError::Replay { event: 1, .. })
        ));
        let mut twice = p.clone();
        twice.ops.push(Op::Alloc {
            id: 0,
            size: 512,
            stream: 0,
        });
        assert!(matches!(
            replay_on_sim(&twice, None),
            Err(TraceError::Replay { event: 1, .. })
        ));
        let tiny = SimReplay::new(&p, AllocatorConfig::new(), Some(1 << 20)).unwrap();
        assert!(matches!(
            tiny.run(&p),
            Err(TraceError::Replay { event: 0, .. })
        ));
    }

    #[test]
    fn report_puts_both_sides_in_the_table_and_json() {
        let snap = Snapshot {
            device_traces: vec![vec![
                TraceEvent::new(Action::SegmentAlloc, 0x1000, 2 << 20, 0),
                TraceEvent::new(Action::Alloc, 0x1000, 1000, 0),
                TraceEvent::new(Action::FreeRequested, 0x1000, 1000, 0),
            ]],
            segments: vec![Segment {
                address: 0x1000,
                total_size: 2 << 20,
                ..Default::default()
            }],
            ..Snapshot::default()
        };
        let plan = ReplayPlan::from_snapshot(&snap, 0).unwrap();
        let options = ReplayOptions {
            runs: 2,
            ..ReplayOptions::default()
        };
        let stats = replay_plan_on_sim(&plan, &options).unwrap();
        let report = ReplayReport::new("x.pickle", "", false, &plan, &stats);
        assert_eq!(report.torch_peak_reserved_bytes, 2 << 20);
        assert_eq!(report.torch_reserved_at_start_bytes, 0);
        assert_eq!(report.torch_device_mallocs, 1);
        assert_eq!(report.peak_reserved_bytes, 2 << 20);
        assert_eq!(report.peak_live_bytes, 1024);
        let table = report.table();
        assert!(table.contains("peak reserved"), "{table}");
        assert!(table.contains("pytorch"), "{table}");
        let bad = ReplayOptions {
            conf: Some("max_split_size_mb:nope".into()),
            ..ReplayOptions::default()
        };
        assert!(matches!(
            replay_plan_on_sim(&plan, &bad),
            Err(TraceError::Config(_))
        ));
    }
}
