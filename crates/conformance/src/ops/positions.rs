//! LayerNorm (with its statistics), the positions of extremes and cumulative sums, from
//! contiguous and strided views, against host references.

use super::{close, download, err, ramp, upload};
use crate::support::still_works;
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::ops::{self, ArgReduce, LayerNorm, TensorOp};
use braid_stream_core::DType;

/// LayerNorm rows of a transposed input with a weight and a bias, its mean and rstd, in each
/// float type; argmax along each dimension and `max(dim)` with its values; cumulative sums of
/// a bool mask into int64 and of floats along a strided dimension.
pub fn layer_norm_argmax_and_cumsum_follow_their_formulas<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let (rows, cols) = (3, 8);
    for dtype in DType::FLOATS {
        let round = |v: f64| f64::from(dtype.round(v as f32));
        // Stored [cols, rows], normalised along what its transpose calls rows.
        let stored: Vec<f64> = ramp(rows * cols, 0.375).into_iter().map(round).collect();
        let x = upload(&device, &s, dtype, &[cols, rows], &stored)?;
        let xt = x.t.t().map_err(err)?;
        let ws: Vec<f64> = ramp(cols, 0.25).into_iter().map(round).collect();
        let bs: Vec<f64> = (0..cols).map(|i| round(i as f64 * 0.125 - 0.5)).collect();
        let w = upload(&device, &s, dtype, &[cols], &ws)?;
        let b = upload(&device, &s, dtype, &[cols], &bs)?;
        let out = upload(&device, &s, dtype, &[rows, cols], &[])?;
        let mean = upload(&device, &s, DType::F32, &[rows, 1], &[])?;
        let rstd = upload(&device, &s, DType::F32, &[rows, 1], &[])?;
        let op = TensorOp::LayerNorm(LayerNorm {
            x: xt,
            normalized: 1,
            weight: Some(w.t.clone()),
            bias: Some(b.t.clone()),
            eps: 1e-5,
            out: out.t.clone(),
            mean: Some(mean.t.clone()),
            rstd: Some(rstd.t.clone()),
        });
        s.launch(op.kernel().map_err(err)?)?;
        let (mut want, mut means, mut rstds) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rows {
            let row: Vec<f64> = (0..cols).map(|c| stored[c * rows + r]).collect();
            let mu = row.iter().sum::<f64>() / cols as f64;
            let var = row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / cols as f64;
            let rs = 1.0 / (var + 1e-5).sqrt();
            want.extend((0..cols).map(|c| round((row[c] - mu) * rs * ws[c] + bs[c])));
            means.push(mu);
            rstds.push(rs);
        }
        close(&download(&s, &out)?, &want, dtype, "layer_norm")?;
        close(&download(&s, &mean)?, &means, DType::F32, "layer_norm mean")?;
        close(&download(&s, &rstd)?, &rstds, DType::F32, "layer_norm rstd")?;

        // argmax of each row of the transposed view; max along dimension 0 with values.
        let idx = upload(&device, &s, DType::I64, &[rows], &[])?;
        s.launch(ops::argmax(&x.t.t().map_err(err)?, 1, true, &idx.t).map_err(err)?)?;
        let first_max = |v: &[f64]| {
            let mut best = 0;
            for (i, &x) in v.iter().enumerate() {
                if x > v[best] {
                    best = i;
                }
            }
            best as f64
        };
        let want: Vec<f64> = (0..rows)
            .map(|r| first_max(&(0..cols).map(|c| stored[c * rows + r]).collect::<Vec<_>>()))
            .collect();
        close(&download(&s, &idx)?, &want, DType::I64, "argmax")?;
        let vals = upload(&device, &s, dtype, &[1, rows], &[])?;
        let pos = upload(&device, &s, DType::I64, &[1, rows], &[])?;
        let op = TensorOp::ArgReduce(ArgReduce {
            max: false,
            x: x.t.clone(),
            dim: 0,
            values: Some(vals.t.clone()),
            indices: pos.t.clone(),
        });
        s.launch(op.kernel().map_err(err)?)?;
        let (mut mins, mut at) = (Vec::new(), Vec::new());
        for r in 0..rows {
            let col: Vec<f64> = (0..cols).map(|c| stored[c * rows + r]).collect();
            let mut best = 0;
            for (i, &v) in col.iter().enumerate() {
                if v < col[best] {
                    best = i;
                }
            }
            mins.push(col[best]);
            at.push(best as f64);
        }
        close(&download(&s, &vals)?, &mins, dtype, "min(dim) values")?;
        close(&download(&s, &pos)?, &at, DType::I64, "min(dim) indices")?;

        // Cumulative sums down the columns of the [cols, rows] tensor, in float32.
        let sums = upload(&device, &s, DType::F32, &[cols, rows], &[])?;
        s.launch(ops::cumsum(&x.t, 0, &sums.t).map_err(err)?)?;
        let mut want = vec![0.0; cols * rows];
        for r in 0..rows {
            let mut acc = 0.0;
            for c in 0..cols {
                acc += stored[c * rows + r];
                want[c * rows + r] = acc;
            }
        }
        close(&download(&s, &sums)?, &want, DType::F32, "cumsum")?;
    }
    // A padding mask's cumulative sum into int64 positions, as `generate` computes them.
    let mask = upload(
        &device,
        &s,
        DType::Bool,
        &[2, 4],
        &[0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0],
    )?;
    let positions = upload(&device, &s, DType::I64, &[2, 4], &[])?;
    s.launch(ops::cumsum(&mask.t, 1, &positions.t).map_err(err)?)?;
    let want = [0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 2.0, 3.0];
    close(
        &download(&s, &positions)?,
        &want,
        DType::I64,
        "bool cumsum into int64",
    )?;
    still_works(&device)
}
