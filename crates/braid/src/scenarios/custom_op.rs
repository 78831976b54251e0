//! A user-defined operator, RMSNorm, on two streams: the `custom_op` example and its tests.
//!
//! ```text
//! x, gamma  = uploads on the main stream              (float16)
//! with stream("norm"):                                # a second stream
//!     wait(main)                                      # left out in the racy run
//!     y, rstd = rms_norm(x, gamma)                    # the user's operator
//! main.wait(norm); read y                             # checked against a host reference
//! capture rms_norm into a graph; new x; replay        # checked again
//! ```
//!
//! The operator is the user's: braid knows only its declaration (reads `x` and `gamma`, writes
//! `y` and `rstd`, in `float16` with `rstd` in `float32`, a vector-unit cost). Its body is the
//! backend's: on the simulator a host function ([`sim_body`]), on ACL a closure that calls
//! `aclnnRmsNorm` on the native stream (`acl_body`, with the `acl` feature). The allocator
//! runs in automatic mode, so the second stream's uses of `x` and `gamma` keep them alive
//! without any `record_stream`. The racy run leaves out the wait: the norm reads `x` while
//! the main stream still writes it, and the race detector reports it.

use crate::allocator::{AllocError, AllocatorConfig, CachingAllocator, CrossStreamMode};
use crate::{ComputeUnit, CustomOp, DType, Device, DeviceSlice, Kernel, OpCost};
use braid_stream_core::hal::Backend;
use std::sync::Arc;

/// Rows of `x` (tokens).
pub const ROWS: u64 = 8;
/// Columns of `x` (hidden size).
pub const COLS: u64 = 64;
/// The epsilon under the square root.
pub const EPS: f64 = 1e-6;
/// The data type of `x`, `gamma` and `y` (the seeds run in `float16`).
pub const DTYPE: DType = DType::F16;

/// Workspace bytes each launch takes in stream order ([`crate::Stream::workspace`]): at least
/// what `aclnnRmsNorm` asks for at this shape (the ACL body checks the operator's
/// `GetWorkspaceSize` against it and refuses, with a typed error, a workspace too small).
pub const WORKSPACE: u64 = 4096;

/// Where one launch of the operator reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct RmsNormArgs {
    /// Input, `ROWS × COLS` of [`DTYPE`].
    pub x: DeviceSlice,
    /// Scale, `COLS` of [`DTYPE`].
    pub gamma: DeviceSlice,
    /// Output, `ROWS × COLS` of [`DTYPE`].
    pub y: DeviceSlice,
    /// Reciprocal RMS of each row, `ROWS` of `float32`.
    pub rstd: DeviceSlice,
    /// Scratch memory the operator may use while it runs ([`WORKSPACE`] bytes, taken on the
    /// launching stream).
    pub workspace: DeviceSlice,
}

/// The declaration of one RMSNorm launch, with the backend's `body`.
pub fn rms_norm_op<B: Backend>(args: RmsNormArgs, body: Arc<B::OpBody>) -> CustomOp<B> {
    CustomOp::new("rms_norm")
        .dtype(DTYPE)
        .supports(&[DType::F16, DType::BF16, DType::F32])
        .read_shaped(args.x, &[ROWS, COLS])
        .read_shaped(args.gamma, &[COLS])
        .write_shaped(args.y, &[ROWS, COLS])
        // rstd is float32 whatever the input type (as aclnnRmsNorm's rstdOut).
        .write(args.rstd)
        .cost(OpCost::Work {
            unit: ComputeUnit::Vector,
            flops: 4 * ROWS * COLS,
            bytes: args.x.len + args.gamma.len + args.y.len + args.rstd.len,
        })
        .body(body)
}

/// The host reference: `y = x / sqrt(mean(x²) + eps) * gamma` per row, each `y` rounded to
/// [`DTYPE`], and each row's `1 / sqrt(mean(x²) + eps)`.
pub fn reference(x: &[f32], gamma: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let cols = COLS as usize;
    let mut y = Vec::with_capacity(x.len());
    let mut rstd = Vec::with_capacity(x.len() / cols);
    for row in x.chunks(cols) {
        let mean_sq = row.iter().map(|v| (v * v) as f64).sum::<f64>() / cols as f64;
        let r = (1.0 / (mean_sq + EPS).sqrt()) as f32;
        rstd.push(r);
        y.extend(row.iter().zip(gamma).map(|(v, g)| DTYPE.round(v * r * g)));
    }
    (y, rstd)
}

/// The simulator's body: the host reference over exactly the declared ranges.
#[cfg(feature = "sim")]
pub fn sim_body(_args: RmsNormArgs) -> crate::Result<Arc<braid_backend_sim::HostOpFn>> {
    Ok(braid_backend_sim::host_op(|inputs, outputs| {
        let (y, rstd) = reference(&DTYPE.decode(inputs[0]), &DTYPE.decode(inputs[1]));
        let mut bytes = Vec::with_capacity(outputs[0].len());
        y.iter().for_each(|&v| DTYPE.push(&mut bytes, v));
        outputs[0].copy_from_slice(&bytes);
        let rstd_bytes = DType::F32.encode(&rstd);
        outputs[1].copy_from_slice(&rstd_bytes);
    }))
}

/// What one run observed.
#[derive(Clone, Debug)]
pub struct Run {
    /// Whether `y` and `rstd` match the host reference (eager run, with the wait).
    pub correct: bool,
    /// Whether each replay of the captured operator matches the reference for its input.
    pub replay_correct: bool,
    /// The race detector's reports of the correct runs (`None` where the backend has none).
    pub reports: Option<usize>,
    /// The race detector's reports of the run without the wait.
    pub race_reports: Option<usize>,
}

fn input(seed: f32) -> (Vec<f32>, Vec<f32>) {
    let x = (0..ROWS * COLS)
        .map(|i| DTYPE.round(((i as f32 * 0.37 + seed).sin()) * 3.0))
        .collect();
    let gamma = (0..COLS)
        .map(|i| DTYPE.round(0.5 + (i % 7) as f32 * 0.125))
        .collect();
    (x, gamma)
}

fn close(got: &[f32], want: &[f32], tolerance: f32) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g - w).abs() <= tolerance * w.abs().max(1.0))
}

/// Runs the scenario on `device` with bodies from `body`; `reports` asks the backend's race
/// detector (after the correct runs, then after the racy one).
pub fn run<B: Backend>(
    device: &Device<B>,
    body: impl Fn(RmsNormArgs) -> crate::Result<Arc<B::OpBody>>,
    reports: impl Fn(&Device<B>) -> Option<Vec<String>>,
) -> Result<Run, AllocError> {
    let alloc = CachingAllocator::new(
        device.clone(),
        AllocatorConfig::new().cross_stream(CrossStreamMode::Automatic),
    )?;
    let main = device.create_stream(0)?;
    let norm = device.create_stream(0)?;
    let n = ROWS * COLS;
    let (x_host, gamma_host) = input(0.0);
    let (want_y, want_rstd) = reference(&x_host, &gamma_host);

    // Eager: inputs on main, the norm on the second stream after a wait.
    let x = alloc.alloc(n * DTYPE.size(), &main)?;
    let gamma = alloc.alloc(COLS * DTYPE.size(), &main)?;
    let y = alloc.alloc(n * DTYPE.size(), &main)?;
    let rstd = alloc.alloc(ROWS * 4, &main)?;
    main.copy_h2d(x.slice(), DTYPE.encode(&x_host))?;
    main.copy_h2d(gamma.slice(), DTYPE.encode(&gamma_host))?;
    let args = RmsNormArgs {
        x: x.slice(),
        gamma: gamma.slice(),
        y: y.slice(),
        rstd: rstd.slice(),
        workspace: DeviceSlice::new(crate::DevicePtr::NULL, 0),
    };
    norm.wait_stream(&main)?;
    let workspace = norm.workspace(WORKSPACE)?;
    let args = RmsNormArgs {
        workspace: workspace.slice(),
        ..args
    };
    norm.launch_op(&rms_norm_op(args, body(args)?))?;
    drop(workspace);
    main.wait_stream(&norm)?;
    let got_y = DTYPE.decode(&main.copy_d2h(y.slice())?.wait()?);
    let got_rstd = DType::F32.decode(&main.copy_d2h(rstd.slice())?.wait()?);
    let correct = close(&got_y, &want_y, 1e-2) && close(&got_rstd, &want_rstd, 1e-3);
    // Automatic mode: x and gamma were used on `norm`; dropping them needs no record_stream.
    drop((x, gamma));

    // Captured once, replayed for two inputs.
    let cap = device.create_stream(0)?;
    let xs = alloc.alloc(n * DTYPE.size(), &cap)?;
    let gs = alloc.alloc(COLS * DTYPE.size(), &cap)?;
    let ys = alloc.alloc(n * DTYPE.size(), &cap)?;
    let rs = alloc.alloc(ROWS * 4, &cap)?;
    let static_args = RmsNormArgs {
        x: xs.slice(),
        gamma: gs.slice(),
        y: ys.slice(),
        rstd: rs.slice(),
        workspace: DeviceSlice::new(crate::DevicePtr::NULL, 0),
    };
    cap.copy_h2d(gs.slice(), DTYPE.encode(&gamma_host))?;
    cap.synchronize()?;
    cap.begin_capture(crate::CaptureMode::Global)?;
    // Inside the capture the workspace comes from the capture's pool and lives with the graph.
    let captured = cap
        .workspace(WORKSPACE)
        .map_err(AllocError::from)
        .and_then(|workspace| {
            let args = RmsNormArgs {
                workspace: workspace.slice(),
                ..static_args
            };
            Ok(cap.launch_op(&rms_norm_op(args, body(args)?))?)
        });
    let graph = cap.end_capture();
    captured?;
    let graph = graph?;
    let mut replay_correct = true;
    for seed in [1.0, 2.5] {
        let (x_new, _) = input(seed);
        let (want, _) = reference(&x_new, &gamma_host);
        cap.copy_h2d(xs.slice(), DTYPE.encode(&x_new))?;
        graph.launch(&cap)?;
        let got = DTYPE.decode(&cap.copy_d2h(ys.slice())?.wait()?);
        replay_correct &= close(&got, &want, 1e-2);
    }
    device.synchronize()?;
    let clean = reports(device).map(|r| r.len());

    // The racy run: the norm does not wait for main's write of x.
    let x = alloc.alloc(n * DTYPE.size(), &main)?;
    let gamma = alloc.alloc(COLS * DTYPE.size(), &main)?;
    main.copy_h2d(gamma.slice(), DTYPE.encode(&gamma_host))?;
    main.synchronize()?;
    main.launch_labeled(
        Kernel::Fill {
            dst: x.slice(),
            value: 1.0,
        }
        .typed(DTYPE),
        "x = ones",
    )?;
    let racy = RmsNormArgs {
        x: x.slice(),
        gamma: gamma.slice(),
        y: y.slice(),
        rstd: rstd.slice(),
        workspace: DeviceSlice::new(crate::DevicePtr::NULL, 0),
    };
    // `y` and `rstd` were last used on main, which `norm` does not wait for either.
    let workspace = norm.workspace(WORKSPACE)?;
    let racy = RmsNormArgs {
        workspace: workspace.slice(),
        ..racy
    };
    norm.launch_op(&rms_norm_op(racy, body(racy)?))?;
    drop(workspace);
    device.synchronize()?;
    let race_reports = reports(device).map(|r| r.len() - clean.unwrap_or(0));
    Ok(Run {
        correct,
        replay_correct,
        reports: clean,
        race_reports,
    })
}

/// The ACL body: `aclnnRmsNorm` on the native stream. Its descriptors are made in the
/// closure from the declared ranges (and destroyed when it returns, on every path); the
/// workspace is the one the launching stream handed out before the launch.
#[cfg(feature = "acl")]
pub fn acl_body(args: RmsNormArgs) -> crate::Result<Arc<braid_backend_acl::NativeOpFn>> {
    use crate::hal::HalError;
    use braid_backend_acl::aclnn::{self, Executor, Tensor};
    let api = aclnn::api().map_err(|e| HalError::Native {
        code: braid_backend_acl::ACLNN_LOAD_FAILED_CODE,
        name: "BRAID_ACLNN_LIBRARY_UNAVAILABLE",
        message: e.to_string(),
    })?;
    let body = move |stream: braid_backend_acl::ffi::aclrtStream| -> Result<(), HalError> {
        let (rows, cols) = (ROWS as i64, COLS as i64);
        let x = Tensor::new(api, &[rows, cols], DTYPE, args.x.ptr)?;
        let gamma = Tensor::new(api, &[cols], DTYPE, args.gamma.ptr)?;
        let y = Tensor::new(api, &[rows, cols], DTYPE, args.y.ptr)?;
        let rstd = Tensor::new(api, &[rows, 1], DType::F32, args.rstd.ptr)?;
        let ops = api.operators();
        let executor = Executor::plan(api, "aclnnRmsNormGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors and out pointers.
            unsafe {
                (ops.aclnnRmsNormGetWorkspaceSize)(
                    x.as_ptr(),
                    gamma.as_ptr(),
                    EPS,
                    y.as_ptr(),
                    rstd.as_ptr(),
                    ws,
                    ex,
                )
            }
        })?;
        if executor.workspace_size() > args.workspace.len {
            return Err(HalError::InvalidArgument(format!(
                "aclnnRmsNorm needs {} bytes of workspace, {} were taken",
                executor.workspace_size(),
                args.workspace.len
            )));
        }
        // SAFETY: aclnnRmsNorm is the launch of the planned executor; braid hands the closure
        // its live stream, and reserves the declared ranges (workspace included) in stream order.
        unsafe {
            executor.launch(
                ops.aclnnRmsNorm,
                "aclnnRmsNorm",
                args.workspace.ptr.0 as *mut std::ffi::c_void,
                args.workspace.len,
                stream,
            )
        }?;
        Ok(())
    };
    // SAFETY: the closure enqueues only on the stream it is handed, touches only the declared
    // ranges, never synchronizes, and takes its workspace from the stream beforehand.
    Ok(unsafe { braid_backend_acl::native_op(body) })
}
