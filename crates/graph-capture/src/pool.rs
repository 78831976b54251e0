//! `GraphPool<B>`: a private pool shared by graphs (PyTorch's `graph_pool_handle()`), with the
//! replay bookkeeping that keeps graphs sharing it in order.

use crate::error::{GraphError, Result};
use braid_allocator::{CachingAllocator, MemPool, PoolOptions, PoolStats};
use braid_stream_core::hal::Backend;
use braid_stream_core::Stream;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

struct ReplayState<B: Backend> {
    /// The stream the last graph of the pool was launched on.
    last_stream: Option<Stream<B>>,
    /// Bumped at every launch of a graph of the pool.
    epoch: u64,
}

/// A private memory pool for graphs. Cloning shares the pool (each clone counts as one user,
/// as does each graph captured into it); the memory lives while any handle, graph or output
/// of the pool does.
///
/// Graphs sharing a pool must not run concurrently: [`crate::CapturedGraph::launch`] orders
/// each launch after the previous launch of any graph of the pool (a stream wait when the
/// stream differs), which is the "replayed one at a time, in capture order" contract of
/// PyTorch's shared pools made automatic.
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
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Orders the next work on `stream` after the last launch of any graph of this pool, so
    /// that eager work touching pool memory (copies into static inputs) cannot race with it.
    pub fn order_on(&self, stream: &Stream<B>) -> Result<()> {
        let st = self.state();
        if let Some(last) = &st.last_stream {
            if last != stream {
                stream.wait_stream(last)?;
            }
        }
        Ok(())
    }

    /// Notes that `stream`, ordered by [`GraphPool::order_on`], now touches pool memory
    /// eagerly (the runner's copies into static inputs): later launches and copies wait for
    /// it, even when the launch that was to follow fails.
    pub(crate) fn note_eager_use(&self, stream: &Stream<B>) {
        self.state().last_stream = Some(stream.clone());
    }

    /// Notes a launch on `stream`; returns the new epoch.
    pub(crate) fn note_launch(&self, stream: &Stream<B>) -> u64 {
        let mut st = self.state();
        st.last_stream = Some(stream.clone());
        st.epoch += 1;
        st.epoch
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
