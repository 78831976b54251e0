//! Greedy generation ([`generate`]): the request checked on the host, then on the devices
//! the weights uploaded, the decode pool sized by a dry run, the KV cache allocated in it,
//! the prompt prefilled eagerly, the decode step captured once per device, and per token one
//! task-group update of the captured graphs (the step's position and input tokens) and one
//! replay — never a recapture unless an update is refused.

use super::config::{LlamaConfig, Split};
use super::kv_cache::KvCache;
use super::parallel::{capture_all, launch_step, Groups, Lane, Rank};
use super::step::{StepBuffers, StepKernels, StepShape};
use super::weights::HostWeights;
use super::LlamaError;
use crate::collective::{CollectiveBackend, Communicator};
use crate::graph_capture::CapturedGraph;
use crate::graph_memory::DryRun;
use crate::scenarios::Timer;
use crate::Device;

/// What to generate: the prompts (one per sequence of the batch, all of one length), how
/// many tokens to generate for each, and the micro-batches the batch is split into (for the
/// overlap of the all-reduces with compute; 1 for none).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Request {
    /// Token ids of each sequence's prompt.
    pub prompts: Vec<Vec<u32>>,
    /// Tokens to generate per sequence (the first comes from the prefill).
    pub generate: usize,
    /// Micro-batches (dividing the batch).
    pub micro_batches: usize,
}

impl Request {
    /// Checks the request against `config` on `devices` devices, on the host: the split
    /// ([`LlamaConfig::split`]), a batch of equal, non-empty prompts dividing into the
    /// micro-batches, every token inside the vocabulary, at least one token to generate, and
    /// the prompt with the generated tokens fitting in the KV cache.
    pub fn check(&self, config: &LlamaConfig, devices: usize) -> Result<Split, LlamaError> {
        let split = config.split(devices)?;
        let request = |what: &str, reason: String| LlamaError::Request {
            what: what.to_string(),
            reason,
        };
        let Some(first) = self.prompts.first() else {
            return Err(request("batch", "has no prompt".to_string()));
        };
        let len = first.len();
        if len == 0 {
            return Err(request("prompt 0", "is empty".to_string()));
        }
        for (i, p) in self.prompts.iter().enumerate() {
            if p.len() != len {
                return Err(request(
                    &format!("prompt {i}"),
                    format!(
                        "has {} tokens, prompt 0 has {len}: prompts of a batch are of one length",
                        p.len()
                    ),
                ));
            }
            if let Some(t) = p.iter().find(|&&t| t as usize >= config.vocab) {
                return Err(request(
                    &format!("prompt {i}"),
                    format!(
                        "has token {t}, outside the vocabulary of {} (vocab_size)",
                        config.vocab
                    ),
                ));
            }
        }
        if self.generate == 0 {
            return Err(request("generate", "must be at least 1".to_string()));
        }
        if self.micro_batches == 0 || self.prompts.len() % self.micro_batches != 0 {
            return Err(request(
                "micro_batches",
                format!(
                    "{} do not divide the batch of {}",
                    self.micro_batches,
                    self.prompts.len()
                ),
            ));
        }
        if len + self.generate > config.max_positions {
            return Err(LlamaError::PromptTooLong {
                prompt: len,
                generate: self.generate,
                cache: config.max_positions,
            });
        }
        Ok(split)
    }

    /// The shape of a step over `tokens` positions per sequence.
    pub fn step_shape(&self, tokens: usize) -> StepShape {
        StepShape {
            seqs: self.prompts.len() / self.micro_batches.max(1),
            tokens,
            micro_batches: self.micro_batches,
        }
    }
}

/// What [`generate`] produced and measured.
#[derive(Clone, PartialEq, Debug)]
pub struct Generation {
    /// Devices (tensor-parallel degree).
    pub devices: usize,
    /// The generated tokens of each sequence.
    pub tokens: Vec<Vec<u32>>,
    /// The logits of the prefill's last position of each sequence (the first generated
    /// token's), as float32.
    pub first_logits: Vec<Vec<f32>>,
    /// Device time of the prefill (µs, the slowest device's).
    pub prefill_us: f64,
    /// Device time of the first decode step launched eagerly (µs, the slowest device's).
    pub eager_step_us: f64,
    /// Mean device time of a decode step through the graphs, its update included (µs, the
    /// slowest device's).
    pub graph_step_us: f64,
    /// Whether the first graph replay's logits equal the same step's run eagerly, bit for
    /// bit (true when only one token was generated: no step was replayed).
    pub eager_equals_graph: bool,
    /// Captures of the decode step (one per device count, unless an update was refused).
    pub captures: u32,
    /// Task-group updates issued (per device and group).
    pub updates: u64,
    /// The decode pool's bytes on the first device, as the dry run predicted them before
    /// anything was captured.
    pub predicted_pool_bytes: u64,
    /// The decode pool's bytes on the first device once the KV cache and the captured
    /// step's buffers are in it.
    pub pool_bytes: u64,
    /// The KV cache's bytes on each device.
    pub cache_bytes: u64,
}

impl Generation {
    /// Captures beyond the first.
    pub fn recaptures(&self) -> u32 {
        self.captures.saturating_sub(1)
    }
}

/// The index of the largest value (the first of equals, as `torch.argmax`).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best as u32
}

/// One device count's run state: the ranks, their KV caches, and the open communicators.
pub(super) struct Node<B: CollectiveBackend> {
    config: LlamaConfig,
    split: Split,
    ranks: Vec<Rank<B>>,
    caches: Vec<KvCache<B>>,
}

impl<B: CollectiveBackend> Node<B> {
    /// One rank per device (a communicator over them when there are several) with its
    /// shard of the weights (`host`'s values, or none on timing-only devices), then — once
    /// `before_cache` has run on the ranks (the dry run sizing the decode pool) — each
    /// rank's KV cache for `batch` sequences in its decode pool.
    pub(super) fn open(
        devices: &[Device<B>],
        config: LlamaConfig,
        split: Split,
        batch: usize,
        micro_batches: usize,
        host: Option<&HostWeights>,
        before_cache: impl FnOnce(&[Rank<B>]) -> Result<(), LlamaError>,
    ) -> Result<Self, LlamaError> {
        let comms: Vec<Option<Communicator<B>>> = if devices.len() > 1 {
            Communicator::init_all(devices)?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        let ranks = devices
            .iter()
            .zip(comms)
            .enumerate()
            .map(|(r, (device, comm))| {
                Rank::new(device, comm, &config, &split, r, micro_batches, host)
            })
            .collect::<Result<Vec<_>, _>>()?;
        before_cache(&ranks)?;
        let caches = ranks
            .iter()
            .map(|r| r.alloc_cache(&config, &split, batch))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Node {
            config,
            split,
            ranks,
            caches,
        })
    }

    /// The ranks, in order.
    pub(super) fn ranks(&self) -> &[Rank<B>] {
        &self.ranks
    }

    pub(super) fn lanes<'a>(&'a self, buffers: &'a [StepBuffers<B>]) -> Vec<Lane<'a, B>> {
        self.ranks
            .iter()
            .zip(&self.caches)
            .zip(buffers)
            .map(|((rank, cache), buffers)| Lane {
                compute: &rank.compute,
                comm: rank.comm.as_ref().map(|c| (&rank.comm_stream, c)),
                events: &rank.events,
                kernels: StepKernels {
                    config: &self.config,
                    split: &self.split,
                    weights: &rank.weights,
                    cache,
                    buffers,
                },
            })
            .collect()
    }

    /// Step buffers of `shape` on every device, outside any capture.
    pub(super) fn buffers(&self, shape: StepShape) -> Result<Vec<StepBuffers<B>>, LlamaError> {
        self.ranks
            .iter()
            .map(|r| StepBuffers::new(&r.alloc, &r.compute, &self.config, &self.split, shape))
            .collect()
    }

    /// Runs `launch` between timing events on every compute stream; the slowest device's
    /// microseconds.
    pub(super) fn timed(
        &self,
        launch: impl FnOnce() -> Result<(), LlamaError>,
    ) -> Result<f64, LlamaError> {
        for rank in &self.ranks {
            rank.line_up(self.config.dtype)?;
        }
        for rank in &self.ranks {
            rank.compute.synchronize()?;
        }
        let timers = self
            .ranks
            .iter()
            .map(|r| Timer::start(&r.compute))
            .collect::<crate::Result<Vec<_>>>()?;
        launch()?;
        let mut slowest = 0f64;
        for (rank, timer) in self.ranks.iter().zip(timers) {
            slowest = slowest.max(timer.stop_us(&rank.compute)?);
        }
        Ok(slowest)
    }

    /// The logits of every sequence, read from the first device.
    pub(super) fn logits(&self, buffers: &StepBuffers<B>) -> Result<Vec<Vec<f32>>, LlamaError> {
        let s = &self.ranks[0].compute;
        let mut out = Vec::new();
        for scratch in &buffers.micro {
            let t = &scratch.logits;
            let values = s.copy_d2h(t.range())?.wait_as(t.dtype())?;
            out.extend(values.chunks(self.config.vocab).map(<[f32]>::to_vec));
        }
        Ok(out)
    }

    /// Re-issues every task group of the captured decode `graphs` (with their `buffers` and
    /// `groups`) for position `pos` and input `tokens`, counting each update. A refused
    /// update (which the caller answers with a recapture) is the inner error; a failure to
    /// build the kernels the outer one.
    pub(super) fn update(
        &self,
        graphs: &[CapturedGraph<B>],
        buffers: &[StepBuffers<B>],
        groups: &[Groups],
        pos: usize,
        tokens: &[Vec<u32>],
        updates: &mut u64,
    ) -> Result<Result<(), LlamaError>, LlamaError> {
        let lanes = self.lanes(buffers);
        for (((lane, rank), graph), groups) in lanes.iter().zip(&self.ranks).zip(graphs).zip(groups)
        {
            let k = &lane.kernels;
            let micro = k.buffers.shape.micro_batches;
            let mut issue = |group, kernels: Vec<crate::Kernel>| -> Result<(), LlamaError> {
                graph.update(group, &rank.update, |u| {
                    for k in &kernels {
                        u.launch(k)?;
                    }
                    Ok(())
                })?;
                *updates += 1;
                Ok(())
            };
            if let Err(e) = issue(&groups.prelude, k.prelude(pos, tokens)?) {
                return Ok(Err(e));
            }
            for (i, group) in groups.cache.iter().enumerate() {
                if let Err(e) = issue(group, k.cache_write(i / micro, i % micro, pos)?) {
                    return Ok(Err(e));
                }
            }
        }
        Ok(Ok(()))
    }

    /// Captures the decode step at `pos` for `tokens` on every device.
    #[allow(clippy::type_complexity)]
    pub(super) fn capture(
        &self,
        shape: StepShape,
        pos: usize,
        tokens: &[Vec<u32>],
    ) -> Result<(Vec<CapturedGraph<B>>, (Vec<StepBuffers<B>>, Vec<Groups>)), LlamaError> {
        capture_all(&self.ranks, &mut || {
            let buffers = self.buffers(shape)?;
            let groups = launch_step(&self.lanes(&buffers), pos, tokens, true)?;
            Ok((buffers, groups))
        })
    }
}

/// Generates `request.generate` tokens per prompt greedily with the model `weights` over
/// `devices` (one tensor-parallel node; timing events measure each phase). Everything about
/// the input is checked first, on the host ([`Request::check`]): nothing touches a device
/// when the request is refused.
pub fn generate<B: CollectiveBackend>(
    devices: &[Device<B>],
    weights: &HostWeights,
    request: &Request,
) -> Result<Generation, LlamaError> {
    let config = *weights.config();
    let split = request.check(&config, devices.len())?;
    let span = tracing::info_span!("llama_generate", devices = devices.len());
    let _span = span.enter();
    let batch = request.prompts.len();
    let prompt_len = request.prompts[0].len();
    let decode_shape = request.step_shape(1);
    // The decode pool's size, before anything is allocated in it or captured.
    let mut predicted_pool_bytes = 0;
    let node = Node::open(
        devices,
        config,
        split,
        batch,
        request.micro_batches,
        Some(weights),
        |ranks| {
            predicted_pool_bytes = predict_pool(&ranks[0], &config, &split, batch, decode_shape)?;
            Ok(())
        },
    )?;
    let cache_bytes = KvCache::<B>::bytes(&config, &split, batch);

    // Prefill: the whole prompt in one eager step.
    let (first_logits, prefill_us) = {
        let buffers = node.buffers(request.step_shape(prompt_len))?;
        let lanes = node.lanes(&buffers);
        let us = node.timed(|| launch_step(&lanes, 0, &request.prompts, false).map(|_| ()))?;
        let logits = node.logits(&buffers[0])?;
        for rank in &node.ranks {
            rank.compute.synchronize()?;
        }
        (logits, us)
    };
    let mut tokens: Vec<Vec<u32>> = first_logits.iter().map(|l| vec![argmax(l)]).collect();
    let last = |tokens: &[Vec<u32>]| -> Vec<Vec<u32>> {
        tokens
            .iter()
            .map(|t| vec![*t.last().unwrap_or(&0)])
            .collect()
    };

    // The first decode step eagerly, to time and to compare with the graph's.
    let (eager_logits, eager_step_us) = {
        let buffers = node.buffers(decode_shape)?;
        let lanes = node.lanes(&buffers);
        let input = last(&tokens);
        let us = node.timed(|| launch_step(&lanes, prompt_len, &input, false).map(|_| ()))?;
        let logits = node.logits(&buffers[0])?;
        for rank in &node.ranks {
            rank.compute.synchronize()?;
        }
        (logits, us)
    };

    // The decode step captured once, then per token: update, replay.
    let (mut graphs, (mut buffers, mut groups)) =
        node.capture(decode_shape, prompt_len, &last(&tokens))?;
    let pool_bytes = node.ranks[0].pool.reserved_bytes();
    let (mut captures, mut updates) = (1u32, 0u64);
    let mut graph_us = Vec::new();
    let mut eager_equals_graph = false;
    for step in 0..request.generate - 1 {
        let pos = prompt_len + step;
        let input = last(&tokens);
        let mut refused = None;
        let us = node.timed(|| {
            refused = node
                .update(&graphs, &buffers, &groups, pos, &input, &mut updates)?
                .err();
            if refused.is_none() {
                for (rank, graph) in node.ranks.iter().zip(&graphs) {
                    graph.launch(&rank.compute)?;
                }
            }
            Ok(())
        })?;
        if let Some(e) = refused {
            // The fallback a server without updates takes every step: capture again at this
            // position (never taken here; counted if it were).
            tracing::warn!(error = %e, "graph update refused; capturing again");
            drop((graphs, buffers, groups));
            (graphs, (buffers, groups)) = node.capture(decode_shape, pos, &input)?;
            captures += 1;
            for (rank, graph) in node.ranks.iter().zip(&graphs) {
                graph.launch(&rank.compute)?;
            }
        } else {
            graph_us.push(us);
        }
        let logits = node.logits(&buffers[0])?;
        if step == 0 {
            eager_equals_graph = logits == eager_logits;
        }
        for (seq, l) in tokens.iter_mut().zip(&logits) {
            seq.push(argmax(l));
        }
    }
    if request.generate == 1 {
        eager_equals_graph = true;
    }
    let graph_step_us = if graph_us.is_empty() {
        0.0
    } else {
        graph_us.iter().sum::<f64>() / graph_us.len() as f64
    };
    Ok(Generation {
        devices: devices.len(),
        tokens,
        first_logits,
        prefill_us,
        eager_step_us,
        graph_step_us,
        eager_equals_graph,
        captures,
        updates,
        predicted_pool_bytes,
        pool_bytes,
        cache_bytes,
    })
}

/// The bytes the decode pool of `rank` reserves — its KV cache for `batch` sequences, then
/// the decode step's buffers allocated inside the capture — predicted by a dry run of the
/// same allocations and the same step on a timing-only simulated device
/// ([`DryRun::like`] the rank's allocator), before the real pool holds anything.
fn predict_pool<B: CollectiveBackend>(
    rank: &Rank<B>,
    config: &LlamaConfig,
    split: &Split,
    batch: usize,
    shape: StepShape,
) -> Result<u64, LlamaError> {
    let dry = DryRun::like(&rank.alloc, &rank.compute)?;
    let model = crate::graph_capture::GraphError::model;
    let forecast = dry.predict_ladder_with(
        |alloc, stream| {
            super::device_weights::DeviceWeights::upload(alloc, stream, config, split, 0, None)
                .map_err(model)
        },
        &[()],
        |ctx, weights, ()| {
            let cache = KvCache::new(config, split, batch, |bytes| {
                Ok(ctx.allocator().alloc(bytes, ctx.stream())?)
            })
            .map_err(model)?;
            let buffers = StepBuffers::new(ctx.allocator(), ctx.stream(), config, split, shape)
                .map_err(model)?;
            let lane = Lane {
                compute: ctx.stream(),
                comm: None,
                events: &[],
                kernels: StepKernels {
                    config,
                    split,
                    weights,
                    cache: &cache,
                    buffers: &buffers,
                },
            };
            let tokens = vec![vec![0u32]; batch];
            launch_step(&[lane], 0, &tokens, true).map_err(model)?;
            Ok((cache, buffers))
        },
    )?;
    Ok(forecast.reserved_bytes)
}
