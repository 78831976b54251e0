//! `Outputs<'r, B>`: what a runner call returns — views of a graph's static outputs that
//! borrow the runner, or owned buffers.

use crate::error::Result;
use crate::pool::GraphPool;
use braid_allocator::{CachingAllocator, DeviceBuffer};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DeviceSlice, Stream};
use std::fmt;

pub(crate) enum Kind<'r, B: Backend> {
    /// The static outputs of a graph, written by the replay just launched.
    Replayed {
        slices: &'r [DeviceSlice],
        pool: &'r GraphPool<B>,
        epoch: u64,
    },
    /// Buffers of an eager run, or clones of a replay's outputs.
    Owned(Vec<DeviceBuffer<B>>),
}

/// The outputs of one [`crate::GraphRunner::run`] call.
///
/// Outputs of a replay live in the graph's pool and are overwritten by the next replay, so
/// they borrow the runner: keeping them across the next call does not compile.
///
/// ```compile_fail
/// # use braid_graph_capture::{GraphRunner, RunnerConfig, InputKind, Result, RunContext};
/// # use braid_backend_sim::SimBackend;
/// # use braid_stream_core::{DeviceSlice, Stream};
/// # use braid_allocator::DeviceBuffer;
/// # fn demo<M>(runner: &mut GraphRunner<SimBackend, M>, s: &Stream<SimBackend>, x: DeviceSlice) -> Result<()>
/// # where M: FnMut(&RunContext<'_, SimBackend>, &[DeviceSlice]) -> Result<Vec<DeviceBuffer<SimBackend>>> {
/// let first = runner.run(s, &[x])?;
/// let second = runner.run(s, &[x])?; // error: `*runner` is already borrowed by `first`
/// let _ = first.slices()?;
/// # Ok(()) }
/// ```
///
/// Clone what must outlive the next call ([`Outputs::into_owned`], or
/// [`crate::RunnerConfig::clone_outputs`]): owned outputs borrow nothing.
///
/// ```
/// # use braid_graph_capture::{GraphRunner, RunnerConfig, InputKind, Result, RunContext};
/// # use braid_backend_sim::SimBackend;
/// # use braid_stream_core::{DeviceSlice, Stream};
/// # use braid_allocator::DeviceBuffer;
/// # fn demo<M>(runner: &mut GraphRunner<SimBackend, M>, s: &Stream<SimBackend>, x: DeviceSlice) -> Result<()>
/// # where M: FnMut(&RunContext<'_, SimBackend>, &[DeviceSlice]) -> Result<Vec<DeviceBuffer<SimBackend>>> {
/// let first: Vec<DeviceBuffer<SimBackend>> = runner.run(s, &[x])?.into_owned()?;
/// let second = runner.run(s, &[x])?;
/// let _ = (first, second.slices()?);
/// # Ok(()) }
/// ```
pub struct Outputs<'r, B: Backend> {
    kind: Kind<'r, B>,
    stream: Stream<B>,
    allocator: CachingAllocator<B>,
}

impl<B: Backend> fmt::Debug for Outputs<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outputs")
            .field("replayed", &self.is_replay())
            .field("len", &self.len())
            .finish()
    }
}

impl<'r, B: Backend> Outputs<'r, B> {
    pub(crate) fn new(
        kind: Kind<'r, B>,
        stream: Stream<B>,
        allocator: CachingAllocator<B>,
    ) -> Self {
        Outputs {
            kind,
            stream,
            allocator,
        }
    }

    /// Whether these are a replay's static outputs (rather than owned buffers).
    pub fn is_replay(&self) -> bool {
        matches!(self.kind, Kind::Replayed { .. })
    }

    /// Number of outputs.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Replayed { slices, .. } => slices.len(),
            Kind::Owned(bufs) => bufs.len(),
        }
    }

    /// Whether there are no outputs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stream the call ran on (read outputs there, or after waiting on it).
    pub fn stream(&self) -> &Stream<B> {
        &self.stream
    }

    /// The outputs' device memory. Fails with [`crate::GraphError::OutputOverwritten`] if
    /// another graph sharing the pool ran since (possible only with a pool shared by several
    /// runners).
    pub fn slices(&self) -> Result<Vec<DeviceSlice>> {
        match &self.kind {
            Kind::Replayed {
                slices,
                pool,
                epoch,
            } => {
                pool.check_epoch(*epoch)?;
                Ok(slices.to_vec())
            }
            Kind::Owned(bufs) => Ok(bufs.iter().map(DeviceBuffer::slice).collect()),
        }
    }

    /// Copies output `index` to the host as `f32`s (synchronizes with the call's stream).
    pub fn read_f32(&self, index: usize) -> Result<Vec<f32>> {
        let slices = self.slices()?;
        let Some(slice) = slices.get(index) else {
            return Ok(Vec::new());
        };
        Ok(self.stream.copy_d2h(*slice)?.wait_f32()?)
    }

    /// Owned outputs: moved out when they already are, else copied into new buffers of the
    /// default pool on the call's stream.
    pub fn into_owned(self) -> Result<Vec<DeviceBuffer<B>>> {
        match self.kind {
            Kind::Owned(bufs) => Ok(bufs),
            Kind::Replayed {
                slices,
                pool,
                epoch,
            } => {
                pool.check_epoch(epoch)?;
                clone_slices(&self.allocator, &self.stream, slices)
            }
        }
    }
}

/// Copies `slices` into new default-pool buffers on `stream`.
pub(crate) fn clone_slices<B: Backend>(
    allocator: &CachingAllocator<B>,
    stream: &Stream<B>,
    slices: &[DeviceSlice],
) -> Result<Vec<DeviceBuffer<B>>> {
    let mut out = Vec::with_capacity(slices.len());
    for s in slices {
        let buf = allocator.alloc(s.len, stream)?;
        if s.len > 0 {
            stream.copy_d2d(*s, buf.slice())?;
        }
        out.push(buf);
    }
    Ok(out)
}
