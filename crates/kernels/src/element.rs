//! Elements between device bytes and the domains kernels compute in.
//!
//! A kernel computes in one of three domains ([`Num`]: `f32`, `f64`, `i64`); operands of any
//! [`DType`] are loaded into it run by run ([`load_run`]) and results stored back converted to
//! the output's type ([`store_run`]): floats rounded to nearest even (f16 and bf16 through
//! `half`), floats into integers truncated toward zero and saturating (Rust's `as`), integers
//! into narrower integers wrapped, anything into bool as "non-zero". Both walk one run of a
//! [`crate::layout::Walk`]: an element offset, a stride and a length.

use crate::vector::{simd, MapInto};
use braid_stream_core::DType;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// A domain kernels compute in.
pub trait Num: bytemuck::Pod + Default + PartialOrd + Send + Sync + 'static {
    /// Whether it is a floating-point domain.
    const FLOAT: bool;
    /// The data type whose elements are this domain's values as they are (no conversion).
    const DTYPE: DType;
    /// `run` as `f32` values, when this domain is `f32` (the bulk conversions use it).
    fn as_f32_run(run: &mut [Self]) -> Option<&mut [f32]> {
        let _ = run;
        None
    }
    /// `run` as `f32` values, when this domain is `f32`.
    fn as_f32_values(run: &[Self]) -> Option<&[f32]> {
        let _ = run;
        None
    }
    /// From an `f32`.
    fn from_f32(v: f32) -> Self;
    /// From an `f64`.
    fn from_f64(v: f64) -> Self;
    /// From an `i64`.
    fn from_i64(v: i64) -> Self;
    /// From a `u64`.
    fn from_u64(v: u64) -> Self;
    /// To an `f32`.
    fn to_f32(self) -> f32;
    /// To an `f64`.
    fn to_f64(self) -> f64;
    /// To an `i64` (floats truncated, saturating).
    fn to_i64(self) -> i64;
}

impl Num for f32 {
    const FLOAT: bool = true;
    const DTYPE: DType = DType::F32;
    fn as_f32_run(run: &mut [Self]) -> Option<&mut [f32]> {
        Some(run)
    }
    fn as_f32_values(run: &[Self]) -> Option<&[f32]> {
        Some(run)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl Num for f64 {
    const FLOAT: bool = true;
    const DTYPE: DType = DType::F64;
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f64::from(v)
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f64
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as f64
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl Num for i64 {
    const FLOAT: bool = false;
    const DTYPE: DType = DType::I64;
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as i64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as i64
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self
    }
}

/// `bytes` as elements of `T`, when they are aligned for it (device memory is; a copy made
/// by the caller may not be).
fn typed<T: bytemuck::Pod>(bytes: &[u8]) -> Option<&[T]> {
    bytemuck::try_cast_slice(bytes).ok()
}

/// [`typed`], mutably.
fn typed_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Option<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes).ok()
}

/// The run of `len` elements at element `base` of `bytes` as the domain's own values, when
/// they are of its type ([`Num::DTYPE`]), contiguous (`step` 1) and aligned: kernels then
/// compute on device bytes in place, without loading or storing.
pub(crate) fn native_run<D: Num>(
    bytes: &[u8],
    dtype: DType,
    base: usize,
    step: usize,
    len: usize,
) -> Option<&[D]> {
    let size = std::mem::size_of::<D>();
    (dtype == D::DTYPE && (step == 1 || len == 1))
        .then(|| typed(&bytes[base * size..(base + len) * size]))
        .flatten()
}

/// [`native_run`], mutably.
pub(crate) fn native_run_mut<D: Num>(
    bytes: &mut [u8],
    dtype: DType,
    base: usize,
    step: usize,
    len: usize,
) -> Option<&mut [D]> {
    let size = std::mem::size_of::<D>();
    (dtype == D::DTYPE && (step == 1 || len == 1))
        .then(|| typed_mut(&mut bytes[base * size..(base + len) * size]))
        .flatten()
}

/// Reads `out.len()` elements of `dtype` from `bytes`, starting at element `base` and `step`
/// elements apart, into `out`.
///
/// Typed loops over aligned bytes, which the compiler vectorises (a contiguous run of the
/// domain's own type is a copy); float16 into float32 through `half`'s slice conversion (the
/// CPU's F16C instructions where it has them).
pub fn load_run<D: Num>(bytes: &[u8], dtype: DType, base: usize, step: usize, out: &mut [D]) {
    if out.is_empty() {
        return;
    }
    macro_rules! run {
        ($t:ty, $conv:expr) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            let n = out.len();
            let span = ((n - 1) * step + 1) * SIZE;
            let src = &bytes[base * SIZE..base * SIZE + span];
            match typed::<$t>(src) {
                Some(vals) if step == 1 => simd(MapInto {
                    src: vals,
                    dst: out,
                    f: $conv,
                }),
                Some(vals) => {
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = $conv(vals[i * step]);
                    }
                }
                None => {
                    for (i, o) in out.iter_mut().enumerate() {
                        let at = i * step * SIZE;
                        let mut raw = [0u8; SIZE];
                        raw.copy_from_slice(&src[at..at + SIZE]);
                        *o = $conv(<$t>::from_le_bytes(raw));
                    }
                }
            }
        }};
    }
    match dtype {
        DType::F32 => run!(f32, D::from_f32),
        DType::F16 => {
            let n = out.len();
            if step == 1 {
                if let (Some(dst), Some(src)) = (
                    D::as_f32_run(out),
                    typed::<f16>(&bytes[base * 2..(base + n) * 2]),
                ) {
                    src.convert_to_f32_slice(dst);
                    return;
                }
            }
            run!(f16, |v: f16| D::from_f32(v.to_f32()))
        }
        DType::BF16 => run!(bf16, |v: bf16| D::from_f32(v.to_f32())),
        DType::F64 => run!(f64, D::from_f64),
        DType::I8 => run!(i8, |v| D::from_i64(i64::from(v))),
        DType::I16 => run!(i16, |v| D::from_i64(i64::from(v))),
        DType::I32 => run!(i32, |v| D::from_i64(i64::from(v))),
        DType::I64 => run!(i64, D::from_i64),
        DType::U8 => run!(u8, |v| D::from_i64(i64::from(v))),
        DType::U16 => run!(u16, |v| D::from_i64(i64::from(v))),
        DType::U32 => run!(u32, |v| D::from_i64(i64::from(v))),
        DType::U64 => run!(u64, D::from_u64),
        DType::Bool => run!(u8, |v: u8| D::from_i64(i64::from(v != 0))),
    }
}

/// Writes `vals`, converted to `dtype`, into `bytes` at element `base`, `step` elements
/// apart. Typed loops as in [`load_run`]; float32 into float16 through `half`'s slice
/// conversion.
pub fn store_run<D: Num>(bytes: &mut [u8], dtype: DType, base: usize, step: usize, vals: &[D]) {
    if vals.is_empty() {
        return;
    }
    macro_rules! run {
        ($t:ty, $conv:expr) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            let n = vals.len();
            let span = ((n - 1) * step + 1) * SIZE;
            let dst = &mut bytes[base * SIZE..base * SIZE + span];
            match typed_mut::<$t>(dst) {
                Some(out) if step == 1 => simd(MapInto {
                    src: vals,
                    dst: out,
                    f: $conv,
                }),
                Some(out) => {
                    for (i, &v) in vals.iter().enumerate() {
                        out[i * step] = $conv(v);
                    }
                }
                None => {
                    for (i, &v) in vals.iter().enumerate() {
                        let at = i * step * SIZE;
                        let x: $t = $conv(v);
                        dst[at..at + SIZE].copy_from_slice(&x.to_le_bytes());
                    }
                }
            }
        }};
    }
    /// Into an integer type: floats truncate and saturate, integers wrap.
    macro_rules! int {
        ($t:ty) => {
            run!($t, |v: D| if D::FLOAT {
                v.to_f64() as $t
            } else {
                v.to_i64() as $t
            })
        };
    }
    match dtype {
        DType::F32 => run!(f32, |v: D| v.to_f32()),
        DType::F16 => {
            if step == 1 {
                if let (Some(src), Some(dst)) = (
                    D::as_f32_values(vals),
                    typed_mut::<f16>(&mut bytes[base * 2..(base + vals.len()) * 2]),
                ) {
                    dst.convert_from_f32_slice(src);
                    return;
                }
            }
            // From float32 one rounding (f32 widens to f64 exactly), from float64 one
            // rounding, from int64 through float64.
            run!(f16, |v: D| if D::FLOAT {
                f16::from_f64(v.to_f64())
            } else {
                f16::from_f64(v.to_i64() as f64)
            })
        }
        DType::BF16 => match D::as_f32_values(vals) {
            // The same single rounding as through f64, without the widening.
            Some(v32) => store_run_typed(bytes, base, step, v32, bf16::from_f32),
            None => run!(bf16, |v: D| bf16::from_f64(v.to_f64())),
        },
        DType::F64 => run!(f64, |v: D| v.to_f64()),
        DType::I8 => int!(i8),
        DType::I16 => int!(i16),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        DType::U8 => int!(u8),
        DType::U16 => int!(u16),
        DType::U32 => int!(u32),
        DType::U64 => int!(u64),
        DType::Bool => run!(u8, |v: D| u8::from(v != D::default())),
    }
}

/// Stores `vals` converted by `conv` as elements of `T` at element `base`, `step` apart.
fn store_run_typed<V: Copy, T: bytemuck::Pod>(
    bytes: &mut [u8],
    base: usize,
    step: usize,
    vals: &[V],
    conv: impl Fn(V) -> T,
) {
    let size = std::mem::size_of::<T>();
    let span = ((vals.len() - 1) * step + 1) * size;
    let dst = &mut bytes[base * size..base * size + span];
    match typed_mut::<T>(dst) {
        Some(out) if step == 1 => simd(MapInto {
            src: vals,
            dst: out,
            f: conv,
        }),
        Some(out) => vals
            .iter()
            .enumerate()
            .for_each(|(i, &v)| out[i * step] = conv(v)),
        None => vals.iter().enumerate().for_each(|(i, &v)| {
            let at = i * step * size;
            dst[at..at + size].copy_from_slice(bytemuck::bytes_of(&conv(v)));
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_loads_and_stores_through_each_domain() {
        for dtype in DType::ALL {
            let mut bytes = vec![0u8; 8 * dtype.size() as usize];
            let vals: Vec<f32> = vec![0.0, 1.0, 2.0, 3.0];
            store_run(&mut bytes, dtype, 1, 2, &vals);
            let mut back = [0f32; 4];
            load_run(&bytes, dtype, 1, 2, &mut back);
            let expected: Vec<f32> = vals.iter().map(|&v| dtype.round(v)).collect();
            assert_eq!(back.to_vec(), expected, "{dtype}");
            let mut ints = [0i64; 4];
            load_run(&bytes, dtype, 1, 2, &mut ints);
            assert_eq!(ints.map(|v| v as f32).to_vec(), expected, "{dtype}");
            // The gaps are untouched.
            let mut gaps = [1f64; 4];
            load_run(&bytes, dtype, 0, 2, &mut gaps);
            assert_eq!(gaps, [0.0; 4], "{dtype}");
        }
    }

    #[test]
    fn conversions_round_truncate_saturate_and_wrap() {
        let mut b = vec![0u8; 2];
        store_run(&mut b, DType::F16, 0, 1, &[1.0f32 + 2f32.powi(-12)]);
        let mut back = [0f32];
        load_run(&b, DType::F16, 0, 1, &mut back);
        assert_eq!(back[0], 1.0);
        let mut b = vec![0u8; 1];
        store_run(&mut b, DType::I8, 0, 1, &[300.7f32]);
        assert_eq!(b[0] as i8, 127);
        store_run(&mut b, DType::I8, 0, 1, &[300i64]);
        assert_eq!(b[0] as i8, 44);
        store_run(&mut b, DType::Bool, 0, 1, &[-0.5f32]);
        assert_eq!(b[0], 1);
        let mut b = vec![0u8; 8];
        store_run(&mut b, DType::I64, 0, 1, &[i64::MAX]);
        let mut back = [0i64];
        load_run(&b, DType::I64, 0, 1, &mut back);
        assert_eq!(back[0], i64::MAX);
    }
}
