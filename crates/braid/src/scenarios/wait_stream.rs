//! MindSpore's `wait_stream` example: a matmul on the default stream, and the `sum` of its
//! result on a side stream. Without `side.wait_stream(&main)` the side stream reads the result
//! before the matmul has written it.
//!
//! The default stream is still busy with earlier work (a kernel of `earlier_work_ns`, standing
//! for the previous layers of a model) when the matmul is enqueued — the situation in which the
//! missing wait bites on real hardware too.

use super::{alloc_f32, approx_eq, Timer};
use crate::{Device, Kernel, Result};
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
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            m: 128,
            k: 128,
            n: 128,
            earlier_work_ns: 500_000,
        }
    }
}

/// Value `a` is filled with.
const A_VALUE: f32 = 0.5;
/// Value `b` is filled with.
const B_VALUE: f32 = 2.0;

/// What one run observed.
#[derive(Clone, Debug)]
pub struct Run {
    /// The sum the side stream computed.
    pub sum: f32,
    /// The correct sum.
    pub expected: f32,
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
    let (m, k, n) = (shape.m as u64, shape.k as u64, shape.n as u64);
    let a = alloc_f32(device, m * k)?;
    let b = alloc_f32(device, k * n)?;
    let c = alloc_f32(device, m * n)?;
    let sum = alloc_f32(device, 1)?;

    let timer = Timer::start(&main)?;
    main.launch_labeled(
        &Kernel::Busy {
            duration_ns: shape.earlier_work_ns,
        },
        "earlier layers",
    )?;
    main.launch(&Kernel::Fill {
        dst: a.slice(),
        value: A_VALUE,
    })?;
    main.launch(&Kernel::Fill {
        dst: b.slice(),
        value: B_VALUE,
    })?;
    main.launch(&Kernel::Matmul {
        a: a.slice(),
        b: b.slice(),
        c: c.slice(),
        m: shape.m,
        k: shape.k,
        n: shape.n,
    })?;
    if with_wait {
        side.wait_stream(&main)?;
    }
    side.launch(&Kernel::ReduceSum {
        src: c.slice(),
        dst: sum.slice(),
    })?;
    let readback = side.copy_d2h(sum.slice())?;
    main.wait_stream(&side)?;
    let elapsed_us = timer.stop_us(&main)?;

    let got = readback.wait_f32()?.first().copied().unwrap_or(f32::NAN);
    let expected = expected_sum(shape);
    Ok(Run {
        sum: got,
        expected,
        correct: approx_eq(got, expected),
        elapsed_us,
        reports: reports(device),
    })
}

/// The correct sum of `a × b` for the constant inputs.
pub fn expected_sum(shape: Shape) -> f32 {
    let per_element = shape.k as f64 * A_VALUE as f64 * B_VALUE as f64;
    (per_element * shape.m as f64 * shape.n as f64) as f32
}
