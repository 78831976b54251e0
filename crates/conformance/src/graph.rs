//! Graph capture ([`braid_graph_capture`]) on every backend: capture sessions with private and
//! shared pools (D34–D39, D42, D43, D45, D46, D48), tagged side streams and events (G58), the
//! `GraphRunner` (D49, recapture of moved inputs, TorchAir's memory modes), and every capture
//! rule as a typed error after which the allocator and the streams stay usable.
//!
//! One module per topic; every case is re-exported here, so a case is named `graph::CASE`
//! wherever the suite lists it.

mod errors;
mod multi_stream;
mod pools;
mod runner;
mod sessions;

pub use errors::*;
pub use multi_stream::*;
pub use pools::*;
pub use runner::*;
pub use sessions::*;

use crate::support::download;
use crate::CaseError;
use braid_allocator::DeviceBuffer;
use braid_graph_capture::{GraphError, RunContext};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DeviceSlice, Kernel, Stream};

/// Floats in the buffers of the capture cases (PyTorch's tests use 1000).
const N: u64 = 1000;

/// `out = x + c` into a fresh buffer on the current stream.
fn add<B: Backend>(
    ctx: &RunContext<'_, B>,
    x: DeviceSlice,
    c: DeviceSlice,
) -> Result<DeviceBuffer<B>, GraphError> {
    let out = ctx.alloc(x.len)?;
    ctx.current_stream().launch(&Kernel::Add {
        a: x,
        b: c,
        out: out.slice(),
    })?;
    Ok(out)
}

/// The sum of the floats in `slice`, read back on `stream`.
#[track_caller]
fn sum<B: Backend>(stream: &Stream<B>, slice: DeviceSlice) -> Result<f32, CaseError> {
    Ok(download(stream, slice)?.iter().sum())
}
