//! Driving a [`ReplayPlan`] through braid's caching allocator.
//!
//! [`replay`] runs on any backend; with the `sim` feature, [`crate::sim`] opens a simulated
//! device to run it on.

use crate::error::{Result, TraceError};
use crate::replay_plan::{Op, ReplayPlan};
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_stream_core::hal::Backend;
use braid_stream_core::Stream;
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

/// The allocator configuration `conf` describes (`None`: the defaults).
pub fn parse_conf(conf: Option<&str>) -> Result<AllocatorConfig> {
    match conf {
        Some(text) => AllocatorConfig::parse(text).map_err(|e| TraceError::Config(e.to_string())),
        None => Ok(AllocatorConfig::new()),
    }
}
