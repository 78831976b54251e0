//! Typed errors of graph capture and the runner.

use braid_allocator::AllocError;
use braid_stream_core::WrongDevice;

/// Everything a capture session, a captured graph or a [`crate::GraphRunner`] can refuse or
/// report. After any of these the allocator, the streams and the runner stay usable: a failed
/// capture is ended and its memory returned to its pool.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The front layer refused a call: a capture rule (capture on the default stream,
    /// synchronize or query during capture, an unjoined stream at the end, ...) or another
    /// stream/event misuse. The inner error names the rule.
    #[error(transparent)]
    Stream(#[from] braid_stream_core::StreamError),
    /// The allocator failed (out of memory inside a capture, a busy pool, ...).
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A stream of another device than the allocator's was passed.
    #[error(transparent)]
    WrongDevice(#[from] Box<WrongDevice>),
    /// A pool of another allocator than the capture's (or the runner's) was passed.
    #[error("{call}: the pool belongs to another allocator than the one given (make it with graph_pool_handle of that allocator)")]
    ForeignPool {
        /// The call refused (`CaptureSession::run`, `GraphRunner::new`).
        call: &'static str,
    },
    /// A runner was called with a number of inputs other than it was built for.
    #[error("the runner takes {expected} inputs, {got} were given")]
    InputCount {
        /// Inputs declared when the runner was built.
        expected: usize,
        /// Inputs passed.
        got: usize,
    },
    /// An output of a graph was read after another graph sharing its pool replayed (its
    /// memory may have been overwritten). Clone outputs to keep them across replays.
    #[error("graph output read after another replay in pool {pool} may have overwritten it: clone outputs you keep across replays (RunnerConfig::clone_outputs or Outputs::into_owned)")]
    OutputOverwritten {
        /// The pool's id.
        pool: u64,
    },
    /// A graph sharing a pool was launched out of capture order: bytes of the pool it reads,
    /// written by another graph of the pool (`producer`), no longer hold that graph's data —
    /// graph `overwritten_by`'s launch wrote them since (its capture reused the block), or
    /// no launch of `producer` has written them yet. Nothing was enqueued. Graphs are named
    /// by their place in the pool's capture order ([`crate::CapturedGraph::capture_index`]).
    #[error("graph {graph} of pool {pool} reads {len} bytes at {address:#x} written by graph {producer}, but {}: replay graphs that share a pool in capture order", match .overwritten_by {
        Some(g) => format!("graph {g}'s launch overwrote them since"),
        None => format!("no launch of graph {producer} has written them yet"),
    })]
    ReplayOrder {
        /// The pool's id.
        pool: u64,
        /// The graph refused.
        graph: u32,
        /// The graph whose data it reads there.
        producer: u32,
        /// The graph whose launch overwrote the bytes; `None` when no launch of `producer`
        /// wrote them.
        overwritten_by: Option<u32>,
        /// The first byte.
        address: u64,
        /// How many bytes.
        len: u64,
    },
    /// The model (the user's closure) failed.
    #[error("model failed: {0}")]
    Model(Box<dyn std::error::Error + Send + Sync>),
}

impl GraphError {
    /// Wraps an error of the user's model.
    pub fn model(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        GraphError::Model(err.into())
    }
}

/// Result with [`GraphError`].
pub type Result<T, E = GraphError> = std::result::Result<T, E>;
