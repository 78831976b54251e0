//! braid's tensor operators ([`braid_stream_core::ops`]) as the CANN aclnn operators of the
//! same meaning: each operand becomes an `aclTensor` of its view (shape, strides, data type),
//! each scalar an `aclScalar`, and the operator's `GetWorkspaceSize` plans it. An aclnn
//! operator the loaded libraries lack is [`HalError::Unsupported`] naming it; an operator with
//! no aclnn equivalent is refused the same way, naming what is missing.
//!
//! | braid | aclnn |
//! |---|---|
//! | `Unary` | `aclnnNeg`, `aclnnSilu`, `aclnnRsqrt`, ... (`GeluTanh`: `aclnnGeluV2` with approximate 1) |
//! | `Binary` of two tensors | `aclnnAdd`, `aclnnSub`, `aclnnMul`, `aclnnDiv`, `aclnnPowTensorTensor`, `aclnnMaximum`, `aclnnMinimum`, `aclnnEqTensor`..., `aclnnBitwiseAndTensor`..., `aclnnLogicalAnd`, `aclnnLogicalOr` |
//! | `Binary` with a scalar `other` | `aclnnAdds`, `aclnnSubs`, `aclnnMuls`, `aclnnDivs`, `aclnnPowTensorScalar`, `aclnnEqScalar`..., `aclnnBitwiseAndScalar`... |
//! | `Binary` `Sub` of a scalar `self` | `aclnnRsubs` |
//! | `Fill` | `aclnnInplaceFillScalar` |
//! | `Cast` | `aclnnCast` (same shape, another type), else `aclnnInplaceCopy` |
//! | `Reduce` | `aclnnReduceSum`, `aclnnMean`, `aclnnAmax` / `aclnnAmin`, `aclnnAny`, `aclnnAll` |
//! | `Softmax` | `aclnnSoftmax`, `aclnnLogSoftmax` |
//! | `Matmul` | `aclnnMm` (2-D), `aclnnMatmul` (batched), `aclnnAddmm` (2-D with a bias) |
//! | `Rope` | `aclnnRotaryPositionEmbedding` |
//! | `Attention` | `aclnnFlashAttentionScore` (see its module for what it cannot express) |
//! | the indexing, shape, LayerNorm and position families | see `lower_model` |
//! | `Random`, `ApplyDropoutMask` | the random family (`super::lower_random`) |
//! | `FormatCast` | `aclnnNpuFormatCast` (`super::lower_format`) |

use super::kernels::{AclPrepared, Held, Kind, Operator};
use super::objects::{Executor, IntArray, LaunchFn, Scalar, Tensor};
use super::AclnnApi;
use crate::error::AclError;
use braid_acl_sys::aclnn::CUBE_MATH_KEEP_DTYPE;
use braid_stream_core::hal::HalError;
use braid_stream_core::ops::{
    Binary, BinaryOp, OpKernel, Operand, Reduce, ReduceKind, TensorOp, Unary, UnaryOp,
};

/// The refusal of an operator the loaded aclnn libraries do not have.
pub(super) fn missing(call: &str) -> HalError {
    HalError::UnsupportedOperator(format!(
        "{call} is not in the loaded aclnn operator libraries"
    ))
}

/// A planned operator, or the planning's error.
pub(super) fn prepared(
    executor: Result<Executor, AclError>,
    launch: LaunchFn,
    call: &'static str,
    held: Vec<Held>,
) -> Result<AclPrepared, HalError> {
    Ok(AclPrepared {
        kind: Kind::Operator(Operator {
            executor: executor?,
            launch,
            call,
            _held: held,
        }),
    })
}

/// Plans aclnn operator `$launch` of table `$table` (optional symbols) through
/// `$get($args..., workspaceSize, executor)`, keeping `$held` until the launch.
macro_rules! plan {
    ($api:expr, $table:ident, $get:ident, $launch:ident, ($($arg:expr),*), [$($held:expr),*]) => {{
        let table = $api.$table();
        match (table.$get, table.$launch) {
            (Some(get), Some(launch)) => {
                let executor = Executor::plan($api, stringify!($get), |ws, ex| {
                    // SAFETY: live descriptors and out pointers; the descriptors stay alive
                    // (held) until the launch has been enqueued.
                    unsafe { get($($arg,)* ws, ex) }
                });
                prepared(
                    executor,
                    launch,
                    stringify!($launch),
                    vec![$(Box::new($held) as Held),*],
                )
            }
            _ => Err(missing(stringify!($launch))),
        }
    }};
}

pub(super) use plan;

/// Plans a required operator of braid's own table.
macro_rules! plan_required {
    ($api:expr, $get:ident, $launch:ident, ($($arg:expr),*), [$($held:expr),*]) => {{
        let table = $api.operators();
        let get = table.$get;
        let executor = Executor::plan($api, stringify!($get), |ws, ex| {
            // SAFETY: as in `plan!`.
            unsafe { get($($arg,)* ws, ex) }
        });
        prepared(
            executor,
            table.$launch,
            stringify!($launch),
            vec![$(Box::new($held) as Held),*],
        )
    }};
}

mod attention;

/// Plans `op` as its aclnn operator (its `GetWorkspaceSize`).
pub(crate) fn prepare(api: &'static AclnnApi, op: &OpKernel) -> Result<AclPrepared, HalError> {
    let view = |t| Tensor::view(api, t).map_err(HalError::from);
    match op.op() {
        TensorOp::Unary(u) => unary(api, u),
        TensorOp::Binary(b) => binary(api, b),
        TensorOp::Fill(f) => {
            let (out, value) = (view(&f.out)?, Scalar::of(api, f.value)?);
            plan_required!(
                api,
                aclnnInplaceFillScalarGetWorkspaceSize,
                aclnnInplaceFillScalar,
                (out.as_ptr(), value.as_ptr()),
                [out, value]
            )
        }
        TensorOp::Cast(c) => {
            let (x, out) = (view(&c.x)?, view(&c.out)?);
            if c.x.shape() == c.out.shape() && c.x.dtype() != c.out.dtype() {
                let dtype = super::acl_data_type(c.out.dtype());
                plan!(
                    api,
                    tensor_operators,
                    aclnnCastGetWorkspaceSize,
                    aclnnCast,
                    (x.as_ptr(), dtype, out.as_ptr()),
                    [x, out]
                )
            } else {
                plan_required!(
                    api,
                    aclnnInplaceCopyGetWorkspaceSize,
                    aclnnInplaceCopy,
                    (out.as_ptr(), x.as_ptr()),
                    [out, x]
                )
            }
        }
        TensorOp::Reduce(r) => reduce(api, r),
        TensorOp::Softmax(s) => {
            let (x, out) = (view(&s.x)?, view(&s.out)?);
            let dim = s.dim as i64;
            if s.log {
                plan!(
                    api,
                    tensor_operators,
                    aclnnLogSoftmaxGetWorkspaceSize,
                    aclnnLogSoftmax,
                    (x.as_ptr(), dim, out.as_ptr()),
                    [x, out]
                )
            } else {
                plan!(
                    api,
                    tensor_operators,
                    aclnnSoftmaxGetWorkspaceSize,
                    aclnnSoftmax,
                    (x.as_ptr(), dim, out.as_ptr()),
                    [x, out]
                )
            }
        }
        TensorOp::RmsNorm(n) => {
            let (x, g, y, r) = (view(&n.x)?, view(&n.gamma)?, view(&n.y)?, view(&n.rstd)?);
            plan_required!(
                api,
                aclnnRmsNormGetWorkspaceSize,
                aclnnRmsNorm,
                (x.as_ptr(), g.as_ptr(), n.eps, y.as_ptr(), r.as_ptr()),
                [x, g, y, r]
            )
        }
        TensorOp::Matmul(m) => {
            let (a, b, out) = (view(&m.a)?, view(&m.b)?, view(&m.out)?);
            let two_d = m.a.rank() == 2 && m.b.rank() == 2;
            match &m.bias {
                None if two_d && m.alpha == 1.0 => plan_required!(
                    api,
                    aclnnMmGetWorkspaceSize,
                    aclnnMm,
                    (a.as_ptr(), b.as_ptr(), out.as_ptr(), CUBE_MATH_KEEP_DTYPE),
                    [a, b, out]
                ),
                None if m.alpha == 1.0 => plan!(
                    api,
                    tensor_operators,
                    aclnnMatmulGetWorkspaceSize,
                    aclnnMatmul,
                    (a.as_ptr(), b.as_ptr(), out.as_ptr(), CUBE_MATH_KEEP_DTYPE),
                    [a, b, out]
                ),
                Some(bias) if two_d => {
                    let bias = view(bias)?;
                    let beta = Scalar::of(api, m.beta.into())?;
                    let alpha = Scalar::of(api, m.alpha.into())?;
                    plan!(
                        api,
                        tensor_operators,
                        aclnnAddmmGetWorkspaceSize,
                        aclnnAddmm,
                        (
                            bias.as_ptr(),
                            a.as_ptr(),
                            b.as_ptr(),
                            beta.as_ptr(),
                            alpha.as_ptr(),
                            out.as_ptr(),
                            CUBE_MATH_KEEP_DTYPE
                        ),
                        [bias, a, b, beta, alpha, out]
                    )
                }
                _ => Err(HalError::UnsupportedOperator(
                    "matmul with a bias over batched operands, or an alpha other than 1 without a bias, has no single aclnn operator".to_string(),
                )),
            }
        }
        TensorOp::Rope(r) => attention::rope(api, r),
        TensorOp::Attention(a) => attention::attention(api, a),
        TensorOp::Random(r) => super::lower_random::random(api, r),
        TensorOp::ApplyDropoutMask(m) => super::lower_random::apply_dropout_mask(api, m),
        TensorOp::FormatCast(f) => super::lower_format::format_cast(api, f),
        other => super::lower_model::prepare(api, other),
    }
}

/// A unary function's operator.
fn unary(api: &'static AclnnApi, u: &Unary) -> Result<AclPrepared, HalError> {
    let (x, out) = (Tensor::view(api, &u.x)?, Tensor::view(api, &u.out)?);
    macro_rules! one {
        ($get:ident, $launch:ident) => {
            plan!(
                api,
                tensor_operators,
                $get,
                $launch,
                (x.as_ptr(), out.as_ptr()),
                [x, out]
            )
        };
    }
    match u.op {
        UnaryOp::Neg => one!(aclnnNegGetWorkspaceSize, aclnnNeg),
        UnaryOp::Abs => one!(aclnnAbsGetWorkspaceSize, aclnnAbs),
        UnaryOp::Relu => one!(aclnnReluGetWorkspaceSize, aclnnRelu),
        UnaryOp::Exp => one!(aclnnExpGetWorkspaceSize, aclnnExp),
        UnaryOp::Log => one!(aclnnLogGetWorkspaceSize, aclnnLog),
        UnaryOp::Sqrt => one!(aclnnSqrtGetWorkspaceSize, aclnnSqrt),
        UnaryOp::Rsqrt => one!(aclnnRsqrtGetWorkspaceSize, aclnnRsqrt),
        UnaryOp::Reciprocal => one!(aclnnReciprocalGetWorkspaceSize, aclnnReciprocal),
        UnaryOp::Sin => one!(aclnnSinGetWorkspaceSize, aclnnSin),
        UnaryOp::Cos => one!(aclnnCosGetWorkspaceSize, aclnnCos),
        UnaryOp::Tanh => one!(aclnnTanhGetWorkspaceSize, aclnnTanh),
        UnaryOp::Sigmoid => one!(aclnnSigmoidGetWorkspaceSize, aclnnSigmoid),
        UnaryOp::Silu => one!(aclnnSiluGetWorkspaceSize, aclnnSilu),
        UnaryOp::Gelu => one!(aclnnGeluGetWorkspaceSize, aclnnGelu),
        UnaryOp::Erf => one!(aclnnErfGetWorkspaceSize, aclnnErf),
        UnaryOp::Floor => one!(aclnnFloorGetWorkspaceSize, aclnnFloor),
        UnaryOp::Ceil => one!(aclnnCeilGetWorkspaceSize, aclnnCeil),
        UnaryOp::BitwiseNot => one!(aclnnBitwiseNotGetWorkspaceSize, aclnnBitwiseNot),
        UnaryOp::LogicalNot => one!(aclnnLogicalNotGetWorkspaceSize, aclnnLogicalNot),
        UnaryOp::GeluTanh => plan!(
            api,
            tensor_operators,
            aclnnGeluV2GetWorkspaceSize,
            aclnnGeluV2,
            (x.as_ptr(), 1i64, out.as_ptr()),
            [x, out]
        ),
    }
}

/// A binary function's operator.
fn binary(api: &'static AclnnApi, b: &Binary) -> Result<AclPrepared, HalError> {
    let out = Tensor::view(api, &b.out)?;
    match (&b.a, &b.b) {
        (Operand::Tensor(a), Operand::Tensor(o)) => {
            let (x, y) = (Tensor::view(api, a)?, Tensor::view(api, o)?);
            macro_rules! two {
                ($table:ident, $get:ident, $launch:ident) => {
                    plan!(
                        api,
                        $table,
                        $get,
                        $launch,
                        (x.as_ptr(), y.as_ptr(), out.as_ptr()),
                        [x, y, out]
                    )
                };
            }
            match b.op {
                BinaryOp::Add { alpha } => {
                    let alpha = Scalar::of(api, alpha)?;
                    plan_required!(
                        api,
                        aclnnAddGetWorkspaceSize,
                        aclnnAdd,
                        (x.as_ptr(), y.as_ptr(), alpha.as_ptr(), out.as_ptr()),
                        [x, y, alpha, out]
                    )
                }
                BinaryOp::Sub { alpha } => {
                    let alpha = Scalar::of(api, alpha)?;
                    plan!(
                        api,
                        client_operators,
                        aclnnSubGetWorkspaceSize,
                        aclnnSub,
                        (x.as_ptr(), y.as_ptr(), alpha.as_ptr(), out.as_ptr()),
                        [x, y, alpha, out]
                    )
                }
                BinaryOp::Mul => two!(client_operators, aclnnMulGetWorkspaceSize, aclnnMul),
                BinaryOp::Div => two!(tensor_operators, aclnnDivGetWorkspaceSize, aclnnDiv),
                BinaryOp::Pow => two!(
                    tensor_operators,
                    aclnnPowTensorTensorGetWorkspaceSize,
                    aclnnPowTensorTensor
                ),
                BinaryOp::Maximum => {
                    two!(tensor_operators, aclnnMaximumGetWorkspaceSize, aclnnMaximum)
                }
                BinaryOp::Minimum => {
                    two!(tensor_operators, aclnnMinimumGetWorkspaceSize, aclnnMinimum)
                }
                BinaryOp::Eq => two!(tensor_operators, aclnnEqTensorGetWorkspaceSize, aclnnEqTensor),
                BinaryOp::Ne => two!(tensor_operators, aclnnNeTensorGetWorkspaceSize, aclnnNeTensor),
                BinaryOp::Lt => two!(tensor_operators, aclnnLtTensorGetWorkspaceSize, aclnnLtTensor),
                BinaryOp::Le => two!(tensor_operators, aclnnLeTensorGetWorkspaceSize, aclnnLeTensor),
                BinaryOp::Gt => two!(tensor_operators, aclnnGtTensorGetWorkspaceSize, aclnnGtTensor),
                BinaryOp::Ge => two!(tensor_operators, aclnnGeTensorGetWorkspaceSize, aclnnGeTensor),
                BinaryOp::BitwiseAnd => two!(
                    tensor_operators,
                    aclnnBitwiseAndTensorGetWorkspaceSize,
                    aclnnBitwiseAndTensor
                ),
                BinaryOp::BitwiseOr => two!(
                    tensor_operators,
                    aclnnBitwiseOrTensorGetWorkspaceSize,
                    aclnnBitwiseOrTensor
                ),
                BinaryOp::BitwiseXor => two!(
                    tensor_operators,
                    aclnnBitwiseXorTensorGetWorkspaceSize,
                    aclnnBitwiseXorTensor
                ),
                BinaryOp::LogicalAnd => {
                    two!(tensor_operators, aclnnLogicalAndGetWorkspaceSize, aclnnLogicalAnd)
                }
                BinaryOp::LogicalOr => {
                    two!(tensor_operators, aclnnLogicalOrGetWorkspaceSize, aclnnLogicalOr)
                }
            }
        }
        (Operand::Tensor(a), Operand::Scalar(s)) => {
            let (x, s) = (Tensor::view(api, a)?, Scalar::of(api, *s)?);
            macro_rules! with_scalar {
                ($table:ident, $get:ident, $launch:ident) => {
                    plan!(
                        api,
                        $table,
                        $get,
                        $launch,
                        (x.as_ptr(), s.as_ptr(), out.as_ptr()),
                        [x, s, out]
                    )
                };
            }
            match b.op {
                BinaryOp::Add { alpha } | BinaryOp::Sub { alpha } => {
                    let alpha = Scalar::of(api, alpha)?;
                    let args = (x.as_ptr(), s.as_ptr(), alpha.as_ptr(), out.as_ptr());
                    if matches!(b.op, BinaryOp::Add { .. }) {
                        plan!(
                            api,
                            client_operators,
                            aclnnAddsGetWorkspaceSize,
                            aclnnAdds,
                            (args.0, args.1, args.2, args.3),
                            [x, s, alpha, out]
                        )
                    } else {
                        plan!(
                            api,
                            client_operators,
                            aclnnSubsGetWorkspaceSize,
                            aclnnSubs,
                            (args.0, args.1, args.2, args.3),
                            [x, s, alpha, out]
                        )
                    }
                }
                BinaryOp::Mul => plan_required!(
                    api,
                    aclnnMulsGetWorkspaceSize,
                    aclnnMuls,
                    (x.as_ptr(), s.as_ptr(), out.as_ptr()),
                    [x, s, out]
                ),
                BinaryOp::Div => with_scalar!(tensor_operators, aclnnDivsGetWorkspaceSize, aclnnDivs),
                BinaryOp::Pow => with_scalar!(
                    tensor_operators,
                    aclnnPowTensorScalarGetWorkspaceSize,
                    aclnnPowTensorScalar
                ),
                BinaryOp::Eq => with_scalar!(tensor_operators, aclnnEqScalarGetWorkspaceSize, aclnnEqScalar),
                BinaryOp::Ne => with_scalar!(tensor_operators, aclnnNeScalarGetWorkspaceSize, aclnnNeScalar),
                BinaryOp::Lt => with_scalar!(tensor_operators, aclnnLtScalarGetWorkspaceSize, aclnnLtScalar),
                BinaryOp::Le => with_scalar!(tensor_operators, aclnnLeScalarGetWorkspaceSize, aclnnLeScalar),
                BinaryOp::Gt => with_scalar!(tensor_operators, aclnnGtScalarGetWorkspaceSize, aclnnGtScalar),
                BinaryOp::Ge => with_scalar!(tensor_operators, aclnnGeScalarGetWorkspaceSize, aclnnGeScalar),
                BinaryOp::BitwiseAnd => with_scalar!(
                    tensor_operators,
                    aclnnBitwiseAndScalarGetWorkspaceSize,
                    aclnnBitwiseAndScalar
                ),
                BinaryOp::BitwiseOr => with_scalar!(
                    tensor_operators,
                    aclnnBitwiseOrScalarGetWorkspaceSize,
                    aclnnBitwiseOrScalar
                ),
                BinaryOp::BitwiseXor => with_scalar!(
                    tensor_operators,
                    aclnnBitwiseXorScalarGetWorkspaceSize,
                    aclnnBitwiseXorScalar
                ),
                op => Err(HalError::UnsupportedOperator(format!(
                    "{} of a tensor and a scalar has no aclnn operator: pass the scalar as a one-element tensor",
                    op.name()
                ))),
            }
        }
        (Operand::Scalar(s), Operand::Tensor(t)) => match b.op {
            BinaryOp::Sub { alpha } => {
                let (x, s, alpha) = (
                    Tensor::view(api, t)?,
                    Scalar::of(api, *s)?,
                    Scalar::of(api, alpha)?,
                );
                plan!(
                    api,
                    tensor_operators,
                    aclnnRsubsGetWorkspaceSize,
                    aclnnRsubs,
                    (x.as_ptr(), s.as_ptr(), alpha.as_ptr(), out.as_ptr()),
                    [x, s, alpha, out]
                )
            }
            op => Err(HalError::UnsupportedOperator(format!(
                "{} of a scalar and a tensor has no aclnn operator: swap the operands or pass the scalar as a one-element tensor",
                op.name()
            ))),
        },
        (Operand::Scalar(_), Operand::Scalar(_)) => Err(HalError::UnsupportedOperator(format!(
            "{} of two scalars has no aclnn operator: fill the output instead",
            b.op.name()
        ))),
    }
}

/// A reduction's operator.
fn reduce(api: &'static AclnnApi, r: &Reduce) -> Result<AclPrepared, HalError> {
    let (x, out) = (Tensor::view(api, &r.x)?, Tensor::view(api, &r.out)?);
    let keep = r.out.rank() == r.x.rank() && r.x.rank() > 0;
    let dims: Vec<i64> = if r.dims.is_empty() {
        (0..r.x.rank() as i64).collect()
    } else {
        r.dims.iter().map(|&d| d as i64).collect()
    };
    let dims = IntArray::new(api, &dims)?;
    let dtype = super::acl_data_type(r.out.dtype());
    macro_rules! over_dims {
        ($get:ident, $launch:ident) => {
            plan!(
                api,
                tensor_operators,
                $get,
                $launch,
                (x.as_ptr(), dims.as_ptr(), keep, out.as_ptr()),
                [x, dims, out]
            )
        };
    }
    match r.kind {
        ReduceKind::Sum => plan_required!(
            api,
            aclnnReduceSumGetWorkspaceSize,
            aclnnReduceSum,
            (x.as_ptr(), dims.as_ptr(), keep, dtype, out.as_ptr()),
            [x, dims, out]
        ),
        ReduceKind::Mean => plan!(
            api,
            tensor_operators,
            aclnnMeanGetWorkspaceSize,
            aclnnMean,
            (x.as_ptr(), dims.as_ptr(), keep, dtype, out.as_ptr()),
            [x, dims, out]
        ),
        ReduceKind::Max => over_dims!(aclnnAmaxGetWorkspaceSize, aclnnAmax),
        ReduceKind::Min => over_dims!(aclnnAminGetWorkspaceSize, aclnnAmin),
        ReduceKind::Any => over_dims!(aclnnAnyGetWorkspaceSize, aclnnAny),
        ReduceKind::All => over_dims!(aclnnAllGetWorkspaceSize, aclnnAll),
        ReduceKind::Prod => Err(HalError::UnsupportedOperator(
            "reduce_prod has no aclnn operator braid binds yet".to_string(),
        )),
    }
}
