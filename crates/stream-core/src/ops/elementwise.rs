//! Element-wise operators: [`Unary`], [`Binary`] (tensor or scalar operands, broadcast),
//! [`Fill`] and [`Cast`].
//!
//! How they compute, for every backend: each element is computed in a *domain* chosen from
//! its operands' types ([`Domain`]): float64 if any operand is float64, else float32 if any
//! is a float (float16 and bfloat16 widen to float32, as a device's vector units do), else
//! int64 (bool counts as 0 and 1); the result is converted to `out`'s data type as it is
//! stored (rounded to nearest even for the narrow floats, truncated toward zero and
//! wrapped for the integers, non-zero for bool). Comparisons choose their domain from their
//! inputs only and store 0 or 1.

use super::check::{broadcasts_to, dtype_in, same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse, TensorOp};
use crate::dtype::{DType, DTypeKind};
use crate::kernel::Kernel;
use crate::tensor::{broadcast_shapes, Tensor};
use std::fmt;

/// A scalar operand: `aclScalar`'s value, with its kind.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Scalar {
    /// A floating-point value.
    Float(f64),
    /// An integer value.
    Int(i64),
    /// A boolean value.
    Bool(bool),
}

impl Scalar {
    /// Its value as `f64` (an integer beyond 2^53 rounds).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Float(v) => v,
            Scalar::Int(v) => v as f64,
            Scalar::Bool(v) => f64::from(u8::from(v)),
        }
    }

    /// Its value as `i64` (a float truncated toward zero, saturating; NaN is 0).
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Float(v) => v as i64,
            Scalar::Int(v) => v,
            Scalar::Bool(v) => i64::from(v),
        }
    }

    /// The kind of value it is.
    pub fn kind(self) -> DTypeKind {
        match self {
            Scalar::Float(_) => DTypeKind::Float,
            Scalar::Int(_) => DTypeKind::Int,
            Scalar::Bool(_) => DTypeKind::Bool,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Float(v) => write!(f, "{v}"),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Bool(v) => write!(f, "{v}"),
        }
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}

impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(f64::from(v))
    }
}

impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}

impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

/// An input of a binary operator: a tensor or a scalar.
#[derive(Clone, PartialEq, Debug)]
pub enum Operand {
    /// A tensor, broadcast to the output's shape.
    Tensor(Tensor),
    /// One value for every element.
    Scalar(Scalar),
}

impl Operand {
    /// The tensor, if it is one.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Operand::Tensor(t) => Some(t),
            Operand::Scalar(_) => None,
        }
    }

    /// The kind of values it holds.
    pub fn kind(&self) -> DTypeKind {
        match self {
            Operand::Tensor(t) => t.dtype().kind(),
            Operand::Scalar(s) => s.kind(),
        }
    }

    /// Whether it is (or holds) float64.
    fn is_f64(&self) -> bool {
        matches!(self, Operand::Tensor(t) if t.dtype() == DType::F64)
    }
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Self {
        Operand::Tensor(t)
    }
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Self {
        Operand::Tensor(t.clone())
    }
}

impl From<Scalar> for Operand {
    fn from(s: Scalar) -> Self {
        Operand::Scalar(s)
    }
}

/// What element-wise work computes in: float64 if any operand is float64, else float32 if any
/// is a float, else int64.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Domain {
    /// float32 (float16 and bfloat16 widen to it).
    F32,
    /// float64.
    F64,
    /// int64 (every integer type and bool).
    I64,
}

impl Domain {
    /// The domain of operands of these kinds, any of them float64 or not.
    pub fn of(kinds: impl IntoIterator<Item = DTypeKind>, any_f64: bool) -> Domain {
        if any_f64 {
            return Domain::F64;
        }
        if kinds.into_iter().any(|k| k == DTypeKind::Float) {
            Domain::F32
        } else {
            Domain::I64
        }
    }

    /// The domain of one data type.
    pub fn of_dtype(dtype: DType) -> Domain {
        Domain::of([dtype.kind()], dtype == DType::F64)
    }
}

/// An element-wise function of one operand.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `max(x, 0)`.
    Relu,
    /// `e^x`.
    Exp,
    /// `ln x`.
    Log,
    /// `√x`.
    Sqrt,
    /// `1/√x`.
    Rsqrt,
    /// `1/x`.
    Reciprocal,
    /// `sin x`.
    Sin,
    /// `cos x`.
    Cos,
    /// `tanh x`.
    Tanh,
    /// `1/(1+e^-x)`.
    Sigmoid,
    /// `x·sigmoid(x)` (SiLU, Swish).
    Silu,
    /// GELU with the error function: `x/2·(1+erf(x/√2))`.
    Gelu,
    /// GELU's tanh approximation: `x/2·(1+tanh(√(2/π)(x+0.044715x³)))` (`gelu_new`).
    GeluTanh,
    /// `erf x`.
    Erf,
    /// `⌊x⌋`.
    Floor,
    /// `⌈x⌉`.
    Ceil,
    /// Bitwise not of an integer, logical not of a bool.
    BitwiseNot,
    /// 1 where `x` is zero (false), else 0, into any type.
    LogicalNot,
}

/// Which operand types a unary function takes.
enum Takes {
    /// Any numeric type; computed in floating point, `out` a float.
    Float,
    /// Any numeric type, `out` of the input's type.
    Numeric,
    /// Integers and bool, `out` of the input's type.
    Bits,
    /// Anything, `out` anything (0 or 1).
    Logical,
}

impl UnaryOp {
    /// Its name (`silu`, `rsqrt`...).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Relu => "relu",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Silu => "silu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Erf => "erf",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::BitwiseNot => "bitwise_not",
            UnaryOp::LogicalNot => "logical_not",
        }
    }

    fn takes(self) -> Takes {
        match self {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu => Takes::Numeric,
            UnaryOp::BitwiseNot => Takes::Bits,
            UnaryOp::LogicalNot => Takes::Logical,
            _ => Takes::Float,
        }
    }

    /// Vector operations per element (transcendental functions count several).
    pub fn cost(self) -> u64 {
        match self {
            UnaryOp::Silu | UnaryOp::Sigmoid | UnaryOp::Gelu | UnaryOp::GeluTanh => 4,
            UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Erf => 2,
            _ => 1,
        }
    }
}

const NUMERIC: [DType; 12] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];
const FLOAT_OUT: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
const BITS: [DType; 9] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
];

/// `out = op(self)` element by element; `self` and `out` have one shape.
#[derive(Clone, PartialEq, Debug)]
pub struct Unary {
    /// The function.
    pub op: UnaryOp,
    /// Its input (`self`).
    pub x: Tensor,
    /// Its output.
    pub out: Tensor,
}

impl OpSpec for Unary {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("self", &self.x),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let name = self.name();
        shape_is(name, "out", &self.out, self.x.shape())?;
        match self.op.takes() {
            Takes::Float => {
                dtype_in(name, "self", &self.x, &NUMERIC)?;
                dtype_in(name, "out", &self.out, &FLOAT_OUT)
            }
            Takes::Numeric => {
                dtype_in(name, "self", &self.x, &NUMERIC)?;
                same_dtype(name, "out", &self.out, self.x.dtype(), "self")
            }
            Takes::Bits => {
                dtype_in(name, "self", &self.x, &BITS)?;
                same_dtype(name, "out", &self.out, self.x.dtype(), "self")
            }
            Takes::Logical => Ok(()),
        }
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64 * self.op.cost()
    }
}

/// An element-wise function of two operands.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum BinaryOp {
    /// `self + alpha·other`.
    Add {
        /// The factor of `other`.
        alpha: Scalar,
    },
    /// `self - alpha·other`.
    Sub {
        /// The factor of `other`.
        alpha: Scalar,
    },
    /// `self · other`.
    Mul,
    /// `self / other`, true division (in floating point even for integers).
    Div,
    /// `self ^ other`.
    Pow,
    /// The larger of the two (NaN if either is).
    Maximum,
    /// The smaller of the two (NaN if either is).
    Minimum,
    /// 1 where equal, else 0.
    Eq,
    /// 1 where different, else 0.
    Ne,
    /// 1 where `self < other`.
    Lt,
    /// 1 where `self <= other`.
    Le,
    /// 1 where `self > other`.
    Gt,
    /// 1 where `self >= other`.
    Ge,
    /// Bitwise and of integers (logical and of bools).
    BitwiseAnd,
    /// Bitwise or.
    BitwiseOr,
    /// Bitwise exclusive or.
    BitwiseXor,
    /// 1 where both are non-zero.
    LogicalAnd,
    /// 1 where either is non-zero.
    LogicalOr,
}

/// How a binary function chooses its domain and its output.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinaryClass {
    /// From both inputs and `out`.
    Arithmetic,
    /// Floating point from both inputs and `out` (at least float32).
    Division,
    /// From both inputs; stores 0 or 1 into any type.
    Comparison,
    /// int64, on integers and bools only.
    Bitwise,
    /// From both inputs; stores 0 or 1 into any type.
    Logical,
}

impl BinaryOp {
    /// Its name (`add`, `le`...).
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add { .. } => "add",
            BinaryOp::Sub { .. } => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::BitwiseAnd => "bitwise_and",
            BinaryOp::BitwiseOr => "bitwise_or",
            BinaryOp::BitwiseXor => "bitwise_xor",
            BinaryOp::LogicalAnd => "logical_and",
            BinaryOp::LogicalOr => "logical_or",
        }
    }

    /// How it chooses its domain and output.
    pub fn class(self) -> BinaryClass {
        match self {
            BinaryOp::Add { .. }
            | BinaryOp::Sub { .. }
            | BinaryOp::Mul
            | BinaryOp::Pow
            | BinaryOp::Maximum
            | BinaryOp::Minimum => BinaryClass::Arithmetic,
            BinaryOp::Div => BinaryClass::Division,
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => BinaryClass::Comparison,
            BinaryOp::BitwiseAnd | BinaryOp::BitwiseOr | BinaryOp::BitwiseXor => {
                BinaryClass::Bitwise
            }
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => BinaryClass::Logical,
        }
    }
}

/// `out = self ∘ other` element by element, tensors broadcast to `out`'s shape (which must be
/// their broadcast shape), scalars repeated.
#[derive(Clone, PartialEq, Debug)]
pub struct Binary {
    /// The function.
    pub op: BinaryOp,
    /// The left operand (`self`).
    pub a: Operand,
    /// The right operand (`other`).
    pub b: Operand,
    /// The output.
    pub out: Tensor,
}

impl Binary {
    /// The domain it computes in (see [`Domain`]).
    pub fn domain(&self) -> Domain {
        let inputs = [self.a.kind(), self.b.kind()];
        let f64_in = self.a.is_f64() || self.b.is_f64();
        let out = self.out.dtype();
        match self.op.class() {
            BinaryClass::Arithmetic => Domain::of(
                inputs.into_iter().chain([out.kind()]),
                f64_in || out == DType::F64,
            ),
            BinaryClass::Division => match Domain::of(inputs, f64_in || out == DType::F64) {
                Domain::F64 => Domain::F64,
                _ => Domain::F32,
            },
            BinaryClass::Comparison | BinaryClass::Logical => Domain::of(inputs, f64_in),
            BinaryClass::Bitwise => Domain::I64,
        }
    }
}

impl OpSpec for Binary {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        let mut v = Vec::with_capacity(3);
        if let Some(a) = self.a.tensor() {
            v.push(OperandUse::read("self", a));
        }
        if let Some(b) = self.b.tensor() {
            v.push(OperandUse::read("other", b));
        }
        v.push(OperandUse::write("out", &self.out));
        v
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let name = self.name();
        let shape = match (self.a.tensor(), self.b.tensor()) {
            (Some(a), Some(b)) => {
                broadcast_shapes(a.shape(), b.shape()).ok_or_else(|| OpCheckError::Shape {
                    op: name,
                    operand: "other",
                    shape: b.shape().to_vec(),
                    rule: format!("it does not broadcast with self's {:?}", a.shape()),
                })?
            }
            (Some(t), None) | (None, Some(t)) => t.shape().to_vec(),
            (None, None) => self.out.shape().to_vec(),
        };
        shape_is(name, "out", &self.out, &shape)?;
        for (role, operand) in [("self", &self.a), ("other", &self.b)] {
            if let Some(t) = operand.tensor() {
                broadcasts_to(name, role, t, &shape)?;
                if self.op.class() == BinaryClass::Bitwise {
                    dtype_in(name, role, t, &BITS)?;
                }
            }
            if let (BinaryClass::Bitwise, Operand::Scalar(Scalar::Float(_))) =
                (self.op.class(), operand)
            {
                return Err(OpCheckError::Attribute {
                    op: name,
                    attribute: role,
                    reason: "is a float scalar; bitwise operators take integers and bools"
                        .to_string(),
                });
            }
        }
        match self.op.class() {
            BinaryClass::Bitwise => dtype_in(name, "out", &self.out, &BITS),
            BinaryClass::Division => dtype_in(name, "out", &self.out, &FLOAT_OUT),
            _ => Ok(()),
        }
    }

    fn flops(&self) -> u64 {
        let per = match self.op {
            BinaryOp::Add { .. } | BinaryOp::Sub { .. } => 2,
            BinaryOp::Pow => 4,
            _ => 1,
        };
        self.out.numel() as u64 * per
    }
}

/// `out[...] = value` for every element of `out` (converted to its data type).
#[derive(Clone, PartialEq, Debug)]
pub struct Fill {
    /// The value.
    pub value: Scalar,
    /// The tensor filled.
    pub out: Tensor,
}

impl OpSpec for Fill {
    fn name(&self) -> &'static str {
        "fill"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![OperandUse::write("selfRef", &self.out)]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// `out = self`, broadcast to `out`'s shape and converted to its data type (a plain copy when
/// the types match): `aclnnCast`, and `aclnnInplaceCopy` with `out` as `selfRef`.
#[derive(Clone, PartialEq, Debug)]
pub struct Cast {
    /// The source (`self`, or `src` of an in-place copy).
    pub x: Tensor,
    /// The destination.
    pub out: Tensor,
}

impl OpSpec for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("self", &self.x),
            OperandUse::write("out", &self.out),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        broadcasts_to("cast", "self", &self.x, self.out.shape())
    }

    fn flops(&self) -> u64 {
        self.out.numel() as u64
    }
}

/// The kernel of `out = op(x)` ([`Unary`]).
pub fn unary(op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Unary(Unary {
        op,
        x: x.clone(),
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out = a ∘ b` ([`Binary`]); `a` and `b` are tensors or scalars.
pub fn binary(
    op: BinaryOp,
    a: impl Into<Operand>,
    b: impl Into<Operand>,
    out: &Tensor,
) -> Result<Kernel, OpCheckError> {
    TensorOp::Binary(Binary {
        op,
        a: a.into(),
        b: b.into(),
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out[...] = value` ([`Fill`]).
pub fn fill(out: &Tensor, value: impl Into<Scalar>) -> Result<Kernel, OpCheckError> {
    TensorOp::Fill(Fill {
        value: value.into(),
        out: out.clone(),
    })
    .kernel()
}

/// The kernel of `out = x` converted and broadcast ([`Cast`]).
pub fn cast(x: &Tensor, out: &Tensor) -> Result<Kernel, OpCheckError> {
    TensorOp::Cast(Cast {
        x: x.clone(),
        out: out.clone(),
    })
    .kernel()
}
