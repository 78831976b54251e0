//! The KV cache: one static buffer per device, `[layers, 2 (key, value), batch, kv_heads,
//! max_positions, head_dim]`, at a fixed address for the life of the decode graph (its
//! operators read and write it in place; only the position they write moves, by task-group
//! update).
//!
//! It lives in the decode graph's private pool (the run diverts its allocation there before
//! the capture), so the pool's size — cache and step buffers together — is known before
//! anything is captured, by a dry run of the same allocations ([`crate::graph_memory`]).

use super::config::{LlamaConfig, Split};
use super::LlamaError;
use crate::allocator::DeviceBuffer;
use crate::hal::Backend;
use crate::tensor::Tensor;

/// A device's KV cache (see the [module docs](self)).
pub(crate) struct KvCache<B: Backend> {
    /// Per layer: the keys and the values, each `[batch, kv_heads, max_positions, head_dim]`.
    layers: Vec<[Tensor; 2]>,
    buffer: DeviceBuffer<B>,
}

impl<B: Backend> KvCache<B> {
    /// Its bytes for `batch` sequences on one device of `split`.
    pub fn bytes(config: &LlamaConfig, split: &Split, batch: usize) -> u64 {
        (config.layers * 2 * batch * split.kv_heads * config.max_positions * config.head_dim())
            as u64
            * config.dtype.size()
    }

    /// A cache for `batch` sequences in the buffer `alloc` returns for [`KvCache::bytes`].
    pub fn new(
        config: &LlamaConfig,
        split: &Split,
        batch: usize,
        alloc: impl FnOnce(u64) -> Result<DeviceBuffer<B>, LlamaError>,
    ) -> Result<Self, LlamaError> {
        let buffer = alloc(Self::bytes(config, split, batch))?;
        let shape = [
            config.layers,
            2,
            batch,
            split.kv_heads,
            config.max_positions,
            config.head_dim(),
        ];
        let all = Tensor::new(buffer.slice(), config.dtype, &shape)?;
        let layers = (0..config.layers)
            .map(|l| -> Result<[Tensor; 2], LlamaError> {
                let layer = all.select(0, l)?;
                Ok([layer.select(0, 0)?, layer.select(0, 1)?])
            })
            .collect::<Result<_, _>>()?;
        Ok(KvCache { layers, buffer })
    }

    /// Layer `layer`'s keys (`which` 0) or values (1): `[batch, kv_heads, max_positions,
    /// head_dim]`.
    pub fn tensor(&self, layer: usize, which: usize) -> &Tensor {
        &self.layers[layer][which]
    }

    /// The whole buffer.
    pub fn buffer(&self) -> &DeviceBuffer<B> {
        &self.buffer
    }
}
