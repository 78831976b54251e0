//! The planning of the element-wise and reduction operators braid and torch_npu call, shared
//! by braid's operators ([`super::exports`]) and the client families
//! ([`super::client_exports`]): each reads its descriptors and becomes one of braid's tensor
//! operators ([`TensorOp`]), whose declaration checks it.

use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::ACLNN_ERR_PARAM_INVALID;
use braid_stream_core::ops::{
    Binary, BinaryOp, Cast, Fill, Operand, Reduce, ReduceKind, Scalar, TensorOp,
};

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// `out = self + alpha * other` (`Sub`: `- alpha`), or `out = self * other` when `alpha` is
/// `None`; `other` is a tensor handle (broadcast) or a scalar one.
pub(crate) enum Other {
    /// An `aclTensor`.
    Tensor(usize),
    /// An `aclScalar`.
    Scalar(usize),
}

/// Which of the add, sub and mul families: `Add` / `Sub` with their `alpha` handle.
pub(crate) enum Arith {
    /// `self + alpha * other`.
    Add(usize),
    /// `self - alpha * other`.
    Sub(usize),
    /// `self * other`.
    Mul,
}

/// The operator of the add, sub and mul families.
pub(crate) fn arith(
    call: &str,
    o: &Objects,
    (self_, other, out): (usize, Other, usize),
    kind: Arith,
) -> Result<(Work, u64), Fail> {
    let a = tensor(o, call, "self", self_)?;
    let out = tensor(o, call, "out", out)?;
    let b = match other {
        Other::Tensor(h) => Operand::Tensor(tensor(o, call, "other", h)?),
        Other::Scalar(h) => Operand::Scalar(o.scalar(call, "other", h)?),
    };
    let op = match kind {
        Arith::Add(h) => BinaryOp::Add {
            alpha: o.scalar(call, "alpha", h)?,
        },
        Arith::Sub(h) => BinaryOp::Sub {
            alpha: o.scalar(call, "alpha", h)?,
        },
        Arith::Mul => BinaryOp::Mul,
    };
    op_work(
        call,
        TensorOp::Binary(Binary {
            op,
            a: Operand::Tensor(a),
            b,
            out,
        }),
        0,
    )
}

/// What a fill writes.
pub(crate) enum FillValue {
    /// A value of the operator (`aclnnInplaceOne`'s 1).
    Constant(Scalar),
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
    let out = tensor(o, call, "selfRef", self_ref)?;
    let value = match value {
        FillValue::Constant(v) => v,
        FillValue::Scalar(h) => o.scalar(call, "value", h)?,
    };
    op_work(call, TensorOp::Fill(Fill { value, out }), 0)
}

/// `selfRef[...] = src[...]`, `src` broadcast to `selfRef`'s shape and converted to its data
/// type (CANN's copy casts).
pub(crate) fn copy(
    call: &str,
    o: &Objects,
    self_ref: usize,
    src: usize,
) -> Result<(Work, u64), Fail> {
    let out = tensor(o, call, "selfRef", self_ref)?;
    let x = tensor(o, call, "src", src)?;
    op_work(call, TensorOp::Cast(Cast { x, out }), 0)
}

/// The dimensions `dims` (each in `[-rank, rank)`) as indices of a tensor of `rank`.
pub(crate) fn dims_of(call: &str, dims: &[i64], rank: usize) -> Result<Vec<usize>, Fail> {
    let r = rank as i64;
    let mut seen = Vec::with_capacity(dims.len());
    dims.iter()
        .map(|&d| {
            let i = if d < 0 { d + r } else { d };
            usize::try_from(i)
                .ok()
                .filter(|&i| i < rank.max(1))
                .ok_or_else(|| {
                    invalid(
                        call,
                        format!("dimension {d} is out of range for self of rank {rank}"),
                    )
                })
                .and_then(|i| {
                    if seen.contains(&i) {
                        return Err(invalid(
                            call,
                            format!("dimension {d} is named twice in dim {dims:?}"),
                        ));
                    }
                    seen.push(i);
                    Ok(i)
                })
        })
        .collect()
}

/// `kind(self)` over the dimensions `dim` (every dimension when `dim` is empty, as CANN
/// documents), into `out`: `self`'s shape with those dimensions removed, or kept as 1 with
/// `keepDim`. `dtype` must be `out`'s type.
pub(crate) fn reduce(
    call: &str,
    o: &Objects,
    (self_, dim, out): (usize, usize, usize),
    (kind, keep_dim, dtype): (ReduceKind, bool, i32),
    workspace: u64,
) -> Result<(Work, u64), Fail> {
    let x = tensor(o, call, "self", self_)?;
    let out_desc = o.tensor(call, "out", out)?;
    let given = o.int_array(call, "dim", dim)?.clone();
    if dtype != out_desc.dtype {
        return Err(invalid(
            call,
            format!("dtype {dtype} differs from out's {}", out_desc.dtype),
        ));
    }
    let out = tensor(o, call, "out", out)?;
    let dims = dims_of(call, &given, x.rank())?;
    let expected_rank = if keep_dim {
        x.rank()
    } else if dims.is_empty() {
        0
    } else {
        x.rank().saturating_sub(dims.len())
    };
    if out.rank() != expected_rank {
        return Err(invalid(
            call,
            format!(
                "out has shape {:?}; with keepDim {keep_dim} over {given:?} of self's {:?} it has {expected_rank} dimensions",
                out.shape(),
                x.shape()
            ),
        ));
    }
    op_work(
        call,
        TensorOp::Reduce(Reduce { kind, x, dims, out }),
        workspace,
    )
}
