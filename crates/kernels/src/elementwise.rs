//! Element-wise operators: unary functions, binary functions of tensors and scalars, fills
//! and casts, each computed run by run in its domain (see `braid_stream_core::ops` for the
//! rules every backend follows).

use crate::element::{load_run, native_run, native_run_mut, store_run, Num};
use crate::layout::{broadcast_strides, Walk, RUN};
use crate::parallel::{for_parts, threads_for};
use crate::vector::{self, simd};
use braid_stream_core::ops::{
    Binary, BinaryOp, Cast, Domain, Fill, Operand, Scalar, Unary, UnaryOp,
};
use braid_stream_core::{DType, DTypeKind, Tensor};
use num_traits::Float;

/// Read-only bytes of an operand with its tensor.
pub(crate) struct Src<'a> {
    pub bytes: &'a [u8],
    pub tensor: &'a Tensor,
}

/// Writable bytes of an output with its tensor.
pub(crate) struct Dst<'a> {
    pub bytes: &'a mut [u8],
    pub tensor: &'a Tensor,
}

/// Calls `part(first, bytes, range)` to compute the output elements whose row-major index
/// lies in `range`, into `bytes`, whose first byte is element `first`'s: the whole output at
/// once, or a contiguous output of `total` elements cut into parts computed on up to
/// `threads` threads ([`for_parts`]).
fn over_output(
    out: &mut Dst<'_>,
    total: usize,
    threads: usize,
    part: impl Fn(usize, &mut [u8], std::ops::Range<usize>) + Sync,
) {
    let threads = threads_for(total, threads);
    if threads > 1 && out.tensor.is_contiguous() {
        let size = out.tensor.dtype().size() as usize;
        for_parts(out.bytes, total, size, threads, |first, bytes| {
            part(first, bytes, first..first + bytes.len() / size)
        });
    } else {
        part(0, out.bytes, 0..total)
    }
}

/// Loads each run of `x`, applies `f`, stores it into `out`. Where `out` holds the domain's
/// own type contiguously, the run is loaded into `out`'s bytes and computed there.
fn map1<D: Num>(x: &Src<'_>, out: &mut Dst<'_>, threads: usize, f: impl Fn(&mut [D]) + Sync) {
    let shape = out.tensor.shape().to_vec();
    let xs = broadcast_strides(x.tensor.shape(), x.tensor.strides(), &shape);
    let walk = Walk::new(&shape, [out.tensor.strides(), &xs]);
    let (xt, ot) = (x.tensor.dtype(), out.tensor.dtype());
    over_output(out, walk.len(), threads, |first, bytes, range| {
        let mut buf = [D::default(); RUN];
        walk.runs_in(range, |[ob, xb], [os, step], len| {
            let ob = ob - first;
            if let Some(run) = native_run_mut::<D>(bytes, ot, ob, os, len) {
                load_run(x.bytes, xt, xb, step, run);
                f(run);
                return;
            }
            let run = &mut buf[..len];
            load_run(x.bytes, xt, xb, step, run);
            f(run);
            store_run(bytes, ot, ob, os, run);
        });
    });
}

/// A binary operand loaded into domain `D`.
enum In<'a, D> {
    Tensor(&'a Src<'a>),
    Scalar(D),
}

/// The left operand of a binary run and where its results go.
enum Lhs<'a, D> {
    /// A buffer holding the left operand, which takes the results.
    Here(&'a mut [D]),
    /// The results' run, and the left operand's, read in place.
    Apart(&'a mut [D], &'a [D]),
}

/// Sets each result of a binary run ([`Lhs`]) to `$f(x, y)` of its operands' elements.
macro_rules! each_pair {
    ($lhs:expr, $b:expr, $f:expr) => {
        match $lhs {
            Lhs::Here(a) => a.iter_mut().zip($b).for_each(|(x, &y)| *x = $f(*x, y)),
            Lhs::Apart(out, a) => out
                .iter_mut()
                .zip(a.iter().zip($b))
                .for_each(|(o, (&x, &y))| *o = $f(x, y)),
        }
    };
}

/// Loads each run of `a` and `b` (broadcast), applies `f(a, b)`, stores it. Where `out` holds
/// the domain's own type contiguously, the results go straight into its bytes, read from `a`
/// in place where it does too (one pass), else loaded there first; where `b` does, it is read
/// in place.
fn map2<D: Num>(
    a: In<'_, D>,
    b: In<'_, D>,
    out: &mut Dst<'_>,
    threads: usize,
    f: impl Fn(Lhs<'_, D>, &[D]) + Sync,
) {
    let shape = out.tensor.shape().to_vec();
    let strides = |i: &In<'_, D>| match i {
        In::Tensor(s) => broadcast_strides(s.tensor.shape(), s.tensor.strides(), &shape),
        In::Scalar(_) => vec![0; shape.len()],
    };
    let (sa, sb) = (strides(&a), strides(&b));
    let walk = Walk::new(&shape, [out.tensor.strides(), &sa, &sb]);
    let ot = out.tensor.dtype();
    over_output(out, walk.len(), threads, |first, bytes, range| {
        let mut left = [D::default(); RUN];
        let mut right = [D::default(); RUN];
        if let In::Scalar(v) = b {
            right.fill(v);
        }
        walk.runs_in(range, |[ob, ab, bb], [os, astep, bstep], len| {
            let ob = ob - first;
            let rhs: &[D] = match &b {
                In::Tensor(s) => match native_run::<D>(s.bytes, s.tensor.dtype(), bb, bstep, len) {
                    Some(v) => v,
                    None => {
                        load_run(s.bytes, s.tensor.dtype(), bb, bstep, &mut right[..len]);
                        &right[..len]
                    }
                },
                In::Scalar(_) => &right[..len],
            };
            let native_a = match &a {
                In::Tensor(s) => native_run::<D>(s.bytes, s.tensor.dtype(), ab, astep, len),
                In::Scalar(_) => None,
            };
            let direct = native_run_mut::<D>(bytes, ot, ob, os, len);
            let in_place = direct.is_some();
            match (direct, native_a) {
                (Some(run), Some(a)) => return f(Lhs::Apart(run, a), rhs),
                (direct, _) => {
                    let lhs = direct.unwrap_or(&mut left[..len]);
                    match &a {
                        In::Tensor(s) => load_run(s.bytes, s.tensor.dtype(), ab, astep, lhs),
                        In::Scalar(v) => lhs.fill(*v),
                    }
                    f(Lhs::Here(lhs), rhs);
                }
            }
            if !in_place {
                store_run(bytes, ot, ob, os, &left[..len]);
            }
        });
    });
}

/// `x ↦ op(x)` on a float run.
fn unary_float<T: Float + Num>(op: UnaryOp, v: &mut [T]) {
    simd(UnaryFloat { op, v })
}

/// [`unary_float`]'s loops, for [`simd`].
struct UnaryFloat<'a, T> {
    op: UnaryOp,
    v: &'a mut [T],
}

impl<T: Float + Num> pulp::WithSimd for UnaryFloat<'_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        if let Some(v) = T::as_f32_run(self.v) {
            if unary_exp_f32(self.op, v) {
                return;
            }
            return unary_float_loop(self.op, v);
        }
        unary_float_loop(self.op, self.v)
    }
}

/// The float32 functions of `e^x` with [`vector::exp`], which vectorises (the library's
/// `exp` is a call per element): `false` for the other functions.
#[inline(always)]
fn unary_exp_f32(op: UnaryOp, v: &mut [f32]) -> bool {
    match op {
        UnaryOp::Exp => v.iter_mut().for_each(|x| *x = vector::exp(*x)),
        UnaryOp::Sigmoid => v
            .iter_mut()
            .for_each(|x| *x = 1.0 / (1.0 + vector::exp(-*x))),
        UnaryOp::Silu => v
            .iter_mut()
            .for_each(|x| *x = *x / (1.0 + vector::exp(-*x))),
        _ => return false,
    }
    true
}

/// [`unary_float`]'s loops.
#[inline(always)]
fn unary_float_loop<T: Float + Num>(op: UnaryOp, v: &mut [T]) {
    let half = T::from_f32(0.5);
    let one = T::one();
    match op {
        UnaryOp::Neg => v.iter_mut().for_each(|x| *x = -*x),
        UnaryOp::Abs => v.iter_mut().for_each(|x| *x = x.abs()),
        UnaryOp::Relu => v.iter_mut().for_each(|x| {
            if *x < T::zero() {
                *x = T::zero()
            }
        }),
        UnaryOp::Exp => v.iter_mut().for_each(|x| *x = x.exp()),
        UnaryOp::Log => v.iter_mut().for_each(|x| *x = x.ln()),
        UnaryOp::Sqrt => v.iter_mut().for_each(|x| *x = x.sqrt()),
        UnaryOp::Rsqrt => v.iter_mut().for_each(|x| *x = one / x.sqrt()),
        UnaryOp::Reciprocal => v.iter_mut().for_each(|x| *x = one / *x),
        UnaryOp::Sin => v.iter_mut().for_each(|x| *x = x.sin()),
        UnaryOp::Cos => v.iter_mut().for_each(|x| *x = x.cos()),
        UnaryOp::Tanh => v.iter_mut().for_each(|x| *x = x.tanh()),
        UnaryOp::Sigmoid => v.iter_mut().for_each(|x| *x = one / (one + (-*x).exp())),
        UnaryOp::Silu => v.iter_mut().for_each(|x| *x = *x / (one + (-*x).exp())),
        UnaryOp::Gelu => v.iter_mut().for_each(|x| {
            let e = T::from_f64(libm::erf(x.to_f64() * std::f64::consts::FRAC_1_SQRT_2));
            *x = half * *x * (one + e)
        }),
        UnaryOp::GeluTanh => {
            let c = T::from_f64((2.0 / std::f64::consts::PI).sqrt());
            let k = T::from_f64(0.044715);
            v.iter_mut()
                .for_each(|x| *x = half * *x * (one + (c * (*x + k * *x * *x * *x)).tanh()))
        }
        UnaryOp::Erf => v
            .iter_mut()
            .for_each(|x| *x = T::from_f64(libm::erf(x.to_f64()))),
        UnaryOp::Floor => v.iter_mut().for_each(|x| *x = x.floor()),
        UnaryOp::Ceil => v.iter_mut().for_each(|x| *x = x.ceil()),
        UnaryOp::BitwiseNot | UnaryOp::LogicalNot => logical_not(v),
    }
}

/// 1 where zero, else 0.
fn logical_not<D: Num>(v: &mut [D]) {
    let (zero, one) = (D::default(), D::from_i64(1));
    v.iter_mut()
        .for_each(|x| *x = if *x == zero { one } else { zero });
}

/// `x ↦ op(x)` on an integer run.
fn unary_int(op: UnaryOp, v: &mut [i64], bool_input: bool) {
    match op {
        UnaryOp::Neg => v.iter_mut().for_each(|x| *x = x.wrapping_neg()),
        UnaryOp::Abs => v.iter_mut().for_each(|x| *x = x.wrapping_abs()),
        UnaryOp::Relu => v.iter_mut().for_each(|x| *x = (*x).max(0)),
        UnaryOp::BitwiseNot if bool_input => logical_not(v),
        UnaryOp::BitwiseNot => v.iter_mut().for_each(|x| *x = !*x),
        UnaryOp::LogicalNot => logical_not(v),
        // Float functions never reach the integer domain (their output is a float).
        _ => {}
    }
}

/// `out = op(x)`, on up to `threads` threads.
pub(crate) fn unary(u: &Unary, x: &Src<'_>, out: &mut Dst<'_>, threads: usize) {
    let domain = match u.op {
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::LogicalNot => {
            Domain::of_dtype(u.x.dtype())
        }
        UnaryOp::BitwiseNot => Domain::I64,
        _ if u.x.dtype() == DType::F64 || u.out.dtype() == DType::F64 => Domain::F64,
        _ => Domain::F32,
    };
    let bool_input = u.x.dtype() == DType::Bool;
    match domain {
        Domain::F32 => map1::<f32>(x, out, threads, |v| unary_float(u.op, v)),
        Domain::F64 => map1::<f64>(x, out, threads, |v| unary_float(u.op, v)),
        Domain::I64 => map1::<i64>(x, out, threads, |v| unary_int(u.op, v, bool_input)),
    }
}

/// `a ∘ b` on float runs.
fn binary_float<T: Float + Num>(op: BinaryOp, a: Lhs<'_, T>, b: &[T]) {
    simd(BinaryRun { op, a, b })
}

/// A binary run's operands, for [`simd`].
struct BinaryRun<'a, T> {
    op: BinaryOp,
    a: Lhs<'a, T>,
    b: &'a [T],
}

impl<T: Float + Num> pulp::WithSimd for BinaryRun<'_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        binary_float_loop(self.op, self.a, self.b)
    }
}

/// [`BinaryRun`] of integers.
struct IntRun<'a>(BinaryRun<'a, i64>);

impl pulp::WithSimd for IntRun<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        binary_int_loop(self.0.op, self.0.a, self.0.b)
    }
}

/// [`binary_float`]'s loops.
#[inline(always)]
fn binary_float_loop<T: Float + Num>(op: BinaryOp, a: Lhs<'_, T>, b: &[T]) {
    let bit = |c: bool| if c { T::one() } else { T::zero() };
    let zero = T::zero();
    macro_rules! each {
        ($f:expr) => {
            each_pair!(a, b, $f)
        };
    }
    match op {
        BinaryOp::Add { alpha } => {
            let alpha = T::from_f64(alpha.as_f64());
            each!(|x: T, y: T| x + alpha * y)
        }
        BinaryOp::Sub { alpha } => {
            let alpha = T::from_f64(alpha.as_f64());
            each!(|x: T, y: T| x - alpha * y)
        }
        BinaryOp::Mul => each!(|x: T, y: T| x * y),
        BinaryOp::Div => each!(|x: T, y: T| x / y),
        BinaryOp::Pow => each!(|x: T, y: T| x.powf(y)),
        BinaryOp::Maximum => each!(|x: T, y: T| if x.is_nan() || y.is_nan() {
            T::nan()
        } else {
            x.max(y)
        }),
        BinaryOp::Minimum => each!(|x: T, y: T| if x.is_nan() || y.is_nan() {
            T::nan()
        } else {
            x.min(y)
        }),
        BinaryOp::Eq => each!(|x: T, y: T| bit(x == y)),
        BinaryOp::Ne => each!(|x: T, y: T| bit(x != y)),
        BinaryOp::Lt => each!(|x: T, y: T| bit(x < y)),
        BinaryOp::Le => each!(|x: T, y: T| bit(x <= y)),
        BinaryOp::Gt => each!(|x: T, y: T| bit(x > y)),
        BinaryOp::Ge => each!(|x: T, y: T| bit(x >= y)),
        BinaryOp::LogicalAnd => each!(|x: T, y: T| bit(x != zero && y != zero)),
        BinaryOp::LogicalOr => each!(|x: T, y: T| bit(x != zero || y != zero)),
        // Bitwise operators compute in int64 (checked when the operator was made).
        BinaryOp::BitwiseAnd | BinaryOp::BitwiseOr | BinaryOp::BitwiseXor => {}
    }
}

/// `a ∘ b` on integer runs, into `a`.
fn binary_int(op: BinaryOp, a: Lhs<'_, i64>, b: &[i64]) {
    simd(IntRun(BinaryRun { op, a, b }))
}

/// [`binary_int`]'s loops.
#[inline(always)]
fn binary_int_loop(op: BinaryOp, a: Lhs<'_, i64>, b: &[i64]) {
    let bit = |c: bool| i64::from(c);
    macro_rules! each {
        ($f:expr) => {
            each_pair!(a, b, $f)
        };
    }
    match op {
        BinaryOp::Add { alpha } => {
            let alpha = alpha.as_i64();
            each!(|x: i64, y: i64| x.wrapping_add(alpha.wrapping_mul(y)))
        }
        BinaryOp::Sub { alpha } => {
            let alpha = alpha.as_i64();
            each!(|x: i64, y: i64| x.wrapping_sub(alpha.wrapping_mul(y)))
        }
        BinaryOp::Mul => each!(|x: i64, y: i64| x.wrapping_mul(y)),
        BinaryOp::Pow => each!(|x: i64, y: i64| match u32::try_from(y) {
            Ok(e) => x.wrapping_pow(e),
            // A negative exponent: only 1 and -1 keep an integer value.
            Err(_) => match x {
                1 => 1,
                -1 =>
                    if y % 2 == 0 {
                        1
                    } else {
                        -1
                    },
                _ => 0,
            },
        }),
        BinaryOp::Maximum => each!(|x: i64, y: i64| x.max(y)),
        BinaryOp::Minimum => each!(|x: i64, y: i64| x.min(y)),
        BinaryOp::Eq => each!(|x, y| bit(x == y)),
        BinaryOp::Ne => each!(|x, y| bit(x != y)),
        BinaryOp::Lt => each!(|x, y| bit(x < y)),
        BinaryOp::Le => each!(|x, y| bit(x <= y)),
        BinaryOp::Gt => each!(|x, y| bit(x > y)),
        BinaryOp::Ge => each!(|x, y| bit(x >= y)),
        BinaryOp::BitwiseAnd => each!(|x: i64, y: i64| x & y),
        BinaryOp::BitwiseOr => each!(|x: i64, y: i64| x | y),
        BinaryOp::BitwiseXor => each!(|x: i64, y: i64| x ^ y),
        BinaryOp::LogicalAnd => each!(|x, y| bit(x != 0 && y != 0)),
        BinaryOp::LogicalOr => each!(|x, y| bit(x != 0 || y != 0)),
        // Division computes in floating point (its domain is never int64).
        BinaryOp::Div => {}
    }
}

/// A scalar in domain `D`.
pub(crate) fn scalar<D: Num>(s: Scalar) -> D {
    match s {
        Scalar::Float(v) => D::from_f64(v),
        Scalar::Int(v) => D::from_i64(v),
        Scalar::Bool(v) => D::from_i64(i64::from(v)),
    }
}

/// `out = a ∘ b`, on up to `threads` threads; `srcs` holds the tensor operands in order.
pub(crate) fn binary(op: &Binary, srcs: &[Src<'_>], out: &mut Dst<'_>, threads: usize) {
    fn run<D: Num>(
        op: &Binary,
        srcs: &[Src<'_>],
        out: &mut Dst<'_>,
        threads: usize,
        f: impl Fn(Lhs<'_, D>, &[D]) + Sync,
    ) {
        let mut tensors = srcs.iter();
        let mut input = |o: &Operand| match o {
            Operand::Tensor(_) => tensors.next().map(In::Tensor),
            Operand::Scalar(s) => Some(In::Scalar(scalar::<D>(*s))),
        };
        if let (Some(a), Some(b)) = (input(&op.a), input(&op.b)) {
            map2(a, b, out, threads, f);
        }
    }
    // `x ** 2` (RMSNorm's mean of squares) is `x * x`, as CPU torch computes it: the same
    // number as `powf`'s correctly rounded square, without a call into libm per element.
    let square = op.op == BinaryOp::Pow && matches!(op.b, Operand::Scalar(s) if s.as_f64() == 2.0);
    match op.domain() {
        Domain::F32 if square => run::<f32>(op, srcs, out, threads, squares),
        Domain::F64 if square => run::<f64>(op, srcs, out, threads, squares),
        Domain::F32 => run::<f32>(op, srcs, out, threads, |a, b| binary_float(op.op, a, b)),
        Domain::F64 => run::<f64>(op, srcs, out, threads, |a, b| binary_float(op.op, a, b)),
        Domain::I64 => run::<i64>(op, srcs, out, threads, |a, b| binary_int(op.op, a, b)),
    }
}

/// `x ↦ x * x` on a float run (the exponent's run, `b`, is all twos).
fn squares<T: Float + Num>(a: Lhs<'_, T>, b: &[T]) {
    simd(Squares(a, b))
}

/// [`squares`]' loop, for [`simd`].
struct Squares<'a, T>(Lhs<'a, T>, &'a [T]);

impl<T: Float + Num> pulp::WithSimd for Squares<'_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        each_pair!(self.0, self.1, |x: T, _two: T| x * x)
    }
}

/// `out[...] = value`.
pub(crate) fn fill(f: &Fill, out: &mut Dst<'_>) {
    fn run<D: Num>(value: D, out: &mut Dst<'_>) {
        let walk = Walk::new(out.tensor.shape(), [out.tensor.strides()]);
        let buf = [value; RUN];
        let ot = out.tensor.dtype();
        walk.runs(|[ob], [os], len| store_run(out.bytes, ot, ob, os, &buf[..len]));
    }
    let float = f.value.kind() == DTypeKind::Float && f.out.dtype().is_float();
    match (float, f.out.dtype()) {
        (true, DType::F64) | (true, DType::F32) => run::<f64>(f.value.as_f64(), out),
        (true, _) => run::<f32>(f.value.as_f64() as f32, out),
        (false, _) if f.value.kind() == DTypeKind::Float => run::<f64>(f.value.as_f64(), out),
        (false, _) => run::<i64>(f.value.as_i64(), out),
    }
}

/// `out = x` converted and broadcast, on up to `threads` threads.
pub(crate) fn cast(c: &Cast, x: &Src<'_>, out: &mut Dst<'_>, threads: usize) {
    let (from, to) = (c.x.dtype(), c.out.dtype());
    if from == to {
        return copy_same_type(x, out);
    }
    if from.is_float() || to.is_float() {
        // Every float and every integer up to 2^53 is exact in f64: one rounding, at the store.
        map1::<f64>(x, out, threads, |_| ());
    } else {
        map1::<i64>(x, out, threads, |_| ());
    }
}

/// `out = x` element by element without conversion (bytes moved as they are).
fn copy_same_type(x: &Src<'_>, out: &mut Dst<'_>) {
    let shape = out.tensor.shape().to_vec();
    let size = out.tensor.dtype().size() as usize;
    let xs = broadcast_strides(x.tensor.shape(), x.tensor.strides(), &shape);
    let walk = Walk::new(&shape, [out.tensor.strides(), &xs]);
    walk.runs(|[ob, xb], [os, step], len| {
        if os == 1 && step == 1 {
            out.bytes[ob * size..(ob + len) * size]
                .copy_from_slice(&x.bytes[xb * size..(xb + len) * size]);
        } else {
            for i in 0..len {
                let (o, s) = ((ob + i * os) * size, (xb + i * step) * size);
                out.bytes[o..o + size].copy_from_slice(&x.bytes[s..s + size]);
            }
        }
    });
}
