//! Reductions over any set of dimensions, softmax along one, and RMSNorm over the trailing
//! ones: each walks the output's elements and, for each, the input elements it reduces.

use crate::element::{load_run, native_run, native_run_mut, store_run, Num};
use crate::elementwise::{Dst, Src};
use crate::layout::{offset_of, Walk, RUN};
use crate::parallel::{for_parts, items_per_part, run_parts, threads_for};
use crate::vector::{self, simd, LaneSum};
use braid_stream_core::ops::{Reduce, ReduceKind, RmsNorm, Softmax};
use braid_stream_core::DType;

/// Calls `f(bases)` with each element's offset in each operand, walking `shape` with each
/// operand's `strides`, in row-major order.
pub(crate) fn for_each_element<const N: usize>(
    shape: &[usize],
    strides: [&[usize]; N],
    mut f: impl FnMut([usize; N]),
) {
    Walk::new(shape, strides).runs(|bases, steps, len| {
        for i in 0..len {
            f(std::array::from_fn(|k| bases[k] + i * steps[k]));
        }
    });
}

/// Loads the elements of `src` under `base` over `shape` / `strides` (a sub-tensor) into
/// `out`, in row-major order.
pub(crate) fn load_sub<D: Num>(
    src: &Src<'_>,
    base: usize,
    shape: &[usize],
    strides: &[usize],
    out: &mut [D],
) {
    let mut at = 0;
    Walk::new(shape, [strides]).runs(|[b], [step], len| {
        load_run(
            src.bytes,
            src.tensor.dtype(),
            base + b,
            step,
            &mut out[at..at + len],
        );
        at += len;
    });
}

/// Stores `vals` into `dst` under `base` over `shape` / `strides`, in row-major order.
pub(crate) fn store_sub<D: Num>(
    dst: &mut Dst<'_>,
    base: usize,
    shape: &[usize],
    strides: &[usize],
    vals: &[D],
) {
    let mut at = 0;
    let dtype = dst.tensor.dtype();
    Walk::new(shape, [strides]).runs(|[b], [step], len| {
        store_run(dst.bytes, dtype, base + b, step, &vals[at..at + len]);
        at += len;
    });
}

/// An accumulator of one reduction.
trait Acc<D: Num> {
    fn start(kind: ReduceKind) -> Self;
    fn add(&mut self, kind: ReduceKind, run: &[D]);
    fn finish(self, kind: ReduceKind, count: usize) -> D;
}

/// Floats accumulate sums and products in f64 (sums in lanes, [`LaneSum`]), extremes in
/// their domain.
struct FloatAcc<D> {
    wide: f64,
    sum: LaneSum,
    extreme: Option<D>,
    nan: bool,
}

impl<D: Num> Acc<D> for FloatAcc<D> {
    fn start(kind: ReduceKind) -> Self {
        let wide = match kind {
            ReduceKind::Prod | ReduceKind::All => 1.0,
            _ => 0.0,
        };
        FloatAcc {
            wide,
            sum: LaneSum::default(),
            extreme: None,
            nan: false,
        }
    }

    fn add(&mut self, kind: ReduceKind, run: &[D]) {
        match kind {
            // In lanes by position, so the rounding does not depend on where runs end.
            ReduceKind::Sum | ReduceKind::Mean => simd(SumRun {
                sum: &mut self.sum,
                run,
            }),
            ReduceKind::Prod => self.wide = run.iter().fold(self.wide, |s, v| s * v.to_f64()),
            ReduceKind::Any => {
                if run.iter().any(|v| v.to_f64() != 0.0) {
                    self.wide = 1.0
                }
            }
            ReduceKind::All => {
                if run.iter().any(|v| v.to_f64() == 0.0) {
                    self.wide = 0.0
                }
            }
            ReduceKind::Max | ReduceKind::Min => {
                for &v in run {
                    if v.to_f64().is_nan() {
                        self.nan = true;
                    }
                    let better = match self.extreme {
                        None => true,
                        Some(e) if kind == ReduceKind::Max => v > e,
                        Some(e) => v < e,
                    };
                    if better {
                        self.extreme = Some(v);
                    }
                }
            }
        }
    }

    fn finish(self, kind: ReduceKind, count: usize) -> D {
        match kind {
            ReduceKind::Max | ReduceKind::Min if self.nan => D::from_f64(f64::NAN),
            ReduceKind::Max | ReduceKind::Min => self.extreme.unwrap_or_default(),
            ReduceKind::Mean => D::from_f64(self.sum.total() / count.max(1) as f64),
            ReduceKind::Sum => D::from_f64(self.sum.total()),
            _ => D::from_f64(self.wide),
        }
    }
}

/// Adds `run` to a float sum, for [`simd`].
struct SumRun<'a, D> {
    sum: &'a mut LaneSum,
    run: &'a [D],
}

impl<D: Num> pulp::WithSimd for SumRun<'_, D> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        self.sum.add(self.run, D::to_f64)
    }
}

/// Integers and bools accumulate in i64 (wrapping).
struct IntAcc(i64);

impl Acc<i64> for IntAcc {
    fn start(kind: ReduceKind) -> Self {
        IntAcc(match kind {
            ReduceKind::Prod | ReduceKind::All => 1,
            ReduceKind::Max => i64::MIN,
            ReduceKind::Min => i64::MAX,
            _ => 0,
        })
    }

    fn add(&mut self, kind: ReduceKind, run: &[i64]) {
        let a = &mut self.0;
        match kind {
            ReduceKind::Sum | ReduceKind::Mean => {
                *a = run.iter().fold(*a, |s, &v| s.wrapping_add(v))
            }
            ReduceKind::Prod => *a = run.iter().fold(*a, |s, &v| s.wrapping_mul(v)),
            ReduceKind::Max => *a = run.iter().fold(*a, |s, &v| s.max(v)),
            ReduceKind::Min => *a = run.iter().fold(*a, |s, &v| s.min(v)),
            ReduceKind::Any => *a |= i64::from(run.iter().any(|&v| v != 0)),
            ReduceKind::All => *a &= i64::from(run.iter().all(|&v| v != 0)),
        }
    }

    fn finish(self, _kind: ReduceKind, _count: usize) -> i64 {
        self.0
    }
}

/// The shapes and strides of a reduction: over the kept dimensions, the input's and the
/// output's strides; over the reduced ones, the input's.
struct Split {
    kept: Vec<usize>,
    x_kept: Vec<usize>,
    out_kept: Vec<usize>,
    reduced: Vec<usize>,
    x_reduced: Vec<usize>,
}

fn split(r: &Reduce) -> Split {
    let flags = r.reduced();
    let keepdim = r.out.rank() == r.x.rank();
    let mut s = Split {
        kept: Vec::new(),
        x_kept: Vec::new(),
        out_kept: Vec::new(),
        reduced: Vec::new(),
        x_reduced: Vec::new(),
    };
    let mut out_dim = 0;
    for (d, &is_reduced) in flags.iter().enumerate() {
        let (size, stride) = (r.x.shape()[d], r.x.strides()[d]);
        if is_reduced {
            s.reduced.push(size);
            s.x_reduced.push(stride);
            if keepdim {
                out_dim += 1;
            }
        } else {
            s.kept.push(size);
            s.x_kept.push(stride);
            s.out_kept.push(r.out.strides()[out_dim]);
            out_dim += 1;
        }
    }
    s
}

fn run_reduce<D: Num, A: Acc<D>>(r: &Reduce, x: &Src<'_>, out: &mut Dst<'_>) {
    let s = split(r);
    let count: usize = s.reduced.iter().product();
    let inner = Walk::new(&s.reduced, [&s.x_reduced]);
    let mut buf = [D::default(); RUN];
    let (xt, ot) = (x.tensor.dtype(), out.tensor.dtype());
    for_each_element(&s.kept, [&s.x_kept, &s.out_kept], |[xb, ob]| {
        let mut acc = A::start(r.kind);
        inner.runs(|[b], [step], len| {
            load_run(x.bytes, xt, xb + b, step, &mut buf[..len]);
            acc.add(r.kind, &buf[..len]);
        });
        let v = [acc.finish(r.kind, count)];
        store_run(out.bytes, ot, ob, 1, &v);
    });
}

/// `out = kind(x)` over the reduced dimensions.
pub(crate) fn reduce(r: &Reduce, x: &Src<'_>, out: &mut Dst<'_>) {
    let float = r.x.dtype().is_float() || (r.kind == ReduceKind::Mean);
    match (float, r.x.dtype()) {
        (true, DType::F64) => run_reduce::<f64, FloatAcc<f64>>(r, x, out),
        (true, _) => run_reduce::<f32, FloatAcc<f32>>(r, x, out),
        (false, _) => run_reduce::<i64, IntAcc>(r, x, out),
    }
}

/// Normalises one row in place: softmax, or log-softmax. Float32 rows take the vectorised
/// path ([`softmax_row_f32`]).
fn softmax_row<D: Num + num_traits::Float>(row: &mut [D], log: bool) {
    if let Some(row) = D::as_f32_run(row) {
        return simd(SoftmaxRow {
            src: None,
            row,
            log,
        });
    }
    let max = row.iter().copied().fold(D::neg_infinity(), D::max);
    let max = if max.is_finite() { max } else { D::zero() };
    let mut sum = D::zero();
    for v in row.iter_mut() {
        let e = (*v - max).exp();
        sum = sum + e;
        if !log {
            *v = e;
        }
    }
    if log {
        let lse = sum.ln();
        row.iter_mut().for_each(|v| *v = *v - max - lse);
    } else {
        row.iter_mut().for_each(|v| *v = *v / sum);
    }
}

/// A float32 row for [`softmax_row_f32`], for [`simd`]: its input in `src`, or already in
/// `row`.
struct SoftmaxRow<'a> {
    src: Option<&'a [f32]>,
    row: &'a mut [f32],
    log: bool,
}

impl pulp::WithSimd for SoftmaxRow<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        softmax_row_f32(self.src, self.row, self.log)
    }
}

/// Lanes of [`row_max`]: four AVX-512 registers, so that four chains of comparisons run
/// side by side.
const MAX_LANES: usize = 64;

/// The largest of `v` (NaNs ignored, as `f32::max` does; exact in any order).
#[inline(always)]
fn row_max(v: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; MAX_LANES];
    let rows = v.chunks_exact(MAX_LANES);
    let tail = rows.remainder();
    for r in rows {
        for (m, &x) in lanes.iter_mut().zip(r) {
            *m = if x > *m { x } else { *m };
        }
    }
    lanes
        .iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// A float32 row's softmax into `row` (from `src`, else from `row` itself): the maximum in
/// lanes, `e^(x - max)` by [`vector::exp`], their sum in f64 lanes ([`LaneSum`]), then each
/// times the sum's reciprocal (rounded once to float32), as torch computes it.
#[inline(always)]
fn softmax_row_f32(src: Option<&[f32]>, row: &mut [f32], log: bool) {
    let max = row_max(src.unwrap_or(row));
    let max = if max.is_finite() { max } else { 0.0 };
    let mut sum = LaneSum::default();
    if log {
        if let Some(src) = src {
            row.copy_from_slice(src);
        }
        sum.add(row, |v| f64::from(vector::exp(v - max)));
        let shift = max + sum.total().ln() as f32;
        row.iter_mut().for_each(|v| *v -= shift);
    } else {
        match src {
            Some(src) => row
                .iter_mut()
                .zip(src)
                .for_each(|(v, &x)| *v = vector::exp(x - max)),
            None => row.iter_mut().for_each(|v| *v = vector::exp(*v - max)),
        }
        sum.add(row, f64::from);
        let scale = (1.0 / sum.total()) as f32;
        row.iter_mut().for_each(|v| *v *= scale);
    }
}

/// The shape and strides of `shape`/`strides` without dimension `dim`.
fn without(shape: &[usize], strides: &[usize], dim: usize) -> (Vec<usize>, Vec<usize>) {
    let drop = |v: &[usize]| {
        v.iter()
            .enumerate()
            .filter(|&(d, _)| d != dim)
            .map(|(_, &x)| x)
            .collect()
    };
    (drop(shape), drop(strides))
}

fn run_softmax<D: Num + num_traits::Float>(
    s: &Softmax,
    x: &Src<'_>,
    out: &mut Dst<'_>,
    threads: usize,
) {
    let (outer, x_outer) = without(s.x.shape(), s.x.strides(), s.dim);
    let (_, out_outer) = without(s.out.shape(), s.out.strides(), s.dim);
    let n = s.x.shape()[s.dim];
    let (xs, os) = (s.x.strides()[s.dim], s.out.strides()[s.dim]);
    let ot = out.tensor.dtype();
    let rows: usize = outer.iter().product();
    let threads = threads_for(rows * n, threads);
    if threads > 1 && os == 1 && s.out.is_contiguous() {
        // Rows of a contiguous output lie one after the other: parts of whole rows.
        let row_bytes = n * ot.size() as usize;
        for_parts(out.bytes, rows, row_bytes, threads, |first, bytes| {
            let mut row = vec![D::zero(); n];
            for r in 0..bytes.len() / row_bytes {
                let xb = offset_of(first + r, &outer, &x_outer);
                softmax_at(x, xb, xs, bytes, ot, r * n, 1, &mut row, s.log);
            }
        });
        return;
    }
    let mut row = vec![D::zero(); n];
    for_each_element(&outer, [&x_outer, &out_outer], |[xb, ob]| {
        softmax_at(x, xb, xs, out.bytes, ot, ob, os, &mut row, s.log);
    });
}

/// The softmax of the row of `x` at `xb` (`xs` apart) into `out_bytes` at `ob` (`os` apart),
/// in place there when the output holds `D` contiguously, else through `row`.
#[allow(clippy::too_many_arguments)]
fn softmax_at<D: Num + num_traits::Float>(
    x: &Src<'_>,
    xb: usize,
    xs: usize,
    out_bytes: &mut [u8],
    ot: DType,
    ob: usize,
    os: usize,
    row: &mut [D],
    log: bool,
) {
    let (xt, n) = (x.tensor.dtype(), row.len());
    if let Some(dst) = native_run_mut::<D>(out_bytes, ot, ob, os, n) {
        // Float32 in and out: read in place, computed into the output.
        if let (Some(dst), Some(src)) = (
            D::as_f32_run(dst),
            native_run::<f32>(x.bytes, xt, xb, xs, n),
        ) {
            return simd(SoftmaxRow {
                src: Some(src),
                row: dst,
                log,
            });
        }
        load_run(x.bytes, xt, xb, xs, dst);
        softmax_row(dst, log);
        return;
    }
    load_run(x.bytes, xt, xb, xs, row);
    softmax_row(row, log);
    store_run(out_bytes, ot, ob, os, row);
}

/// `out = softmax(x)` along `dim`.
pub(crate) fn softmax(s: &Softmax, x: &Src<'_>, out: &mut Dst<'_>, threads: usize) {
    if s.x.dtype() == DType::F64 {
        run_softmax::<f64>(s, x, out, threads)
    } else {
        run_softmax::<f32>(s, x, out, threads)
    }
}

/// One row of [`rms_norm`], normalised in place by [`simd`]; gives its `rstd`.
struct RmsNormRow<'a> {
    row: &'a mut [f32],
    gamma: &'a [f32],
    eps: f64,
}

impl pulp::WithSimd for RmsNormRow<'_> {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> f32 {
        let mut sum = LaneSum::default();
        sum.add(self.row, |v| f64::from(v * v));
        let mean = sum.total() / self.row.len().max(1) as f64;
        let r = (1.0 / (mean + self.eps).sqrt()) as f32;
        self.row
            .iter_mut()
            .zip(self.gamma)
            .for_each(|(v, g)| *v = *v * r * g);
        r
    }
}

/// `y = x · rstd · gamma` per row, `rstd = 1/√(mean(x²) + eps)`: squares in f32, their mean
/// accumulated in f64 (in lanes, [`LaneSum`]), the scaling in f32.
pub(crate) fn rms_norm(
    n: &RmsNorm,
    x: &Src<'_>,
    gamma: &Src<'_>,
    y: &mut Dst<'_>,
    rstd: &mut Dst<'_>,
    threads: usize,
) {
    let g_rank = n.gamma.rank();
    let rank = n.x.rank();
    let lead = rank - g_rank;
    let (rows_shape, row_shape) = n.x.shape().split_at(lead);
    let (x_rows, x_row) = n.x.strides().split_at(lead);
    let (y_rows, y_row) = n.y.strides().split_at(lead);
    let cols = n.gamma.numel();
    let mut g = vec![0f32; cols];
    load_sub(gamma, 0, n.gamma.shape(), n.gamma.strides(), &mut g);
    let r_rows = rstd.tensor.strides()[..lead].to_vec();
    let rows: usize = rows_shape.iter().product();
    let threads = threads_for(rows * cols, threads);
    let ydtype = y.tensor.dtype();
    if threads > 1 && cols > 0 && n.y.is_contiguous() {
        // Rows of a contiguous output lie one after the other: parts of whole rows, each
        // row's rstd kept and stored once every part is done.
        let row_bytes = cols * ydtype.size() as usize;
        let mut rstds = vec![0f32; rows];
        let per = items_per_part(rows, threads);
        let parts = y.bytes[..rows * row_bytes]
            .chunks_mut(per * row_bytes)
            .zip(rstds.chunks_mut(per));
        run_parts(parts, threads, |part, (bytes, rstds)| {
            let mut row = vec![0f32; cols];
            for (i, r) in rstds.iter_mut().enumerate() {
                let xb = offset_of(part * per + i, rows_shape, x_rows);
                load_sub(x, xb, row_shape, x_row, &mut row);
                *r = simd(RmsNormRow {
                    row: &mut row,
                    gamma: &g,
                    eps: n.eps,
                });
                store_run(bytes, ydtype, i * cols, 1, &row);
            }
        });
        for (i, r) in rstds.into_iter().enumerate() {
            let rb = offset_of(i, rows_shape, &r_rows);
            store_run(rstd.bytes, DType::F32, rb, 1, &[r]);
        }
        return;
    }
    let mut row = vec![0f32; cols];
    for_each_element(rows_shape, [x_rows, y_rows, &r_rows], |[xb, yb, rb]| {
        load_sub(x, xb, row_shape, x_row, &mut row);
        let r = simd(RmsNormRow {
            row: &mut row,
            gamma: &g,
            eps: n.eps,
        });
        store_sub(y, yb, row_shape, y_row, &row);
        store_run(rstd.bytes, DType::F32, rb, 1, &[r]);
    });
}
