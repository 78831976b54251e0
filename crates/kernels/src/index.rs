//! Indexing with index tensors: advanced indexing (`Index`, which makes embedding lookups
//! too) and `IndexCopy`. Elements move as bytes (input and output share a data type); index
//! values are read from their tensors, a negative one counting from the end of its
//! dimension, and one out of range is [`ComputeError::IndexOutOfRange`].

use crate::element::load_run;
use crate::elementwise::{Dst, Src};
use crate::layout::{broadcast_strides, Walk};
use crate::reduce::for_each_element;
use crate::ComputeError;
use braid_stream_core::ops::{Index, IndexCopy};
use braid_stream_core::Tensor;

/// Copies the elements of `shape` from `src` (element offset `src_base`, `src_strides`) to
/// `dst` (`dst_base`, `dst_strides`), `size` bytes each.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_elements(
    dst: &mut [u8],
    dst_base: usize,
    dst_strides: &[usize],
    src: &[u8],
    src_base: usize,
    src_strides: &[usize],
    shape: &[usize],
    size: usize,
) {
    Walk::new(shape, [dst_strides, src_strides]).runs(|[d, s], [ds, ss], len| {
        let (d, s) = (dst_base + d, src_base + s);
        if ds == 1 && ss == 1 {
            dst[d * size..(d + len) * size].copy_from_slice(&src[s * size..(s + len) * size]);
        } else {
            for i in 0..len {
                let (o, x) = ((d + i * ds) * size, (s + i * ss) * size);
                dst[o..o + size].copy_from_slice(&src[x..x + size]);
            }
        }
    });
}

/// The values of index tensor `src` broadcast to `shape`, each checked against `bound` (a
/// negative one counted from the end).
pub(crate) fn load_indices(
    op: &'static str,
    operand: &'static str,
    src: &Src<'_>,
    shape: &[usize],
    bound: usize,
) -> Result<Vec<usize>, ComputeError> {
    let t = src.tensor;
    let strides = broadcast_strides(t.shape(), t.strides(), shape);
    let mut raw = vec![0i64; shape.iter().product()];
    let mut at = 0;
    Walk::new(shape, [&strides]).runs(|[b], [step], len| {
        load_run(src.bytes, t.dtype(), b, step, &mut raw[at..at + len]);
        at += len;
    });
    raw.into_iter()
        .map(|i| {
            let j = if i < 0 { i + bound as i64 } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| j < bound)
                .ok_or(ComputeError::IndexOutOfRange {
                    op,
                    operand,
                    index: i,
                    bound,
                })
        })
        .collect()
}

/// `out = x[indices...]`.
pub(crate) fn index(op: &Index, srcs: &[Src<'_>], out: &mut Dst<'_>) -> Result<(), ComputeError> {
    let layout = op.layout().map_err(ComputeError::Check)?;
    let x = op.x.shape();
    let xs = op.x.strides();
    // The element offset in `x` that each position of the index shape selects.
    let count: usize = layout.index_shape.iter().product();
    let mut offsets = vec![0usize; count];
    for (&d, src) in layout.indexed.iter().zip(&srcs[1..]) {
        let idx = load_indices("index", "indices", src, &layout.index_shape, x[d])?;
        for (o, i) in offsets.iter_mut().zip(idx) {
            *o += i * xs[d];
        }
    }
    // The dimensions of `x` taken whole, and their places in `out`.
    let whole: Vec<(usize, usize)> = (0..x.len())
        .filter(|d| !layout.indexed.contains(d))
        .map(|d| (x[d], xs[d]))
        .collect();
    let (before, after) = whole.split_at(layout.at);
    let os = op.out.strides();
    let n_index = layout.index_shape.len();
    let a_shape: Vec<usize> = before.iter().map(|w| w.0).collect();
    let a_x: Vec<usize> = before.iter().map(|w| w.1).collect();
    let c_shape: Vec<usize> = after.iter().map(|w| w.0).collect();
    let c_x: Vec<usize> = after.iter().map(|w| w.1).collect();
    let a_out = &os[..layout.at];
    let b_out = &os[layout.at..layout.at + n_index];
    let c_out = &os[layout.at + n_index..];
    let size = op.x.dtype().size() as usize;
    let x_bytes = srcs[0].bytes;
    for_each_element(&a_shape, [&a_x, a_out], |[xa, oa]| {
        let mut b = 0;
        for_each_element(&layout.index_shape, [b_out], |[ob]| {
            copy_elements(
                out.bytes,
                oa + ob,
                c_out,
                x_bytes,
                xa + offsets[b],
                &c_x,
                &c_shape,
                size,
            );
            b += 1;
        });
    });
    Ok(())
}

/// `out = x` (when given) with slices `index[i]` of `dim` replaced by slice `i` of `source`.
pub(crate) fn index_copy(
    op: &IndexCopy,
    srcs: &[Src<'_>],
    out: &mut Dst<'_>,
) -> Result<(), ComputeError> {
    let size = op.out.dtype().size() as usize;
    let (index, source) = match &op.x {
        Some(x) => {
            copy_elements(
                out.bytes,
                0,
                op.out.strides(),
                srcs[0].bytes,
                0,
                x.strides(),
                op.out.shape(),
                size,
            );
            (&srcs[1], &srcs[2])
        }
        None => (&srcs[0], &srcs[1]),
    };
    let n = op.index.numel();
    let bound = op.out.shape().get(op.dim).copied().unwrap_or(1);
    let positions = load_indices("index_copy", "index", index, &[n], bound)?;
    let drop_dim = |t: &Tensor| -> (Vec<usize>, Vec<usize>, usize) {
        let mut shape = t.shape().to_vec();
        let mut strides = t.strides().to_vec();
        if op.dim < shape.len() {
            shape.remove(op.dim);
            let s = strides.remove(op.dim);
            (shape, strides, s)
        } else {
            // A tensor of rank 0 (or a source of `index`'s length over one): contiguous.
            (Vec::new(), Vec::new(), 1)
        }
    };
    let (rest, out_rest, out_step) = drop_dim(&op.out);
    let (_, src_rest, src_step) = if op.source.rank() == op.out.rank() {
        drop_dim(&op.source)
    } else {
        (Vec::new(), Vec::new(), 1)
    };
    for (i, &p) in positions.iter().enumerate() {
        copy_elements(
            out.bytes,
            p * out_step,
            &out_rest,
            source.bytes,
            i * src_step,
            &src_rest,
            &rest,
            size,
        );
    }
    Ok(())
}
