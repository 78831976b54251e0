//! braid's indexing, shape, LayerNorm and position operators as CANN aclnn operators (the
//! [`AclnnModelOperators`](braid_acl_sys::aclnn::AclnnModelOperators) table):
//!
//! | braid | aclnn |
//! |---|---|
//! | `Index` of one 2-D tensor by one index tensor | `aclnnEmbedding` |
//! | any other `Index` | `aclnnIndex` (a `None` entry: an empty tensor, as torch_npu passes) |
//! | `IndexCopy` | `aclnnInplaceIndexCopy`, or `aclnnIndexCopy` into another tensor |
//! | `Cat` | `aclnnCat` |
//! | `Where` of two tensors | `aclnnSWhere` |
//! | `Where` of a scalar into its own `other` | `aclnnInplaceMaskedFillScalar` |
//! | `Triangle` | `aclnnTriu` / `aclnnTril`, in place `aclnnInplaceTriu` / `aclnnInplaceTril` |
//! | `Arange` | `aclnnArange` |
//! | `LayerNorm` | `aclnnLayerNorm` |
//! | `ArgReduce` | `aclnnArgMax` / `aclnnArgMin`, with the values `aclnnMaxDim` / `aclnnMinDim` |
//! | `Cumsum` | `aclnnCumsum` |

use super::kernels::{AclPrepared, Held};
use super::lower::{missing, plan, prepared};
use super::objects::{Executor, IntArray, Scalar, Tensor, TensorList};
use super::AclnnApi;
use braid_stream_core::hal::HalError;
use braid_stream_core::ops::{Operand, Scalar as Value, TensorOp};

/// An optional operand's descriptor (null when absent).
fn optional(
    api: &'static AclnnApi,
    t: Option<&braid_stream_core::Tensor>,
) -> Result<Option<Tensor>, HalError> {
    t.map(|t| Tensor::view(api, t).map_err(HalError::from))
        .transpose()
}

/// The pointer of an optional descriptor.
fn ptr(t: &Option<Tensor>) -> *mut braid_acl_sys::aclnn::aclTensor {
    t.as_ref().map_or(std::ptr::null_mut(), Tensor::as_ptr)
}

/// Plans `op`, one of the operators of this module's table.
pub(super) fn prepare(api: &'static AclnnApi, op: &TensorOp) -> Result<AclPrepared, HalError> {
    let view = |t| Tensor::view(api, t).map_err(HalError::from);
    match op {
        TensorOp::Index(i) => {
            let (x, out) = (view(&i.x)?, view(&i.out)?);
            if let [Some(ids)] = i.indices.as_slice() {
                if i.x.rank() == 2 {
                    let ids = view(ids)?;
                    return plan!(
                        api,
                        model_operators,
                        aclnnEmbeddingGetWorkspaceSize,
                        aclnnEmbedding,
                        (x.as_ptr(), ids.as_ptr(), out.as_ptr()),
                        [x, ids, out]
                    );
                }
            }
            // A dimension taken whole is an empty tensor (of self's type, at self's address).
            let empty = braid_stream_core::Tensor::strided(i.x.ptr(), i.x.dtype(), &[0], &[1])
                .map_err(|e| HalError::UnsupportedOperator(e.to_string()))?;
            let entries = i
                .indices
                .iter()
                .map(|e| view(e.as_ref().unwrap_or(&empty)))
                .collect::<Result<Vec<_>, _>>()?;
            let list = TensorList::new(api, entries)?;
            plan!(
                api,
                model_operators,
                aclnnIndexGetWorkspaceSize,
                aclnnIndex,
                (x.as_ptr(), list.as_ptr(), out.as_ptr()),
                [x, list, out]
            )
        }
        TensorOp::IndexCopy(c) => {
            let (index, source, out) = (view(&c.index)?, view(&c.source)?, view(&c.out)?);
            let dim = c.dim as i64;
            match &c.x {
                None => plan!(
                    api,
                    model_operators,
                    aclnnInplaceIndexCopyGetWorkspaceSize,
                    aclnnInplaceIndexCopy,
                    (out.as_ptr(), dim, index.as_ptr(), source.as_ptr()),
                    [out, index, source]
                ),
                Some(x) => {
                    let x = view(x)?;
                    plan!(
                        api,
                        model_operators,
                        aclnnIndexCopyGetWorkspaceSize,
                        aclnnIndexCopy,
                        (
                            x.as_ptr(),
                            dim,
                            index.as_ptr(),
                            source.as_ptr(),
                            out.as_ptr()
                        ),
                        [x, index, source, out]
                    )
                }
            }
        }
        TensorOp::Cat(c) => {
            let inputs = c.inputs.iter().map(view).collect::<Result<Vec<_>, _>>()?;
            let (list, out) = (TensorList::new(api, inputs)?, view(&c.out)?);
            plan!(
                api,
                model_operators,
                aclnnCatGetWorkspaceSize,
                aclnnCat,
                (list.as_ptr(), c.dim as i64, out.as_ptr()),
                [list, out]
            )
        }
        TensorOp::Where(w) => {
            let (cond, out) = (view(&w.condition)?, view(&w.out)?);
            match (&w.x, &w.y) {
                (Operand::Tensor(x), Operand::Tensor(y)) => {
                    let (x, y) = (view(x)?, view(y)?);
                    plan!(
                        api,
                        model_operators,
                        aclnnSWhereGetWorkspaceSize,
                        aclnnSWhere,
                        (cond.as_ptr(), x.as_ptr(), y.as_ptr(), out.as_ptr()),
                        [cond, x, y, out]
                    )
                }
                (Operand::Scalar(v), Operand::Tensor(y)) if *y == w.out => {
                    let value = Scalar::of(api, *v)?;
                    plan!(
                        api,
                        model_operators,
                        aclnnInplaceMaskedFillScalarGetWorkspaceSize,
                        aclnnInplaceMaskedFillScalar,
                        (out.as_ptr(), cond.as_ptr(), value.as_ptr()),
                        [out, cond, value]
                    )
                }
                _ => Err(HalError::UnsupportedOperator(
                    "where with a scalar operand has no aclnn operator unless it fills its own other operand in place (masked fill): pass the scalar as a one-element tensor".to_string(),
                )),
            }
        }
        TensorOp::Triangle(t) => {
            let out = view(&t.out)?;
            let d = t.diagonal;
            match (t.x == t.out, t.upper) {
                (true, true) => plan!(
                    api,
                    model_operators,
                    aclnnInplaceTriuGetWorkspaceSize,
                    aclnnInplaceTriu,
                    (out.as_ptr(), d),
                    [out]
                ),
                (true, false) => plan!(
                    api,
                    model_operators,
                    aclnnInplaceTrilGetWorkspaceSize,
                    aclnnInplaceTril,
                    (out.as_ptr(), d),
                    [out]
                ),
                (false, upper) => {
                    let x = view(&t.x)?;
                    if upper {
                        plan!(
                            api,
                            model_operators,
                            aclnnTriuGetWorkspaceSize,
                            aclnnTriu,
                            (x.as_ptr(), d, out.as_ptr()),
                            [x, out]
                        )
                    } else {
                        plan!(
                            api,
                            model_operators,
                            aclnnTrilGetWorkspaceSize,
                            aclnnTril,
                            (x.as_ptr(), d, out.as_ptr()),
                            [x, out]
                        )
                    }
                }
            }
        }
        TensorOp::Arange(a) => {
            let n = a.out.numel();
            // aclnnArange takes the end, excluded: one that makes ⌈(end - start) / step⌉ = n.
            let end = match (a.start, a.step) {
                (Value::Int(s), Value::Int(st)) => {
                    Value::Int(s.wrapping_add(st.wrapping_mul(n as i64)))
                }
                (s, st) => Value::Float(s.as_f64() + (n as f64 - 0.5) * st.as_f64()),
            };
            let (start, end, step) = (
                Scalar::of(api, a.start)?,
                Scalar::of(api, end)?,
                Scalar::of(api, a.step)?,
            );
            let out = view(&a.out)?;
            plan!(
                api,
                model_operators,
                aclnnArangeGetWorkspaceSize,
                aclnnArange,
                (start.as_ptr(), end.as_ptr(), step.as_ptr(), out.as_ptr()),
                [start, end, step, out]
            )
        }
        TensorOp::LayerNorm(n) => {
            let (x, out) = (view(&n.x)?, view(&n.out)?);
            let dims: Vec<i64> = n.x.shape()[n.x.rank() - n.normalized..]
                .iter()
                .map(|&d| d as i64)
                .collect();
            let shape = IntArray::new(api, &dims)?;
            let (w, b) = (
                optional(api, n.weight.as_ref())?,
                optional(api, n.bias.as_ref())?,
            );
            let (mean, rstd) = (
                optional(api, n.mean.as_ref())?,
                optional(api, n.rstd.as_ref())?,
            );
            plan!(
                api,
                model_operators,
                aclnnLayerNormGetWorkspaceSize,
                aclnnLayerNorm,
                (
                    x.as_ptr(),
                    shape.as_ptr(),
                    ptr(&w),
                    ptr(&b),
                    n.eps,
                    out.as_ptr(),
                    ptr(&mean),
                    ptr(&rstd)
                ),
                [x, shape, w, b, out, mean, rstd]
            )
        }
        TensorOp::ArgReduce(a) => {
            let (x, indices) = (view(&a.x)?, view(&a.indices)?);
            let keep = a.indices.rank() == a.x.rank() && a.x.rank() > 0;
            let dim = a.dim as i64;
            match (&a.values, a.max) {
                (None, true) => plan!(
                    api,
                    model_operators,
                    aclnnArgMaxGetWorkspaceSize,
                    aclnnArgMax,
                    (x.as_ptr(), dim, keep, indices.as_ptr()),
                    [x, indices]
                ),
                (None, false) => plan!(
                    api,
                    model_operators,
                    aclnnArgMinGetWorkspaceSize,
                    aclnnArgMin,
                    (x.as_ptr(), dim, keep, indices.as_ptr()),
                    [x, indices]
                ),
                (Some(v), max) => {
                    let v = view(v)?;
                    if max {
                        plan!(
                            api,
                            model_operators,
                            aclnnMaxDimGetWorkspaceSize,
                            aclnnMaxDim,
                            (x.as_ptr(), dim, keep, v.as_ptr(), indices.as_ptr()),
                            [x, v, indices]
                        )
                    } else {
                        plan!(
                            api,
                            model_operators,
                            aclnnMinDimGetWorkspaceSize,
                            aclnnMinDim,
                            (x.as_ptr(), dim, keep, v.as_ptr(), indices.as_ptr()),
                            [x, v, indices]
                        )
                    }
                }
            }
        }
        TensorOp::Cumsum(c) => {
            let (x, out) = (view(&c.x)?, view(&c.out)?);
            let dtype = super::acl_data_type(c.out.dtype());
            plan!(
                api,
                model_operators,
                aclnnCumsumGetWorkspaceSize,
                aclnnCumsum,
                (x.as_ptr(), c.dim as i64, dtype, out.as_ptr()),
                [x, out]
            )
        }
        other => Err(HalError::UnsupportedOperator(format!(
            "{} is lowered elsewhere",
            braid_stream_core::ops::OpSpec::name(other)
        ))),
    }
}
