//! braid's graph capture: capture sessions with private memory pools, shared graph pools, and
//! `GraphRunner`, TorchAir's aclgraph runner for Rust.
//!
//! - [`CaptureSession`]: records a closure's work on a non-default stream into a
//!   [`CapturedGraph`]. Allocations of every stream of the capture go to a private
//!   [`GraphPool`] (a new one, or one shared with other graphs — PyTorch's
//!   `graph_pool_handle()`); tagged side streams ([`RunContext::stream_switch`], TorchAir's
//!   `npu_stream_switch`) fork from the beginning of the capture — not from where the switch
//!   is called, so order them after earlier work with tagged events — and are joined back at
//!   the end, as TorchAir's passes insert the closing records and waits; tagged events and
//!   [`RunContext::record_tagged_stream`] work inside. Inside a capture, a block freed on one
//!   stream is reused only by work the happens-before model orders after all its uses. Every
//!   capture rule is a typed [`GraphError`]; a failed capture leaves the allocator and streams
//!   usable.
//! - [`CapturedGraph::launch`] replays on any stream; graphs sharing a pool are ordered one
//!   after another, and a launch that would read pool memory another graph has overwritten
//!   since (replay out of capture order) is refused with [`GraphError::ReplayOrder`]
//!   (module `replay_order`); a pool lives while any graph, handle or output block of it does.
//! - [`GraphRunner`]: one graph per input-shape key; warm-up, capture, replay; parameters,
//!   mutated inputs and user inputs ([`InputKind`]); memory reuse modes ([`MemoryReuse`]);
//!   input and output cloning; a capture limit with eager fallback; [`RunnerStats`]. Replay
//!   outputs ([`Outputs`]) borrow the runner, so holding one across the next call is a
//!   compile error.
//!
//! TorchAir's configuration maps to braid's as follows:
//!
//! | TorchAir (reduce-overhead / npugraph_ex) | braid |
//! |---|---|
//! | `aclgraph_config.use_custom_pool = torch.npu.graph_pool_handle()` / `use_graph_pool` (mode 1) | `RunnerConfig::memory(MemoryReuse::Shared(graph_pool_handle(&alloc)))` |
//! | `debug.aclgraph.disable_mempool_reuse_in_same_fx = False` / `reuse_graph_pool_in_same_fx` (mode 2, default) | `MemoryReuse::RunnerPool` (default) |
//! | `disable_mempool_reuse_in_same_fx = True` | `MemoryReuse::PoolPerGraph` |
//! | `debug.aclgraph.clone_input = True` / `clone_input` (mode 3, default) | `RunnerConfig::clone_inputs(true)` (default) |
//! | `debug.aclgraph.enable_output_clone` / `clone_output` | `RunnerConfig::clone_outputs(true)`, or `Outputs::into_owned()` per call |
//! | `debug.aclgraph.static_capture_size_limit = 64` / `capture_limit` | `RunnerConfig::capture_limit(64)` (default) |
#![warn(missing_docs)]

mod context;
mod error;
mod pool;
mod replay_order;
mod runner;
mod session;

pub use context::RunContext;
pub use error::{GraphError, Result};
pub use pool::{graph_pool_handle, GraphPool};
pub use runner::{
    GraphRunner, InputKind, MemoryReuse, Outputs, RecaptureReason, RunnerConfig, RunnerStats,
    DEFAULT_CAPTURE_LIMIT,
};
pub use session::{CaptureSession, CapturedGraph};
