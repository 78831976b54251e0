//! TorchAir's `npu_record_tagged_stream` example:
//!
//! ```text
//! A = zeros(n)                                    # main stream
//! with npu_stream_switch("second_stream"):
//!     npu_tagged_event_wait(a_ready)
//!     ...long work...
//!     B = A + 1                                   # reads A long after the main stream moved on
//!     npu_record_tagged_stream(A, "second_stream")
//! del A                                           # freed on the main stream
//! C = ones(n); C.add_(2)                          # main stream: may take A's memory
//! ```
//!
//! With the record, the caching allocator keeps A's block until the second stream's read is
//! ordered before the main stream's next work, so `C` gets other memory and `B == 1`. Without
//! it, `C` takes A's block and is written before the second stream reads A: `B` is wrong, and
//! the simulator's sanitizer reports the use after free.

//!
//! The tensors are `float16` ([`DTYPE`]): every
//! value is a small integer, exact in every type, so the checks compare exactly.

use crate::allocator::{AllocError, AllocatorConfig, CachingAllocator};
use crate::{DType, Device, Kernel};
use braid_stream_core::hal::Backend;

/// The tag of the side stream, as in TorchAir's example.
pub const STREAM_TAG: &str = "second_stream";
/// Tag of the event the side stream waits on before reading `A`.
pub const EVENT_TAG: &str = "a_ready";
/// Elements of `A`, `B` and `C`.
pub const ELEMENTS: u64 = 4096;
/// Device time of the work the second stream does before reading `A`.
pub const LONG_WORK_NS: u64 = 2_000_000;

/// The data type of the example's tensors.
pub const DTYPE: DType = DType::F16;

/// What one run observed.
#[derive(Clone, Debug)]
pub struct Run {
    /// Whether every element of `B` is 1 (`A` read as zeros).
    pub b_correct: bool,
    /// Whether every element of `C` is 3.
    pub c_correct: bool,
    /// Whether `C` got the memory `A` had.
    pub c_reused_a: bool,
    /// The race detector's reports (`None` where the backend has none).
    pub reports: Option<Vec<String>>,
}

/// Runs the example on `device`, with or without `record_tagged_stream`; `reports` asks the
/// backend's race detector afterwards.
pub fn run<B: Backend>(
    device: &Device<B>,
    with_record: bool,
    reports: impl FnOnce(&Device<B>) -> Option<Vec<String>>,
) -> Result<Run, AllocError> {
    run_with(device, &AllocatorConfig::new(), DTYPE, with_record, reports)
}

/// [`run`] with the caching allocator configured by `config`, the tensors in `dtype`.
pub fn run_with<B: Backend>(
    device: &Device<B>,
    config: &AllocatorConfig,
    dtype: DType,
    with_record: bool,
    reports: impl FnOnce(&Device<B>) -> Option<Vec<String>>,
) -> Result<Run, AllocError> {
    let alloc = CachingAllocator::new(device.clone(), config.clone())?;
    let main = device.current_stream();
    let bytes = ELEMENTS * dtype.size();

    let a = alloc.alloc(bytes, &main)?;
    main.launch_labeled(
        Kernel::Fill {
            dst: a.slice(),
            value: 0.0,
        }
        .typed(dtype),
        "A = zeros",
    )?;
    let a_ready = match device.tagged_event(EVENT_TAG) {
        Ok(event) => event,
        Err(_) => device.create_tagged_event(EVENT_TAG)?,
    };
    a_ready.record_on_current_stream()?;

    let b = {
        let _switch = device.stream_switch(STREAM_TAG, 0)?;
        let side = device.current_stream();
        a_ready.wait_on_current_stream()?;
        side.launch_labeled(
            &Kernel::Busy {
                duration_ns: LONG_WORK_NS,
            },
            "long work",
        )?;
        let b = alloc.alloc(bytes, &side)?;
        side.launch_labeled(
            Kernel::Fill {
                dst: b.slice(),
                value: 1.0,
            }
            .typed(dtype),
            "ones",
        )?;
        side.launch_labeled(
            Kernel::Add {
                a: a.slice(),
                b: b.slice(),
                out: b.slice(),
            }
            .typed(dtype),
            "B = A + 1",
        )?;
        if with_record {
            alloc.record_tagged_stream(&a, STREAM_TAG)?;
        }
        b
    };
    let a_ptr = a.ptr();
    drop(a);

    let c = alloc.alloc(bytes, &main)?;
    let twos = alloc.alloc(bytes, &main)?;
    main.launch_labeled(
        Kernel::Fill {
            dst: c.slice(),
            value: 1.0,
        }
        .typed(dtype),
        "C = ones",
    )?;
    main.launch_labeled(
        Kernel::Fill {
            dst: twos.slice(),
            value: 2.0,
        }
        .typed(dtype),
        "twos",
    )?;
    main.launch_labeled(
        Kernel::Add {
            a: c.slice(),
            b: twos.slice(),
            out: c.slice(),
        }
        .typed(dtype),
        "C.add_(2)",
    )?;

    let side = device.tagged_stream(STREAM_TAG, 0)?;
    main.wait_stream(&side)?;
    let b_values = main.copy_d2h(b.slice())?.wait_as(dtype)?;
    let c_values = main.copy_d2h(c.slice())?.wait_as(dtype)?;
    Ok(Run {
        b_correct: b_values.len() == ELEMENTS as usize && b_values.iter().all(|v| *v == 1.0),
        c_correct: c_values.len() == ELEMENTS as usize && c_values.iter().all(|v| *v == 3.0),
        c_reused_a: c.ptr() == a_ptr,
        reports: reports(device),
    })
}
