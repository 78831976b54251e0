//! TorchAir's tagged-event example:
//!
//! ```text
//! add_result = in1 + in2                      # main stream
//! npu_tagged_event_record(event)              # main stream
//! with npu_stream_switch("1", 3):
//!     npu_tagged_event_wait(event)            # tagged stream "1" waits for the add
//!     mm_result = in3 @ in4
//! add2 = in3 + in4                            # main stream, overlaps the matmul
//! ```
//!
//! The same work on one stream is the baseline: the matmul (cube units) and the second add
//! (vector units) cannot overlap there.
//!
//! The tensors are `float16` ([`DTYPE`]). The
//! inputs are sums of powers of two and `dim` a multiple of 8, so every result is exact in
//! `float16` (the matmul accumulates in `float32`, as cube units do): [`check`] compares
//! exactly.

use super::{alloc_elements, Timer};
use crate::{DType, Device, Kernel, Result, Stream};
use braid_stream_core::hal::Backend;

/// Tag of the side stream, as in TorchAir's example.
pub const STREAM_TAG: &str = "1";
/// Tag of the event the main stream records after the first add.
pub const EVENT_TAG: &str = "add_done";
/// Priority the example passes to `npu_stream_switch`.
pub const STREAM_PRIORITY: i32 = 3;
/// The data type of the example's tensors.
pub const DTYPE: DType = DType::F16;

/// Sizes of the scenario.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Elements of `in1` and `in2`.
    pub elements: u64,
    /// `in3` and `in4` are `dim × dim` matrices.
    pub dim: u32,
    /// The data type of every tensor ([`DTYPE`] in the shapes below).
    pub dtype: DType,
}

impl Shape {
    /// Small enough to compute in data mode quickly.
    pub const SMALL: Shape = Shape {
        elements: 4096,
        dim: 64,
        dtype: DTYPE,
    };
    /// Large enough that device time dominates host launch cost (for timing-only runs).
    pub const MODEL: Shape = Shape {
        elements: 64 << 20,
        dim: 4096,
        dtype: DTYPE,
    };
    /// This shape in `dtype`.
    pub const fn with_dtype(self, dtype: DType) -> Shape {
        Shape { dtype, ..self }
    }
}

/// Which streams run the work.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layout {
    /// The matmul on tagged stream "1", as in the example.
    MultiStream,
    /// Everything on the main stream.
    SingleStream,
}

const IN1: f32 = 1.0;
const IN2: f32 = 2.0;
const IN3: f32 = 0.5;
const IN4: f32 = 0.25;

/// The results, read back from the device.
#[derive(Clone, PartialEq, Debug)]
pub struct Results {
    /// Every element of `add_result`.
    pub add_result: Vec<f32>,
    /// Every element of `mm_result`.
    pub mm_result: Vec<f32>,
    /// Every element of `add2`.
    pub add2: Vec<f32>,
}

/// What one run observed.
#[derive(Clone, Debug)]
pub struct Run {
    /// Device time from the first enqueue until all three results exist, in microseconds.
    pub makespan_us: f64,
    /// The results, when read back.
    pub results: Option<Results>,
}

/// Runs the example. With `read_back`, copies the results to the host (use it in data mode).
pub fn run<B: Backend>(
    device: &Device<B>,
    shape: Shape,
    layout: Layout,
    read_back: bool,
) -> Result<Run> {
    let main = device.current_stream();
    let dtype = shape.dtype;
    let mat = shape.dim as u64 * shape.dim as u64;
    let alloc = |elements| alloc_elements(device, elements, dtype);
    let in1 = alloc(shape.elements)?;
    let in2 = alloc(shape.elements)?;
    let in3 = alloc(mat)?;
    let in4 = alloc(mat)?;
    let add_result = alloc(shape.elements)?;
    let mm_result = alloc(mat)?;
    let add2 = alloc(mat)?;
    for (buf, value) in [(&in1, IN1), (&in2, IN2), (&in3, IN3), (&in4, IN4)] {
        main.launch(
            Kernel::Fill {
                dst: buf.slice(),
                value,
            }
            .typed(dtype),
        )?;
    }
    main.synchronize()?;

    let timer = Timer::start(&main)?;
    main.launch(
        Kernel::Add {
            a: in1.slice(),
            b: in2.slice(),
            out: add_result.slice(),
        }
        .typed(dtype),
    )?;
    let matmul = Kernel::Matmul {
        a: in3.slice(),
        b: in4.slice(),
        c: mm_result.slice(),
        m: shape.dim,
        k: shape.dim,
        n: shape.dim,
    }
    .typed(dtype);
    let side: Option<Stream<B>> = match layout {
        Layout::MultiStream => {
            // A tag is taken once per device: a second run on the same device reuses the event.
            let event = match device.tagged_event(EVENT_TAG) {
                Ok(event) => event,
                Err(_) => device.create_tagged_event(EVENT_TAG)?,
            };
            event.record_on_current_stream()?;
            let _switch = device.stream_switch(STREAM_TAG, STREAM_PRIORITY)?;
            event.wait_on_current_stream()?;
            device.current_stream().launch(&matmul)?;
            Some(device.current_stream())
        }
        Layout::SingleStream => {
            main.launch(&matmul)?;
            None
        }
    };
    main.launch(
        Kernel::Add {
            a: in3.slice(),
            b: in4.slice(),
            out: add2.slice(),
        }
        .typed(dtype),
    )?;
    if let Some(side) = &side {
        main.wait_stream(side)?;
    }
    let makespan_us = timer.stop_us(&main)?;

    let results = if read_back {
        Some(Results {
            add_result: main.copy_d2h(add_result.slice())?.wait_as(dtype)?,
            mm_result: main.copy_d2h(mm_result.slice())?.wait_as(dtype)?,
            add2: main.copy_d2h(add2.slice())?.wait_as(dtype)?,
        })
    } else {
        None
    };
    Ok(Run {
        makespan_us,
        results,
    })
}

/// Whether `results` are exactly what the example computes for `shape` (every value is exact
/// in `float16` and `float32`).
pub fn check(shape: Shape, results: &Results) -> bool {
    let mm = shape.dim as f32 * IN3 * IN4;
    let mat = shape.dim as usize * shape.dim as usize;
    results.add_result.len() == shape.elements as usize
        && results.add_result.iter().all(|v| *v == IN1 + IN2)
        && results.mm_result.len() == mat
        && results.mm_result.iter().all(|v| *v == mm)
        && results.add2.len() == mat
        && results.add2.iter().all(|v| *v == IN3 + IN4)
}
