//! Elements between device bytes and the domains kernels compute in.
//!
//! A kernel computes in one of three domains ([`Num`]: `f32`, `f64`, `i64`); operands of any
//! [`DType`] are loaded into it run by run ([`load_run`]) and results stored back converted to
//! the output's type ([`store_run`]): floats rounded to nearest even (f16 and bf16 through
//! `half`), floats into integers truncated toward zero and saturating (Rust's `as`), integers
//! into narrower integers wrapped, anything into bool as "non-zero". Both walk one run of a
//! [`crate::layout::Walk`]: an element offset, a stride and a length.

use braid_stream_core::DType;
use half::{bf16, f16};

/// A domain kernels compute in.
pub trait Num: Copy + Default + PartialOrd + Send + Sync + 'static {
    /// Whether it is a floating-point domain.
    const FLOAT: bool;
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
    fn from_f32(v: f32) -> Self {
        v
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    fn from_u64(v: u64) -> Self {
        v as f32
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl Num for f64 {
    const FLOAT: bool = true;
    fn from_f32(v: f32) -> Self {
        f64::from(v)
    }
    fn from_f64(v: f64) -> Self {
        v
    }
    fn from_i64(v: i64) -> Self {
        v as f64
    }
    fn from_u64(v: u64) -> Self {
        v as f64
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl Num for i64 {
    const FLOAT: bool = false;
    fn from_f32(v: f32) -> Self {
        v as i64
    }
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    fn from_i64(v: i64) -> Self {
        v
    }
    fn from_u64(v: u64) -> Self {
        v as i64
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn to_i64(self) -> i64 {
        self
    }
}

/// Reads `out.len()` elements of `dtype` from `bytes`, starting at element `base` and `step`
/// elements apart, into `out`.
pub fn load_run<D: Num>(bytes: &[u8], dtype: DType, base: usize, step: usize, out: &mut [D]) {
    macro_rules! run {
        ($t:ty, $conv:expr) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            if step == 1 {
                let start = base * SIZE;
                let src = &bytes[start..start + out.len() * SIZE];
                for (o, chunk) in out.iter_mut().zip(src.chunks_exact(SIZE)) {
                    let v = <$t>::from_le_bytes(chunk.try_into().unwrap_or_default());
                    *o = $conv(v);
                }
            } else {
                for (i, o) in out.iter_mut().enumerate() {
                    let at = (base + i * step) * SIZE;
                    let chunk = &bytes[at..at + SIZE];
                    let v = <$t>::from_le_bytes(chunk.try_into().unwrap_or_default());
                    *o = $conv(v);
                }
            }
        }};
    }
    match dtype {
        DType::F32 => run!(f32, D::from_f32),
        DType::F16 => run!(f16, |v: f16| D::from_f32(v.to_f32())),
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
/// apart.
pub fn store_run<D: Num>(bytes: &mut [u8], dtype: DType, base: usize, step: usize, vals: &[D]) {
    macro_rules! run {
        ($t:ty, $conv:expr) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            if step == 1 {
                let start = base * SIZE;
                let dst = &mut bytes[start..start + vals.len() * SIZE];
                for (chunk, &v) in dst.chunks_exact_mut(SIZE).zip(vals) {
                    let x: $t = $conv(v);
                    chunk.copy_from_slice(&x.to_le_bytes());
                }
            } else {
                for (i, &v) in vals.iter().enumerate() {
                    let at = (base + i * step) * SIZE;
                    let x: $t = $conv(v);
                    bytes[at..at + SIZE].copy_from_slice(&x.to_le_bytes());
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
        DType::F16 => run!(f16, |v: D| if D::FLOAT {
            f16::from_f64(v.to_f64())
        } else {
            f16::from_f64(v.to_i64() as f64)
        }),
        DType::BF16 => run!(bf16, |v: D| bf16::from_f64(v.to_f64())),
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
