//! Times tensor operators on braid's simulator in data mode, as a program sees them: each
//! case launches its operator on a stream and synchronizes, and the wall-clock time of that
//! (launch, compute, store) is measured. The side-by-side benchmark
//! (`scripts/side_by_side.py`) runs it beside torch on the CPU and prints the ratios.
//!
//! ```text
//! sim_kernel_times [--repeat N] [--warm-ms MS] CASE...
//! ```
//!
//! Cases: `matmul:N:DTYPE` (N×N by N×N), `add:N`, `mul:N` (float32 vectors), `softmax:R:C`
//! and `rmsnorm:R:C` (float32 rows, along the last dimension). Each prints one line,
//! `CASE FASTEST MEDIAN` in seconds, over the repeats after the warm-up: untimed runs for
//! `--warm-ms` milliseconds, at least one (on a shared machine the fastest run is the one
//! least disturbed by others). The simulator's compute threads follow `BRAID_SIM_THREADS`
//! (all cores when unset).

use braid::core::hal::{Device as _, Stream as _};
use braid::core::kernel::{Kernel, TypedKernel};
use braid::core::ops::{self, BinaryOp, Scalar};
use braid::core::types::DeviceSlice;
use braid::core::{DType, Tensor};
use braid::sim::{SimConfig, SimDevice, SimStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// A device buffer holding `numel` elements of `dtype`, filled with values in [-1, 1).
fn buffer(dev: &SimDevice, s: &SimStream, dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let numel: usize = shape.iter().product();
    let bytes = numel * dtype.size() as usize;
    let ptr = dev.alloc(bytes as u64).expect("alloc");
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut host = Vec::with_capacity(bytes);
    for _ in 0..numel {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v = ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
        match dtype {
            DType::F32 => host.extend_from_slice(&v.to_le_bytes()),
            DType::F16 => host.extend_from_slice(&half::f16::from_f32(v).to_le_bytes()),
            DType::BF16 => host.extend_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
            other => panic!("no values for {other}"),
        }
    }
    // SAFETY: `host` outlives the copy: the stream is synchronized before it is dropped.
    unsafe {
        s.memcpy_h2d(ptr, host.as_ptr(), bytes as u64)
            .expect("upload")
    };
    s.synchronize().expect("synchronize");
    Tensor::new(DeviceSlice::new(ptr, bytes as u64), dtype, shape).expect("tensor")
}

fn dtype(name: &str) -> Option<DType> {
    match name {
        "f32" => Some(DType::F32),
        "f16" => Some(DType::F16),
        "bf16" => Some(DType::BF16),
        _ => None,
    }
}

/// The kernel of `case` over fresh buffers of `dev`.
fn kernel(dev: &SimDevice, s: &SimStream, case: &str) -> Result<Kernel, String> {
    let parts: Vec<&str> = case.split(':').collect();
    let num = |i: usize| -> Result<usize, String> {
        parts
            .get(i)
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("{case}: part {i} is not a number"))
    };
    let bad = |e: ops::OpCheckError| e.to_string();
    Ok(match parts[0] {
        "matmul" => {
            let n = num(1)?;
            let t = parts
                .get(2)
                .and_then(|d| dtype(d))
                .ok_or_else(|| format!("{case}: no data type f32, f16 or bf16"))?;
            let a = buffer(dev, s, t, &[n, n], 1);
            let b = buffer(dev, s, t, &[n, n], 2);
            let out = buffer(dev, s, t, &[n, n], 3);
            ops::matmul(&a, &b, &out).map_err(bad)?
        }
        op @ ("add" | "mul") => {
            let n = num(1)?;
            let a = buffer(dev, s, DType::F32, &[n], 1);
            let b = buffer(dev, s, DType::F32, &[n], 2);
            let out = buffer(dev, s, DType::F32, &[n], 3);
            let op = match op {
                "add" => BinaryOp::Add {
                    alpha: Scalar::Float(1.0),
                },
                _ => BinaryOp::Mul,
            };
            ops::binary(op, a, b, &out).map_err(bad)?
        }
        "softmax" => {
            let (r, c) = (num(1)?, num(2)?);
            let x = buffer(dev, s, DType::F32, &[r, c], 1);
            let out = buffer(dev, s, DType::F32, &[r, c], 2);
            ops::softmax(&x, 1, &out).map_err(bad)?
        }
        "rmsnorm" => {
            let (r, c) = (num(1)?, num(2)?);
            let x = buffer(dev, s, DType::F32, &[r, c], 1);
            let gamma = buffer(dev, s, DType::F32, &[c], 2);
            let y = buffer(dev, s, DType::F32, &[r, c], 3);
            let rstd = buffer(dev, s, DType::F32, &[r, 1], 4);
            ops::rms_norm(&x, &gamma, 1e-6, &y, &rstd).map_err(bad)?
        }
        other => return Err(format!("unknown case kind `{other}`")),
    })
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let mut repeat = 10usize;
    let mut warm = Duration::ZERO;
    let mut cases = Vec::new();
    while let Some(a) = args.next() {
        if a == "--repeat" {
            match args.next().and_then(|r| r.parse().ok()) {
                Some(r) if r > 0 => repeat = r,
                _ => {
                    eprintln!("--repeat takes a positive count");
                    return ExitCode::from(2);
                }
            }
        } else if a == "--warm-ms" {
            match args.next().and_then(|r| r.parse().ok()) {
                Some(ms) => warm = Duration::from_millis(ms),
                None => {
                    eprintln!("--warm-ms takes a count of milliseconds");
                    return ExitCode::from(2);
                }
            }
        } else {
            cases.push(a);
        }
    }
    let dev = SimDevice::new(SimConfig::new());
    let s = dev.create_stream(0).expect("stream");
    for case in cases {
        let k = match kernel(&dev, &s, &case) {
            Ok(k) => TypedKernel::from(&k),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        let run = || {
            let start = Instant::now();
            s.launch(&k, &case).expect("launch");
            s.synchronize().expect("synchronize");
            start.elapsed().as_secs_f64()
        };
        let warming = Instant::now();
        run();
        while warming.elapsed() < warm {
            run();
        }
        let mut times: Vec<f64> = (0..repeat).map(|_| run()).collect();
        times.sort_by(f64::total_cmp);
        println!("{case} {:.9} {:.9}", times[0], times[times.len() / 2]);
        // Each buffer is a segment of its own, freed by its base.
        let ranges: Vec<DeviceSlice> = k.reads().chain(k.writes()).collect();
        for r in ranges {
            // SAFETY: the stream was synchronized; nothing uses the buffer any more.
            unsafe { dev.free(r.ptr).expect("free") };
        }
    }
    ExitCode::SUCCESS
}
