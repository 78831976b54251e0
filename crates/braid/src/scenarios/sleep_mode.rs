//! Sleep mode between rollout and training (vLLM's sleep mode, used by RL frameworks;
//! vllm-ascend's camem allocator): a model's weights live in a sleepable pool tagged
//! `weights`, its KV cache in one tagged `kv_cache`, and a decode step over both is captured
//! into a graph. Sleeping offloads the weights to pinned host memory and discards the KV
//! cache, releasing their device memory while their addresses stay reserved; waking maps new
//! memory at the same addresses and restores the weights, and the captured graph replays with
//! the same results as before the sleep.
//!
//! [`run`] runs on any backend with virtual memory; the example prints reserved bytes awake
//! and asleep and whether the replay after the wake matched.

use braid_allocator::{AllocatorConfig, CachingAllocator, PoolOptions, SleepMode};
use braid_graph_capture::{CaptureSession, GraphError};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DType, Device, Kernel};

/// The data type of weights and activations.
pub const DTYPE: DType = super::SEED_DTYPE;

/// Sizes of the model.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Shape {
    /// Rows of the weight matrix (output features).
    pub out_features: u32,
    /// Columns of the weight matrix (input features).
    pub in_features: u32,
    /// Tokens in a decode step.
    pub tokens: u32,
    /// Bytes of KV cache.
    pub kv_bytes: u64,
}

impl Default for Shape {
    /// 8 MiB of `float16` weights, 32 tokens, 64 MiB of KV cache.
    fn default() -> Self {
        Shape {
            out_features: 2048,
            in_features: 2048,
            tokens: 32,
            kv_bytes: 64 << 20,
        }
    }
}

/// What [`run`] measured.
#[derive(Clone, PartialEq, Debug)]
pub struct Outcome {
    /// The allocator's reserved bytes with every pool awake.
    pub reserved_awake: u64,
    /// The allocator's reserved bytes with the weights and the KV cache asleep.
    pub reserved_asleep: u64,
    /// Device memory in use awake and asleep (total minus free).
    pub device_used: (u64, u64),
    /// Bytes offloaded to pinned host memory (the weights).
    pub offloaded_bytes: u64,
    /// Whether the weights and KV cache kept their addresses.
    pub same_addresses: bool,
    /// Whether the graph replayed after the wake computed what it computed before the sleep
    /// (and something other than zeros).
    pub correct: bool,
}

/// Weights, KV cache and a captured decode step on `device`, put to sleep and woken.
pub fn run<B: Backend>(device: &Device<B>, shape: Shape) -> Result<Outcome, GraphError> {
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let (m, k, n) = (shape.out_features, shape.in_features, shape.tokens);
    let bytes = |rows: u32, cols: u32| u64::from(rows) * u64::from(cols) * DTYPE.size();
    let weights_pool = alloc.create_sleepable_pool("weights", PoolOptions::new())?;
    let kv_pool = alloc.create_sleepable_pool("kv_cache", PoolOptions::new())?;
    let w = {
        let _under_tag = weights_pool.use_on_current_thread()?;
        alloc.alloc(bytes(m, k), &s)?
    };
    let kv = {
        let _under_tag = kv_pool.use_on_current_thread()?;
        alloc.alloc(shape.kv_bytes.max(bytes(m, n)), &s)?
    };
    // Weights with a pattern (exact in float16): row i holds (i % 7 + 1) / 64.
    let values: Vec<f32> = (0..m)
        .flat_map(|row| std::iter::repeat_n((row % 7 + 1) as f32 / 64.0, k as usize))
        .collect();
    s.copy_h2d(w.slice(), DTYPE.encode(&values))?;
    let x = alloc.alloc(bytes(k, n), &s)?;
    s.launch(
        Kernel::Fill {
            dst: x.slice(),
            value: 0.5,
        }
        .typed(DTYPE),
    )?;
    let kv_part = kv
        .slice()
        .sub(0, bytes(m, n))
        .ok_or_else(|| GraphError::model("KV cache too small"))?;
    // The step: y = W·x, written to the KV cache, then out = y + cache (the cache is written
    // before it is read, so a discarded cache does not change the result).
    let (graph, out) = CaptureSession::new(&alloc, &s).run(|ctx| {
        let y = ctx.alloc(bytes(m, n))?;
        ctx.stream().launch(
            Kernel::Matmul {
                a: w.slice(),
                b: x.slice(),
                c: y.slice(),
                m,
                k,
                n,
            }
            .typed(DTYPE),
        )?;
        ctx.stream().launch(
            Kernel::Copy {
                src: y.slice(),
                dst: kv_part,
            }
            .typed(DTYPE),
        )?;
        let out = ctx.alloc(bytes(m, n))?;
        ctx.stream().launch(
            Kernel::Add {
                a: y.slice(),
                b: kv_part,
                out: out.slice(),
            }
            .typed(DTYPE),
        )?;
        Ok(out)
    })?;
    graph.launch(&s)?;
    let before = s.copy_d2h(out.slice())?.wait_as(DTYPE)?;

    let used = || -> Result<u64, GraphError> {
        let info = device.mem_info()?;
        Ok(info.total - info.free)
    };
    let (reserved_awake, used_awake) = (alloc.memory_reserved(), used()?);
    let addresses = (w.ptr(), kv.ptr());
    let offloaded = alloc.sleep("weights", SleepMode::Offload)?;
    alloc.sleep("kv_cache", SleepMode::Discard)?;
    let (reserved_asleep, used_asleep) = (alloc.memory_reserved(), used()?);
    // Training would use the freed memory here.
    alloc.wake("weights")?;
    alloc.wake("kv_cache")?;
    graph.launch(&s)?;
    let after = s.copy_d2h(out.slice())?.wait_as(DTYPE)?;
    Ok(Outcome {
        reserved_awake,
        reserved_asleep,
        device_used: (used_awake, used_asleep),
        offloaded_bytes: offloaded.offloaded_bytes,
        same_addresses: (w.ptr(), kv.ptr()) == addresses,
        correct: after == before && before.iter().any(|&v| v != 0.0),
    })
}
