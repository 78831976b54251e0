//! Capture sessions: a closure's work recorded into a replayable graph, its allocations in a
//! private pool, its tagged side streams joined back automatically.

use crate::context::RunContext;
use crate::error::{GraphError, Result};
use crate::pool::{graph_pool_handle, GraphPool};
use crate::replay_order::{touched, AccessRecorder, Footprint, Span};
use braid_allocator::{CachingAllocator, PoolFilter};
use braid_stream_core::hal::Backend;
use braid_stream_core::{
    CaptureMode, Domain, Event, Graph, Stream, StreamPosition, TaskGroup, UseObserver, WrongDevice,
};
use std::fmt;
use std::sync::Arc;

/// A graph captured by a [`CaptureSession`], with the pool its memory lives in. Launch it on
/// any stream of its device, as often as needed; it keeps its pool alive.
pub struct CapturedGraph<B: Backend> {
    graph: Graph<B>,
    pool: GraphPool<B>,
    /// Its place in the pool's capture order, from 1.
    index: u32,
    /// What it needs from other graphs of the pool and writes, at each replay.
    footprint: Footprint,
    /// Every byte its work reads or writes (sorted, disjoint): a launch is refused while some
    /// of them sleep.
    touched: Vec<Span>,
}

impl<B: Backend> Drop for CapturedGraph<B> {
    fn drop(&mut self) {
        self.pool.forget(self.index);
    }
}

impl<B: Backend> fmt::Debug for CapturedGraph<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapturedGraph")
            .field("nodes", &self.graph.node_count())
            .field("pool", &self.pool.id().0)
            .field("index", &self.index)
            .finish()
    }
}

impl<B: Backend> CapturedGraph<B> {
    /// Enqueues one replay on `stream` (PyTorch's `replay()`, which may run on any stream),
    /// ordered after the previous launch of any graph sharing the pool.
    ///
    /// A graph that reads memory of its pool another graph wrote (an output of a graph
    /// captured before it) is launched only while those bytes hold that graph's data: when
    /// a third graph's launch has overwritten them since (its capture reused the block), or no
    /// launch of the writing graph has run yet, the launch is refused with
    /// [`GraphError::ReplayOrder`] naming both graphs and the bytes, and nothing is enqueued.
    /// Graphs sharing a pool replayed in capture order always pass.
    ///
    /// A graph whose work reads or writes memory of a sleeping pool
    /// ([`braid_allocator::CachingAllocator::sleep`]: weights offloaded between rollout and
    /// training) is refused with [`braid_allocator::AllocError::MemoryAsleep`] until the wake;
    /// nothing is enqueued. Memory an update ([`CapturedGraph::update`]) named is checked by
    /// the graph itself: a sleeping pool's is refused with
    /// [`braid_stream_core::StreamError::GraphMemoryAsleep`], a buffer dropped since with
    /// [`braid_stream_core::StreamError::GraphUsesDroppedBuffer`] (both in
    /// [`GraphError::Stream`]).
    pub fn launch(&self, stream: &Stream<B>) -> Result<StreamPosition> {
        self.pool
            .mem_pool()
            .allocator()
            .check_awake(self.touched.iter().map(|s| (s.start, s.end)))?;
        self.pool
            .launch(&self.graph, self.index, &self.footprint, stream)
    }

    /// The graph's place in its pool's capture order, from 1 (the name
    /// [`GraphError::ReplayOrder`] gives it).
    pub fn capture_index(&self) -> u32 {
        self.index
    }

    /// Work nodes captured.
    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    /// Whether nothing was captured (a warning is logged at capture end, as PyTorch warns).
    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// The pool the graph's memory lives in (PyTorch's `graph.pool()`): pass it to another
    /// capture to share memory.
    pub fn pool(&self) -> &GraphPool<B> {
        &self.pool
    }

    /// The front layer's graph.
    pub fn graph(&self) -> &Graph<B> {
        &self.graph
    }

    /// Re-issues the operators of `group` (marked in this graph's capture with
    /// `ctx.stream().begin_task_group()` / `end_task_group()`) on `stream` with new scalars or
    /// buffers of the same shape, without recapturing: [`Graph::update`], whose rules and
    /// typed errors apply (the graph holds the buffers the update names until it is dropped
    /// or a later update of the group no longer names them). Returns the event the next
    /// launches wait on.
    pub fn update(
        &self,
        group: &TaskGroup,
        stream: &Stream<B>,
        f: impl FnOnce(&Stream<B>) -> braid_stream_core::Result<()>,
    ) -> Result<Event<B>> {
        Ok(self.graph.update(group, stream, f)?)
    }
}

/// Ends the capture if the closure panics.
struct ActiveCapture<'a, B: Backend> {
    stream: &'a Stream<B>,
    done: bool,
}

impl<B: Backend> Drop for ActiveCapture<'_, B> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(err) = self.stream.end_capture() {
                tracing::warn!(%err, "capture abandoned");
            }
        }
    }
}

/// Builds and runs one capture (PyTorch's `torch.cuda.graph(g, pool=..., stream=...)`,
/// torch_npu's `NPUGraph`).
///
/// [`CaptureSession::run`]: diverts allocations of every stream of the capture into the pool
/// (a new one unless [`CaptureSession::pool`] names one), begins capture on the stream (which
/// must not be the default stream) and makes it current, runs the closure with a
/// [`RunContext`], joins back every tagged side stream, ends the capture and the diversion —
/// the last two always, also when the closure fails or panics. Every capture rule is a typed
/// [`GraphError`]; after a failure the allocator and the streams are usable and the
/// closure's memory is back in the pool.
///
/// ```
/// use braid_allocator::{AllocatorConfig, CachingAllocator};
/// use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
/// use braid_graph_capture::CaptureSession;
/// use braid_stream_core::{Device, Kernel};
///
/// let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new())).unwrap();
/// let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
/// let s = device.create_stream(0).unwrap();
/// let (graph, out) = CaptureSession::new(&alloc, &s)
///     .run(|ctx| {
///         let out = ctx.alloc(16)?;
///         ctx.stream().launch(&Kernel::Fill { dst: out.slice(), value: 2.0 })?;
///         Ok(out)
///     })
///     .unwrap();
/// assert_eq!(out.pool(), graph.pool().id());
/// graph.launch(&s).unwrap();
/// assert_eq!(s.copy_d2h(out.slice()).unwrap().wait_f32().unwrap(), vec![2.0; 4]);
/// ```
pub struct CaptureSession<'a, B: Backend> {
    allocator: &'a CachingAllocator<B>,
    stream: &'a Stream<B>,
    pool: Option<GraphPool<B>>,
    mode: CaptureMode,
}

impl<'a, B: Backend> CaptureSession<'a, B> {
    /// A session capturing on `stream` with allocations from `allocator`; a new private pool
    /// and [`CaptureMode::Global`] unless set.
    pub fn new(allocator: &'a CachingAllocator<B>, stream: &'a Stream<B>) -> Self {
        CaptureSession {
            allocator,
            stream,
            pool: None,
            mode: CaptureMode::Global,
        }
    }

    /// Captures into `pool` (shared with other graphs) instead of a new one.
    pub fn pool(mut self, pool: &GraphPool<B>) -> Self {
        self.pool = Some(pool.clone());
        self
    }

    /// The capture mode (how strict the capture is about other threads).
    pub fn mode(mut self, mode: CaptureMode) -> Self {
        self.mode = mode;
        self
    }

    /// Runs `f` under capture; returns the graph and what `f` returned (typically output
    /// buffers, which live in the graph's pool and are written by every replay).
    pub fn run<T>(
        self,
        f: impl FnOnce(&RunContext<'_, B>) -> Result<T>,
    ) -> Result<(CapturedGraph<B>, T)> {
        let alloc = self.allocator;
        let stream = self.stream;
        if !stream.device().same_as(alloc.device()) {
            return Err(GraphError::WrongDevice(Box::new(WrongDevice {
                call: "CaptureSession::run".into(),
                what: "stream",
                expected: alloc.device().id(),
                found: stream.device().id(),
            })));
        }
        let pool = match self.pool {
            Some(pool) if !pool.mem_pool().allocator().same_as(alloc) => {
                return Err(GraphError::ForeignPool {
                    call: "CaptureSession::run",
                })
            }
            Some(pool) => pool,
            None => graph_pool_handle(alloc),
        };
        let span = tracing::info_span!("capture", stream = stream.id().0, pool = pool.id().0);
        let _span = span.enter();
        stream.begin_capture(self.mode)?;
        let mut active = ActiveCapture {
            stream,
            done: false,
        };
        let Domain::Capture(id) = stream.domain() else {
            return Err(GraphError::Stream(
                braid_stream_core::StreamError::NotCapturing {
                    stream: stream.id(),
                },
            ));
        };
        let diversion = alloc.begin_allocate_to_pool(pool.mem_pool(), PoolFilter::Capture(id))?;
        let (live_at_begin, _) = pool.layout();
        let recorder = Arc::new(AccessRecorder::new(id));
        stream
            .device()
            .add_use_observer(&(recorder.clone() as Arc<dyn UseObserver>));
        let ctx = RunContext::new(alloc, stream.clone(), true)?;
        let result = f(&ctx);
        let joined = ctx.join();
        active.done = true;
        let graph = stream.end_capture();
        drop(diversion);
        let value = match (result, joined) {
            (Err(e), _) | (Ok(_), Err(e)) => {
                tracing::warn!(error = %e, "capture failed");
                return Err(e);
            }
            (Ok(value), Ok(())) => value,
        };
        let graph = graph?;
        let accesses = recorder.take();
        let (index, footprint) = pool.register_capture(&accesses, &live_at_begin);
        tracing::debug!(
            nodes = graph.node_count(),
            index,
            needs = footprint.needs.len(),
            "graph captured"
        );
        Ok((
            CapturedGraph {
                graph,
                pool,
                index,
                footprint,
                touched: touched(&accesses),
            },
            value,
        ))
    }
}
