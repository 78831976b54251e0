//! Rotary position embedding: each row of the last dimension loaded with its cosines and
//! sines (broadcast), rotated in float32, stored once. A row is read whole before it is
//! written, so the operator can run in place.

use crate::element::{load_run, store_run};
use crate::elementwise::{Dst, Src};
use crate::layout::broadcast_strides;
use crate::reduce::for_each_element;
use braid_stream_core::ops::{Rope, RopeMode};

/// `out = x · cos + rot(x) · sin` per row.
pub(crate) fn rope(r: &Rope, x: &Src<'_>, cos: &Src<'_>, sin: &Src<'_>, out: &mut Dst<'_>) {
    let shape = r.x.shape();
    let rank = shape.len();
    let d = shape[rank - 1];
    let cs = broadcast_strides(r.cos.shape(), r.cos.strides(), shape);
    let ss = broadcast_strides(r.sin.shape(), r.sin.strides(), shape);
    let (xs, os) = (r.x.strides(), r.out.strides());
    let rows = &shape[..rank - 1];
    let mut row = vec![0f32; d];
    let mut c = vec![0f32; d];
    let mut s = vec![0f32; d];
    let mut y = vec![0f32; d];
    let (xt, ct, st, ot) = (r.x.dtype(), r.cos.dtype(), r.sin.dtype(), r.out.dtype());
    let half = d / 2;
    for_each_element(
        rows,
        [
            &xs[..rank - 1],
            &cs[..rank - 1],
            &ss[..rank - 1],
            &os[..rank - 1],
        ],
        |[xb, cb, sb, ob]| {
            load_run(x.bytes, xt, xb, xs[rank - 1], &mut row);
            load_run(cos.bytes, ct, cb, cs[rank - 1], &mut c);
            load_run(sin.bytes, st, sb, ss[rank - 1], &mut s);
            for i in 0..d {
                let rotated = match r.mode {
                    RopeMode::Half if i < half => -row[i + half],
                    RopeMode::Half => row[i - half],
                    RopeMode::Interleaved if i % 2 == 0 => -row[i + 1],
                    RopeMode::Interleaved => row[i - 1],
                };
                y[i] = row[i] * c[i] + rotated * s[i];
            }
            store_run(out.bytes, ot, ob, os[rank - 1], &y);
        },
    );
}
