//! The kernels against plain reference loops, on contiguous, strided, broadcast and
//! transposed operands in several data types.

use super::*;
use braid_stream_core::ops::{self, BinaryOp, ReduceKind, Scalar, UnaryOp};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::{DType, DevicePtr, DeviceSlice, Kernel};
use proptest::prelude::*;

/// Host bytes standing for device memory, each tensor at its own fake address.
pub(crate) struct Mem {
    next: u64,
}

impl Mem {
    pub(crate) fn new() -> Self {
        Mem { next: 0x10_0000 }
    }

    /// A contiguous tensor holding `values` (converted to `dtype`) and its bytes.
    pub(crate) fn tensor(
        &mut self,
        dtype: DType,
        shape: &[usize],
        values: &[f64],
    ) -> (Tensor, Vec<u8>) {
        let n: usize = shape.iter().product();
        assert_eq!(values.len(), n);
        let len = n as u64 * dtype.size();
        let t = Tensor::new(DeviceSlice::new(DevicePtr(self.next), len), dtype, shape).unwrap();
        self.next += len.max(1).next_multiple_of(4096);
        let mut bytes = Vec::new();
        for &v in values {
            dtype.push_f64(&mut bytes, v);
        }
        (t, bytes)
    }

    pub(crate) fn zeros(&mut self, dtype: DType, shape: &[usize]) -> (Tensor, Vec<u8>) {
        let n = shape.iter().product();
        self.tensor(dtype, shape, &vec![0.0; n])
    }
}

/// Runs a kernel on `inputs` (bytes of each read operand) and returns its outputs' bytes,
/// starting from `outputs`.
pub(crate) fn run(kernel: Kernel, inputs: &[&[u8]], mut outputs: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let Kernel::Op(op) = kernel else {
        panic!("not a tensor operator")
    };
    let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(|v| v.as_mut_slice()).collect();
    compute(op.op(), inputs, &mut outs).unwrap();
    outputs
}

pub(crate) fn values(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    (0..bytes.len() / dtype.size() as usize)
        .map(|i| dtype.get_f64(bytes, i).unwrap())
        .collect()
}

pub(crate) fn seq(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 - n as f64 / 2.0) * scale)
        .collect()
}

#[test]
fn unary_functions_match_their_formulas_in_each_float_type() {
    let mut m = Mem::new();
    for dtype in DType::FLOATS {
        let xs = seq(12, 0.37);
        let (x, xb) = m.tensor(dtype, &[3, 4], &xs);
        let (y, yb) = m.zeros(dtype, &[3, 4]);
        for op in [UnaryOp::Silu, UnaryOp::Neg, UnaryOp::Cos, UnaryOp::GeluTanh] {
            let out = run(ops::unary(op, &x, &y).unwrap(), &[&xb], vec![yb.clone()]);
            let got = values(dtype, &out[0]);
            for (i, &v) in values(dtype, &xb).iter().enumerate() {
                let v = v as f32;
                let want = match op {
                    UnaryOp::Silu => v / (1.0 + (-v).exp()),
                    UnaryOp::Neg => -v,
                    UnaryOp::Cos => v.cos(),
                    _ => {
                        let c = (2.0 / std::f32::consts::PI).sqrt();
                        0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh())
                    }
                };
                assert_eq!(
                    got[i],
                    f64::from(dtype.round(want)),
                    "{op:?} {dtype} at {i}"
                );
            }
        }
    }
}

#[test]
fn binary_operators_broadcast_transpose_and_take_scalars() {
    let mut m = Mem::new();
    let (a, ab) = m.tensor(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let (row, rb) = m.tensor(DType::F32, &[3], &[10.0, 20.0, 30.0]);
    let (out, ob) = m.zeros(DType::F32, &[2, 3]);
    let add = ops::binary(
        BinaryOp::Add {
            alpha: Scalar::Float(2.0),
        },
        &a,
        &row,
        &out,
    )
    .unwrap();
    let got = run(add, &[&ab, &rb], vec![ob.clone()]);
    assert_eq!(
        values(DType::F32, &got[0]),
        [21.0, 42.0, 63.0, 24.0, 45.0, 66.0]
    );
    // a transposed view times a scalar, into a [3, 2] output.
    let (o2, o2b) = m.zeros(DType::F32, &[3, 2]);
    let mul = ops::binary(BinaryOp::Mul, a.t().unwrap(), Scalar::Float(0.5), &o2).unwrap();
    let got = run(mul, &[&ab], vec![o2b]);
    assert_eq!(values(DType::F32, &got[0]), [0.5, 2.0, 1.0, 2.5, 1.5, 3.0]);
    // int64 ids plus an int scalar, and a comparison into bool.
    let (ids, ib) = m.tensor(DType::I64, &[4], &[0.0, 5.0, 9.0, 3.0]);
    let (shifted, sb) = m.zeros(DType::I64, &[4]);
    let adds = ops::binary(
        BinaryOp::Add {
            alpha: Scalar::Int(1),
        },
        &ids,
        Scalar::Int(7),
        &shifted,
    )
    .unwrap();
    let got = run(adds, &[&ib], vec![sb]);
    assert_eq!(values(DType::I64, &got[0]), [7.0, 12.0, 16.0, 10.0]);
    let (mask, mb) = m.zeros(DType::Bool, &[4]);
    let le = ops::binary(BinaryOp::Le, &ids, Scalar::Int(4), &mask).unwrap();
    let got = run(le, &[&ib], vec![mb]);
    assert_eq!(got[0], [1, 0, 0, 1]);
}

#[test]
fn large_int64_values_survive_integer_arithmetic() {
    let mut m = Mem::new();
    let big = (1i64 << 60) + 1;
    let (x, _) = m.zeros(DType::I64, &[1]);
    let xb = big.to_le_bytes().to_vec();
    let (o, ob) = m.zeros(DType::I64, &[1]);
    let k = ops::binary(
        BinaryOp::Add {
            alpha: Scalar::Int(1),
        },
        &x,
        Scalar::Int(1),
        &o,
    )
    .unwrap();
    let got = run(k, &[&xb], vec![ob]);
    assert_eq!(
        i64::from_le_bytes(got[0].clone().try_into().unwrap()),
        big + 1
    );
}

#[test]
fn casts_convert_between_every_pair_of_kinds() {
    let mut m = Mem::new();
    let (x, xb) = m.tensor(DType::F32, &[4], &[-1.7, 0.0, 2.5, 70000.0]);
    for (to, want) in [
        (DType::I64, vec![-1.0, 0.0, 2.0, 70000.0]),
        (DType::Bool, vec![1.0, 0.0, 1.0, 1.0]),
        (DType::F16, vec![-1.7f32 as f64, 0.0, 2.5, f64::INFINITY]),
        (DType::U8, vec![0.0, 0.0, 2.0, 255.0]),
    ] {
        let (o, ob) = m.zeros(to, &[4]);
        let got = run(ops::cast(&x, &o).unwrap(), &[&xb], vec![ob]);
        let got = values(to, &got[0]);
        for (g, w) in got.iter().zip(&want) {
            let w = if to == DType::F16 {
                f64::from(DType::F16.round(*w as f32))
            } else {
                *w
            };
            assert_eq!(*g, w, "to {to}");
        }
    }
    // A broadcast copy of one row.
    let (row, rb) = m.tensor(DType::BF16, &[1, 3], &[1.0, 2.0, 3.0]);
    let (o, ob) = m.zeros(DType::BF16, &[2, 3]);
    let got = run(ops::cast(&row, &o).unwrap(), &[&rb], vec![ob]);
    assert_eq!(values(DType::BF16, &got[0]), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
}

#[test]
fn fills_write_every_element_of_a_strided_view_only() {
    let mut m = Mem::new();
    let (x, xb) = m.tensor(DType::F32, &[2, 3], &[0.0; 6]);
    let col = x.narrow(1, 1, 1).unwrap();
    let range = col.range();
    let start = (range.ptr.0 - x.ptr().0) as usize;
    let sub = xb[start..start + range.len as usize].to_vec();
    let got = run(ops::fill(&col, 4.0).unwrap(), &[], vec![sub]);
    assert_eq!(values(DType::F32, &got[0]), [4.0, 0.0, 0.0, 4.0]);
}

#[test]
fn reductions_over_some_or_all_dimensions() {
    let mut m = Mem::new();
    let xs = seq(24, 1.0);
    let (x, xb) = m.tensor(DType::F32, &[2, 3, 4], &xs);
    let (o, ob) = m.zeros(DType::F32, &[2, 1, 4]);
    let got = run(
        ops::reduce(ReduceKind::Sum, &x, &[1], &o).unwrap(),
        &[&xb],
        vec![ob],
    );
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..4).map(move |k| (i, k)))
        .map(|(i, k)| (0..3).map(|j| xs[i * 12 + j * 4 + k]).sum())
        .collect();
    assert_eq!(values(DType::F32, &got[0]), want);
    let (mx, mb) = m.zeros(DType::F32, &[3]);
    let got = run(
        ops::reduce(ReduceKind::Max, &x, &[0, 2], &mx).unwrap(),
        &[&xb],
        vec![mb],
    );
    assert_eq!(values(DType::F32, &got[0]), [3.0, 7.0, 11.0]);
    let (mean, meanb) = m.zeros(DType::F32, &[]);
    let got = run(
        ops::reduce(ReduceKind::Mean, &x, &[], &mean).unwrap(),
        &[&xb],
        vec![meanb],
    );
    assert_eq!(values(DType::F32, &got[0]), [-0.5]);
    // bool mask counted into int64.
    let (mask, maskb) = m.tensor(DType::Bool, &[5], &[1.0, 0.0, 1.0, 1.0, 0.0]);
    let (cnt, cb) = m.zeros(DType::I64, &[]);
    let got = run(
        ops::reduce(ReduceKind::Sum, &mask, &[], &cnt).unwrap(),
        &[&maskb],
        vec![cb],
    );
    assert_eq!(values(DType::I64, &got[0]), [3.0]);
}

#[test]
fn softmax_and_rms_norm_follow_their_formulas() {
    let mut m = Mem::new();
    let xs = seq(8, 0.5);
    let (x, xb) = m.tensor(DType::F32, &[2, 4], &xs);
    let (o, ob) = m.zeros(DType::F32, &[2, 4]);
    let got = run(ops::softmax(&x, 1, &o).unwrap(), &[&xb], vec![ob]);
    let got = values(DType::F32, &got[0]);
    for r in 0..2 {
        let row = &xs[r * 4..r * 4 + 4];
        let max = row.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
        for c in 0..4 {
            assert!((got[r * 4 + c] - (row[c] - max).exp() / sum).abs() < 1e-6);
        }
    }
    let (g, gb) = m.tensor(DType::F32, &[4], &[1.0, 2.0, 0.5, 1.0]);
    let (y, yb) = m.zeros(DType::F32, &[2, 4]);
    let (r, rb) = m.zeros(DType::F32, &[2, 1]);
    let outs = run(
        ops::rms_norm(&x, &g, 1e-6, &y, &r).unwrap(),
        &[&xb, &gb],
        vec![yb, rb],
    );
    let got = values(DType::F32, &outs[0]);
    let rstds = values(DType::F32, &outs[1]);
    for r in 0..2 {
        let row = &xs[r * 4..r * 4 + 4];
        let ms: f64 = row.iter().map(|v| v * v).sum::<f64>() / 4.0;
        let rstd = 1.0 / (ms + 1e-6).sqrt();
        assert!((rstds[r] - rstd).abs() < 1e-5 * rstd);
        for c in 0..4 {
            let want = row[c] * rstd * [1.0, 2.0, 0.5, 1.0][c];
            assert!(
                (got[r * 4 + c] - want).abs() < 1e-5,
                "{} vs {want}",
                got[r * 4 + c]
            );
        }
    }
}

/// The naive product of `a` [m, k] and `b` [k, n] (row-major values), in f64.
fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    (0..m * n)
        .map(|idx| {
            (0..k)
                .map(|p| a[idx / n * k + p] * b[p * n + idx % n])
                .sum()
        })
        .collect()
}

#[test]
fn matmul_reads_a_transposed_weight_in_place_and_adds_a_bias() {
    let mut m = Mem::new();
    let (mm, kk, nn) = (5, 7, 3);
    let xs = seq(mm * kk, 0.1);
    let ws = seq(nn * kk, 0.2);
    let (x, xb) = m.tensor(DType::F32, &[mm, kk], &xs);
    let (w, wb) = m.tensor(DType::F32, &[nn, kk], &ws);
    let (bias, bb) = m.tensor(DType::F32, &[nn], &[1.0, -1.0, 0.5]);
    let (y, yb) = m.zeros(DType::F32, &[mm, nn]);
    let wt: Vec<f64> = (0..kk * nn).map(|i| ws[(i % nn) * kk + i / nn]).collect();
    let want = naive(&xs, &wt, mm, kk, nn);
    let got = run(
        ops::matmul_bias(&x, &w.t().unwrap(), &bias, &y).unwrap(),
        &[&xb, &wb, &bb],
        vec![yb],
    );
    for (i, g) in values(DType::F32, &got[0]).iter().enumerate() {
        let w = want[i] + [1.0, -1.0, 0.5][i % nn];
        assert!((g - w).abs() < 1e-4, "{i}: {g} vs {w}");
    }
}

#[test]
fn batched_half_precision_products_accumulate_in_f32_and_broadcast_batches() {
    let mut m = Mem::new();
    for dtype in [DType::F16, DType::BF16] {
        let (bt, mm, kk, nn) = (3, 2, 64, 2);
        let xs = seq(bt * mm * kk, 0.01);
        let ws = seq(kk * nn, 0.02);
        let (x, xb) = m.tensor(dtype, &[bt, mm, kk], &xs);
        let (w, wb) = m.tensor(dtype, &[1, kk, nn], &ws);
        let (y, yb) = m.zeros(dtype, &[bt, mm, nn]);
        let got = run(ops::matmul(&x, &w, &y).unwrap(), &[&xb, &wb], vec![yb]);
        let got = values(dtype, &got[0]);
        let (xr, wr) = (values(dtype, &xb), values(dtype, &wb));
        for b in 0..bt {
            let want = naive(&xr[b * mm * kk..(b + 1) * mm * kk], &wr, mm, kk, nn);
            for (i, w) in want.iter().enumerate() {
                let g = got[b * mm * nn + i];
                assert_eq!(
                    g,
                    f64::from(dtype.round(*w as f32)),
                    "{dtype} batch {b} at {i}"
                );
            }
        }
    }
}

#[test]
fn products_larger_than_a_tile_are_widened_and_stored_tile_by_tile() {
    let mut m = Mem::new();
    let tile = matmul::TILE;
    let (bt, mm, kk, nn) = (2, tile + 88, 24, tile + 18);
    let xs = seq(bt * mm * kk, 0.003);
    let ws = seq(kk * nn, 0.002);
    let bs = seq(bt * nn, 0.01);
    for dtype in [DType::BF16, DType::F32] {
        let (x, xb) = m.tensor(dtype, &[bt, mm, kk], &xs);
        let (w, wb) = m.tensor(dtype, &[1, kk, nn], &ws);
        // A bias per batch, broadcast over rows.
        let (bias, bb) = m.tensor(dtype, &[bt, 1, nn], &bs);
        // float32 into a transposed output (through a buffer), bfloat16 into a plain one.
        let (y, yb, transposed) = if dtype == DType::F32 {
            let (yt, yb) = m.zeros(dtype, &[bt, nn, mm]);
            (yt.transpose(1, 2).unwrap(), yb, true)
        } else {
            let (y, yb) = m.zeros(dtype, &[bt, mm, nn]);
            (y, yb, false)
        };
        let got = run(
            ops::matmul_bias(&x, &w, &bias, &y).unwrap(),
            &[&xb, &wb, &bb],
            vec![yb],
        );
        let got = values(dtype, &got[0]);
        let (xr, wr, br) = (values(dtype, &xb), values(dtype, &wb), values(dtype, &bb));
        // Relative to the sum of the terms' sizes (the products cancel).
        let tolerance = if dtype == DType::F32 { 1e-6 } else { 8e-3 };
        let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<f64>>();
        for b in 0..bt {
            let xb = &xr[b * mm * kk..(b + 1) * mm * kk];
            let want = naive(xb, &wr, mm, kk, nn);
            let size = naive(&abs(xb), &abs(&wr), mm, kk, nn);
            for i in 0..mm {
                for j in 0..nn {
                    let w = want[i * nn + j] + br[b * nn + j];
                    let at = if transposed {
                        (b * nn + j) * mm + i
                    } else {
                        (b * mm + i) * nn + j
                    };
                    let g = got[at];
                    let scale = size[i * nn + j] + br[b * nn + j].abs();
                    assert!(
                        (g - w).abs() <= tolerance * scale.max(w.abs()),
                        "{dtype} [{b}, {i}, {j}]: {g} vs {w}"
                    );
                }
            }
        }
    }
}

/// Runs `kernel` on `threads` threads ([`compute_with`]) and returns its outputs' bytes.
fn run_on(
    threads: usize,
    kernel: &Kernel,
    inputs: &[&[u8]],
    mut outputs: Vec<Vec<u8>>,
) -> Vec<Vec<u8>> {
    let Kernel::Op(op) = kernel else {
        panic!("not a tensor operator")
    };
    let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(|v| v.as_mut_slice()).collect();
    compute_with(op.op(), inputs, &mut outs, threads).unwrap();
    outputs
}

#[test]
fn numbers_do_not_depend_on_the_thread_count() {
    let mut m = Mem::new();
    let tile = matmul::TILE;
    // Products in place (float32), widened and stored tile by tile (bfloat16, larger than a
    // tile, with a bias), through a buffer (a transposed float32 output), batched, and a
    // matrix-vector product; then the reductions, which run on one thread whatever the
    // setting.
    // A tile of either operand has enough elements to be widened on several threads.
    let (mm, kk, nn) = (tile + 40, 136, tile + 24);
    let wave = |n: usize, f: f64| -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 / 997.0 * f - 0.5)
            .collect()
    };
    // (kernel, its inputs' bytes, its outputs' bytes before it runs)
    type Case = (Kernel, Vec<Vec<u8>>, Vec<Vec<u8>>);
    let mut cases: Vec<Case> = Vec::new();
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        let (a, ab) = m.tensor(dtype, &[mm, kk], &wave(mm * kk, 1.0));
        let (b, bb) = m.tensor(dtype, &[kk, nn], &wave(kk * nn, 0.7));
        let (bias, biasb) = m.tensor(dtype, &[nn], &wave(nn, 0.3));
        let (y, yb) = m.zeros(dtype, &[mm, nn]);
        cases.push((
            ops::matmul(&a, &b, &y).unwrap(),
            vec![ab.clone(), bb.clone()],
            vec![yb.clone()],
        ));
        cases.push((
            ops::matmul_bias(&a, &b, &bias, &y).unwrap(),
            vec![ab.clone(), bb.clone(), biasb],
            vec![yb],
        ));
        let (yt, ytb) = m.zeros(dtype, &[nn, mm]);
        cases.push((
            ops::matmul(&a, &b, &yt.t().unwrap()).unwrap(),
            vec![ab.clone(), bb.clone()],
            vec![ytb],
        ));
        let (v, vb) = m.tensor(dtype, &[kk, 1], &wave(kk, 0.9));
        let (yv, yvb) = m.zeros(dtype, &[mm, 1]);
        cases.push((ops::matmul(&a, &v, &yv).unwrap(), vec![ab, vb], vec![yvb]));
        let (x3, x3b) = m.tensor(dtype, &[3, 96, kk], &wave(3 * 96 * kk, 1.1));
        let (w3, w3b) = m.tensor(dtype, &[3, kk, 80], &wave(3 * kk * 80, 0.6));
        let (y3, y3b) = m.zeros(dtype, &[3, 96, 80]);
        cases.push((
            ops::matmul(&x3, &w3, &y3).unwrap(),
            vec![x3b, w3b],
            vec![y3b],
        ));
        let (x, xb) = m.tensor(dtype, &[64, 4096], &wave(64 * 4096, 4.0));
        let (sx, sxb) = m.zeros(dtype, &[64, 4096]);
        cases.push((
            ops::softmax(&x, 1, &sx).unwrap(),
            vec![xb.clone()],
            vec![sxb.clone()],
        ));
        let (g, gb) = m.tensor(dtype, &[4096], &wave(4096, 2.0));
        let (r, rb) = m.zeros(DType::F32, &[64, 1]);
        cases.push((
            ops::rms_norm(&x, &g, 1e-6, &sx, &r).unwrap(),
            vec![xb.clone(), gb],
            vec![sxb, rb],
        ));
        // Element-wise kernels and casts large enough to be cut into parts, one operand
        // broadcast.
        let (row, rowb) = m.tensor(dtype, &[4096], &wave(4096, 0.5));
        let (sum, sumb) = m.zeros(dtype, &[64, 4096]);
        cases.push((
            ops::binary(BinaryOp::Mul, x.clone(), row, &sum).unwrap(),
            vec![xb.clone(), rowb],
            vec![sumb.clone()],
        ));
        cases.push((
            ops::unary(UnaryOp::Silu, &x, &sum).unwrap(),
            vec![xb.clone()],
            vec![sumb],
        ));
        let (wide, wideb) = m.zeros(DType::F32, &[64, 4096]);
        cases.push((ops::cast(&x, &wide).unwrap(), vec![xb.clone()], vec![wideb]));
        let (total, totalb) = m.zeros(dtype, &[]);
        cases.push((
            ops::reduce(ReduceKind::Sum, &x, &[], &total).unwrap(),
            vec![xb],
            vec![totalb],
        ));
    }
    for (kernel, inputs, outputs) in &cases {
        let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let one = run_on(1, kernel, &inputs, outputs.clone());
        assert_ne!(&one, outputs, "{kernel:?} computed");
        for threads in [2, 3, 8] {
            assert!(
                run_on(threads, kernel, &inputs, outputs.clone()) == one,
                "{threads} threads changed the numbers of {kernel:?}"
            );
        }
    }
}

#[test]
fn bytes_that_do_not_match_a_tensor_are_refused_not_read_past() {
    let mut m = Mem::new();
    let (x, xb) = m.tensor(DType::F32, &[4], &[0.0; 4]);
    let (y, _) = m.zeros(DType::F32, &[4]);
    let Kernel::Op(op) = ops::unary(UnaryOp::Exp, &x, &y).unwrap() else {
        unreachable!()
    };
    let mut short = vec![0u8; 12];
    let err = compute(op.op(), &[&xb], &mut [&mut short]).unwrap_err();
    assert!(err.to_string().contains("out was given 12 bytes"), "{err}");
    let err = compute(op.op(), &[], &mut [&mut short]).unwrap_err();
    assert!(matches!(err, ComputeError::Count { .. }), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any broadcast pair of shapes, any operand transposed: `maximum` equals the reference.
    #[test]
    fn binary_broadcasting_equals_a_reference_walk(
        rows in 1usize..5, cols in 1usize..6, row_b in any::<bool>(), transpose in any::<bool>()
    ) {
        let mut m = Mem::new();
        let av = seq(rows * cols, 0.25);
        let (a, ab) = if transpose {
            let (t, b) = m.tensor(DType::F32, &[cols, rows], &av);
            (t.t().unwrap(), b)
        } else {
            m.tensor(DType::F32, &[rows, cols], &av)
        };
        let bshape = if row_b { vec![cols] } else { vec![rows, 1] };
        let bv = seq(bshape.iter().product(), -0.5);
        let (b, bb) = m.tensor(DType::F32, &bshape, &bv);
        let (o, ob) = m.zeros(DType::F32, &[rows, cols]);
        let got = run(ops::binary(BinaryOp::Maximum, &a, &b, &o).unwrap(), &[&ab, &bb], vec![ob]);
        let got = values(DType::F32, &got[0]);
        for i in 0..rows {
            for j in 0..cols {
                let x = if transpose { av[j * rows + i] } else { av[i * cols + j] };
                let y = if row_b { bv[j] } else { bv[i] };
                prop_assert_eq!(got[i * cols + j], x.max(y));
            }
        }
    }
}

#[test]
fn a_power_of_two_is_the_square_powf_gives() {
    let mut m = Mem::new();
    // Ordinary values, tiny and huge ones, signed zeros, infinities and NaN.
    let mut xs: Vec<f64> = (0..4000)
        .map(|i| ((i * 7919) % 10007) as f64 / 613.0 - 8.0)
        .collect();
    xs.extend([
        0.0,
        -0.0,
        1e-30,
        -3e-39,
        1e19,
        3.4e38,
        f64::INFINITY,
        -f64::INFINITY,
        f64::NAN,
    ]);
    let n = xs.len();
    for exponent in [Scalar::Float(2.0), Scalar::Int(2)] {
        for dtype in [DType::F32, DType::F64] {
            let (x, xb) = m.tensor(dtype, &[n], &xs);
            let (y, yb) = m.zeros(dtype, &[n]);
            let square = ops::binary(BinaryOp::Pow, &x, exponent, &y).unwrap();
            let got = values(dtype, &run(square, &[&xb], vec![yb])[0]);
            for (&g, &x) in got.iter().zip(&values(dtype, &xb)) {
                let want = match dtype {
                    DType::F32 => f64::from((x as f32).powf(2.0)),
                    _ => x.powf(2.0),
                };
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{dtype} {x}: {g} vs {want}"
                );
            }
        }
    }
}
