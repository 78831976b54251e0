//! Operators that move elements by ids or by position: embedding lookups and advanced
//! indexing, `index_copy` (in place and into another tensor), concatenation, choice by a mask
//! (and a masked fill in place), triangles and ramps; from contiguous and strided views, in the
//! float types and int64, exactly (they move or convert values, they do not round sums).

use super::{close, download, err, upload};
use crate::support::still_works;
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::ops::{self, IndexCopy, Scalar, TensorOp};
use braid_stream_core::DType;

/// Embedding rows by int64 ids (a negative one from the end) in each float type and int64;
/// `x[:, ids]` of a transposed view with int32 ids; `x[ids0, :, ids2]`, not adjacent;
/// `index_copy_` into a static-cache-shaped tensor along dimension 2, and into a copy.
pub fn embeddings_indexing_and_index_copy_move_elements_by_ids<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let rows: Vec<f64> = (0..20).map(|i| i as f64 - 4.0).collect();
    for dtype in DType::FLOATS.into_iter().chain([DType::I64]) {
        let w = upload(&device, &s, dtype, &[5, 4], &rows)?;
        let ids = upload(
            &device,
            &s,
            DType::I64,
            &[2, 3],
            &[4.0, 0.0, -1.0, 2.0, 2.0, 1.0],
        )?;
        let out = upload(&device, &s, dtype, &[2, 3, 4], &[])?;
        s.launch(ops::embedding(&w.t, &ids.t, &out.t).map_err(err)?)?;
        let want: Vec<f64> = [4, 0, 4, 2, 2, 1]
            .iter()
            .flat_map(|&r| rows[r * 4..r * 4 + 4].to_vec())
            .collect();
        close(&download(&s, &out)?, &want, dtype, "embedding")?;
    }

    // x is [2, 3, 4]; its transpose [4, 3, 2] indexed on dimension 1 by int32 ids.
    let xs: Vec<f64> = (0..24).map(f64::from).collect();
    let at = |i: usize, j: usize, k: usize| xs[i * 12 + j * 4 + k];
    let x = upload(&device, &s, DType::F32, &[2, 3, 4], &xs)?;
    let xt = x.t.transpose(0, 2).map_err(err)?;
    let ids = upload(&device, &s, DType::I32, &[2], &[2.0, 0.0])?;
    let out = upload(&device, &s, DType::F32, &[4, 2, 2], &[])?;
    s.launch(ops::index(&xt, &[None, Some(ids.t.clone())], &out.t).map_err(err)?)?;
    let mut want = Vec::new();
    for k in 0..4 {
        for j in [2, 0] {
            for i in 0..2 {
                want.push(at(i, j, k));
            }
        }
    }
    close(&download(&s, &out)?, &want, DType::F32, "x.T[:, ids]")?;
    // x[[1, 0], :, [3]]: the index dimensions first, [3] broadcast.
    let i0 = upload(&device, &s, DType::I64, &[2], &[1.0, 0.0])?;
    let i2 = upload(&device, &s, DType::I64, &[1], &[3.0])?;
    let out = upload(&device, &s, DType::F32, &[2, 3], &[])?;
    let k = ops::index(
        &x.t,
        &[Some(i0.t.clone()), None, Some(i2.t.clone())],
        &out.t,
    );
    s.launch(k.map_err(err)?)?;
    let want: Vec<f64> = [1, 0]
        .iter()
        .flat_map(|&i| (0..3).map(move |j| at(i, j, 3)))
        .collect();
    close(&download(&s, &out)?, &want, DType::F32, "x[ids, :, ids]")?;

    // A static cache [1, 2, 6, 2] written at positions [4, 1] along dimension 2.
    for dtype in DType::FLOATS {
        let cache = upload(&device, &s, dtype, &[1, 2, 6, 2], &[0.5; 24])?;
        let pos = upload(&device, &s, DType::I64, &[2], &[4.0, 1.0])?;
        let src_vals: Vec<f64> = (0..8).map(|i| i as f64 * 0.25).collect();
        let src = upload(&device, &s, dtype, &[1, 2, 2, 2], &src_vals)?;
        s.launch(ops::index_copy(&cache.t, 2, &pos.t, &src.t).map_err(err)?)?;
        let mut want = vec![0.5; 24];
        for hd in 0..2 {
            for (i, p) in [4usize, 1].into_iter().enumerate() {
                for d in 0..2 {
                    want[hd * 12 + p * 2 + d] = src_vals[hd * 4 + i * 2 + d];
                }
            }
        }
        close(&download(&s, &cache)?, &want, dtype, "index_copy_")?;
        // Into another tensor: the cache is read, not written.
        let copy = upload(&device, &s, dtype, &[1, 2, 6, 2], &[])?;
        let op = TensorOp::IndexCopy(IndexCopy {
            x: Some(cache.t.clone()),
            dim: 2,
            index: pos.t.clone(),
            source: src.t.clone(),
            out: copy.t.clone(),
        });
        s.launch(op.kernel().map_err(err)?)?;
        close(&download(&s, &copy)?, &want, dtype, "index_copy")?;
    }
    still_works(&device)
}

/// `cat` of a contiguous and a transposed input of another type; `where` with a broadcast
/// mask, and a masked fill in place; `triu` and `tril` into another tensor and in place;
/// `arange` into float and int64 outputs.
pub fn cat_where_triangles_and_arange_build_tensors_by_position<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    for dtype in DType::FLOATS {
        let a = upload(&device, &s, dtype, &[2, 2], &[1.0, 2.0, 3.0, 4.0])?;
        let b = upload(
            &device,
            &s,
            DType::F32,
            &[3, 2],
            &[5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
        )?;
        let out = upload(&device, &s, dtype, &[2, 5], &[])?;
        let bt = b.t.t().map_err(err)?;
        s.launch(ops::cat(&[a.t.clone(), bt], 1, &out.t).map_err(err)?)?;
        let want = [1.0, 2.0, 5.0, 7.0, 9.0, 3.0, 4.0, 6.0, 8.0, 10.0];
        close(&download(&s, &out)?, &want, dtype, "cat")?;

        let mask = upload(
            &device,
            &s,
            DType::Bool,
            &[1, 5],
            &[1.0, 0.0, 0.0, 1.0, 1.0],
        )?;
        let other = upload(&device, &s, dtype, &[], &[-8.0])?;
        let chosen = upload(&device, &s, dtype, &[2, 5], &[])?;
        s.launch(ops::where_(&mask.t, &out.t, &other.t, &chosen.t).map_err(err)?)?;
        let m = [true, false, false, true, true];
        let picked: Vec<f64> = (0..10)
            .map(|i| if m[i % 5] { want[i] } else { -8.0 })
            .collect();
        close(&download(&s, &chosen)?, &picked, dtype, "where")?;
        // masked_fill_: out = mask ? value : out, in place.
        let fill = ops::where_(&mask.t, Scalar::Float(0.5), &out.t, &out.t).map_err(err)?;
        s.launch(fill)?;
        let filled: Vec<f64> = (0..10)
            .map(|i| if m[i % 5] { 0.5 } else { want[i] })
            .collect();
        close(&download(&s, &out)?, &filled, dtype, "masked fill")?;

        let xs: Vec<f64> = (1..=12).map(f64::from).collect();
        let x = upload(&device, &s, dtype, &[3, 4], &xs)?;
        let up = upload(&device, &s, dtype, &[3, 4], &[])?;
        s.launch(ops::triangle(&x.t, 1, true, &up.t).map_err(err)?)?;
        let tri = |upper: bool, d: i64| -> Vec<f64> {
            (0..12)
                .map(|e| {
                    let k = (e % 4) as i64 - (e / 4) as i64;
                    if (upper && k >= d) || (!upper && k <= d) {
                        xs[e]
                    } else {
                        0.0
                    }
                })
                .collect()
        };
        close(&download(&s, &up)?, &tri(true, 1), dtype, "triu")?;
        s.launch(ops::triangle(&x.t, -1, false, &x.t).map_err(err)?)?;
        close(&download(&s, &x)?, &tri(false, -1), dtype, "tril in place")?;

        let r = upload(&device, &s, dtype, &[6], &[])?;
        s.launch(ops::arange(-1.0, 0.5, &r.t).map_err(err)?)?;
        let want: Vec<f64> = (0..6).map(|i| -1.0 + i as f64 * 0.5).collect();
        close(&download(&s, &r)?, &want, dtype, "arange")?;
    }
    let positions = upload(&device, &s, DType::I64, &[5], &[])?;
    s.launch(ops::arange(7i64, 3i64, &positions.t).map_err(err)?)?;
    let want = [7.0, 10.0, 13.0, 16.0, 19.0];
    close(
        &download(&s, &positions)?,
        &want,
        DType::I64,
        "int64 arange",
    )?;
    still_works(&device)
}
