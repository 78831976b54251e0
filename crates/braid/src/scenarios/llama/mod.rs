//! A Llama-architecture decoder on braid alone: weights from a `safetensors` file, a prompt
//! prefilled and tokens decoded greedily, the decode step captured once per device and
//! updated per token without recapture, tensor-parallel over the devices of a node — the
//! `llama_decode` example's logic, checked against transformers' `LlamaForCausalLM` by the
//! torch_npu suite (`tests/torch_npu/test_llama_decode.py`).
//!
//! The pieces, one job each:
//!
//! - [`ci`]: the CI-sized run the example, `braid demo` and the tests share, with the
//!   tokens transformers generates for it;
//! - [`config`]: the model's sizes ([`LlamaConfig`]: a CI-sized one and Llama-2-7B's) and
//!   how they split over devices ([`config::Split`]);
//! - [`weights`]: the `safetensors` file as transformers names it — written with seeded
//!   weights, read back and checked tensor by tensor, cut into each device's shard;
//! - `step`: one forward step as braid's tensor operators (norms, projections, RoPE, the
//!   KV-cache write, attention over the cache, the gated MLP, the output head);
//! - `kv_cache`: the static KV cache in the decode graph's private pool;
//! - `parallel`: the devices of a tensor-parallel node, the step's launch order across them
//!   with the all-reduces on communication streams, and the capture of every device's graph;
//! - [`decode`]: prefill, the dry run that sizes the pool, the capture, and the decode loop
//!   with one task-group update per token ([`decode::generate`]);
//! - [`timing`]: the step's times (eager, graph, per device count) at any size on
//!   timing-only devices, and Llama-2-7B's per-token latency beside published measurements
//!   ([`timing::published_decode_rows`]).
//!
//! Everything that can be wrong with the input — the file's tensors (missing, of another
//! data type or shape), a prompt longer than the cache, a device count that does not divide
//! the heads — is a [`LlamaError`] naming the tensor or dimension, returned before any device
//! is touched.

pub mod ci;
pub mod config;
pub mod decode;
mod device_weights;
mod kv_cache;
mod parallel;
mod step;
mod tables;
pub mod timing;
pub mod weights;

pub use config::{LlamaConfig, Split};
pub use decode::{generate, Generation, Request};
pub use step::StepShape;
pub use weights::{write_model, HostWeights};

use std::path::PathBuf;

/// What can go wrong running the decoder.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    /// A configuration field is out of range.
    #[error("config: {field} {reason}")]
    Config {
        /// The field, as transformers' `config.json` names it.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The weights file is missing a tensor the configuration needs.
    #[error("the weights file has no tensor `{name}`")]
    MissingTensor {
        /// The tensor's name.
        name: String,
    },
    /// A tensor of the weights file has another shape than the configuration gives it.
    #[error("tensor `{name}` has shape {found:?}; the config needs {expected:?}")]
    WrongShape {
        /// The tensor's name.
        name: String,
        /// The shape the configuration gives it.
        expected: Vec<usize>,
        /// Its shape in the file.
        found: Vec<usize>,
    },
    /// A tensor of the weights file has another data type than the configuration's.
    #[error("tensor `{name}` is {found}; the config needs {expected}")]
    WrongDType {
        /// The tensor's name.
        name: String,
        /// The configuration's data type.
        expected: String,
        /// Its data type in the file.
        found: String,
    },
    /// The weights file cannot be read as `safetensors`.
    #[error("weights file: {0}")]
    Format(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The device count does not divide a dimension the model is split along.
    #[error("{devices} device(s) do not divide {dimension} ({value}) for tensor parallelism")]
    Indivisible {
        /// Devices asked for.
        devices: usize,
        /// The dimension, as transformers' `config.json` names it.
        dimension: &'static str,
        /// Its size.
        value: usize,
    },
    /// The request does not fit the model or the cache.
    #[error("request: {what} {reason}")]
    Request {
        /// What is wrong (`prompt`, `batch`, a token...).
        what: String,
        /// Why.
        reason: String,
    },
    /// A prompt and the tokens to generate do not fit in the KV cache.
    #[error("the prompt has {prompt} tokens and {generate} are to be generated, but the KV cache holds {cache} positions per sequence (max_position_embeddings)")]
    PromptTooLong {
        /// Tokens in the prompt.
        prompt: usize,
        /// Tokens to generate.
        generate: usize,
        /// Positions in the cache.
        cache: usize,
    },
    /// A device, stream, event or graph call failed.
    #[error(transparent)]
    Braid(#[from] crate::StreamError),
    /// An operator was refused (a bug of the decoder: the inputs were checked).
    #[error(transparent)]
    Op(#[from] crate::OpCheckError),
    /// A tensor view was refused (a bug of the decoder: the inputs were checked).
    #[error(transparent)]
    Tensor(#[from] crate::TensorError),
    /// The allocator failed.
    #[error(transparent)]
    Alloc(#[from] crate::allocator::AllocError),
    /// A capture failed.
    #[error(transparent)]
    Graph(#[from] crate::graph_capture::GraphError),
    /// A communicator refused a call, or a collective failed.
    #[error(transparent)]
    Collective(#[from] crate::collective::CollectiveError),
    /// The dry run that sizes the decode pool failed.
    #[error(transparent)]
    DryRun(#[from] crate::graph_memory::DryRunError),
}
