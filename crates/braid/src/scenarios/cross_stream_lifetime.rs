//! MindSpore's cross-stream memory example (`add_s0`): a tensor made on the default stream is
//! read by an add on a side stream, then dropped on the default stream while the add is still
//! queued behind earlier work; the next allocation on the default stream may take its memory.
//!
//! ```text
//! x = full(n, 2.0)                 # default stream
//! s1.wait_stream(default)
//! with StreamCtx(s1):
//!     ...earlier work...
//!     y = add(x, x)                # "add_s0": reads x on s1
//! del x                            # no record_stream
//! z = full(n, 5.0)                 # default stream: may reuse x's memory
//! ```
//!
//! With the allocator in automatic mode (MindSpore's semantics) the front layer tells it about
//! the read on `s1`, so `x` stays reserved until that read is ordered before the default
//! stream's next work: `y == 4` with no `record_stream` call and no race. In manual mode
//! (PyTorch's semantics) nothing was recorded, `z` takes `x`'s memory, `y` is wrong and the
//! simulator's sanitizer reports the use after free.

//!
//! The tensors are `float16` ([`DTYPE`]): every
//! value is a small integer, exact in every type, so the checks compare exactly.

use crate::allocator::{AllocError, AllocatorConfig, CachingAllocator, CrossStreamMode};
use crate::{DType, Device, Kernel};
use braid_stream_core::hal::Backend;

/// Elements of `x`, `y` and `z`.
pub const ELEMENTS: u64 = 4096;
/// Device time of the side stream's earlier work.
pub const EARLIER_WORK_NS: u64 = 2_000_000;

/// The data type of the example's tensors.
pub const DTYPE: DType = DType::F16;

/// What one run observed.
#[derive(Clone, Debug)]
pub struct Run {
    /// Whether every element of `y` is 4.
    pub correct: bool,
    /// Whether `z` got the memory `x` had.
    pub z_reused_x: bool,
    /// Events the allocator recorded to track cross-stream uses.
    pub events_recorded: u64,
    /// The race detector's reports (`None` where the backend has none).
    pub reports: Option<Vec<String>>,
}

/// Runs the example on `device` with the allocator in `mode`; `reports` asks the backend's
/// race detector afterwards.
pub fn run<B: Backend>(
    device: &Device<B>,
    mode: CrossStreamMode,
    reports: impl FnOnce(&Device<B>) -> Option<Vec<String>>,
) -> Result<Run, AllocError> {
    run_with(device, &AllocatorConfig::new(), DTYPE, mode, reports)
}

/// [`run`] with the caching allocator configured by `config`, its cross-stream mode set to
/// `mode` (the scenario's subject, so it overrides `config`'s), the tensors in `dtype`.
pub fn run_with<B: Backend>(
    device: &Device<B>,
    config: &AllocatorConfig,
    dtype: DType,
    mode: CrossStreamMode,
    reports: impl FnOnce(&Device<B>) -> Option<Vec<String>>,
) -> Result<Run, AllocError> {
    let alloc = CachingAllocator::new(device.clone(), config.clone().cross_stream(mode))?;
    let main = device.default_stream();
    let s1 = device.create_stream(0)?;
    let bytes = ELEMENTS * dtype.size();

    let x = alloc.alloc(bytes, &main)?;
    main.launch_labeled(
        Kernel::Fill {
            dst: x.slice(),
            value: 2.0,
        }
        .typed(dtype),
        "x = full(2)",
    )?;
    s1.wait_stream(&main)?;
    let y = {
        let _ctx = device.use_stream(&s1)?;
        let s1 = device.current_stream();
        s1.launch_labeled(
            &Kernel::Busy {
                duration_ns: EARLIER_WORK_NS,
            },
            "earlier work",
        )?;
        let y = alloc.alloc_current(bytes)?;
        s1.launch_labeled(
            Kernel::Add {
                a: x.slice(),
                b: x.slice(),
                out: y.slice(),
            }
            .typed(dtype),
            "add_s0",
        )?;
        y
    };
    let x_ptr = x.ptr();
    drop(x);

    let z = alloc.alloc(bytes, &main)?;
    main.launch_labeled(
        Kernel::Fill {
            dst: z.slice(),
            value: 5.0,
        }
        .typed(dtype),
        "z = full(5)",
    )?;
    main.wait_stream(&s1)?;
    let y_values = main.copy_d2h(y.slice())?.wait_as(dtype)?;
    Ok(Run {
        correct: y_values.len() == ELEMENTS as usize && y_values.iter().all(|v| *v == 4.0),
        z_reused_x: z.ptr() == x_ptr,
        events_recorded: alloc.memory_stats().num_events_recorded,
        reports: reports(device),
    })
}
