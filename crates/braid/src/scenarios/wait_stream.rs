//! MindSpore's `wait_stream` example: a matmul on the default stream, and the `sum` of its
//! result on a side stream. Without `side.wait_stream(&main)` the side stream reads the result
//! before the matmul has written it.
//!
//! The default stream is still busy with earlier work (a kernel of `earlier_work_ns`, standing
//! for the previous layers of a model) when the matmul is enqueued — the situation in which the
//! missing wait bites on real hardware too.
//!
//! The tensors are `float16` ([`DTYPE`]). The
//! inputs are powers of two, so every product, every element of `c` (a sum of `k` of them) and
//! the sum of `c` are exact in `float16` as long as the sum stays within its range
//! (`m·k·n / 256 ≤ 65504`, true of the default shape): the check is exact equality.

use super::{alloc_elements, Timer};
use crate::{DType, Device, Kernel, Result};
use braid_stream_core::hal::Backend;

/// Sizes of the scenario.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Rows of `a` and `c`.
    pub m: u32,
    /// Columns of `a`, rows of `b`.
    pub k: u32,
    /// Columns of `b` and `c`.
    pub n: u32,
    /// Device time of the work already queued on the default stream.
    pub earlier_work_ns: u64,
    /// The data type of `a`, `b`, `c` and the sum ([`DTYPE`] by default).
    pub dtype: DType,
}

/// The data type of the example's tensors.
pub const DTYPE: DType = DType::F16;

impl Default for Shape {
    fn default() -> Self {
        Shape {
            m: 128,
            k: 128,
            n: 128,
            earlier_work_ns: 500_000,
            dtype: DTYPE,
        }
    }
}

/// Value `a` is filled with (a power of two: exact in every type).
const A_VALUE: f32 = 1.0 / 16.0;
/// Value `b` is filled with (a power of two: exact in every type).
const B_VALUE: f32 = 1.0 / 16.0;

/// What one run observed.
#[derive(Clone, Debug)]
pub struct Run {
    /// The sum the side stream computed.
    pub sum: f32,
    /// The correct sum.
    pub expected: f32,
    /// The data type the kernels ran in (`shape.dtype`).
    pub dtype: DType,
    /// Whether `sum` is correct.
    pub correct: bool,
    /// Device time from the first enqueue to the sum's completion, in microseconds.
    pub elapsed_us: f64,
    /// What a race detector on the backend reported during the run (for the simulator: its
    /// sanitizer's reports, rendered); `None` when the run was not checked.
    pub reports: Option<Vec<String>>,
}

/// Runs the scenario on `device`, with or without the side stream waiting for the default one.
pub fn run<B: Backend>(device: &Device<B>, shape: Shape, with_wait: bool) -> Result<Run> {
    run_checked(device, shape, with_wait, |_| None)
}

/// [`run`], then asks `reports` for what the backend's race detector found (the scenario
/// stays generic over the backend; see `braid::sim_race_reports` for the simulator).
pub fn run_checked<B: Backend>(
    device: &Device<B>,
    shape: Shape,
    with_wait: bool,
    reports: impl FnOnce(&Device<B>) -> Option<Vec<String>>,
) -> Result<Run> {
    let main = device.default_stream();
    let side = device.create_stream(0)?;
    let dtype = shape.dtype;
    let (m, k, n) = (shape.m as u64, shape.k as u64, shape.n as u64);
    let a = alloc_elements(device, m * k, dtype)?;
    let b = alloc_elements(device, k * n, dtype)?;
    let c = alloc_elements(device, m * n, dtype)?;
    let sum = alloc_elements(device, 1, dtype)?;

    let timer = Timer::start(&main)?;
    main.launch_labeled(
        &Kernel::Busy {
            duration_ns: shape.earlier_work_ns,
        },
        "earlier layers",
    )?;
    main.launch(
        Kernel::Fill {
            dst: a.slice(),
            value: A_VALUE,
        }
        .typed(dtype),
    )?;
    main.launch(
        Kernel::Fill {
            dst: b.slice(),
            value: B_VALUE,
        }
        .typed(dtype),
    )?;
    main.launch(
        Kernel::Matmul {
            a: a.slice(),
            b: b.slice(),
            c: c.slice(),
            m: shape.m,
            k: shape.k,
            n: shape.n,
        }
        .typed(dtype),
    )?;
    if with_wait {
        side.wait_stream(&main)?;
    }
    side.launch(
        Kernel::ReduceSum {
            src: c.slice(),
            dst: sum.slice(),
        }
        .typed(dtype),
    )?;
    let readback = side.copy_d2h(sum.slice())?;
    main.wait_stream(&side)?;
    let elapsed_us = timer.stop_us(&main)?;

    let got = readback
        .wait_as(dtype)?
        .first()
        .copied()
        .unwrap_or(f32::NAN);
    let expected = dtype.round(expected_sum(shape));
    Ok(Run {
        sum: got,
        expected,
        dtype,
        correct: got == expected,
        elapsed_us,
        reports: reports(device),
    })
}

/// The correct sum of `a × b` for the constant inputs (exact; a run compares it rounded to
/// its data type, which leaves it unchanged within `float16`'s range).
pub fn expected_sum(shape: Shape) -> f32 {
    let per_element = shape.k as f64 * A_VALUE as f64 * B_VALUE as f64;
    (per_element * shape.m as f64 * shape.n as f64) as f32
}
