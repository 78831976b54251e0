//! LayerNorm over the trailing dimensions: each row's mean and biased variance accumulated
//! in float64 (two passes, so a large mean costs no precision), the row normalised, scaled
//! and shifted in float32 (float64 for float64), rounded once as it is stored.

use crate::element::{store_run, Num};
use crate::elementwise::{Dst, Src};
use crate::reduce::{for_each_element, load_sub, store_sub};
use braid_stream_core::ops::LayerNorm;
use braid_stream_core::tensor::contiguous_strides;
use braid_stream_core::{DType, Tensor};
use num_traits::Float;

/// The strides of a `mean` / `rstd` output over the rows: its own when it has the
/// statistics' shape, else those of contiguous values.
fn stat_strides(n: &LayerNorm, t: &Tensor, lead: usize) -> Vec<usize> {
    if t.shape() == n.stat_shape() {
        t.strides()[..lead].to_vec()
    } else {
        contiguous_strides(&n.x.shape()[..lead])
    }
}

fn run<D: Num + Float>(n: &LayerNorm, srcs: &[Src<'_>], out: &mut Dst<'_>, stats: &mut [Dst<'_>]) {
    let lead = n.x.rank() - n.normalized;
    let (rows_shape, row_shape) = n.x.shape().split_at(lead);
    let (x_rows, x_row) = n.x.strides().split_at(lead);
    let (o_rows, o_row) = n.out.strides().split_at(lead);
    let (_, cols) = n.rows_cols();
    let mut next = 1;
    let mut param = |t: &Option<Tensor>| {
        t.as_ref().map(|t| {
            let mut v = vec![D::default(); cols];
            load_sub(&srcs[next], 0, t.shape(), t.strides(), &mut v);
            next += 1;
            v
        })
    };
    let (weight, bias) = (param(&n.weight), param(&n.bias));
    let mut stats: Vec<(&mut Dst<'_>, Vec<usize>, bool)> = n
        .mean
        .iter()
        .map(|t| (t, true))
        .chain(n.rstd.iter().map(|t| (t, false)))
        .zip(stats.iter_mut())
        .map(|((t, is_mean), dst)| (dst, stat_strides(n, t, lead), is_mean))
        .collect();
    let mut row = vec![D::default(); cols];
    let mut index = 0usize;
    for_each_element(rows_shape, [x_rows, o_rows], |[xb, ob]| {
        load_sub(&srcs[0], xb, row_shape, x_row, &mut row);
        let count = cols.max(1) as f64;
        let mean = row.iter().map(|&v| Num::to_f64(v)).sum::<f64>() / count;
        let var = row
            .iter()
            .map(|&v| (Num::to_f64(v) - mean).powi(2))
            .sum::<f64>()
            / count;
        let rstd = 1.0 / (var + n.eps).sqrt();
        let (m, r) = (<D as Num>::from_f64(mean), <D as Num>::from_f64(rstd));
        for (c, v) in row.iter_mut().enumerate() {
            let mut y = (*v - m) * r;
            if let Some(w) = &weight {
                y = y * w[c];
            }
            if let Some(b) = &bias {
                y = y + b[c];
            }
            *v = y;
        }
        store_sub(out, ob, row_shape, o_row, &row);
        for (dst, strides, is_mean) in stats.iter_mut() {
            let at = index_of(index, rows_shape, strides);
            let dtype = dst.tensor.dtype();
            let value = if *is_mean { mean } else { rstd };
            store_run(dst.bytes, dtype, at, 1, &[value]);
        }
        index += 1;
    });
}

/// The element offset of row `index` (row-major over `shape`) under `strides`.
fn index_of(mut index: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut at = 0;
    for d in (0..shape.len()).rev() {
        let size = shape[d].max(1);
        at += (index % size) * strides[d];
        index /= size;
    }
    at
}

/// `out = layer_norm(x) · weight + bias`, with each row's mean and rstd when asked.
pub(crate) fn layer_norm(
    n: &LayerNorm,
    srcs: &[Src<'_>],
    out: &mut Dst<'_>,
    stats: &mut [Dst<'_>],
) {
    if n.x.dtype() == DType::F64 {
        run::<f64>(n, srcs, out, stats)
    } else {
        run::<f32>(n, srcs, out, stats)
    }
}
