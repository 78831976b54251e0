//! One device's weights and position tables, as tensors of device memory: its shard of the
//! model ([`HostWeights::shard`]) uploaded, or on a timing-only device only allocated.

use super::config::{LlamaConfig, Split};
use super::tables::{causal_mask, rope_table, ROPE_ROWS};
use super::weights::{HostWeights, Part};
use super::LlamaError;
use crate::allocator::{CachingAllocator, DeviceBuffer};
use crate::hal::Backend;
use crate::tensor::Tensor;
use crate::{DType, Stream};

/// Allocates a tensor of `shape` and `dtype` from `alloc` on `stream`, keeping its buffer in
/// `keep`.
pub(crate) fn alloc_tensor<B: Backend>(
    alloc: &CachingAllocator<B>,
    stream: &Stream<B>,
    keep: &mut Vec<DeviceBuffer<B>>,
    dtype: DType,
    shape: &[usize],
) -> Result<Tensor, LlamaError> {
    let bytes = shape.iter().product::<usize>() as u64 * dtype.size();
    let buffer = alloc.alloc(bytes.max(1), stream)?;
    let tensor = Tensor::new(buffer.slice(), dtype, shape)?;
    keep.push(buffer);
    Ok(tensor)
}

/// One layer's weights on a device (its shard under tensor parallelism).
#[derive(Clone, Debug)]
pub(crate) struct LayerWeights {
    pub input_norm: Tensor,
    pub q: Tensor,
    pub k: Tensor,
    pub v: Tensor,
    pub o: Tensor,
    pub post_norm: Tensor,
    pub gate: Tensor,
    pub up: Tensor,
    pub down: Tensor,
}

/// A device's weights and tables; the buffers live as long as it does.
pub(crate) struct DeviceWeights<B: Backend> {
    pub embedding: Tensor,
    pub layers: Vec<LayerWeights>,
    pub final_norm: Tensor,
    pub lm_head: Tensor,
    /// `[max_positions, 4, head_dim / 2]` ([`ROPE_ROWS`]).
    pub rope: Tensor,
    /// `[max_positions, max_positions]`.
    pub mask: Tensor,
    _buffers: Vec<DeviceBuffer<B>>,
}

impl<B: Backend> DeviceWeights<B> {
    /// Allocates device `rank`'s shard under `split` from `alloc` on `stream`, uploading the
    /// values of `host` when given (a timing-only device gets none).
    pub fn upload(
        alloc: &CachingAllocator<B>,
        stream: &Stream<B>,
        config: &LlamaConfig,
        split: &Split,
        rank: usize,
        host: Option<&HostWeights>,
    ) -> Result<Self, LlamaError> {
        let dtype = config.dtype;
        let mut keep = Vec::new();
        let mut load = |part: Part| -> Result<Tensor, LlamaError> {
            let shape = part.shard_shape(config, split);
            let t = alloc_tensor(alloc, stream, &mut keep, dtype, &shape)?;
            if let Some(host) = host {
                let shard = host.shard(part, split, rank);
                stream.copy_h2d(t.range(), shard.bytes.into())?;
            }
            Ok(t)
        };
        let embedding = load(Part::Embedding)?;
        let mut layers = Vec::with_capacity(config.layers);
        for l in 0..config.layers {
            layers.push(LayerWeights {
                input_norm: load(Part::InputNorm(l))?,
                q: load(Part::Q(l))?,
                k: load(Part::K(l))?,
                v: load(Part::V(l))?,
                o: load(Part::O(l))?,
                post_norm: load(Part::PostNorm(l))?,
                gate: load(Part::Gate(l))?,
                up: load(Part::Up(l))?,
                down: load(Part::Down(l))?,
            });
        }
        let final_norm = load(Part::FinalNorm)?;
        let lm_head = load(Part::LmHead)?;
        let (s, half) = (config.max_positions, config.head_dim() / 2);
        let rope = alloc_tensor(alloc, stream, &mut keep, dtype, &[s, ROPE_ROWS, half])?;
        let mask = alloc_tensor(alloc, stream, &mut keep, dtype, &[s, s])?;
        if host.is_some() {
            stream.copy_h2d(rope.range(), dtype.encode(&rope_table(config)))?;
            stream.copy_h2d(mask.range(), dtype.encode(&causal_mask(config)))?;
        }
        Ok(DeviceWeights {
            embedding,
            layers,
            final_norm,
            lm_head,
            rope,
            mask,
            _buffers: keep,
        })
    }
}
