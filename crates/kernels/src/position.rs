//! Operators along one dimension that keep positions: the position (and value) of the
//! largest or smallest element (`ArgReduce`), and the cumulative sum (`Cumsum`). Each walks
//! the other dimensions and, for each, loads the row along the dimension.

use crate::element::{load_run, store_run, Num};
use crate::elementwise::{Dst, Src};
use crate::reduce::for_each_element;
use braid_stream_core::ops::{ArgReduce, Cumsum};
use braid_stream_core::{DType, Tensor};

/// The shape and strides of `t` without dimension `dim` (a rank-0 tensor: none).
fn without(t: &Tensor, dim: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let (mut shape, mut strides) = (t.shape().to_vec(), t.strides().to_vec());
    if dim < shape.len() {
        shape.remove(dim);
        let s = strides.remove(dim);
        (shape, strides, s)
    } else {
        (shape, strides, 0)
    }
}

/// The strides of an output over `self`'s dimensions but `dim`: an output keeping `dim` as
/// 1 drops its stride there.
fn out_strides(out: &Tensor, rank: usize, dim: usize) -> Vec<usize> {
    if out.rank() == rank && rank > 0 {
        without(out, dim).1
    } else {
        out.strides().to_vec()
    }
}

fn run_arg<D: Num>(op: &ArgReduce, x: &Src<'_>, outs: &mut [Dst<'_>]) {
    let rank = op.x.rank();
    let (outer, x_outer, step) = without(&op.x, op.dim);
    let n = op.x.shape().get(op.dim).copied().unwrap_or(1);
    let (mut values, indices) = match outs {
        [v, i] => (Some(v), i),
        [i] => (None, i),
        _ => return,
    };
    let i_strides = out_strides(&op.indices, rank, op.dim);
    let v_strides = op
        .values
        .as_ref()
        .map_or_else(|| i_strides.clone(), |v| out_strides(v, rank, op.dim));
    let mut row = vec![D::default(); n];
    let (xt, it) = (op.x.dtype(), op.indices.dtype());
    for_each_element(&outer, [&x_outer, &i_strides, &v_strides], |[xb, ib, vb]| {
        load_run(x.bytes, xt, xb, step, &mut row);
        let mut best = 0;
        for (k, &v) in row.iter().enumerate().skip(1) {
            let b = row[best];
            let b_nan = D::FLOAT && b.to_f64().is_nan();
            if b_nan {
                break;
            }
            let v_nan = D::FLOAT && v.to_f64().is_nan();
            if v_nan || (op.max && v > b) || (!op.max && v < b) {
                best = k;
            }
        }
        store_run(indices.bytes, it, ib, 1, &[best as i64]);
        if let Some(values) = values.as_deref_mut() {
            let vt = values.tensor.dtype();
            store_run(values.bytes, vt, vb, 1, &[row[best]]);
        }
    });
}

/// `indices = argmax(x, dim)` (or argmin), with the values when asked.
pub(crate) fn arg_reduce(op: &ArgReduce, x: &Src<'_>, outs: &mut [Dst<'_>]) {
    match op.x.dtype() {
        DType::F64 => run_arg::<f64>(op, x, outs),
        t if t.is_float() => run_arg::<f32>(op, x, outs),
        _ => run_arg::<i64>(op, x, outs),
    }
}

fn run_cumsum<D: Num>(op: &Cumsum, x: &Src<'_>, out: &mut Dst<'_>, add: impl Fn(D, D) -> D) {
    let (outer, x_outer, xs) = without(&op.x, op.dim);
    let (_, o_outer, os) = without(&op.out, op.dim);
    let n = op.x.shape().get(op.dim).copied().unwrap_or(1);
    let mut row = vec![D::default(); n];
    let (xt, ot) = (op.x.dtype(), op.out.dtype());
    for_each_element(&outer, [&x_outer, &o_outer], |[xb, ob]| {
        load_run(x.bytes, xt, xb, xs, &mut row);
        let mut acc = D::default();
        for v in row.iter_mut() {
            acc = add(acc, *v);
            *v = acc;
        }
        store_run(out.bytes, ot, ob, os, &row);
    });
}

/// `out = cumsum(x, dim)`: float64 when either side is a float, else int64 (wrapping).
pub(crate) fn cumsum(op: &Cumsum, x: &Src<'_>, out: &mut Dst<'_>) {
    if op.x.dtype().is_float() || op.out.dtype().is_float() {
        run_cumsum::<f64>(op, x, out, |a, b| a + b)
    } else {
        run_cumsum::<i64>(op, x, out, i64::wrapping_add)
    }
}
