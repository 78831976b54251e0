//! The exported aclnn operators of [`AclnnTensorOperators`]: each reads its descriptors and
//! plans one of braid's tensor operators, which checks and computes it as braid's Rust API
//! does (activations and other unary functions, the comparison, bitwise and logical
//! families with tensor or scalar operands, division, powers, casts, the matmul family,
//! softmax, and reductions).
//!
//! [`AclnnTensorOperators`]: braid_acl_sys::aclnn::AclnnTensorOperators

use super::exports::{launch, launcher, plan, planner};
use super::ops::{dims_of, reduce};
use super::{op_work, tensor, Objects, Work};
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{
    aclDataType, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclnnStatus,
    ACLNN_ERR_PARAM_INVALID,
};
use braid_stream_core::ops::{
    Binary, BinaryOp, Cast, Matmul, Operand, Reduce, ReduceKind, Softmax, TensorOp, Unary, UnaryOp,
};
use braid_stream_core::tensor::Tensor;
use std::ffi::c_void;

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

launcher!(
    aclnnNeg,
    aclnnAbs,
    aclnnRelu,
    aclnnExp,
    aclnnLog,
    aclnnSqrt,
    aclnnRsqrt,
    aclnnReciprocal,
    aclnnSin,
    aclnnCos,
    aclnnTanh,
    aclnnSigmoid,
    aclnnSilu,
    aclnnGelu,
    aclnnErf,
    aclnnFloor,
    aclnnCeil,
    aclnnBitwiseNot,
    aclnnLogicalNot,
    aclnnGeluV2,
    aclnnDiv,
    aclnnMaximum,
    aclnnMinimum,
    aclnnEqTensor,
    aclnnNeTensor,
    aclnnLtTensor,
    aclnnLeTensor,
    aclnnGtTensor,
    aclnnGeTensor,
    aclnnBitwiseAndTensor,
    aclnnBitwiseOrTensor,
    aclnnBitwiseXorTensor,
    aclnnLogicalAnd,
    aclnnLogicalOr,
    aclnnPowTensorTensor,
    aclnnDivs,
    aclnnEqScalar,
    aclnnNeScalar,
    aclnnLtScalar,
    aclnnLeScalar,
    aclnnGtScalar,
    aclnnGeScalar,
    aclnnBitwiseAndScalar,
    aclnnBitwiseOrScalar,
    aclnnBitwiseXorScalar,
    aclnnPowTensorScalar,
    aclnnRsubs,
    aclnnCast,
    aclnnMatmul,
    aclnnBatchMatMul,
    aclnnAddmm,
    aclnnSoftmax,
    aclnnLogSoftmax,
    aclnnMean,
    aclnnAmax,
    aclnnAmin,
    aclnnAny,
    aclnnAll,
    aclnnMax,
    aclnnMin
);

/// `out = op(self)`.
fn unary(call: &str, o: &Objects, op: UnaryOp, x: usize, out: usize) -> Result<(Work, u64), Fail> {
    let (x, out) = (tensor(o, call, "self", x)?, tensor(o, call, "out", out)?);
    op_work(call, TensorOp::Unary(Unary { op, x, out }), 0)
}

/// Exports `GetWorkspaceSize(self, out, ...)` of a unary function.
macro_rules! unary_exports {
    ($($name:ident => $op:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, out, workspaceSize, executor)`: `out = ", stringify!($op), "(self)`.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    unary(CALL, o, $op, self_ as usize, out as usize)
                })
            }
        }
    )*};
}

unary_exports!(
    aclnnNegGetWorkspaceSize => UnaryOp::Neg,
    aclnnAbsGetWorkspaceSize => UnaryOp::Abs,
    aclnnReluGetWorkspaceSize => UnaryOp::Relu,
    aclnnExpGetWorkspaceSize => UnaryOp::Exp,
    aclnnLogGetWorkspaceSize => UnaryOp::Log,
    aclnnSqrtGetWorkspaceSize => UnaryOp::Sqrt,
    aclnnRsqrtGetWorkspaceSize => UnaryOp::Rsqrt,
    aclnnReciprocalGetWorkspaceSize => UnaryOp::Reciprocal,
    aclnnSinGetWorkspaceSize => UnaryOp::Sin,
    aclnnCosGetWorkspaceSize => UnaryOp::Cos,
    aclnnTanhGetWorkspaceSize => UnaryOp::Tanh,
    aclnnSigmoidGetWorkspaceSize => UnaryOp::Sigmoid,
    aclnnSiluGetWorkspaceSize => UnaryOp::Silu,
    aclnnGeluGetWorkspaceSize => UnaryOp::Gelu,
    aclnnErfGetWorkspaceSize => UnaryOp::Erf,
    aclnnFloorGetWorkspaceSize => UnaryOp::Floor,
    aclnnCeilGetWorkspaceSize => UnaryOp::Ceil,
    aclnnBitwiseNotGetWorkspaceSize => UnaryOp::BitwiseNot,
    aclnnLogicalNotGetWorkspaceSize => UnaryOp::LogicalNot,
);

planner! {
    /// `aclnnGeluV2GetWorkspaceSize(self, approximate, out, workspaceSize, executor)`: GELU
    /// with the error function (`approximate` 0, "none") or its tanh approximation (1).
    fn aclnnGeluV2GetWorkspaceSize(
        self_: *const aclTensor,
        approximate: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        let op = match approximate {
            0 => UnaryOp::Gelu,
            1 => UnaryOp::GeluTanh,
            other => {
                return Err(invalid(
                    CALL,
                    format!("approximate is {other}; it takes 0 (none) or 1 (tanh)"),
                ))
            }
        };
        unary(CALL, o, op, self_ as usize, out as usize)
    }
}

/// `out = self ∘ other` for tensors or scalars.
fn binary(
    call: &str,
    o: &Objects,
    op: BinaryOp,
    a: Operand,
    b: Operand,
    out: usize,
) -> Result<(Work, u64), Fail> {
    let out = tensor(o, call, "out", out)?;
    op_work(call, TensorOp::Binary(Binary { op, a, b, out }), 0)
}

/// Exports `GetWorkspaceSize(self, other, out, ...)` of a binary function of two tensors.
macro_rules! tensor_tensor_exports {
    ($($name:ident => $op:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, other, out, workspaceSize, executor)`: `out = ", stringify!($op), "(self, other)`, broadcast.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            other: *const aclTensor,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    let a = Operand::Tensor(tensor(o, CALL, "self", self_ as usize)?);
                    let b = Operand::Tensor(tensor(o, CALL, "other", other as usize)?);
                    binary(CALL, o, $op, a, b, out as usize)
                })
            }
        }
    )*};
}

tensor_tensor_exports!(
    aclnnDivGetWorkspaceSize => BinaryOp::Div,
    aclnnMaximumGetWorkspaceSize => BinaryOp::Maximum,
    aclnnMinimumGetWorkspaceSize => BinaryOp::Minimum,
    aclnnEqTensorGetWorkspaceSize => BinaryOp::Eq,
    aclnnNeTensorGetWorkspaceSize => BinaryOp::Ne,
    aclnnLtTensorGetWorkspaceSize => BinaryOp::Lt,
    aclnnLeTensorGetWorkspaceSize => BinaryOp::Le,
    aclnnGtTensorGetWorkspaceSize => BinaryOp::Gt,
    aclnnGeTensorGetWorkspaceSize => BinaryOp::Ge,
    aclnnBitwiseAndTensorGetWorkspaceSize => BinaryOp::BitwiseAnd,
    aclnnBitwiseOrTensorGetWorkspaceSize => BinaryOp::BitwiseOr,
    aclnnBitwiseXorTensorGetWorkspaceSize => BinaryOp::BitwiseXor,
    aclnnLogicalAndGetWorkspaceSize => BinaryOp::LogicalAnd,
    aclnnLogicalOrGetWorkspaceSize => BinaryOp::LogicalOr,
    aclnnPowTensorTensorGetWorkspaceSize => BinaryOp::Pow,
);

/// Exports `GetWorkspaceSize(self, other, out, ...)` of a binary function of a tensor and a
/// scalar.
macro_rules! tensor_scalar_exports {
    ($($name:ident => $op:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, other, out, workspaceSize, executor)`: `out = ", stringify!($op), "(self, other)` for a scalar `other`.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            other: *const aclScalar,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    let a = Operand::Tensor(tensor(o, CALL, "self", self_ as usize)?);
                    let b = Operand::Scalar(o.scalar(CALL, "other", other as usize)?);
                    binary(CALL, o, $op, a, b, out as usize)
                })
            }
        }
    )*};
}

tensor_scalar_exports!(
    aclnnDivsGetWorkspaceSize => BinaryOp::Div,
    aclnnEqScalarGetWorkspaceSize => BinaryOp::Eq,
    aclnnNeScalarGetWorkspaceSize => BinaryOp::Ne,
    aclnnLtScalarGetWorkspaceSize => BinaryOp::Lt,
    aclnnLeScalarGetWorkspaceSize => BinaryOp::Le,
    aclnnGtScalarGetWorkspaceSize => BinaryOp::Gt,
    aclnnGeScalarGetWorkspaceSize => BinaryOp::Ge,
    aclnnBitwiseAndScalarGetWorkspaceSize => BinaryOp::BitwiseAnd,
    aclnnBitwiseOrScalarGetWorkspaceSize => BinaryOp::BitwiseOr,
    aclnnBitwiseXorScalarGetWorkspaceSize => BinaryOp::BitwiseXor,
    aclnnPowTensorScalarGetWorkspaceSize => BinaryOp::Pow,
);

planner! {
    /// `aclnnRsubsGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`: `out =
    /// other - alpha · self` for a scalar `other`.
    fn aclnnRsubsGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclScalar,
        alpha: *const aclScalar,
        out: *mut aclTensor,
    ) |CALL, o| {
        let x = Operand::Tensor(tensor(o, CALL, "self", self_ as usize)?);
        let other = Operand::Scalar(o.scalar(CALL, "other", other as usize)?);
        let alpha = o.scalar(CALL, "alpha", alpha as usize)?;
        binary(CALL, o, BinaryOp::Sub { alpha }, other, x, out as usize)
    }

    /// `aclnnCastGetWorkspaceSize(self, dtype, out, workspaceSize, executor)`: `out = self`
    /// converted to `dtype`, which is `out`'s type; the shapes are equal.
    fn aclnnCastGetWorkspaceSize(
        self_: *const aclTensor,
        dtype: aclDataType,
        out: *mut aclTensor,
    ) |CALL, o| {
        let (x, out) = (
            tensor(o, CALL, "self", self_ as usize)?,
            tensor(o, CALL, "out", out as usize)?,
        );
        if braid_acl_sys::dtypes::acl_data_type(out.dtype()) != dtype {
            return Err(invalid(
                CALL,
                format!("dtype {dtype} differs from out's {}", out.dtype()),
            ));
        }
        if x.shape() != out.shape() {
            return Err(invalid(
                CALL,
                format!(
                    "out has shape {:?}; it must be self's {:?}",
                    out.shape(),
                    x.shape()
                ),
            ));
        }
        op_work(CALL, TensorOp::Cast(Cast { x, out }), 0)
    }
}

/// The matmul family's operator: `out = beta·bias + alpha·(a × b)`.
fn matmul(
    call: &str,
    o: &Objects,
    (a, b, out): (usize, usize, usize),
    bias: Option<(usize, f64)>,
    alpha: f64,
    exact_rank: Option<usize>,
) -> Result<(Work, u64), Fail> {
    let (mut a, mut b, mut out) = (
        tensor(o, call, "self", a)?,
        tensor(o, call, "mat2", b)?,
        tensor(o, call, "out", out)?,
    );
    if exact_rank.is_none() {
        // torch.matmul's rule for vectors (aclnnMatmul takes them): a 1-D self is a row,
        // a 1-D mat2 a column, and that dimension is not in out.
        let vector = |call: &str, t: &Tensor, role: &str, dim: usize| {
            t.unsqueeze(dim)
                .map_err(|e| invalid(call, format!("{role}: {e}")))
        };
        if b.rank() == 1 && a.rank() >= 1 {
            b = vector(call, &b, "mat2", 1)?;
            out = vector(call, &out, "out", out.rank())?;
        }
        if a.rank() == 1 {
            a = vector(call, &a, "self", 0)?;
            let at = out.rank().saturating_sub(1);
            out = vector(call, &out, "out", at)?;
        }
    }
    if let Some(rank) = exact_rank {
        if a.rank() != rank || b.rank() != rank {
            return Err(invalid(
                call,
                format!(
                    "self and mat2 must have {rank} dimensions, have shapes {:?} and {:?}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
    }
    let (bias, beta) = match bias {
        Some((h, beta)) => (Some(tensor(o, call, "bias", h)?), beta),
        None => (None, 1.0),
    };
    let mm = Matmul {
        a,
        b,
        bias,
        out,
        alpha,
        beta,
    };
    op_work(call, TensorOp::Matmul(mm), 0)
}

/// `aclnnMatmulGetWorkspaceSize(self, mat2, out, cubeMathType, workspaceSize, executor)`:
/// batched products with broadcast batch dimensions; a one-dimensional operand is a row
/// (`self`) or a column (`mat2`) whose dimension `out` does not have, as in `torch.matmul`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnMatmulGetWorkspaceSize(
    self_: *const aclTensor,
    mat2: *const aclTensor,
    out: *mut aclTensor,
    _cube_math_type: i8,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnMatmulGetWorkspaceSize";
    let tensors = (self_ as usize, mat2 as usize, out as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            matmul(CALL, o, tensors, None, 1.0, None)
        })
    }
}

/// `aclnnBatchMatMulGetWorkspaceSize(self, mat2, out, cubeMathType, workspaceSize,
/// executor)`: 3-D operands.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnBatchMatMulGetWorkspaceSize(
    self_: *const aclTensor,
    mat2: *const aclTensor,
    out: *mut aclTensor,
    _cube_math_type: i8,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnBatchMatMulGetWorkspaceSize";
    let tensors = (self_ as usize, mat2 as usize, out as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            matmul(CALL, o, tensors, None, 1.0, Some(3))
        })
    }
}

/// `aclnnAddmmGetWorkspaceSize(self, mat1, mat2, beta, alpha, out, cubeMathType,
/// workspaceSize, executor)`: `out = beta·self + alpha·(mat1 × mat2)`, 2-D, `self`
/// broadcast.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn aclnnAddmmGetWorkspaceSize(
    self_: *const aclTensor,
    mat1: *const aclTensor,
    mat2: *const aclTensor,
    beta: *const aclScalar,
    alpha: *const aclScalar,
    out: *mut aclTensor,
    _cube_math_type: i8,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnAddmmGetWorkspaceSize";
    let tensors = (mat1 as usize, mat2 as usize, out as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let beta = o.scalar(CALL, "beta", beta as usize)?.as_f64();
            let alpha = o.scalar(CALL, "alpha", alpha as usize)?.as_f64();
            matmul(
                CALL,
                o,
                tensors,
                Some((self_ as usize, beta)),
                alpha,
                Some(2),
            )
        })
    }
}

/// Softmax (or log-softmax) of `self` along `dim` (in `[-rank, rank)`).
fn softmax(
    call: &str,
    o: &Objects,
    x: usize,
    dim: i64,
    out: usize,
    log: bool,
) -> Result<(Work, u64), Fail> {
    let (x, out) = (tensor(o, call, "self", x)?, tensor(o, call, "out", out)?);
    let dim = dims_of(call, &[dim], x.rank())?[0];
    op_work(call, TensorOp::Softmax(Softmax { x, dim, log, out }), 0)
}

planner! {
    /// `aclnnSoftmaxGetWorkspaceSize(self, dim, out, workspaceSize, executor)`.
    fn aclnnSoftmaxGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        softmax(CALL, o, self_ as usize, dim, out as usize, false)
    }

    /// `aclnnLogSoftmaxGetWorkspaceSize(self, dim, out, workspaceSize, executor)`.
    fn aclnnLogSoftmaxGetWorkspaceSize(
        self_: *const aclTensor,
        dim: i64,
        out: *mut aclTensor,
    ) |CALL, o| {
        softmax(CALL, o, self_ as usize, dim, out as usize, true)
    }
}

/// `aclnnMeanGetWorkspaceSize(self, dim, keepDim, dtype, out, workspaceSize, executor)`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnMeanGetWorkspaceSize(
    self_: *const aclTensor,
    dim: *const aclIntArray,
    keep_dim: bool,
    dtype: aclDataType,
    out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnMeanGetWorkspaceSize";
    let handles = (self_ as usize, dim as usize, out as usize);
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            reduce(CALL, o, handles, (ReduceKind::Mean, keep_dim, dtype), 0)
        })
    }
}

/// Exports `GetWorkspaceSize(self, dim, keepDim, out, ...)` of a reduction over dimensions.
macro_rules! reduce_dim_exports {
    ($($name:ident => $kind:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, dim, keepDim, out, workspaceSize, executor)`.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            dim: *const aclIntArray,
            keep_dim: bool,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            let handles = (self_ as usize, dim as usize, out as usize);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    let dtype = o.tensor(CALL, "out", out as usize)?.dtype;
                    reduce(CALL, o, handles, ($kind, keep_dim, dtype), 0)
                })
            }
        }
    )*};
}

reduce_dim_exports!(
    aclnnAmaxGetWorkspaceSize => ReduceKind::Max,
    aclnnAminGetWorkspaceSize => ReduceKind::Min,
    aclnnAnyGetWorkspaceSize => ReduceKind::Any,
    aclnnAllGetWorkspaceSize => ReduceKind::All,
);

/// Exports `GetWorkspaceSize(self, out, ...)` of a reduction over every element.
macro_rules! reduce_all_exports {
    ($($name:ident => $kind:expr),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "(self, out, workspaceSize, executor)`: over every element.")]
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            self_: *const aclTensor,
            out: *mut aclTensor,
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const CALL: &str = stringify!($name);
            // SAFETY: forwarded.
            unsafe {
                plan(CALL, workspace_size, executor, |o| {
                    let (x, out) = (
                        tensor(o, CALL, "self", self_ as usize)?,
                        tensor(o, CALL, "out", out as usize)?,
                    );
                    let r = Reduce { kind: $kind, x, dims: Vec::new(), out };
                    op_work(CALL, TensorOp::Reduce(r), 0)
                })
            }
        }
    )*};
}

reduce_all_exports!(
    aclnnMaxGetWorkspaceSize => ReduceKind::Max,
    aclnnMinGetWorkspaceSize => ReduceKind::Min,
);

braid_acl_sys::aclnn_tensor_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::tensor_operator_fns;)
);
