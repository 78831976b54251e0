//! The seed scenarios, as reusable functions: the examples print them, `braid demo` tabulates
//! them, and tests assert them. Each is generic over the backend.
//!
//! Simulated times come from timing events (`Event::elapsed_ms`) around the scenario's work,
//! so the same code measures real hardware on a real backend.
//!
//! The seeds compute in `float16`, as the examples they come from do ([`SEED_DTYPE`]): each
//! scenario has a `DTYPE` constant, sizes its buffers by `DTYPE.size()`, launches its kernels
//! in that type and decodes its readbacks with it, on every backend (through ACL the kernels
//! are aclnn operators in that type).
//!
//! [`llama`] is more than a seed: a Llama-architecture decoder on braid alone (weights from
//! a `safetensors` file, a KV cache in a graph pool, one task-group update per token, tensor
//! parallelism), checked against transformers; the `llama_decode` example runs it.
//!
//! [`devices`] opens the devices the examples and `braid demo` run them on: simulated ones,
//! or ACL ones with the `acl` feature.

pub mod cross_stream_lifetime;
pub mod custom_op;
pub mod devices;
pub mod graph_memory;
pub mod graph_mode;
pub mod llama;
pub mod memory_reuse;
pub mod record_tagged_stream;
pub mod sleep_mode;
pub mod tagged_events;
pub mod tensor_parallel;
pub mod wait_stream;

use crate::{DType, Device, DeviceMemory, Event, EventFlags, Result, Stream};
use braid_stream_core::hal::Backend;

/// The data type the seed examples compute in.
pub const SEED_DTYPE: DType = DType::F16;

/// Allocates `elements` elements of `dtype` of raw device memory.
pub(crate) fn alloc_elements<B: Backend>(
    device: &Device<B>,
    elements: u64,
    dtype: DType,
) -> Result<DeviceMemory<B>> {
    let bytes = elements.checked_mul(dtype.size()).ok_or_else(|| {
        crate::StreamError::SizeOverflow(crate::SizeOverflow {
            call: "alloc",
            what: format!("{elements} {dtype} elements"),
        })
    })?;
    device.alloc(bytes)
}

/// Measures device time on `stream` between [`Timer::start`] and [`Timer::stop_us`].
pub(crate) struct Timer<B: Backend> {
    start: Event<B>,
}

impl<B: Backend> Timer<B> {
    pub(crate) fn start(stream: &Stream<B>) -> Result<Self> {
        let start = stream.device().create_event(EventFlags::TIMING)?;
        start.record(stream)?;
        Ok(Timer { start })
    }

    /// Records the end on `stream`, waits for it and returns the elapsed microseconds.
    pub(crate) fn stop_us(self, stream: &Stream<B>) -> Result<f64> {
        let end = stream.device().create_event(EventFlags::TIMING)?;
        end.record(stream)?;
        end.synchronize()?;
        Ok(self.start.elapsed_ms(&end)? as f64 * 1000.0)
    }
}
