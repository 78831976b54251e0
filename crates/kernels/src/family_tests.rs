//! The indexing, shape, LayerNorm and position kernels against plain reference loops.

use crate::tests::{run, seq, values, Mem};
use crate::{compute, ComputeError};
use braid_stream_core::ops::{self, ArgReduce, IndexCopy, LayerNorm, TensorOp};
use braid_stream_core::{DType, Kernel};

#[test]
fn an_embedding_lookup_takes_whole_rows_and_counts_negative_ids_from_the_end() {
    let mut m = Mem::new();
    for dtype in [DType::F32, DType::BF16, DType::I64] {
        let rows: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let (w, wb) = m.tensor(dtype, &[4, 3], &rows);
        let (ids, ib) = m.tensor(DType::I64, &[2, 2], &[3.0, 0.0, -1.0, 1.0]);
        let (out, ob) = m.zeros(dtype, &[2, 2, 3]);
        let got = run(
            ops::embedding(&w, &ids, &out).unwrap(),
            &[&wb, &ib],
            vec![ob],
        );
        let want: Vec<f64> = [3, 0, 3, 1]
            .iter()
            .flat_map(|&r| (0..3).map(move |c| (r * 3 + c) as f64))
            .collect();
        assert_eq!(values(dtype, &got[0]), want, "{dtype}");
    }
}

#[test]
fn advanced_indexing_places_the_index_dimensions_by_numpys_rule() {
    let mut m = Mem::new();
    let xs: Vec<f64> = (0..24).map(|i| i as f64).collect();
    let (x, xb) = m.tensor(DType::F32, &[2, 3, 4], &xs);
    let at = |i: usize, j: usize, k: usize| (i * 12 + j * 4 + k) as f64;
    // x[:, [2, 0]]: adjacent, in place of dimension 1 -> [2, 2, 4].
    let (i1, i1b) = m.tensor(DType::I32, &[2], &[2.0, 0.0]);
    let (out, ob) = m.zeros(DType::F32, &[2, 2, 4]);
    let k = ops::index(&x, &[None, Some(i1.clone())], &out).unwrap();
    let got = run(k, &[&xb, &i1b], vec![ob]);
    let mut want = Vec::new();
    for i in 0..2 {
        for j in [2, 0] {
            for k in 0..4 {
                want.push(at(i, j, k));
            }
        }
    }
    assert_eq!(values(DType::F32, &got[0]), want);
    // x[[1, 0], :, [3]]: not adjacent, the index shape first -> [2, 3]; [3] broadcasts.
    let (i0, i0b) = m.tensor(DType::I64, &[2], &[1.0, 0.0]);
    let (i2, i2b) = m.tensor(DType::I64, &[1], &[3.0]);
    let (out, ob) = m.zeros(DType::F32, &[2, 3]);
    let k = ops::index(&x, &[Some(i0), None, Some(i2)], &out).unwrap();
    let got = run(k, &[&xb, &i0b, &i2b], vec![ob]);
    let want: Vec<f64> = [1, 0]
        .iter()
        .flat_map(|&i| (0..3).map(move |j| at(i, j, 3)))
        .collect();
    assert_eq!(values(DType::F32, &got[0]), want);
    // A transposed self is read through its strides.
    let xt = x.transpose(0, 2).unwrap(); // [4, 3, 2]
    let (out, ob) = m.zeros(DType::F32, &[2, 3, 2]);
    let k = ops::index(&xt, &[Some(i1)], &out).unwrap();
    let got = run(k, &[&xb, &i1b], vec![ob]);
    let mut want = Vec::new();
    for kk in [2, 0] {
        for j in 0..3 {
            for i in 0..2 {
                want.push(at(i, j, kk));
            }
        }
    }
    assert_eq!(values(DType::F32, &got[0]), want);
}

#[test]
fn an_index_out_of_range_is_an_error_naming_the_operand() {
    let mut m = Mem::new();
    let (w, wb) = m.zeros(DType::F32, &[4, 3]);
    let (ids, ib) = m.tensor(DType::I64, &[2], &[1.0, 4.0]);
    let (out, mut ob) = m.zeros(DType::F32, &[2, 3]);
    let Kernel::Op(k) = ops::embedding(&w, &ids, &out).unwrap() else {
        unreachable!()
    };
    // An operator that can fail on the values it reads says so (its caller stages its
    // outputs); one reading no index does not.
    assert!(crate::may_fail_on_values(k.op()));
    let Kernel::Op(mul) = ops::binary(ops::BinaryOp::Mul, &w, &w, &w).unwrap() else {
        unreachable!()
    };
    assert!(!crate::may_fail_on_values(mul.op()));
    let err = compute(k.op(), &[&wb, &ib], &mut [&mut ob]).unwrap_err();
    assert_eq!(
        err,
        ComputeError::IndexOutOfRange {
            op: "index",
            operand: "indices",
            index: 4,
            bound: 4
        }
    );
    let (pos, pb) = m.tensor(DType::I64, &[1], &[-5.0]);
    let (src, sb) = m.zeros(DType::F32, &[1, 3]);
    let Kernel::Op(k) = ops::index_copy(&w, 0, &pos, &src).unwrap() else {
        unreachable!()
    };
    assert!(crate::may_fail_on_values(k.op()));
    let mut wb2 = wb.clone();
    let err = compute(k.op(), &[&pb, &sb], &mut [&mut wb2]).unwrap_err();
    assert!(matches!(
        err,
        ComputeError::IndexOutOfRange {
            operand: "index",
            index: -5,
            ..
        }
    ));
}

#[test]
fn index_copy_replaces_the_indexed_slices_in_place_or_into_a_copy() {
    let mut m = Mem::new();
    // A static cache [1, 2 heads, 5 positions, 2]: positions 3 and 1 written along dim 2.
    let (cache, cb) = m.tensor(DType::F16, &[1, 2, 5, 2], &[0.0; 20]);
    let (pos, pb) = m.tensor(DType::I64, &[2], &[3.0, 1.0]);
    let src_vals = seq(8, 0.5);
    let (src, sb) = m.tensor(DType::F16, &[1, 2, 2, 2], &src_vals);
    let got = run(
        ops::index_copy(&cache, 2, &pos, &src).unwrap(),
        &[&pb, &sb],
        vec![cb.clone()],
    );
    let mut want = vec![0.0; 20];
    for h in 0..2 {
        for (i, p) in [3usize, 1].into_iter().enumerate() {
            for d in 0..2 {
                want[h * 10 + p * 2 + d] = src_vals[h * 4 + i * 2 + d];
            }
        }
    }
    assert_eq!(values(DType::F16, &got[0]), want);
    // Out of place: out = self with the rows replaced; self untouched.
    let base: Vec<f64> = (0..20).map(|i| i as f64).collect();
    let (x, xb) = m.tensor(DType::F16, &[1, 2, 5, 2], &base);
    let (out, ob) = m.zeros(DType::F16, &[1, 2, 5, 2]);
    let op = TensorOp::IndexCopy(IndexCopy {
        x: Some(x),
        dim: 2,
        index: pos,
        source: src,
        out,
    });
    let got = run(op.kernel().unwrap(), &[&xb, &pb, &sb], vec![ob]);
    let mut want = base.clone();
    for h in 0..2 {
        for (i, p) in [3usize, 1].into_iter().enumerate() {
            for d in 0..2 {
                want[h * 10 + p * 2 + d] = src_vals[h * 4 + i * 2 + d];
            }
        }
    }
    assert_eq!(values(DType::F16, &got[0]), want);
}

#[test]
fn cat_joins_strided_inputs_converting_them_to_the_output_type() {
    let mut m = Mem::new();
    let (a, ab) = m.tensor(DType::F32, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let (b, bb) = m.tensor(DType::F16, &[3, 2], &[5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
    // b transposed is [2, 3]; joined with a along dimension 1 -> [2, 5].
    let (out, ob) = m.zeros(DType::F32, &[2, 5]);
    let k = ops::cat(&[a, b.t().unwrap()], 1, &out).unwrap();
    let got = run(k, &[&ab, &bb], vec![ob]);
    assert_eq!(
        values(DType::F32, &got[0]),
        [1.0, 2.0, 5.0, 7.0, 9.0, 3.0, 4.0, 6.0, 8.0, 10.0]
    );
}

#[test]
fn where_chooses_by_a_broadcast_mask_and_promotes() {
    let mut m = Mem::new();
    let (mask, mb) = m.tensor(DType::Bool, &[1, 3], &[1.0, 0.0, 1.0]);
    let (x, xb) = m.tensor(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let (y, yb) = m.tensor(DType::F32, &[], &[f64::from(f32::MIN)]);
    let (out, ob) = m.zeros(DType::F32, &[2, 3]);
    let got = run(
        ops::where_(&mask, &x, &y, &out).unwrap(),
        &[&mb, &xb, &yb],
        vec![ob],
    );
    let min = f64::from(f32::MIN);
    assert_eq!(values(DType::F32, &got[0]), [1.0, min, 3.0, 4.0, min, 6.0]);
    // int64 values into int64.
    let (xi, xib) = m.tensor(DType::I64, &[3], &[7.0, 8.0, 9.0]);
    let (yi, yib) = m.tensor(DType::I64, &[3], &[-1.0, -2.0, -3.0]);
    let (oi, oib) = m.zeros(DType::I64, &[1, 3]);
    let got = run(
        ops::where_(&mask, &xi, &yi, &oi).unwrap(),
        &[&mb, &xib, &yib],
        vec![oib],
    );
    assert_eq!(values(DType::I64, &got[0]), [7.0, -2.0, 9.0]);
}

#[test]
fn triu_and_tril_keep_their_triangle_for_any_diagonal() {
    let mut m = Mem::new();
    let xs: Vec<f64> = (1..=24).map(f64::from).collect();
    let (x, xb) = m.tensor(DType::F32, &[2, 3, 4], &xs);
    for upper in [true, false] {
        for diagonal in [-1i64, 0, 2] {
            let (out, ob) = m.zeros(DType::F32, &[2, 3, 4]);
            let k = ops::triangle(&x, diagonal, upper, &out).unwrap();
            let got = run(k, &[&xb], vec![ob]);
            let want: Vec<f64> = (0..24)
                .map(|e| {
                    let (i, j) = ((e / 4) % 3, e % 4);
                    let d = j as i64 - i as i64;
                    let keep = if upper { d >= diagonal } else { d <= diagonal };
                    if keep {
                        xs[e]
                    } else {
                        0.0
                    }
                })
                .collect();
            assert_eq!(values(DType::F32, &got[0]), want, "{upper} {diagonal}");
        }
    }
}

#[test]
fn arange_ramps_in_float_and_integer_outputs() {
    let mut m = Mem::new();
    let (f, fb) = m.zeros(DType::F32, &[5]);
    let got = run(ops::arange(0.5, 0.25, &f).unwrap(), &[], vec![fb]);
    assert_eq!(values(DType::F32, &got[0]), [0.5, 0.75, 1.0, 1.25, 1.5]);
    let (i, ib) = m.zeros(DType::I64, &[4]);
    let got = run(ops::arange(10i64, -3i64, &i).unwrap(), &[], vec![ib]);
    assert_eq!(values(DType::I64, &got[0]), [10.0, 7.0, 4.0, 1.0]);
    let err = ops::arange(0.5, 1i64, &i).unwrap_err();
    assert_eq!(err.operand(), "start");
}

#[test]
fn layer_norm_normalises_rows_and_writes_their_statistics() {
    let mut m = Mem::new();
    let xs = seq(8, 0.7);
    let (x, xb) = m.tensor(DType::F32, &[2, 4], &xs);
    let (w, wb) = m.tensor(DType::F32, &[4], &[1.0, 0.5, 2.0, -1.0]);
    let (b, bb) = m.tensor(DType::F32, &[4], &[0.0, 0.25, -0.5, 1.0]);
    let (out, ob) = m.zeros(DType::F32, &[2, 4]);
    let (mean, mb) = m.zeros(DType::F32, &[2, 1]);
    let (rstd, rb) = m.zeros(DType::F32, &[2]);
    let op = TensorOp::LayerNorm(LayerNorm {
        x,
        normalized: 1,
        weight: Some(w),
        bias: Some(b),
        eps: 1e-5,
        out,
        mean: Some(mean),
        rstd: Some(rstd),
    });
    let got = run(op.kernel().unwrap(), &[&xb, &wb, &bb], vec![ob, mb, rb]);
    let (ws, bs) = ([1.0, 0.5, 2.0, -1.0], [0.0, 0.25, -0.5, 1.0]);
    for r in 0..2 {
        let row = &xs[r * 4..r * 4 + 4];
        let mu = row.iter().sum::<f64>() / 4.0;
        let var = row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / 4.0;
        let rs = 1.0 / (var + 1e-5).sqrt();
        for c in 0..4 {
            let want = (row[c] - mu) * rs * ws[c] + bs[c];
            let g = values(DType::F32, &got[0])[r * 4 + c];
            assert!((g - want).abs() < 1e-5, "row {r} col {c}: {g} vs {want}");
        }
        assert!((values(DType::F32, &got[1])[r] - mu).abs() < 1e-6);
        assert!((values(DType::F32, &got[2])[r] - rs).abs() < 1e-5);
    }
}

#[test]
fn argmax_takes_the_first_extreme_and_a_nan_wins() {
    let mut m = Mem::new();
    let xs = [
        1.0,
        5.0,
        5.0,
        2.0,
        0.0,
        f64::NAN,
        9.0,
        3.0,
        4.0,
        -1.0,
        -1.0,
        4.0,
    ];
    let (x, xb) = m.tensor(DType::F32, &[3, 4], &xs);
    let (idx, ib) = m.zeros(DType::I64, &[3]);
    let got = run(ops::argmax(&x, 1, true, &idx).unwrap(), &[&xb], vec![ib]);
    assert_eq!(values(DType::I64, &got[0]), [1.0, 1.0, 0.0]);
    let (idx, ib) = m.zeros(DType::I64, &[3, 1]);
    let got = run(ops::argmax(&x, 1, false, &idx).unwrap(), &[&xb], vec![ib]);
    assert_eq!(values(DType::I64, &got[0]), [0.0, 1.0, 1.0]);
    // Along dimension 0 with the values (max_dim), on int64.
    let (xi, xib) = m.tensor(
        DType::I64,
        &[3, 4],
        &[1.0, 5.0, 7.0, 2.0, 0.0, 6.0, 9.0, 3.0, 4.0, 6.0, -1.0, 4.0],
    );
    let (vals, vb) = m.zeros(DType::I64, &[4]);
    let (idx, ib) = m.zeros(DType::I64, &[4]);
    let op = TensorOp::ArgReduce(ArgReduce {
        max: true,
        x: xi,
        dim: 0,
        values: Some(vals),
        indices: idx,
    });
    let got = run(op.kernel().unwrap(), &[&xib], vec![vb, ib]);
    assert_eq!(values(DType::I64, &got[0]), [4.0, 6.0, 9.0, 4.0]);
    assert_eq!(values(DType::I64, &got[1]), [2.0, 1.0, 1.0, 2.0]);
}

#[test]
fn cumsum_accumulates_along_a_dimension_into_the_output_type() {
    let mut m = Mem::new();
    let (mask, mb) = m.tensor(DType::Bool, &[2, 3], &[1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
    let (out, ob) = m.zeros(DType::I64, &[2, 3]);
    let got = run(ops::cumsum(&mask, 1, &out).unwrap(), &[&mb], vec![ob]);
    assert_eq!(values(DType::I64, &got[0]), [1.0, 2.0, 2.0, 0.0, 1.0, 2.0]);
    let (x, xb) = m.tensor(DType::F32, &[2, 3], &[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
    let (out, ob) = m.zeros(DType::F32, &[2, 3]);
    let got = run(ops::cumsum(&x, 0, &out).unwrap(), &[&xb], vec![ob]);
    assert_eq!(values(DType::F32, &got[0]), [0.5, 1.0, 1.5, 2.5, 3.5, 4.5]);
}
