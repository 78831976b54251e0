//! Configuration of a [`crate::GraphRunner`]: input kinds, memory reuse, cloning, limits.

use crate::pool::GraphPool;
use braid_stream_core::hal::Backend;
use braid_stream_core::CaptureMode;
use std::fmt;

/// How the runner treats one input (TorchAir's classification of graph inputs).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum InputKind {
    /// Weights: used in place, assumed fixed; a changed address recaptures the graph of the
    /// key ([`RecaptureReason::ParameterAddressChanged`]).
    Parameter,
    /// Inputs the model mutates in place, such as KV caches: used in place; a changed address
    /// recaptures ([`RecaptureReason::MutatedInputAddressChanged`]).
    Mutated,
    /// Per-call data: copied into a static buffer of the graph at every replay when input
    /// cloning is on (TorchAir's mode 3, the default); otherwise used in place and its address
    /// is part of the graph key.
    User,
}

/// Why a key's graph was captured again.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum RecaptureReason {
    /// A [`InputKind::Mutated`] input has another address than at capture.
    MutatedInputAddressChanged,
    /// A [`InputKind::Parameter`] input has another address than at capture.
    ParameterAddressChanged,
}

/// Where the runner's graphs get their memory (TorchAir's memory-reuse modes).
pub enum MemoryReuse<B: Backend> {
    /// Mode 1 (`use_custom_pool`): a pool shared by several runners (a
    /// [`crate::graph_pool_handle`]). Each graph keeps its static inputs and outputs; only
    /// temporaries are shared, so runners sharing the pool must run in capture order (the
    /// pool orders launches for you) and an output read after another graph of the pool ran
    /// is an error ([`crate::GraphError::OutputOverwritten`]).
    Shared(GraphPool<B>),
    /// Mode 2 (default; `disable_mempool_reuse_in_same_fx = False`): one pool for all keys of
    /// the runner, every capture starting from the same pool state — each graph's static
    /// inputs and outputs go back to the pool after capture and are written again at its next
    /// replay. Reserved memory is about the largest graph's, not the sum.
    RunnerPool,
    /// A pool per graph (`disable_mempool_reuse_in_same_fx = True` without a custom pool).
    PoolPerGraph,
}

impl<B: Backend> Clone for MemoryReuse<B> {
    fn clone(&self) -> Self {
        match self {
            MemoryReuse::Shared(p) => MemoryReuse::Shared(p.clone()),
            MemoryReuse::RunnerPool => MemoryReuse::RunnerPool,
            MemoryReuse::PoolPerGraph => MemoryReuse::PoolPerGraph,
        }
    }
}

impl<B: Backend> fmt::Debug for MemoryReuse<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryReuse::Shared(p) => write!(f, "Shared(pool {})", p.id().0),
            MemoryReuse::RunnerPool => write!(f, "RunnerPool"),
            MemoryReuse::PoolPerGraph => write!(f, "PoolPerGraph"),
        }
    }
}

/// Default capture limit (TorchAir's `static_capture_size_limit`).
pub const DEFAULT_CAPTURE_LIMIT: usize = 64;

/// How a [`crate::GraphRunner`] behaves.
pub struct RunnerConfig<B: Backend> {
    /// How each input is treated.
    pub inputs: Vec<InputKind>,
    /// Where graph memory comes from (default [`MemoryReuse::RunnerPool`]).
    pub memory: MemoryReuse<B>,
    /// Copy user inputs into static buffers (TorchAir's `clone_input`, default on).
    pub clone_inputs: bool,
    /// Clone outputs of replays into owned buffers (TorchAir's `enable_output_clone`, default
    /// off).
    pub clone_outputs: bool,
    /// Calls of a key that run eagerly before it is captured (warm-up; default 1: the first
    /// call of a shape runs eagerly, the second captures, later calls replay).
    pub warmup_calls: u32,
    /// Most graphs the runner captures (TorchAir's `static_capture_size_limit`, default 64).
    /// Keys beyond it run eagerly, with a warning, while captured keys keep replaying.
    pub capture_limit: usize,
    /// Capture mode of the captures.
    pub capture_mode: CaptureMode,
}

impl<B: Backend> Clone for RunnerConfig<B> {
    fn clone(&self) -> Self {
        RunnerConfig {
            inputs: self.inputs.clone(),
            memory: self.memory.clone(),
            clone_inputs: self.clone_inputs,
            clone_outputs: self.clone_outputs,
            warmup_calls: self.warmup_calls,
            capture_limit: self.capture_limit,
            capture_mode: self.capture_mode,
        }
    }
}

impl<B: Backend> fmt::Debug for RunnerConfig<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnerConfig")
            .field("inputs", &self.inputs)
            .field("memory", &self.memory)
            .field("clone_inputs", &self.clone_inputs)
            .field("clone_outputs", &self.clone_outputs)
            .field("warmup_calls", &self.warmup_calls)
            .field("capture_limit", &self.capture_limit)
            .field("capture_mode", &self.capture_mode)
            .finish()
    }
}

impl<B: Backend> RunnerConfig<B> {
    /// Defaults for a model with these inputs.
    pub fn new(inputs: Vec<InputKind>) -> Self {
        RunnerConfig {
            inputs,
            memory: MemoryReuse::RunnerPool,
            clone_inputs: true,
            clone_outputs: false,
            warmup_calls: 1,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            capture_mode: CaptureMode::Global,
        }
    }

    /// Sets [`RunnerConfig::memory`].
    pub fn memory(mut self, memory: MemoryReuse<B>) -> Self {
        self.memory = memory;
        self
    }

    /// Sets [`RunnerConfig::clone_inputs`].
    pub fn clone_inputs(mut self, on: bool) -> Self {
        self.clone_inputs = on;
        self
    }

    /// Sets [`RunnerConfig::clone_outputs`].
    pub fn clone_outputs(mut self, on: bool) -> Self {
        self.clone_outputs = on;
        self
    }

    /// Sets [`RunnerConfig::warmup_calls`].
    pub fn warmup_calls(mut self, calls: u32) -> Self {
        self.warmup_calls = calls;
        self
    }

    /// Sets [`RunnerConfig::capture_limit`].
    pub fn capture_limit(mut self, graphs: usize) -> Self {
        self.capture_limit = graphs;
        self
    }

    /// Sets [`RunnerConfig::capture_mode`].
    pub fn capture_mode(mut self, mode: CaptureMode) -> Self {
        self.capture_mode = mode;
        self
    }
}
