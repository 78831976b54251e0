//! `GraphPool<B>`: a private pool shared by graphs (PyTorch's `graph_pool_handle()`), with the
//! replay bookkeeping that keeps graphs sharing it in order.

use crate::error::{GraphError, Result};
use crate::replay_order::{Footprint, Ledger, Span};
use braid_allocator::{BlockState, CachingAllocator, MemPool, PoolOptions, PoolStats};
use braid_stream_core::hal::Backend;
use braid_stream_core::sync::{Mutex, MutexGuard};
use braid_stream_core::{Access, Graph, Stream, StreamPosition};
use std::fmt;
use std::sync::Arc;

struct ReplayState<B: Backend> {
    /// The stream the last graph of the pool was launched on.
    last_stream: Option<Stream<B>>,
    /// Bumped at every launch of a graph of the pool.
    epoch: u64,
    /// Graphs captured into the pool so far (the last one's index).
    captured: u32,
    /// The bytes each live graph of the pool writes at replay, by index, in capture order.
    written: Vec<(u32, Vec<Span>)>,
    /// Which graph's launch last wrote each byte.
    ledger: Ledger,
}

/// A private memory pool for graphs. Cloning shares the pool (each clone counts as one user,
/// as does each graph captured into it); the memory lives while any handle, graph or output
/// of the pool does.
///
/// Graphs sharing a pool must not run concurrently: [`crate::CapturedGraph::launch`] orders
/// each launch after the previous launch of any graph of the pool (a stream wait when the
/// stream differs), which is the "replayed one at a time, in capture order" contract of
/// PyTorch's shared pools made automatic. A launch out of that order which would read bytes
/// another graph of the pool has overwritten is refused ([`GraphError::ReplayOrder`]).
pub struct GraphPool<B: Backend> {
    mem: MemPool<B>,
    state: Arc<Mutex<ReplayState<B>>>,
}

impl<B: Backend> Clone for GraphPool<B> {
    fn clone(&self) -> Self {
        GraphPool {
            mem: self.mem.clone(),
            state: self.state.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for GraphPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphPool").field("mem", &self.mem).finish()
    }
}

/// A new pool for graphs of `allocator` (PyTorch's `torch.cuda.graph_pool_handle()`).
pub fn graph_pool_handle<B: Backend>(allocator: &CachingAllocator<B>) -> GraphPool<B> {
    GraphPool::new(allocator, PoolOptions::new())
}

impl<B: Backend> GraphPool<B> {
    /// A new pool of `allocator` with `options`.
    pub fn new(allocator: &CachingAllocator<B>, options: PoolOptions) -> Self {
        GraphPool {
            mem: allocator.create_pool(options),
            state: Arc::new(Mutex::new(ReplayState {
                last_stream: None,
                epoch: 0,
                captured: 0,
                written: Vec::new(),
                ledger: Ledger::default(),
            })),
        }
    }

    /// The allocator's pool.
    pub fn mem_pool(&self) -> &MemPool<B> {
        &self.mem
    }

    /// The pool's id.
    pub fn id(&self) -> braid_allocator::PoolId {
        self.mem.id()
    }

    /// Whether `other` is a handle to the same pool.
    pub fn same_as(&self, other: &GraphPool<B>) -> bool {
        self.mem.same_as(&other.mem)
    }

    /// Users of the pool: handles, graphs, active captures.
    pub fn use_count(&self) -> u32 {
        self.mem.use_count()
    }

    /// The allocator's figures for the pool.
    pub fn stats(&self) -> PoolStats {
        self.mem.stats()
    }

    /// Bytes in the pool's segments.
    pub fn reserved_bytes(&self) -> u64 {
        self.mem.reserved_bytes()
    }

    fn state(&self) -> MutexGuard<'_, ReplayState<B>> {
        self.state.lock()
    }

    /// Orders the next work on `stream` after the last launch of any graph of this pool, so
    /// that eager work touching pool memory (copies into static inputs) cannot race with it.
    pub fn order_on(&self, stream: &Stream<B>) -> Result<()> {
        Self::order_after_last(&self.state(), stream)
    }

    fn order_after_last(st: &ReplayState<B>, stream: &Stream<B>) -> Result<()> {
        if let Some(last) = &st.last_stream {
            if last != stream {
                stream.wait_stream(last)?;
            }
        }
        Ok(())
    }

    /// The blocks of the pool allocated now, and its segments.
    pub(crate) fn layout(&self) -> (Vec<Span>, Vec<Span>) {
        let snapshot = self.mem.snapshot();
        let live = snapshot
            .segments
            .iter()
            .flat_map(|seg| &seg.blocks)
            .filter(|b| b.state != BlockState::Inactive)
            .map(|b| Span::new(b.address, b.size))
            .collect();
        let segments = snapshot
            .segments
            .iter()
            .map(|seg| Span::new(seg.address, seg.total_size))
            .collect();
        (live, segments)
    }

    /// Registers a graph just captured into the pool, whose capture saw `accesses` with the
    /// pool's blocks `live_at_begin` allocated when it began: returns its index (its place in
    /// the pool's capture order, from 1) and what it needs and writes at replay.
    pub(crate) fn register_capture(
        &self,
        accesses: &[(Span, Access)],
        live_at_begin: &[Span],
    ) -> (u32, Footprint) {
        let (_, segments) = self.layout();
        let mut st = self.state();
        let fp = Footprint::of_capture(accesses, live_at_begin, &segments, &st.written);
        st.captured += 1;
        let index = st.captured;
        st.written.push((index, fp.writes.clone()));
        (index, fp)
    }

    /// Graph `index` was dropped: later captures no longer read what it writes.
    pub(crate) fn forget(&self, index: u32) {
        self.state().written.retain(|(i, _)| *i != index);
    }

    /// Launches graph `index` with footprint `fp` on `stream`, after the last launch of any
    /// graph of the pool, unless a byte it reads holds another graph's data than the one it
    /// was captured to read ([`GraphError::ReplayOrder`]).
    pub(crate) fn launch(
        &self,
        graph: &Graph<B>,
        index: u32,
        fp: &Footprint,
        stream: &Stream<B>,
    ) -> Result<StreamPosition> {
        let mut st = self.state();
        if let Some(conflict) = st.ledger.check(fp) {
            return Err(GraphError::ReplayOrder {
                pool: self.id().0,
                graph: index,
                producer: conflict.producer,
                overwritten_by: conflict.overwritten_by,
                address: conflict.span.start,
                len: conflict.span.end - conflict.span.start,
            });
        }
        Self::order_after_last(&st, stream)?;
        let pos = graph.launch(stream)?;
        st.last_stream = Some(stream.clone());
        st.epoch += 1;
        st.ledger.apply(fp, index);
        Ok(pos)
    }

    /// Notes that `stream`, ordered by [`GraphPool::order_on`], now touches pool memory
    /// eagerly (the runner's copies into static inputs): later launches and copies wait for
    /// it, even when the launch that was to follow fails.
    pub(crate) fn note_eager_use(&self, stream: &Stream<B>) {
        self.state().last_stream = Some(stream.clone());
    }

    /// Launches counted so far.
    pub fn epoch(&self) -> u64 {
        self.state().epoch
    }

    /// Fails with [`GraphError::OutputOverwritten`] if a graph of the pool launched after
    /// `epoch`.
    pub(crate) fn check_epoch(&self, epoch: u64) -> Result<()> {
        if self.epoch() == epoch {
            Ok(())
        } else {
            Err(GraphError::OutputOverwritten { pool: self.id().0 })
        }
    }
}
