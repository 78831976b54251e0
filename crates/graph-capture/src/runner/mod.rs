//! `GraphRunner`: TorchAir's aclgraph runner (reduce-overhead mode) for Rust — one captured
//! graph per input-shape key, warm-up, capture, replay, memory-reuse modes, input and output
//! cloning, a capture limit with eager fallback, and counters.

mod config;
mod outputs;
mod stats;

pub use config::{InputKind, MemoryReuse, RecaptureReason, RunnerConfig, DEFAULT_CAPTURE_LIMIT};
pub use outputs::Outputs;
pub use stats::RunnerStats;

use crate::context::RunContext;
use crate::error::{GraphError, Result};
use crate::pool::{graph_pool_handle, GraphPool};
use crate::session::{CaptureSession, CapturedGraph};
use braid_allocator::{CachingAllocator, DeviceBuffer};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DevicePtr, DeviceSlice, Stream};
use outputs::{clone_slices, Kind};
use std::collections::HashMap;
use std::fmt;

/// How a captured graph reads one input.
#[derive(Clone, Copy, Debug)]
enum Binding {
    /// Copied into this static buffer before every replay.
    Static(DeviceSlice),
    /// Read in place at this address (parameters, mutated inputs, user inputs without
    /// cloning).
    InPlace(DevicePtr),
}

struct Captured<B: Backend> {
    graph: CapturedGraph<B>,
    bindings: Vec<Binding>,
    outputs: Vec<DeviceSlice>,
    /// Task groups the model marked ([`RunContext::end_task_group`]), in order.
    groups: Vec<braid_stream_core::TaskGroup>,
    /// Static inputs and outputs the graph keeps (every mode but the runner pool's).
    _retained: Vec<DeviceBuffer<B>>,
}

struct Entry<B: Backend> {
    calls: u64,
    captured: Option<Captured<B>>,
}

/// One captured graph per input-shape key, replayed on later calls (TorchAir's aclgraph
/// runner, MindSpore's kernel-graph capture).
///
/// The model is a closure given a [`RunContext`] and the inputs' device memory, returning its
/// output buffers; the same closure runs eagerly (warm-up, fallback) and under capture. A
/// call's key is the byte length of every input, plus the address of every user input when
/// input cloning is off. For each key: the first [`RunnerConfig::warmup_calls`] calls run
/// eagerly, the next captures (on a stream leased from the device's pool for the capture,
/// `Device::lease_stream`, into the pool
/// [`RunnerConfig::memory`] selects) and replays, later calls replay. Before a replay, user
/// inputs are copied into the graph's static buffers and parameters and mutated inputs are
/// checked: a moved one recaptures the key. Past [`RunnerConfig::capture_limit`] graphs, new
/// keys run eagerly with a warning. [`GraphRunner::stats`] counts all of it.
///
/// ```
/// use braid_allocator::{AllocatorConfig, CachingAllocator};
/// use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
/// use braid_graph_capture::{GraphRunner, InputKind, RunnerConfig};
/// use braid_stream_core::{Device, Kernel};
///
/// let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new())).unwrap();
/// let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
/// let s = device.create_stream(0).unwrap();
/// // y = 2x
/// let mut runner = GraphRunner::new(&alloc, RunnerConfig::new(vec![InputKind::User]), |ctx, inputs| {
///     let y = ctx.alloc(inputs[0].len)?;
///     ctx.current_stream().launch(&Kernel::Scale { src: inputs[0], dst: y.slice(), factor: 2.0 })?;
///     Ok(vec![y])
/// }).unwrap();
/// let x = alloc.alloc(16, &s).unwrap();
/// for value in [1.0, 2.0, 3.0] {
///     s.launch(&Kernel::Fill { dst: x.slice(), value }).unwrap();
///     let out = runner.run(&s, &[x.slice()]).unwrap();
///     assert_eq!(out.read_f32(0).unwrap(), vec![2.0 * value; 4]);
/// }
/// let stats = runner.stats();
/// assert_eq!((stats.warmups, stats.captures, stats.replays), (1, 1, 1));
/// ```
pub struct GraphRunner<B, M>
where
    B: Backend,
    M: FnMut(&RunContext<'_, B>, &[DeviceSlice]) -> Result<Vec<DeviceBuffer<B>>>,
{
    allocator: CachingAllocator<B>,
    config: RunnerConfig<B>,
    model: M,
    runner_pool: Option<GraphPool<B>>,
    index: HashMap<Vec<u64>, usize>,
    entries: Vec<Entry<B>>,
    key: Vec<u64>,
    graphs: usize,
    limit_warned: bool,
    stats: RunnerStats,
}

impl<B, M> fmt::Debug for GraphRunner<B, M>
where
    B: Backend,
    M: FnMut(&RunContext<'_, B>, &[DeviceSlice]) -> Result<Vec<DeviceBuffer<B>>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphRunner")
            .field("config", &self.config)
            .field("keys", &self.entries.len())
            .field("graphs", &self.graphs)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<B, M> GraphRunner<B, M>
where
    B: Backend,
    M: FnMut(&RunContext<'_, B>, &[DeviceSlice]) -> Result<Vec<DeviceBuffer<B>>>,
{
    /// A runner of `model` with `config`. It holds no stream: each capture leases one from
    /// the device's pool.
    pub fn new(allocator: &CachingAllocator<B>, config: RunnerConfig<B>, model: M) -> Result<Self> {
        if let MemoryReuse::Shared(pool) = &config.memory {
            if !pool.mem_pool().allocator().same_as(allocator) {
                return Err(GraphError::WrongDevice { what: "pool" });
            }
        }
        Ok(GraphRunner {
            allocator: allocator.clone(),
            config,
            model,
            runner_pool: None,
            index: HashMap::new(),
            entries: Vec::new(),
            key: Vec::new(),
            graphs: 0,
            limit_warned: false,
            stats: RunnerStats::default(),
        })
    }

    /// The counters.
    pub fn stats(&self) -> RunnerStats {
        self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &RunnerConfig<B> {
        &self.config
    }

    /// Graphs captured and alive.
    pub fn graph_count(&self) -> usize {
        self.graphs
    }

    /// Every pool the runner's graphs use (one for the runner pool and shared modes).
    pub fn pools(&self) -> Vec<GraphPool<B>> {
        let mut pools: Vec<GraphPool<B>> = Vec::new();
        for c in self.entries.iter().filter_map(|e| e.captured.as_ref()) {
            if !pools.iter().any(|p| p.same_as(c.graph.pool())) {
                pools.push(c.graph.pool().clone());
            }
        }
        pools
    }

    /// Bytes reserved by the runner's pools.
    pub fn reserved_bytes(&self) -> u64 {
        self.pools().iter().map(GraphPool::reserved_bytes).sum()
    }

    /// Drops every captured graph (TorchAir's `reset_captured_graph`); keys capture again.
    pub fn reset(&mut self) {
        self.entries.clear();
        self.index.clear();
        self.graphs = 0;
    }

    /// Runs the model on `inputs` (one slice per declared input) on `stream`: eagerly,
    /// capturing, or replaying, as the key's history says.
    pub fn run(&mut self, stream: &Stream<B>, inputs: &[DeviceSlice]) -> Result<Outputs<'_, B>> {
        if inputs.len() != self.config.inputs.len() {
            return Err(GraphError::InputCount {
                expected: self.config.inputs.len(),
                got: inputs.len(),
            });
        }
        self.stats.calls += 1;
        let idx = self.entry_index(inputs);
        self.entries[idx].calls += 1;
        let calls = self.entries[idx].calls;
        let moved = self.entries[idx]
            .captured
            .as_ref()
            .map(|captured| self.moved_input(captured, inputs));
        match moved {
            None if calls <= u64::from(self.config.warmup_calls) => {
                self.stats.warmups += 1;
                self.eager(stream, inputs)
            }
            None if self.graphs >= self.config.capture_limit => {
                if !self.limit_warned {
                    self.limit_warned = true;
                    tracing::warn!(
                        limit = self.config.capture_limit,
                        "capture limit reached: new input shapes run eagerly"
                    );
                }
                self.stats.eager_fallbacks += 1;
                self.eager(stream, inputs)
            }
            None => {
                self.capture(idx, inputs, None)?;
                self.stats.captures += 1;
                self.graphs += 1;
                self.launch(idx, stream, inputs)
            }
            Some(moved) => {
                if let Some(reason) = moved {
                    self.capture(idx, inputs, Some(reason))?;
                    match reason {
                        RecaptureReason::MutatedInputAddressChanged => {
                            self.stats.recaptures_mutated_input += 1
                        }
                        RecaptureReason::ParameterAddressChanged => {
                            self.stats.recaptures_parameter += 1
                        }
                    }
                } else {
                    self.stats.replays += 1;
                }
                self.launch(idx, stream, inputs)
            }
        }
    }

    /// [`GraphRunner::run`] with per-call parameters: when the call would replay a graph
    /// whose model marked task groups ([`RunContext::begin_task_group`]), `update(i, s)`
    /// first re-issues group `i`'s operators on an update stream `s` (leased from the
    /// device's stream pool for the call, as captures' streams are) with this
    /// call's parameters ([`crate::CapturedGraph::update`]), and the replay runs them — no
    /// recapture. Calls that warm up or capture run the model, which reads the parameters
    /// itself, and do not call `update`. The previous replay must have been observed
    /// complete (its outputs read), else [`braid_stream_core::Error::UpdateWhileLaunchInFlight`].
    /// [`RunnerStats::updates`] counts the groups updated.
    pub fn run_updating(
        &mut self,
        stream: &Stream<B>,
        inputs: &[DeviceSlice],
        mut update: impl FnMut(usize, &Stream<B>) -> braid_stream_core::Result<()>,
    ) -> Result<Outputs<'_, B>> {
        if inputs.len() == self.config.inputs.len() {
            let idx = self.entry_index(inputs);
            if let Some(captured) = self.entries[idx].captured.as_ref() {
                if self.moved_input(captured, inputs).is_none() && !captured.groups.is_empty() {
                    let update_stream = self.allocator.device().lease_stream(0)?;
                    for (i, group) in captured.groups.iter().enumerate() {
                        captured
                            .graph
                            .update(group, &update_stream, |s| update(i, s))?;
                        self.stats.updates += 1;
                    }
                }
            }
        }
        self.run(stream, inputs)
    }

    /// The entry of the call's key, created on first sight (the only allocation of a call on
    /// the replay path is none: the key is built in a reused buffer).
    fn entry_index(&mut self, inputs: &[DeviceSlice]) -> usize {
        self.key.clear();
        self.key.extend(inputs.iter().map(|s| s.len));
        if !self.config.clone_inputs {
            for (kind, s) in self.config.inputs.iter().zip(inputs) {
                if *kind == InputKind::User {
                    self.key.push(s.ptr.0);
                }
            }
        }
        if let Some(&idx) = self.index.get(self.key.as_slice()) {
            return idx;
        }
        let idx = self.entries.len();
        self.entries.push(Entry {
            calls: 0,
            captured: None,
        });
        self.index.insert(self.key.clone(), idx);
        idx
    }

    fn moved_input(
        &self,
        captured: &Captured<B>,
        inputs: &[DeviceSlice],
    ) -> Option<RecaptureReason> {
        for ((kind, binding), input) in self
            .config
            .inputs
            .iter()
            .zip(&captured.bindings)
            .zip(inputs)
        {
            if let Binding::InPlace(ptr) = binding {
                if *ptr != input.ptr {
                    match kind {
                        InputKind::Mutated => {
                            return Some(RecaptureReason::MutatedInputAddressChanged)
                        }
                        InputKind::Parameter => {
                            return Some(RecaptureReason::ParameterAddressChanged)
                        }
                        InputKind::User => {}
                    }
                }
            }
        }
        None
    }

    fn eager(&mut self, stream: &Stream<B>, inputs: &[DeviceSlice]) -> Result<Outputs<'_, B>> {
        let ctx = RunContext::new(&self.allocator, stream.clone(), false)?;
        let outputs = (self.model)(&ctx, inputs)?;
        ctx.join()?;
        Ok(Outputs::new(
            Kind::Owned(outputs),
            stream.clone(),
            self.allocator.clone(),
        ))
    }

    fn pool_for_capture(&mut self) -> GraphPool<B> {
        match &self.config.memory {
            MemoryReuse::Shared(pool) => pool.clone(),
            MemoryReuse::PoolPerGraph => graph_pool_handle(&self.allocator),
            MemoryReuse::RunnerPool => self
                .runner_pool
                .get_or_insert_with(|| graph_pool_handle(&self.allocator))
                .clone(),
        }
    }

    /// Captures the graph of entry `idx` (again, for `reason`).
    fn capture(
        &mut self,
        idx: usize,
        inputs: &[DeviceSlice],
        reason: Option<RecaptureReason>,
    ) -> Result<()> {
        let span = tracing::info_span!("graph_runner_capture", key = idx, ?reason);
        let _span = span.enter();
        if let Some(reason) = reason {
            tracing::warn!(?reason, "recapturing the graph of an input shape");
        }
        let pool = self.pool_for_capture();
        // A stream from the device's pool, given back once the graph is captured: runners
        // of a batch ladder share a few streams instead of holding one each.
        let capture_stream = self.allocator.device().lease_stream(0)?;
        let clone_inputs = self.config.clone_inputs;
        let kinds = &self.config.inputs;
        let model = &mut self.model;
        let (graph, (bindings, outputs, statics, groups)) =
            CaptureSession::new(&self.allocator, &capture_stream)
                .pool(&pool)
                .mode(self.config.capture_mode)
                .run(|ctx| {
                    let mut bindings = Vec::with_capacity(inputs.len());
                    let mut slices = Vec::with_capacity(inputs.len());
                    let mut statics = Vec::new();
                    for (kind, input) in kinds.iter().zip(inputs) {
                        if *kind == InputKind::User && clone_inputs {
                            let buf = ctx.alloc(input.len)?;
                            bindings.push(Binding::Static(buf.slice()));
                            slices.push(buf.slice());
                            statics.push(buf);
                        } else {
                            bindings.push(Binding::InPlace(input.ptr));
                            slices.push(*input);
                        }
                    }
                    let outputs = model(ctx, &slices)?;
                    Ok((bindings, outputs, statics, ctx.take_task_groups()))
                })?;
        let output_slices = outputs.iter().map(DeviceBuffer::slice).collect();
        let retained = match self.config.memory {
            // Every capture of the runner starts from the same pool state (TorchAir's mode 2
            // restores a checkpoint; here the graph's buffers simply go back to the pool).
            MemoryReuse::RunnerPool => Vec::new(),
            _ => statics.into_iter().chain(outputs).collect(),
        };
        tracing::info!(
            nodes = graph.node_count(),
            pool = graph.pool().id().0,
            reserved = graph.pool().reserved_bytes(),
            "graph captured for an input shape"
        );
        self.entries[idx].captured = Some(Captured {
            graph,
            bindings,
            outputs: output_slices,
            groups,
            _retained: retained,
        });
        Ok(())
    }

    /// Copies user inputs into the static buffers and replays the graph of entry `idx`.
    fn launch(
        &mut self,
        idx: usize,
        stream: &Stream<B>,
        inputs: &[DeviceSlice],
    ) -> Result<Outputs<'_, B>> {
        if self.entries[idx].captured.is_none() {
            return self.eager(stream, inputs);
        }
        let Some(captured) = self.entries[idx].captured.as_ref() else {
            return Err(GraphError::InputCount {
                expected: 0,
                got: 0,
            });
        };
        let pool = captured.graph.pool();
        pool.order_on(stream)?;
        pool.note_eager_use(stream);
        for (binding, input) in captured.bindings.iter().zip(inputs) {
            if let Binding::Static(dst) = binding {
                if dst.ptr != input.ptr && dst.len > 0 {
                    stream.copy_d2d(*input, *dst)?;
                }
            }
        }
        captured.graph.launch(stream)?;
        let kind = if self.config.clone_outputs {
            Kind::Owned(clone_slices(&self.allocator, stream, &captured.outputs)?)
        } else {
            Kind::Replayed {
                slices: &captured.outputs,
                pool,
                epoch: pool.epoch(),
            }
        };
        Ok(Outputs::new(kind, stream.clone(), self.allocator.clone()))
    }
}
