//! The simulator's kernels alone (`braid_kernels::compute_with` on host buffers, no engine,
//! no stream): what a data-mode simulated device computes at, for regression tracking, with
//! the machine's own figures beside it.
//!
//! Each bench reports two throughputs (criterion's `ElementsAndBytes`): "elements" are
//! floating-point operations, so `Gelem/s` reads as GFLOP/s, and bytes are the bytes the
//! kernel must read and write at least, so `GiB/s` is its memory traffic:
//!
//! - `matmul`: N×N by N×N products in float32, float16 and bfloat16 (half precision widened
//!   and accumulated in float32), 2·N³ operations, 3·N²·size bytes;
//! - `gemm reference`: the `gemm` crate's own float32 product on the same sizes, called
//!   directly: the compute peak the simulator's products are built on;
//! - `elementwise`: float32 add and mul of 16 K and 1 M elements, one operation and 12 bytes
//!   an element;
//! - `rows`: softmax (5 operations an element: maximum, subtract, exp, sum, divide) and
//!   RMSNorm (4: square, sum, scale, times gamma) over [64, 4096] float32, 8 bytes an
//!   element;
//! - `stream copy`: a 64 MiB copy of the host's memory (`copy_from_slice`, as STREAM's Copy),
//!   the memory peak the vector kernels are bound by;
//! - `on a stream`: the 1 M element add, softmax and RMSNorm launched on a data-mode simulated
//!   stream and synchronized: the kernel with the simulator's data path around it (its
//!   inputs read in place, its outputs written in place at its end), to set beside the
//!   kernel alone;
//! - `on a stream after host work`: the same, each launch after 50 µs of host work (what a
//!   framework's dispatch spends between operators, while the compute threads go idle), only
//!   the launch and synchronization timed: a kernel cut over threads whose helpers must wake
//!   first, as in a program.
//!
//! Kernels use `BRAID_SIM_THREADS` threads when it is set, else every core, as the
//! simulator does (products above a size, element-wise kernels, softmax and RMSNorm from
//! 64 Ki elements).
//!
//! `cargo bench -p braid-benches --bench sim_kernels` (add `-- --quick` for a short run, or a
//! filter such as `-- matmul/1024`).

use braid::core::hal::{Device as _, Stream as _};
use braid::core::ops::{self, BinaryOp, Scalar};
use braid::core::types::{DevicePtr, DeviceSlice};
use braid::core::{DType, Kernel, Tensor, TypedKernel};
use braid::sim::{SimConfig, SimDevice};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Host bytes aligned as device memory is (a cache line), holding values in [-1, 1).
struct Buffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buffer {
    fn new(dtype: DType, numel: usize, seed: u64) -> Self {
        let len = numel * dtype.size() as usize;
        let storage = vec![0u8; len + 64];
        let start = storage.as_ptr().align_offset(64);
        let mut buf = Buffer {
            storage,
            start,
            len,
        };
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let bytes = buf.bytes_mut();
        for i in 0..numel {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            let at = i * dtype.size() as usize;
            match dtype {
                DType::F32 => bytes[at..at + 4].copy_from_slice(&v.to_le_bytes()),
                DType::F16 => {
                    bytes[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes())
                }
                DType::BF16 => {
                    bytes[at..at + 2].copy_from_slice(&half::bf16::from_f32(v).to_le_bytes())
                }
                other => panic!("no values for {other}"),
            }
        }
        buf
    }

    fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// A kernel with its operands' bytes.
struct Case {
    kernel: Kernel,
    inputs: Vec<Buffer>,
    outputs: Vec<Buffer>,
}

impl Case {
    /// A case whose operands are `shapes` (reads first, then writes, as the operator lists
    /// them), each at its own fake address; `make` builds the operator on the tensors.
    fn new(
        operands: &[(DType, &[usize])],
        reads: usize,
        make: impl FnOnce(&[Tensor]) -> Kernel,
    ) -> Self {
        let mut tensors = Vec::new();
        let mut buffers = Vec::new();
        for (i, (dtype, shape)) in operands.iter().enumerate() {
            let numel: usize = shape.iter().product();
            let len = (numel * dtype.size() as usize) as u64;
            let at = DevicePtr(((i as u64) + 1) << 36);
            tensors.push(Tensor::new(DeviceSlice::new(at, len), *dtype, shape).expect("tensor"));
            buffers.push(Buffer::new(*dtype, numel, i as u64 + 1));
        }
        let outputs = buffers.split_off(reads);
        Case {
            kernel: make(&tensors),
            inputs: buffers,
            outputs,
        }
    }

    fn run(&mut self, threads: usize) {
        let Kernel::Op(op) = &self.kernel else {
            unreachable!("every case is a tensor operator")
        };
        let inputs: Vec<&[u8]> = self.inputs.iter().map(Buffer::bytes).collect();
        let mut outputs: Vec<&mut [u8]> = self.outputs.iter_mut().map(Buffer::bytes_mut).collect();
        braid_kernels::compute_with(op.op(), &inputs, &mut outputs, threads).expect("compute");
    }
}

/// The compute threads: `BRAID_SIM_THREADS` when set, else every core.
fn threads() -> usize {
    match std::env::var("BRAID_SIM_THREADS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("BRAID_SIM_THREADS={v:?} is not a thread count")),
        Err(_) => braid_kernels::all_cores(),
    }
}

fn throughput(flops: usize, bytes: usize) -> Throughput {
    Throughput::ElementsAndBytes {
        elements: flops as u64,
        bytes: bytes as u64,
    }
}

/// Fewer samples for the long products, so the whole bench stays within minutes.
fn samples(group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, n: usize) {
    group.sample_size(if n >= 2048 { 10 } else { 20 });
    group.measurement_time(Duration::from_secs(if n >= 2048 { 8 } else { 3 }));
}

fn matmul(c: &mut Criterion) {
    let threads = threads();
    println!("sim_kernels: {threads} compute threads");
    let mut group = c.benchmark_group("matmul");
    for n in [256, 1024, 2048] {
        samples(&mut group, n);
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let shape: &[usize] = &[n, n];
            let mut case = Case::new(&[(dtype, shape), (dtype, shape), (dtype, shape)], 2, |t| {
                ops::matmul(&t[0], &t[1], &t[2]).expect("matmul")
            });
            group.throughput(throughput(2 * n * n * n, 3 * n * n * dtype.size() as usize));
            group.bench_function(format!("{n}/{dtype}"), |b| b.iter(|| case.run(threads)));
        }
    }
    group.finish();

    let mut group = c.benchmark_group("gemm reference");
    for n in [256, 1024, 2048] {
        samples(&mut group, n);
        let a: Vec<f32> = (0..n * n)
            .map(|i| (i % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let b = a.clone();
        let mut out = vec![0f32; n * n];
        let parallelism = if threads > 1 {
            gemm::Parallelism::Rayon(threads)
        } else {
            gemm::Parallelism::None
        };
        group.throughput(throughput(2 * n * n * n, 3 * n * n * 4));
        group.bench_function(format!("{n}/float32"), |bench| {
            bench.iter(|| {
                // SAFETY: three n×n row-major matrices of n·n elements each; `out` is
                // distinct from `a` and `b`, and not read (`read_dst` false).
                unsafe {
                    gemm::gemm(
                        n,
                        n,
                        n,
                        out.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        a.as_ptr(),
                        1,
                        n as isize,
                        b.as_ptr(),
                        1,
                        n as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        parallelism,
                    )
                };
                black_box(&mut out);
            })
        });
    }
    group.finish();
}

fn vector(c: &mut Criterion) {
    let threads = threads();
    let mut group = c.benchmark_group("elementwise");
    group.measurement_time(Duration::from_secs(2));
    for n in [16 * 1024, 1024 * 1024] {
        for (name, op) in [
            (
                "add",
                BinaryOp::Add {
                    alpha: Scalar::Float(1.0),
                },
            ),
            ("mul", BinaryOp::Mul),
        ] {
            let shape: &[usize] = &[n];
            let f32s = [
                (DType::F32, shape),
                (DType::F32, shape),
                (DType::F32, shape),
            ];
            let mut case = Case::new(&f32s, 2, |t| {
                ops::binary(op, t[0].clone(), t[1].clone(), &t[2]).expect("binary")
            });
            group.throughput(throughput(n, 12 * n));
            group.bench_function(format!("{name}/{n}"), |b| b.iter(|| case.run(threads)));
        }
    }
    group.finish();

    let mut group = c.benchmark_group("rows");
    group.measurement_time(Duration::from_secs(2));
    let (rows, cols) = (64, 4096);
    let numel = rows * cols;
    let x: &[usize] = &[rows, cols];
    let mut softmax = Case::new(&[(DType::F32, x), (DType::F32, x)], 1, |t| {
        ops::softmax(&t[0], 1, &t[1]).expect("softmax")
    });
    group.throughput(throughput(5 * numel, 8 * numel));
    group.bench_function("softmax/64x4096", |b| b.iter(|| softmax.run(threads)));
    let gamma: &[usize] = &[cols];
    let rstd: &[usize] = &[rows, 1];
    let mut rms_norm = Case::new(
        &[
            (DType::F32, x),
            (DType::F32, gamma),
            (DType::F32, x),
            (DType::F32, rstd),
        ],
        2,
        |t| ops::rms_norm(&t[0], &t[1], 1e-6, &t[2], &t[3]).expect("rms_norm"),
    );
    group.throughput(throughput(4 * numel, 8 * numel));
    group.bench_function("rms_norm/64x4096", |b| b.iter(|| rms_norm.run(threads)));
    group.finish();

    let mut group = c.benchmark_group("stream copy");
    group.measurement_time(Duration::from_secs(2));
    let len = 64 << 20;
    let src = vec![1u8; len];
    let mut dst = vec![0u8; len];
    // Copy reads and writes each byte once; no floating-point work.
    group.throughput(Throughput::Bytes(2 * len as u64));
    group.bench_function("64MiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        })
    });
    group.finish();
}

/// The vector cases launched on a simulated stream and synchronized, each launch and
/// synchronization one iteration.
fn on_a_stream(c: &mut Criterion) {
    let threads = threads();
    let dev = SimDevice::new(SimConfig::new().compute_threads(threads));
    let stream = dev.create_stream(0).expect("stream");
    // Device tensors of `shapes`, uploaded from the same values as the host cases.
    let tensors = |shapes: &[&[usize]]| -> Vec<Tensor> {
        shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                let numel: usize = shape.iter().product();
                let values = Buffer::new(DType::F32, numel, i as u64 + 1);
                let ptr = dev.alloc(values.len as u64).expect("alloc");
                // SAFETY: `values` outlives the copy: the stream is synchronized below.
                unsafe {
                    stream
                        .memcpy_h2d(ptr, values.bytes().as_ptr(), values.len as u64)
                        .expect("upload")
                };
                stream.synchronize().expect("synchronize");
                let slice = DeviceSlice::new(ptr, values.len as u64);
                Tensor::new(slice, DType::F32, shape).expect("tensor")
            })
            .collect()
    };
    let n = 1024 * 1024;
    let vector: &[usize] = &[n];
    let v = tensors(&[vector, vector, vector]);
    let add = BinaryOp::Add {
        alpha: Scalar::Float(1.0),
    };
    let (rows, cols) = (64, 4096);
    let x: &[usize] = &[rows, cols];
    let s = tensors(&[x, x]);
    let r = tensors(&[x, &[cols], x, &[rows, 1]]);
    let cases = [
        (
            format!("add/{n}"),
            ops::binary(add, v[0].clone(), v[1].clone(), &v[2]).expect("add"),
            throughput(n, 12 * n),
        ),
        (
            "softmax/64x4096".to_string(),
            ops::softmax(&s[0], 1, &s[1]).expect("softmax"),
            throughput(5 * rows * cols, 8 * rows * cols),
        ),
        (
            "rms_norm/64x4096".to_string(),
            ops::rms_norm(&r[0], &r[1], 1e-6, &r[2], &r[3]).expect("rms_norm"),
            throughput(4 * rows * cols, 8 * rows * cols),
        ),
    ];
    let cases: Vec<_> = cases
        .into_iter()
        .map(|(name, kernel, throughput)| (name, TypedKernel::from(&kernel), throughput))
        .collect();
    let run = |kernel: &TypedKernel| {
        stream.launch(kernel, "case").expect("launch");
        stream.synchronize().expect("synchronize");
    };
    let mut group = c.benchmark_group("on a stream");
    group.measurement_time(Duration::from_secs(2));
    for (name, kernel, throughput) in &cases {
        group.throughput(throughput.clone());
        group.bench_function(name, |b| b.iter(|| run(kernel)));
    }
    group.finish();
    let mut group = c.benchmark_group("on a stream after host work");
    group.measurement_time(Duration::from_secs(2));
    for (name, kernel, throughput) in &cases {
        group.throughput(throughput.clone());
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let host_work = Instant::now();
                    while host_work.elapsed() < HOST_WORK {
                        std::hint::spin_loop();
                    }
                    let start = Instant::now();
                    run(kernel);
                    timed += start.elapsed();
                }
                timed
            })
        });
    }
    group.finish();
}

/// The host's work between two launches in `on a stream after host work`.
const HOST_WORK: Duration = Duration::from_micros(50);

criterion_group!(benches, matmul, vector, on_a_stream);
criterion_main!(benches);
