//! braid's tensor operators ([`braid_stream_core::ops`]) on every backend: each computed from
//! strided, transposed and broadcast views, in the float types and the integer and bool types
//! model code uses, checked against a host reference within each data type's tolerance (a
//! device may sum in another order than the host); and an operator its declaration refuses
//! never reaches the device.

mod formats;
mod indexing;
mod positions;

pub use formats::private_formats_round_trip_with_zero_padding;
pub use indexing::{
    cat_where_triangles_and_arange_build_tensors_by_position,
    embeddings_indexing_and_index_copy_move_elements_by_ids,
};
pub use positions::layer_norm_argmax_and_cumsum_follow_their_formulas;
mod random;
pub use random::*;

use crate::support::still_works;
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::ops::{self, BinaryOp, ReduceKind, Scalar, UnaryOp};
use braid_stream_core::{DType, Device, DeviceMemory, Stream, Tensor};

/// The largest relative error a device may show in `dtype` (about two units in the last
/// place of a rounded result).
pub(crate) fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        DType::F32 => 1e-5,
        _ => 0.0,
    }
}

/// A device buffer holding `values` in `dtype` as a contiguous tensor of `shape`.
pub(crate) struct Buf<B: Backend> {
    pub(crate) mem: DeviceMemory<B>,
    pub(crate) t: Tensor,
}

pub(crate) fn upload<B: Backend>(
    device: &Device<B>,
    s: &Stream<B>,
    dtype: DType,
    shape: &[usize],
    values: &[f64],
) -> Result<Buf<B>, CaseError> {
    let n: usize = shape.iter().product();
    let mem = device.alloc((n as u64 * dtype.size()).max(1))?;
    let mut bytes = Vec::new();
    for i in 0..n {
        dtype.push_f64(&mut bytes, values.get(i).copied().unwrap_or(0.0));
    }
    if !bytes.is_empty() {
        s.copy_h2d(mem.slice(), bytes::Bytes::from(bytes))?;
    }
    let t = Tensor::new(mem.slice(), dtype, shape).map_err(|e| CaseError::new(e.to_string()))?;
    Ok(Buf { mem, t })
}

/// The values of `buf` after `s`'s work.
pub(crate) fn download<B: Backend>(s: &Stream<B>, buf: &Buf<B>) -> Result<Vec<f64>, CaseError> {
    let dtype = buf.t.dtype();
    let bytes = s.copy_d2h(buf.t.range())?.wait()?;
    Ok((0..buf.t.numel())
        .map(|i| dtype.get_f64(&bytes, i).unwrap_or(f64::NAN))
        .collect())
}

/// Checks `got` against `want` within `dtype`'s tolerance (exactly for integers and bool).
pub(crate) fn close(got: &[f64], want: &[f64], dtype: DType, what: &str) -> Result<(), CaseError> {
    if got.len() != want.len() {
        return Err(CaseError::new(format!(
            "{what} in {dtype}: {} elements, expected {}",
            got.len(),
            want.len()
        )));
    }
    let tol = tolerance(dtype);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if (g - w).abs() > tol * w.abs().max(1.0) {
            return Err(CaseError::new(format!(
                "{what} in {dtype}: element {i} is {g}, expected {w}"
            )));
        }
    }
    Ok(())
}

pub(crate) fn err(e: impl std::fmt::Display) -> CaseError {
    CaseError::new(e.to_string())
}

/// Values with a short mantissa, exact in every float type.
pub(crate) fn ramp(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7) % 11) as f64 * scale - 0.5)
        .collect()
}

/// A linear layer as `nn.Linear` runs it (`x · Wᵀ + b` with `W` read transposed in place),
/// SiLU, an element-wise product with a broadcast row, softmax and RMSNorm rows, in each
/// float type, against the host.
pub fn linear_silu_softmax_and_rms_norm_in_each_float_type<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let (m, k, n) = (3, 8, 5);
    for dtype in DType::FLOATS {
        let round = |v: f64| f64::from(dtype.round(v as f32));
        let xs: Vec<f64> = ramp(m * k, 0.125).into_iter().map(round).collect();
        let ws: Vec<f64> = ramp(n * k, 0.0625).into_iter().map(round).collect();
        let bs: Vec<f64> = (0..n).map(|i| round(i as f64 * 0.25 - 0.5)).collect();
        let x = upload(&device, &s, dtype, &[m, k], &xs)?;
        let w = upload(&device, &s, dtype, &[n, k], &ws)?;
        let b = upload(&device, &s, dtype, &[n], &bs)?;
        let y = upload(&device, &s, dtype, &[m, n], &[])?;
        let wt = w.t.t().map_err(err)?;
        s.launch(ops::matmul_bias(&x.t, &wt, &b.t, &y.t).map_err(err)?)?;
        let linear: Vec<f64> = (0..m * n)
            .map(|c| {
                let (i, j) = (c / n, c % n);
                (0..k).map(|p| xs[i * k + p] * ws[j * k + p]).sum::<f64>() + bs[j]
            })
            .collect();
        close(
            &download(&s, &y)?,
            &linear.iter().map(|&v| round(v)).collect::<Vec<_>>(),
            dtype,
            "x·Wᵀ+b",
        )?;

        s.launch(ops::unary(UnaryOp::Silu, &y.t, &y.t).map_err(err)?)?;
        let linear: Vec<f64> = linear.iter().map(|&v| round(v)).collect();
        let silu: Vec<f64> = linear
            .iter()
            .map(|&v| round(v / (1.0 + (-v).exp())))
            .collect();
        close(&download(&s, &y)?, &silu, dtype, "silu")?;

        let row = b.t.unsqueeze(0).map_err(err)?;
        let z = upload(&device, &s, dtype, &[m, n], &[])?;
        s.launch(ops::binary(BinaryOp::Mul, &y.t, &row, &z.t).map_err(err)?)?;
        let prod: Vec<f64> = (0..m * n).map(|c| round(silu[c] * bs[c % n])).collect();
        close(&download(&s, &z)?, &prod, dtype, "mul by a broadcast row")?;

        s.launch(ops::softmax(&z.t, 1, &y.t).map_err(err)?)?;
        let soft: Vec<f64> = (0..m * n)
            .map(|c| {
                let r = &prod[c / n * n..c / n * n + n];
                let max = r.iter().cloned().fold(f64::MIN, f64::max);
                let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
                round((prod[c] - max).exp() / sum)
            })
            .collect();
        close(&download(&s, &y)?, &soft, dtype, "softmax")?;

        let g = upload(&device, &s, dtype, &[k], &ramp(k, 0.25))?;
        let out = upload(&device, &s, dtype, &[m, k], &[])?;
        let rstd = upload(&device, &s, DType::F32, &[m, 1], &[])?;
        s.launch(ops::rms_norm(&x.t, &g.t, 1e-6, &out.t, &rstd.t).map_err(err)?)?;
        let gs: Vec<f64> = ramp(k, 0.25).into_iter().map(round).collect();
        let norm: Vec<f64> = (0..m * k)
            .map(|c| {
                let r = &xs[c / k * k..c / k * k + k];
                let rstd = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / k as f64 + 1e-6).sqrt();
                round(xs[c] * rstd * gs[c % k])
            })
            .collect();
        close(&download(&s, &out)?, &norm, dtype, "rms_norm")?;
        drop((x.mem, w.mem, b.mem, y.mem, z.mem, g.mem, out.mem, rstd.mem));
    }
    still_works(&device)
}

/// What model code does with ids and masks: int64 positions plus a scalar, a comparison into
/// a bool mask, the mask counted into int64, a cast of the mask to float; exact.
pub fn int64_positions_and_bool_masks_compute_exactly<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let ids: Vec<f64> = vec![0.0, 3.0, 9.0, 4.0, 1.0, 7.0];
    let x = upload(&device, &s, DType::I64, &[6], &ids)?;
    let shifted = upload(&device, &s, DType::I64, &[6], &[])?;
    let add = BinaryOp::Add {
        alpha: Scalar::Int(1),
    };
    s.launch(ops::binary(add, &x.t, Scalar::Int(5), &shifted.t).map_err(err)?)?;
    let want: Vec<f64> = ids.iter().map(|v| v + 5.0).collect();
    close(&download(&s, &shifted)?, &want, DType::I64, "int64 + 5")?;

    let mask = upload(&device, &s, DType::Bool, &[6], &[])?;
    s.launch(ops::binary(BinaryOp::Le, &shifted.t, Scalar::Int(8), &mask.t).map_err(err)?)?;
    let want: Vec<f64> = ids
        .iter()
        .map(|v| f64::from(u8::from(v + 5.0 <= 8.0)))
        .collect();
    close(&download(&s, &mask)?, &want, DType::Bool, "le into bool")?;

    let count = upload(&device, &s, DType::I64, &[], &[])?;
    s.launch(ops::reduce(ReduceKind::Sum, &mask.t, &[], &count.t).map_err(err)?)?;
    close(
        &download(&s, &count)?,
        &[want.iter().sum()],
        DType::I64,
        "bool sum into int64",
    )?;

    let as_float = upload(&device, &s, DType::F32, &[6], &[])?;
    s.launch(ops::cast(&mask.t, &as_float.t).map_err(err)?)?;
    close(
        &download(&s, &as_float)?,
        &want,
        DType::F32,
        "bool cast to float32",
    )?;
    still_works(&device)
}

/// An operator whose shapes or types do not fit is refused when it is made, naming the
/// operand, before any device sees it; the device keeps working.
pub fn operators_refused_by_their_declaration_never_reach_the_device<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let a = upload(&device, &s, DType::F32, &[2, 3], &[])?;
    let b = upload(&device, &s, DType::F32, &[2, 3], &[])?;
    let c = upload(&device, &s, DType::F32, &[2, 2], &[])?;
    let e = ops::matmul(&a.t, &b.t, &c.t).unwrap_err();
    ensure!(e.operand() == "mat2", "matmul names mat2: {e}");
    let ids = upload(&device, &s, DType::I64, &[2, 3], &[])?;
    let e = ops::unary(UnaryOp::BitwiseNot, &a.t, &ids.t).unwrap_err();
    ensure!(e.operand() == "self", "bitwise_not names self: {e}");
    let e = ops::binary(
        BinaryOp::Mul,
        &a.t,
        &b.t,
        &a.t.narrow(1, 0, 2).map_err(err)?,
    )
    .unwrap_err();
    ensure!(e.operand() == "out", "a wrong output shape names out: {e}");
    s.synchronize()?;
    still_works(&device)
}
