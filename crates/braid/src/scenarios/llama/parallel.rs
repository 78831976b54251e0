//! Tensor parallelism: the decoder over `n` devices of one node, Megatron-style, and the
//! launch order of a step across them.
//!
//! Each device (a [`Rank`]) holds its heads of the attention block and its slice of the MLP
//! ([`super::weights::HostWeights::shard`]); the output and down projections give partial
//! sums, all-reduced after each block. The all-reduce runs on a communication stream of the
//! device's own: the compute stream records an event after the partial is written, the
//! communication stream waits on it, reduces, and records another event that the residual
//! add waits on. The batch is split into micro-batches, and the blocks are launched in a
//! pipelined order — micro-batch `m`'s residual add of the previous block right before its
//! next block — so while one micro-batch's all-reduce runs, the next micro-batch's matmuls
//! (of the same block, or of the next layer) run beside it. On one device there is no
//! communication and the residual adds follow the blocks directly.
//!
//! The same launch order is captured once per device (each device's compute stream in a
//! capture session of its own, nested, in thread-local mode; the communication stream joins
//! each capture by waiting on the compute stream and rejoins it at the end), the
//! collectives included, and marks its position-dependent operators as task groups
//! ([`Groups`]) that each decode step re-issues.

use super::config::{LlamaConfig, Split};
use super::device_weights::DeviceWeights;
use super::kv_cache::KvCache;
use super::step::StepKernels;
use super::LlamaError;
use crate::allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use crate::collective::{CollectiveBackend, Communicator, ReduceOp};
use crate::graph_capture::{
    graph_pool_handle, CaptureSession, CapturedGraph, GraphError, GraphPool,
};
use crate::{CaptureMode, Device, Event, EventFlags, Kernel, Stream, TaskGroup};

/// One device of the node: its allocator, streams, communicator, weights, KV cache and the
/// decode graph's pool.
pub(crate) struct Rank<B: CollectiveBackend> {
    pub alloc: CachingAllocator<B>,
    pub compute: Stream<B>,
    pub comm_stream: Stream<B>,
    /// Where graph updates are issued.
    pub update: Stream<B>,
    pub comm: Option<Communicator<B>>,
    pub weights: DeviceWeights<B>,
    /// The decode graph's private pool: the KV cache and the decode step's buffers.
    pub pool: GraphPool<B>,
    /// Per micro-batch: (partial written, all-reduce done).
    pub events: Vec<(Event<B>, Event<B>)>,
    /// One element all-reduced to line the devices up before a timed phase.
    barrier: DeviceBuffer<B>,
}

impl<B: CollectiveBackend> Rank<B> {
    /// Opens `device` as rank `rank` of `split` and uploads its shard of the weights
    /// (`host`, or nothing on a timing-only device).
    pub fn new(
        device: &Device<B>,
        comm: Option<Communicator<B>>,
        config: &LlamaConfig,
        split: &Split,
        rank: usize,
        micro_batches: usize,
        host: Option<&super::weights::HostWeights>,
    ) -> Result<Self, LlamaError> {
        let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new())?;
        let compute = device.create_stream(0)?;
        let comm_stream = device.create_stream(0)?;
        let update = device.create_stream(0)?;
        let weights = DeviceWeights::upload(&alloc, &compute, config, split, rank, host)?;
        let events = (0..micro_batches)
            .map(|_| -> crate::Result<_> {
                Ok((
                    device.create_event(EventFlags::ORDERING)?,
                    device.create_event(EventFlags::ORDERING)?,
                ))
            })
            .collect::<crate::Result<_>>()?;
        let barrier = alloc.alloc(config.dtype.size(), &compute)?;
        compute.memset(barrier.slice(), 0)?;
        compute.synchronize()?;
        let pool = graph_pool_handle(&alloc);
        Ok(Rank {
            alloc,
            compute,
            comm_stream,
            update,
            comm,
            weights,
            pool,
            events,
            barrier,
        })
    }

    /// Lines this device up with the others (an all-reduce of one element on the compute
    /// stream, after the communication stream's work) and waits for it: devices used before
    /// may be ahead of the others, and a timed phase's first all-reduce would wait for them.
    pub fn line_up(&self, dtype: crate::DType) -> Result<(), LlamaError> {
        if let Some(comm) = &self.comm {
            self.compute.wait_stream(&self.comm_stream)?;
            let b = self.barrier.slice();
            comm.all_reduce(&self.compute, b, b, dtype, ReduceOp::Sum)?;
        }
        Ok(())
    }

    /// Allocates this rank's KV cache for `batch` sequences in the decode graph's pool, and
    /// zeroes it.
    pub fn alloc_cache(
        &self,
        config: &LlamaConfig,
        split: &Split,
        batch: usize,
    ) -> Result<KvCache<B>, LlamaError> {
        let cache = {
            let _into_pool = self.pool.mem_pool().use_on(&self.compute)?;
            KvCache::new(config, split, batch, |bytes| {
                Ok(self.alloc.alloc(bytes, &self.compute)?)
            })?
        };
        self.compute.memset(cache.buffer().slice(), 0)?;
        Ok(cache)
    }
}

/// What one device launches a step with: its streams, its communicator (none on one device,
/// and in a dry run) and its kernels.
pub(crate) struct Lane<'a, B: CollectiveBackend> {
    pub compute: &'a Stream<B>,
    pub comm: Option<(&'a Stream<B>, &'a Communicator<B>)>,
    pub events: &'a [(Event<B>, Event<B>)],
    pub kernels: StepKernels<'a, B>,
}

impl<B: CollectiveBackend> Lane<'_, B> {
    fn launch(&self, kernels: &[Kernel]) -> Result<(), LlamaError> {
        for k in kernels {
            self.compute.launch(k)?;
        }
        Ok(())
    }

    /// Launches `kernels` as one task group when `group` collects them (under capture).
    fn launch_group(
        &self,
        kernels: &[Kernel],
        group: Option<&mut Vec<TaskGroup>>,
    ) -> Result<(), LlamaError> {
        match group {
            Some(groups) => {
                self.compute.begin_task_group()?;
                let launched = self.launch(kernels);
                let group = self.compute.end_task_group();
                launched?;
                groups.push(group?);
            }
            None => self.launch(kernels)?,
        }
        Ok(())
    }

    /// The all-reduce of micro-batch `m`'s partial output on the communication stream,
    /// after the partial is written.
    fn reduce(&self, m: usize) -> Result<(), LlamaError> {
        let Some((stream, comm)) = self.comm else {
            return Ok(());
        };
        let s = &self.kernels.buffers.micro[m];
        let (written, reduced) = &self.events[m];
        written.record(self.compute)?;
        stream.wait(written)?;
        let dtype = s.partial.dtype();
        comm.all_reduce(
            stream,
            s.partial.range(),
            s.reduced.range(),
            dtype,
            ReduceOp::Sum,
        )?;
        reduced.record(stream)?;
        Ok(())
    }

    /// The residual add of micro-batch `m`, after its all-reduce.
    fn residual(&self, m: usize) -> Result<(), LlamaError> {
        if self.comm.is_some() {
            self.compute.wait(&self.events[m].1)?;
        }
        self.compute.launch(&self.kernels.residual(m)?)?;
        Ok(())
    }
}

/// The task groups of one device's decode graph: the prelude (position tables and token
/// embeddings) and, per layer and micro-batch, the KV cache write.
pub(crate) struct Groups {
    pub prelude: TaskGroup,
    /// Index `layer · micro_batches + m`.
    pub cache: Vec<TaskGroup>,
}

/// Launches one step on every lane at position `pos` for input `tokens` (see the
/// [module docs](self) for the order). With `groups`, marks the position-dependent kernels
/// as task groups and returns them (the lanes' streams must be capturing).
pub(crate) fn launch_step<B: CollectiveBackend>(
    lanes: &[Lane<'_, B>],
    pos: usize,
    tokens: &[Vec<u32>],
    capture_groups: bool,
) -> Result<Vec<Groups>, LlamaError> {
    let micro = lanes[0].kernels.buffers.shape.micro_batches;
    let layers = lanes[0].kernels.config.layers;
    let mut prelude = Vec::new();
    let mut cache: Vec<Vec<TaskGroup>> = lanes.iter().map(|_| Vec::new()).collect();
    for lane in lanes {
        let group = capture_groups.then_some(&mut prelude);
        lane.launch_group(&lane.kernels.prelude(pos, tokens)?, group)?;
        if let Some((stream, _)) = lane.comm {
            // Forks the communication stream off the compute stream (under capture, this is
            // how it joins the capture).
            stream.wait_stream(lane.compute)?;
        }
    }
    for l in 0..layers {
        for m in 0..micro {
            for (lane, groups) in lanes.iter().zip(cache.iter_mut()) {
                if l > 0 {
                    lane.residual(m)?;
                }
                let k = &lane.kernels;
                lane.launch(&k.attention_in(l, m)?)?;
                lane.launch_group(&k.cache_write(l, m, pos)?, capture_groups.then_some(groups))?;
                lane.launch(&k.attention_out(l, m)?)?;
                lane.reduce(m)?;
            }
        }
        for m in 0..micro {
            for lane in lanes {
                lane.residual(m)?;
                lane.launch(&lane.kernels.mlp(l, m)?)?;
                lane.reduce(m)?;
            }
        }
    }
    for m in 0..micro {
        for lane in lanes {
            lane.residual(m)?;
            lane.launch(&lane.kernels.head(m)?)?;
        }
    }
    for lane in lanes {
        if let Some((stream, _)) = lane.comm {
            lane.compute.wait_stream(stream)?;
        }
    }
    if !capture_groups {
        return Ok(Vec::new());
    }
    Ok(prelude
        .into_iter()
        .zip(cache)
        .map(|(prelude, cache)| Groups { prelude, cache })
        .collect())
}

/// Runs `f` with every rank's compute stream capturing into its decode pool (nested capture
/// sessions, thread-local mode); returns each rank's graph, in rank order, and what `f`
/// returned.
pub(crate) fn capture_all<B: CollectiveBackend, T>(
    ranks: &[Rank<B>],
    f: &mut dyn FnMut() -> Result<T, LlamaError>,
) -> Result<(Vec<CapturedGraph<B>>, T), LlamaError> {
    fn nest<B: CollectiveBackend, T>(
        ranks: &[Rank<B>],
        f: &mut dyn FnMut() -> Result<T, LlamaError>,
    ) -> Result<(Vec<CapturedGraph<B>>, T), GraphError> {
        let Some((rank, rest)) = ranks.split_first() else {
            return Ok((Vec::new(), f().map_err(GraphError::model)?));
        };
        let (graph, (mut graphs, value)) = CaptureSession::new(&rank.alloc, &rank.compute)
            .pool(&rank.pool)
            .mode(CaptureMode::ThreadLocal)
            .run(|_ctx| nest(rest, f))?;
        graphs.insert(0, graph);
        Ok((graphs, value))
    }
    Ok(nest(ranks, f)?)
}
