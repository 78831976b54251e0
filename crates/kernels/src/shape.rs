//! Operators that build tensors by position: concatenation, choice by a mask, triangles and
//! ramps.

use crate::element::{load_run, store_run, Num};
use crate::elementwise::{self, scalar, Dst, Src};
use crate::index::copy_elements;
use crate::layout::{broadcast_strides, Walk, RUN};
use crate::reduce::for_each_element;
use braid_stream_core::ops::{Arange, Cast, Cat, Operand, Triangle, Where};
use braid_stream_core::DTypeKind;

/// `out = cat(inputs, dim)`: each input converted into its slice of `out`.
pub(crate) fn cat(op: &Cat, srcs: &[Src<'_>], out: &mut Dst<'_>) {
    let size = op.out.dtype().size() as usize;
    let stride = op.out.strides()[op.dim];
    let mut start = 0;
    for (t, src) in op.inputs.iter().zip(srcs) {
        let len = t.shape()[op.dim];
        if len == 0 || t.numel() == 0 {
            continue;
        }
        // The slice's view; `narrow` keeps it inside `out`, whose shape was checked.
        let Ok(part) = op.out.narrow(op.dim, start, len) else {
            return;
        };
        let skip = start * stride * size;
        let mut dst = Dst {
            bytes: &mut out.bytes[skip..],
            tensor: &part,
        };
        let cast = Cast {
            x: t.clone(),
            out: part.clone(),
        };
        elementwise::cast(&cast, src, &mut dst, 1);
        start += len;
    }
}

/// `out = condition ? x : y`, broadcast; a scalar operand is one value repeated.
pub(crate) fn where_(op: &Where, srcs: &[Src<'_>], out: &mut Dst<'_>) {
    fn run<D: Num>(op: &Where, srcs: &[Src<'_>], out: &mut Dst<'_>) {
        let shape = op.out.shape();
        let strides = |s: &Src<'_>| broadcast_strides(s.tensor.shape(), s.tensor.strides(), shape);
        let zeros = vec![0; shape.len()];
        let mut next = srcs[1..].iter();
        // Each value operand: its bytes and strides, or a scalar.
        let mut value = |o: &Operand| match o {
            Operand::Tensor(_) => next.next().map(|s| (Some(s), strides(s))),
            Operand::Scalar(_) => Some((None, zeros.clone())),
        };
        let (Some((xsrc, xstr)), Some((ysrc, ystr))) = (value(&op.x), value(&op.y)) else {
            return;
        };
        let walk = Walk::new(shape, [op.out.strides(), &strides(&srcs[0]), &xstr, &ystr]);
        let mut cond = [0i64; RUN];
        let mut a = [D::default(); RUN];
        let mut b = [D::default(); RUN];
        let fill = |o: &Operand, buf: &mut [D; RUN]| {
            if let Operand::Scalar(s) = o {
                buf.fill(scalar::<D>(*s));
            }
        };
        let ot = op.out.dtype();
        walk.runs(|[o, c, x, y], [os, cs, xs, ys], len| {
            load_run(
                srcs[0].bytes,
                srcs[0].tensor.dtype(),
                c,
                cs,
                &mut cond[..len],
            );
            match xsrc {
                Some(s) => load_run(s.bytes, s.tensor.dtype(), x, xs, &mut a[..len]),
                None => fill(&op.x, &mut a),
            }
            match ysrc {
                Some(s) => load_run(s.bytes, s.tensor.dtype(), y, ys, &mut b[..len]),
                None => fill(&op.y, &mut b),
            }
            for i in 0..len {
                if cond[i] == 0 {
                    a[i] = b[i];
                }
            }
            store_run(out.bytes, ot, o, os, &a[..len]);
        });
    }
    let float =
        op.out.dtype().is_float() || [&op.x, &op.y].iter().any(|o| o.kind() == DTypeKind::Float);
    if float {
        // Every float and every integer up to 2^53 is exact in f64: one rounding, at the store.
        run::<f64>(op, srcs, out)
    } else {
        run::<i64>(op, srcs, out)
    }
}

/// `out = triu(x, diagonal)` or `tril`: each row's kept columns copied, the others zeroed.
pub(crate) fn triangle(op: &Triangle, x: &Src<'_>, out: &mut Dst<'_>) {
    let rank = op.x.rank();
    let (rows, cols) = (op.x.shape()[rank - 2], op.x.shape()[rank - 1]);
    let (xs, os) = (op.x.strides(), op.out.strides());
    let size = op.x.dtype().size() as usize;
    let batch = &op.x.shape()[..rank - 2];
    for_each_element(batch, [&xs[..rank - 2], &os[..rank - 2]], |[xb, ob]| {
        for i in 0..rows {
            // Columns j kept: j - i >= diagonal (triu) or j - i <= diagonal (tril).
            let edge = i as i64 + op.diagonal;
            let (keep_from, keep_to) = if op.upper {
                (edge.clamp(0, cols as i64) as usize, cols)
            } else {
                (0, (edge + 1).clamp(0, cols as i64) as usize)
            };
            let (xr, or) = (xb + i * xs[rank - 2], ob + i * os[rank - 2]);
            let (xc, oc) = (xs[rank - 1], os[rank - 1]);
            copy_elements(
                out.bytes,
                or + keep_from * oc,
                &[oc],
                x.bytes,
                xr + keep_from * xc,
                &[xc],
                &[keep_to.saturating_sub(keep_from)],
                size,
            );
            for j in (0..keep_from).chain(keep_to..cols) {
                let at = (or + j * oc) * size;
                out.bytes[at..at + size].fill(0);
            }
        }
    });
}

/// `out[i] = start + i·step`.
pub(crate) fn arange(op: &Arange, out: &mut Dst<'_>) {
    let n = op.out.numel();
    let stride = op.out.strides()[0];
    let ot = op.out.dtype();
    let mut at = 0;
    if ot.is_float() {
        let (start, step) = (op.start.as_f64(), op.step.as_f64());
        let mut buf = [0f64; RUN];
        while at < n {
            let len = RUN.min(n - at);
            for (k, v) in buf[..len].iter_mut().enumerate() {
                *v = start + (at + k) as f64 * step;
            }
            store_run(out.bytes, ot, at * stride, stride, &buf[..len]);
            at += len;
        }
    } else {
        let (start, step) = (op.start.as_i64(), op.step.as_i64());
        let mut buf = [0i64; RUN];
        while at < n {
            let len = RUN.min(n - at);
            for (k, v) in buf[..len].iter_mut().enumerate() {
                *v = start.wrapping_add(((at + k) as i64).wrapping_mul(step));
            }
            store_run(out.bytes, ot, at * stride, stride, &buf[..len]);
            at += len;
        }
    }
}
