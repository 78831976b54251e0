//! Driving a [`ReplayPlan`] through braid's caching allocator.
//!
//! [`replay`] runs on any backend; [`replay_on_sim`] opens a simulated device in timing-only
//! mode (no data, no timeline, no sanitizer, capacity far above the trace's needs) so the
//! numbers are the allocator's alone.

use crate::error::{Result, TraceError};
use crate::replay_plan::{Op, ReplayPlan};
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_backend_sim::{SanitizerMode, SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Stream};
use serde::Serialize;
use std::time::Instant;

/// What the allocator did over a replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplayStats {
    /// Ops replayed (prologue allocs, window allocs and frees).
    pub events: u64,
    /// Peak of bytes in allocated blocks (rounded sizes).
    pub peak_allocated_bytes: u64,
    /// Peak of bytes held from the device.
    pub peak_reserved_bytes: u64,
    /// Peak of bytes in active blocks (allocated or pending free).
    pub peak_active_bytes: u64,
    /// Peak of bytes requested by live buffers.
    pub peak_requested_bytes: u64,
    /// Bytes held from the device once the prologue ran (when the recorded window starts).
    pub reserved_after_prologue_bytes: u64,
    /// Segments allocated from the device.
    pub device_mallocs: u64,
    /// Segments allocated from the device during the window (after the prologue).
    pub window_device_mallocs: u64,
    /// Segments returned to the device.
    pub device_frees: u64,
    /// Device mallocs that failed and were retried after freeing cache.
    pub alloc_retries: u64,
    /// Wall time of the replay loop in nanoseconds.
    pub replay_ns: u64,
}

impl ReplayStats {
    /// Wall time per op in nanoseconds.
    pub fn ns_per_event(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.replay_ns as f64 / self.events as f64
        }
    }

    /// Ops per second of wall time.
    pub fn events_per_second(&self) -> f64 {
        if self.replay_ns == 0 {
            0.0
        } else {
            self.events as f64 * 1e9 / self.replay_ns as f64
        }
    }

    /// `1 − peak active / peak reserved`: the share of the peak reservation never in use at
    /// the same time.
    pub fn fragmentation(&self) -> f64 {
        if self.peak_reserved_bytes == 0 {
            0.0
        } else {
            1.0 - self.peak_active_bytes as f64 / self.peak_reserved_bytes as f64
        }
    }
}

/// Replays `plan` through `allocator`, trace stream `i` on `streams[i]`.
///
/// The allocator should be fresh: its peak statistics are what the result reports. Buffers
/// still live at the end are dropped after the statistics are read.
pub fn replay<B: Backend>(
    plan: &ReplayPlan,
    allocator: &CachingAllocator<B>,
    streams: &[Stream<B>],
) -> Result<ReplayStats> {
    if streams.len() < plan.streams.len() {
        return Err(TraceError::Replay {
            event: 0,
            message: format!(
                "the plan uses {} streams but {} were given",
                plan.streams.len(),
                streams.len()
            ),
        });
    }
    let mut buffers: Vec<Option<DeviceBuffer<B>>> = Vec::new();
    buffers.resize_with(plan.buffer_count as usize, || None);
    let start = Instant::now();
    run_ops(plan.prologue(), 0, allocator, streams, &mut buffers)?;
    let after_prologue = allocator.memory_stats();
    run_ops(
        plan.window(),
        plan.prologue_len,
        allocator,
        streams,
        &mut buffers,
    )?;
    let replay_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let s = allocator.memory_stats();
    let stats = ReplayStats {
        events: plan.ops.len() as u64,
        peak_allocated_bytes: s.allocated_bytes.all.peak,
        peak_reserved_bytes: s.reserved_bytes.all.peak,
        peak_active_bytes: s.active_bytes.all.peak,
        peak_requested_bytes: s.requested_bytes.all.peak,
        reserved_after_prologue_bytes: after_prologue.reserved_bytes.all.current,
        device_mallocs: s.num_device_alloc,
        window_device_mallocs: s.num_device_alloc - after_prologue.num_device_alloc,
        device_frees: s.num_device_free,
        alloc_retries: s.num_alloc_retries,
        replay_ns,
    };
    drop(buffers);
    Ok(stats)
}

/// Runs `ops` (the first of which is op number `offset` of the plan).
fn run_ops<B: Backend>(
    ops: &[Op],
    offset: usize,
    allocator: &CachingAllocator<B>,
    streams: &[Stream<B>],
    buffers: &mut [Option<DeviceBuffer<B>>],
) -> Result<()> {
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc { id, size, stream } => {
                let (Some(slot), Some(stream)) =
                    (buffers.get_mut(id as usize), streams.get(stream as usize))
                else {
                    return Err(bad_op(offset + i, "buffer id or stream out of range"));
                };
                let buffer = allocator
                    .alloc(size, stream)
                    .map_err(|e| TraceError::Replay {
                        event: offset + i,
                        message: e.to_string(),
                    })?;
                if slot.replace(buffer).is_some() {
                    return Err(bad_op(offset + i, "buffer allocated twice"));
                }
            }
            Op::Free { id } => {
                if buffers
                    .get_mut(id as usize)
                    .and_then(Option::take)
                    .is_none()
                {
                    return Err(bad_op(offset + i, "free of a buffer that is not live"));
                }
            }
        }
    }
    Ok(())
}

fn bad_op(event: usize, message: &str) -> TraceError {
    TraceError::Replay {
        event,
        message: message.to_owned(),
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

/// The allocator configuration `conf` describes (`None`: the defaults).
pub fn parse_conf(conf: Option<&str>) -> Result<AllocatorConfig> {
    match conf {
        Some(text) => AllocatorConfig::parse(text).map_err(|e| TraceError::Config(e.to_string())),
        None => Ok(AllocatorConfig::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Action, Snapshot, TraceEvent};

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
}
