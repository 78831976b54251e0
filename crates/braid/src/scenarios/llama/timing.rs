//! The decode step's times at any size, on timing-only devices ([`decode_step_times`]):
//! the step launched eagerly, and through its captured graphs with the per-token task-group
//! update included — what a token costs. At Llama-2-7B's size these are braid's predicted
//! per-token decode latencies, set beside published measurements of the same model on the
//! same machine ([`published_decode_rows`], from the 910B profile's table of published
//! figures, where a ratio outside [`RATIO_BAND`] names its gap).

use super::config::LlamaConfig;
use super::decode::Node;
use super::parallel::launch_step;
use super::step::StepShape;
use super::LlamaError;
use crate::collective::CollectiveBackend;
use crate::Device;

/// The times of one decode step.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct StepTimes {
    /// Devices (tensor-parallel degree).
    pub devices: usize,
    /// Sequences in the batch.
    pub batch: usize,
    /// The step launched eagerly (µs, the slowest device's).
    pub eager_us: f64,
    /// The step's task-group update and graph replay (µs, the slowest device's): the
    /// per-token decode latency.
    pub graph_us: f64,
}

/// Times one decode step of `config` for `batch` sequences in `micro_batches` over `devices`
/// (one node's, timing-only where simulated: no weights are uploaded, nothing is computed),
/// with the cache full (`max_positions − 1` positions before the step's): eagerly, then
/// captured and updated and replayed (the second replay's time: the first uploads).
pub fn decode_step_times<B: CollectiveBackend>(
    devices: &[Device<B>],
    config: &LlamaConfig,
    batch: usize,
    micro_batches: usize,
) -> Result<StepTimes, LlamaError> {
    let split = config.split(devices.len())?;
    if micro_batches == 0 || batch % micro_batches != 0 {
        return Err(LlamaError::Request {
            what: "micro_batches".to_string(),
            reason: format!("{micro_batches} do not divide the batch of {batch}"),
        });
    }
    let node = Node::open(devices, *config, split, batch, micro_batches, None, |_| {
        Ok(())
    })?;
    let shape = StepShape {
        seqs: batch / micro_batches,
        tokens: 1,
        micro_batches,
    };
    let pos = config.max_positions - 1;
    let tokens = vec![vec![0u32]; batch];
    let eager_us = {
        let buffers = node.buffers(shape)?;
        let lanes = node.lanes(&buffers);
        node.timed(|| launch_step(&lanes, pos, &tokens, false).map(|_| ()))?
    };
    let (graphs, (buffers, groups)) = node.capture(shape, pos, &tokens)?;
    let mut updates = 0;
    let mut replay = || {
        node.timed(|| {
            node.update(&graphs, &buffers, &groups, pos, &tokens, &mut updates)??;
            for (rank, graph) in node.ranks().iter().zip(&graphs) {
                graph.launch(&rank.compute)?;
            }
            Ok(())
        })
    };
    replay()?;
    let graph_us = replay()?;
    Ok(StepTimes {
        devices: devices.len(),
        batch,
        eager_us,
        graph_us,
    })
}

/// The ratios of predicted to published latency the issue accepts without a gap note.
pub const RATIO_BAND: (f64, f64) = (0.67, 1.5);

/// The quantity of the 910B profile's published rows that are Llama-2-7B decode latencies.
pub const DECODE_QUANTITY: &str = "llama2_7b_decode";

/// A published measurement of Llama-2-7B's per-token decode latency on a 910B.
#[derive(Clone, PartialEq, Debug)]
pub struct PublishedDecode {
    /// Sequences in the batch.
    pub batch: usize,
    /// Tensor-parallel devices.
    pub devices: usize,
    /// How it was run: `eager` (one operator at a time) or `graph`.
    pub mode: String,
    /// The published per-token latency (ms).
    pub ms: f64,
    /// Where it comes from.
    pub source: String,
    /// Why braid's prediction misses [`RATIO_BAND`], where it does.
    pub gap: Option<String>,
}

/// The Llama-2-7B decode rows of the 910B profile's table of published measurements
/// (`crates/backend-sim/profiles/published_910b.json`, quantity [`DECODE_QUANTITY`]).
pub fn published_decode_rows() -> Vec<PublishedDecode> {
    let table: serde_json::Value =
        serde_json::from_str(crate::sim::profile::PUBLISHED_910B_JSON).unwrap_or_default();
    let rows = table["rows"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .filter(|r| r["quantity"] == DECODE_QUANTITY)
        .map(|r| PublishedDecode {
            batch: r["batch"].as_u64().unwrap_or(1) as usize,
            devices: r["ranks"].as_u64().unwrap_or(1) as usize,
            mode: r["mode"].as_str().unwrap_or("graph").to_string(),
            ms: r["published"].as_f64().unwrap_or(0.0),
            source: r["source"].as_str().unwrap_or_default().to_string(),
            gap: r["gap"].as_str().map(str::to_string),
        })
        .collect()
}
