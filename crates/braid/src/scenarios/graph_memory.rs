//! Graph memory known before capture: the decoder of the `memory_reuse` scenario captured for
//! a ladder of batch sizes sharing one graph pool (largest first, as vLLM captures), with the
//! pool's reserved bytes predicted by a dry run ([`crate::graph_memory::DryRun`]) before the
//! first real capture, then measured after each real capture.
//!
//! The dry run runs the same generic code (the setup making weights, static inputs and KV
//! caches, and the capture closure) on a timing-only simulated device with the real
//! allocator's configuration, the real device's capacity and the workspace the real
//! backend's kernels ask for (`DryRun::like`). Each capture ends with a reduction over the
//! logits, whose aclnn operator asks for workspace through ACL (`braid-acl-sim`'s
//! `aclnnReduceSum`), so the ACL run checks that the dry run saw it.
//!
//! [`run`] runs on any backend's device; the example prints its table and `RESULT` line.

use super::memory_reuse::{forward, weights, Decoder, Weights};
use crate::graph_memory::DryRun;
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_graph_capture::{graph_pool_handle, CaptureSession, GraphError, RunContext};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Kernel, Stream};

/// Batch sizes captured, in capture order (largest first), sharing one pool.
pub const LADDER: [u32; 8] = [256, 128, 64, 32, 16, 8, 4, 2];

/// What the captures read but do not allocate: the weights, and each batch's hidden states
/// and KV cache (static inputs, in the default pool).
pub struct Statics<B: Backend> {
    weights: Weights<B>,
    inputs: Vec<(DeviceBuffer<B>, DeviceBuffer<B>)>,
}

/// Makes the weights and, for each batch of `ladder`, its hidden states and KV cache.
pub fn statics<B: Backend>(
    alloc: &CachingAllocator<B>,
    s: &Stream<B>,
    d: Decoder,
    ladder: &[u32],
) -> Result<Statics<B>, GraphError> {
    let weights = weights(alloc, s, d)?;
    let inputs = ladder
        .iter()
        .map(|&batch| {
            let act = u64::from(batch) * u64::from(d.hidden) * d.dtype.size();
            let x = alloc.alloc(act, s)?;
            s.launch(
                Kernel::Fill {
                    dst: x.slice(),
                    value: 0.5,
                }
                .typed(d.dtype),
            )?;
            let kv = alloc.alloc(act * u64::from(d.layers), s)?;
            Ok((x, kv))
        })
        .collect::<Result<_, GraphError>>()?;
    Ok(Statics { weights, inputs })
}

/// The capture of ladder step `index`: the decoder's layers and head over that batch's static
/// inputs, then the sum of the logits. Returns the outputs (logits and sum), which live on in
/// the pool.
pub fn step<B: Backend>(
    ctx: &RunContext<'_, B>,
    statics: &Statics<B>,
    d: Decoder,
    index: usize,
) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
    let (x, kv) = statics
        .inputs
        .get(index)
        .ok_or_else(|| GraphError::model(format!("no static inputs for ladder step {index}")))?;
    let mut out = forward(
        ctx,
        &[x.slice(), kv.slice()],
        &statics.weights,
        d,
        0..d.layers,
        true,
    )?;
    let total = ctx.alloc(d.dtype.size())?;
    ctx.stream().launch(
        Kernel::ReduceSum {
            src: out[0].slice(),
            dst: total.slice(),
        }
        .typed(d.dtype),
    )?;
    out.push(total);
    Ok(out)
}

/// One capture of the ladder.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Row {
    /// The batch size captured.
    pub batch: u32,
    /// The pool's reserved bytes after this capture, predicted by the dry run.
    pub predicted: u64,
    /// The pool's reserved bytes after this capture, measured.
    pub actual: u64,
}

/// What [`run`] found.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Outcome {
    /// One row per capture, in capture order.
    pub rows: Vec<Row>,
    /// The pool's reserved bytes once the ladder is captured, predicted.
    pub predicted_bytes: u64,
    /// The pool's reserved bytes once the ladder is captured, measured.
    pub actual_bytes: u64,
}

impl Outcome {
    /// Whether every prediction equals its measurement.
    pub fn matches(&self) -> bool {
        self.predicted_bytes == self.actual_bytes
            && self.rows.iter().all(|r| r.predicted == r.actual)
    }
}

/// Predicts the pool of the ladder `ladder` of decoder `d` with a dry run matching an
/// allocator configured by `config` on `device`, then captures the ladder on `device` into one
/// pool and measures it.
pub fn run<B: Backend>(
    device: &Device<B>,
    config: &AllocatorConfig,
    d: Decoder,
    ladder: &[u32],
) -> Result<Outcome, GraphError> {
    let alloc = CachingAllocator::new(device.clone(), config.clone())?;
    let stream = device.create_stream(0)?;
    let steps: Vec<usize> = (0..ladder.len()).collect();
    let forecast = DryRun::like(&alloc, &stream)
        .map_err(GraphError::model)?
        .predict_ladder_with(
            |a, s| statics(a, s, d, ladder),
            &steps,
            |ctx, st, &i| step(ctx, st, d, i),
        )
        .map_err(GraphError::model)?;

    let statics = statics(&alloc, &stream, d, ladder)?;
    let pool = graph_pool_handle(&alloc);
    let mut graphs = Vec::with_capacity(ladder.len());
    let mut rows = Vec::with_capacity(ladder.len());
    for (i, &batch) in ladder.iter().enumerate() {
        graphs.push(
            CaptureSession::new(&alloc, &stream)
                .pool(&pool)
                .run(|ctx| step(ctx, &statics, d, i))?,
        );
        rows.push(Row {
            batch,
            predicted: forecast.after_each[i],
            actual: pool.reserved_bytes(),
        });
    }
    Ok(Outcome {
        rows,
        predicted_bytes: forecast.reserved_bytes,
        actual_bytes: pool.reserved_bytes(),
    })
}
