//! The planning of every elementwise and reduction operator, shared by braid's operators
//! ([`super::exports`]) and the client families ([`super::client_exports`]): the parameter
//! checks, then the simulator kernel when the tensors are what braid's kernels take
//! (contiguous, one shape, a factor of 1), else the general host operator of
//! [`super::strided`] (strides, broadcasting, any factor, any reduced dimensions).

use super::strided::{broadcast, elementwise, expect_broadcast, reduce_sum, Strided};
use super::{common_dtype, expect_dims, slice_of, Objects, TensorDesc, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::ACLNN_ERR_PARAM_INVALID;
use braid_backend_sim::SimBackend;
use braid_stream_core::kernel::Kernel;
use braid_stream_core::CustomOp;

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// The operator's name from its `GetWorkspaceSize` call's.
fn op_name(call: &str) -> &str {
    call.strip_suffix("GetWorkspaceSize").unwrap_or(call)
}

/// Whether `t` is laid out row-major without gaps.
fn contiguous(t: &TensorDesc) -> bool {
    let mut expect = 1i64;
    for (d, s) in t.dims.iter().zip(&t.strides).rev() {
        if *d > 1 && *s != expect {
            return false;
        }
        expect = expect.saturating_mul((*d).max(1));
    }
    true
}

fn dims(t: &TensorDesc) -> Vec<usize> {
    t.dims.iter().map(|&d| d as usize).collect()
}

/// A host operator, checked as the front layer checks every operator.
fn custom(call: &str, op: CustomOp<SimBackend>) -> Result<(Work, u64), Fail> {
    op.validate()
        .map_err(|e| invalid(call, format!("the operator's declaration is refused: {e}")))?;
    Ok((Work::Custom(op), 0))
}

/// The factor of an add (`Some((alpha scalar, sign))`: `sign` is -1 for a sub), or a mul
/// (`None`). The scalar is checked after the tensors, as CANN's parameter checks go.
pub(crate) type Alpha = Option<(usize, f64)>;

fn alpha_value(call: &str, o: &Objects, alpha: Alpha) -> Result<Option<f64>, Fail> {
    alpha
        .map(|(h, sign)| o.scalar(call, "alpha", h).map(|a| sign * a))
        .transpose()
}

/// `out = self + alpha * other` (an `alpha`) or `out = self * other`, `other` and `self`
/// broadcast to `out`'s shape.
pub(crate) fn binary(
    call: &str,
    o: &Objects,
    (self_, other, out): (usize, usize, usize),
    alpha: Alpha,
) -> Result<(Work, u64), Fail> {
    let (a, b, c) = (
        o.tensor(call, "self", self_)?,
        o.tensor(call, "other", other)?,
        o.tensor(call, "out", out)?,
    );
    let alpha = alpha_value(call, o, alpha)?;
    let t = common_dtype(call, &[("self", a), ("other", b), ("out", c)])?;
    let shape = broadcast(&dims(a), &dims(b)).ok_or_else(|| {
        invalid(
            call,
            format!(
                "self of shape {:?} and other of shape {:?} do not broadcast",
                a.dims, b.dims
            ),
        )
    })?;
    expect_dims(
        call,
        "out",
        c,
        &shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
    )?;
    let simple = a.dims == b.dims && [a, b, c].into_iter().all(contiguous);
    if let (Some(1.0), true) = (alpha, simple) {
        return Ok((
            Work::Kernel(
                Kernel::Add {
                    a: slice_of(call, "self", a, t)?,
                    b: slice_of(call, "other", b, t)?,
                    out: slice_of(call, "out", c, t)?,
                }
                .typed(t),
            ),
            0,
        ));
    }
    let inputs = vec![
        Strided::of(call, "self", a)?,
        Strided::of(call, "other", b)?,
    ];
    let out = Strided::of(call, "out", c)?;
    let op = match alpha {
        // Computed in f32 and rounded once, as the simulator's kernels do.
        Some(alpha) => {
            let alpha = alpha as f32;
            elementwise(op_name(call), inputs, out, move |v| v[0] + alpha * v[1])
        }
        None => elementwise(op_name(call), inputs, out, |v| v[0] * v[1]),
    };
    custom(call, op)
}

/// `out = self + alpha * other` (an `alpha`) or `out = self * other`, with `other` a scalar.
pub(crate) fn with_scalar(
    call: &str,
    o: &Objects,
    (self_, out): (usize, usize),
    other: usize,
    alpha: Alpha,
) -> Result<(Work, u64), Fail> {
    let (a, c) = (o.tensor(call, "self", self_)?, o.tensor(call, "out", out)?);
    let other = o.scalar(call, "other", other)?;
    let alpha = alpha_value(call, o, alpha)?;
    let t = common_dtype(call, &[("self", a), ("out", c)])?;
    expect_dims(call, "out", c, &a.dims)?;
    if alpha.is_none() && contiguous(a) && contiguous(c) {
        return Ok((
            Work::Kernel(
                Kernel::Scale {
                    src: slice_of(call, "self", a, t)?,
                    dst: slice_of(call, "out", c, t)?,
                    factor: other as f32,
                }
                .typed(t),
            ),
            0,
        ));
    }
    let inputs = vec![Strided::of(call, "self", a)?];
    let out = Strided::of(call, "out", c)?;
    let other = other as f32;
    let op = match alpha {
        Some(alpha) => {
            let term = alpha as f32 * other;
            elementwise(op_name(call), inputs, out, move |v| v[0] + term)
        }
        None => elementwise(op_name(call), inputs, out, move |v| v[0] * other),
    };
    custom(call, op)
}

/// What a fill writes.
pub(crate) enum FillValue {
    /// A value of the operator (`aclnnInplaceOne`'s 1).
    Constant(f64),
    /// The scalar of this handle.
    Scalar(usize),
}

/// `selfRef[...] = value` (a constant, or the scalar `value` names).
pub(crate) fn fill(
    call: &str,
    o: &Objects,
    self_ref: usize,
    value: FillValue,
) -> Result<(Work, u64), Fail> {
    let d = o.tensor(call, "selfRef", self_ref)?;
    let value = match value {
        FillValue::Constant(v) => v,
        FillValue::Scalar(h) => o.scalar(call, "value", h)?,
    };
    let t = common_dtype(call, &[("selfRef", d)])?;
    if contiguous(d) {
        return Ok((
            Work::Kernel(
                Kernel::Fill {
                    dst: slice_of(call, "selfRef", d, t)?,
                    value: value as f32,
                }
                .typed(t),
            ),
            0,
        ));
    }
    let out = Strided::of(call, "selfRef", d)?;
    let value = value as f32;
    custom(
        call,
        elementwise(op_name(call), Vec::new(), out, move |_| value),
    )
}

/// `selfRef[...] = src[...]`, `src` broadcast to `selfRef`'s shape and converted to its data
/// type (CANN's copy casts; every pair of float32, float16 and bfloat16 is taken).
pub(crate) fn copy(
    call: &str,
    o: &Objects,
    self_ref: usize,
    src: usize,
) -> Result<(Work, u64), Fail> {
    let (d, s) = (
        o.tensor(call, "selfRef", self_ref)?,
        o.tensor(call, "src", src)?,
    );
    expect_broadcast(call, "src", &dims(s), &dims(d))?;
    let same_type = s.dtype == d.dtype;
    if same_type && s.dims == d.dims && contiguous(s) && contiguous(d) {
        let t = common_dtype(call, &[("selfRef", d), ("src", s)])?;
        return Ok((
            Work::Kernel(
                Kernel::Copy {
                    src: slice_of(call, "src", s, t)?,
                    dst: slice_of(call, "selfRef", d, t)?,
                }
                .typed(t),
            ),
            0,
        ));
    }
    let inputs = vec![Strided::of(call, "src", s)?];
    let out = Strided::of(call, "selfRef", d)?;
    custom(call, elementwise(op_name(call), inputs, out, |v| v[0]))
}

/// The sum of `self` over the dimensions `dim` (every dimension when `dim` is empty, as
/// CANN documents), into `out`: `self`'s shape with those dimensions removed, or kept as 1
/// with `keepDim`. Dimensions are in `[-rank, rank)` and named once.
pub(crate) fn sum(
    call: &str,
    o: &Objects,
    (self_, dim, out): (usize, usize, usize),
    keep_dim: bool,
    dtype: i32,
    workspace: u64,
) -> Result<(Work, u64), Fail> {
    let (a, c) = (o.tensor(call, "self", self_)?, o.tensor(call, "out", out)?);
    let dims_given = o.int_array(call, "dim", dim)?;
    let t = common_dtype(call, &[("self", a), ("out", c)])?;
    if dtype != c.dtype {
        return Err(invalid(
            call,
            format!("dtype {dtype} differs from out's {}", c.dtype),
        ));
    }
    let rank = a.dims.len() as i64;
    let mut reduced = vec![dims_given.is_empty(); a.dims.len()];
    for &d in dims_given {
        let i = if d < 0 { d + rank } else { d };
        match usize::try_from(i).ok().filter(|&i| i < a.dims.len()) {
            Some(i) if !reduced[i] => reduced[i] = true,
            Some(_) => {
                return Err(invalid(
                    call,
                    format!("dimension {d} is named twice in dim {dims_given:?}"),
                ))
            }
            None => {
                return Err(invalid(
                    call,
                    format!("dimension {d} is out of range for self of rank {rank}"),
                ))
            }
        }
    }
    let expected: Vec<i64> = a
        .dims
        .iter()
        .zip(&reduced)
        .filter_map(|(&d, &r)| match (r, keep_dim) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    expect_dims(call, "out", c, &expected)?;
    if reduced.iter().all(|&r| r) && contiguous(a) {
        return Ok((
            Work::Kernel(
                Kernel::ReduceSum {
                    src: slice_of(call, "self", a, t)?,
                    dst: slice_of(call, "out", c, t)?,
                }
                .typed(t),
            ),
            workspace,
        ));
    }
    let src = Strided::of(call, "self", a)?;
    let out = Strided::of(call, "out", c)?;
    let (work, _) = custom(call, reduce_sum(op_name(call), src, &reduced, out))?;
    Ok((work, workspace))
}
