//! Element data types of device work: what a kernel or operator computes in, and how its
//! elements are laid out in memory (little-endian, as on every accelerator braid targets).
//!
//! Values cross between the host and typed device memory through [`DType::encode`] and
//! [`DType::decode`]; computing in a narrow type means rounding every stored result to it
//! ([`DType::round`]), which is how the simulator reproduces the numbers a device gives.

use bytes::Bytes;
use half::{bf16, f16};
use std::fmt;

/// The element type of a kernel's or operator's data.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum DType {
    /// IEEE 754 single precision (4 bytes).
    #[default]
    F32,
    /// IEEE 754 half precision (2 bytes): 10-bit mantissa, range ±65504.
    F16,
    /// bfloat16 (2 bytes): f32's exponent with an 8-bit mantissa.
    BF16,
    /// IEEE 754 double precision (8 bytes).
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer: token ids, positions and indices in model code.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean, one byte holding 0 or 1: masks in model code.
    Bool,
}

/// What kind of values a data type holds, which decides how an operator computes in it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DTypeKind {
    /// A floating-point type: computed in `f32` (`f64` for [`DType::F64`]), each stored
    /// result rounded to the type.
    Float,
    /// A signed or unsigned integer type: computed in `i64`, stored with wrap-around.
    Int,
    /// [`DType::Bool`]: false or true.
    Bool,
}

impl DType {
    /// The floating-point types the simulator's kernels compute in, narrowest last.
    pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// Every data type: the [`DType::FLOATS`] first (in that order), then `f64`, the
    /// integers and bool.
    pub const ALL: [DType; 13] = [
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
        DType::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> u64 {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The name users know (`float32`, `float16`, `bfloat16`, `int64`, `bool`, ..., as in
    /// PyTorch).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
        }
    }

    /// What kind of values it holds.
    pub const fn kind(self) -> DTypeKind {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 => DTypeKind::Float,
            DType::Bool => DTypeKind::Bool,
            _ => DTypeKind::Int,
        }
    }

    /// Whether it is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self.kind(), DTypeKind::Float)
    }

    /// `value` rounded to this type, as an `f32`: round to nearest even for the narrow
    /// floats; for the integers, truncation toward zero, saturating at the type's range
    /// (NaN is 0), as Rust's `as` casts; for bool, 1 for any non-zero value.
    pub fn round(self, value: f32) -> f32 {
        match self {
            DType::F32 => value,
            DType::F16 => f16::from_f32(value).to_f32(),
            DType::BF16 => bf16::from_f32(value).to_f32(),
            DType::F64 => value,
            DType::Bool => f32::from(u8::from(value != 0.0)),
            _ => self.int_from_f64(f64::from(value)) as f32,
        }
    }

    /// `value` converted to this integer type (truncation toward zero, saturating), widened
    /// back to `i64` (an out-of-range `u64` saturates at `i64::MAX`).
    fn int_from_f64(self, value: f64) -> i64 {
        match self {
            DType::I8 => i64::from(value as i8),
            DType::I16 => i64::from(value as i16),
            DType::I32 => i64::from(value as i32),
            DType::U8 => i64::from(value as u8),
            DType::U16 => i64::from(value as u16),
            DType::U32 => i64::from(value as u32),
            DType::U64 => i64::try_from(value as u64).unwrap_or(i64::MAX),
            _ => value as i64,
        }
    }

    /// Appends `value`, rounded to this type, in its little-endian layout.
    pub fn push(self, out: &mut Vec<u8>, value: f32) {
        self.push_f64(out, f64::from(value));
    }

    /// Appends `value`, converted to this type ([`DType::round`]'s rules, in double
    /// precision), in its little-endian layout.
    pub fn push_f64(self, out: &mut Vec<u8>, value: f64) {
        match self {
            DType::F32 => out.extend_from_slice(&(value as f32).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f64(value).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&bf16::from_f64(value).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&value.to_le_bytes()),
            DType::I8 => out.extend_from_slice(&(value as i8).to_le_bytes()),
            DType::I16 => out.extend_from_slice(&(value as i16).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(value as i32).to_le_bytes()),
            DType::I64 => out.extend_from_slice(&(value as i64).to_le_bytes()),
            DType::U8 => out.extend_from_slice(&(value as u8).to_le_bytes()),
            DType::U16 => out.extend_from_slice(&(value as u16).to_le_bytes()),
            DType::U32 => out.extend_from_slice(&(value as u32).to_le_bytes()),
            DType::U64 => out.extend_from_slice(&(value as u64).to_le_bytes()),
            DType::Bool => out.push(u8::from(value != 0.0)),
        }
    }

    /// The element at index `i` of `bytes`, widened to `f32` (an integer beyond 2^24 rounds
    /// to the nearest `f32`); `None` past the end.
    pub fn get(self, bytes: &[u8], i: usize) -> Option<f32> {
        self.get_f64(bytes, i).map(|v| v as f32)
    }

    /// The element at index `i` of `bytes`, widened to `f64` (an `int64` or `uint64` beyond
    /// 2^53 rounds to the nearest `f64`); `None` past the end.
    pub fn get_f64(self, bytes: &[u8], i: usize) -> Option<f64> {
        let size = self.size() as usize;
        let at = i.checked_mul(size)?;
        let raw = bytes.get(at..at.checked_add(size)?)?;
        let two = || [raw[0], raw[1]];
        let four = || [raw[0], raw[1], raw[2], raw[3]];
        let eight = || {
            let mut b = [0u8; 8];
            b.copy_from_slice(raw);
            b
        };
        Some(match self {
            DType::F32 => f64::from(f32::from_le_bytes(four())),
            DType::F16 => f64::from(f16::from_le_bytes(two()).to_f32()),
            DType::BF16 => f64::from(bf16::from_le_bytes(two()).to_f32()),
            DType::F64 => f64::from_le_bytes(eight()),
            DType::I8 => f64::from(raw[0] as i8),
            DType::I16 => f64::from(i16::from_le_bytes(two())),
            DType::I32 => f64::from(i32::from_le_bytes(four())),
            DType::I64 => i64::from_le_bytes(eight()) as f64,
            DType::U8 => f64::from(raw[0]),
            DType::U16 => f64::from(u16::from_le_bytes(two())),
            DType::U32 => f64::from(u32::from_le_bytes(four())),
            DType::U64 => u64::from_le_bytes(eight()) as f64,
            DType::Bool => f64::from(u8::from(raw[0] != 0)),
        })
    }

    /// Encodes `values` (each rounded to this type) as device bytes.
    pub fn encode(self, values: &[f32]) -> Bytes {
        let mut out = Vec::with_capacity(values.len() * self.size() as usize);
        for &v in values {
            self.push(&mut out, v);
        }
        Bytes::from(out)
    }

    /// Decodes device bytes into `f32` values (a trailing partial element is ignored).
    pub fn decode(self, bytes: &[u8]) -> Vec<f32> {
        let n = bytes.len() / self.size() as usize;
        (0..n).filter_map(|i| self.get(bytes, i)).collect()
    }

    /// Number of whole elements in `len` bytes.
    pub const fn elements(self, len: u64) -> u64 {
        len / self.size()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        assert_eq!(DType::F32.size(), 4);
        assert_eq!(DType::F16.size(), 2);
        assert_eq!(DType::BF16.size(), 2);
        assert_eq!(DType::BF16.to_string(), "bfloat16");
        assert_eq!(DType::F16.elements(10), 5);
    }

    #[test]
    fn each_type_rounds_its_own_way() {
        // 1 + 2^-9 is exact in f32, rounds to 1 + 2^-10 steps in f16 (kept: 2^-9 is on the
        // f16 grid) and to 1.0 in bf16 (8-bit mantissa: the grid step at 1 is 2^-7).
        let x = 1.0 + 2f32.powi(-9);
        assert_eq!(DType::F32.round(x), x);
        assert_eq!(DType::F16.round(x), x);
        assert_eq!(DType::BF16.round(x), 1.0);
        // f16 overflows past 65504; bf16 keeps f32's range.
        assert!(DType::F16.round(70000.0).is_infinite());
        assert_eq!(DType::BF16.round(70000.0), 70144.0);
        assert_eq!(DType::F16.round(0.1), 0.099975586);
    }

    #[test]
    fn encode_and_decode_round_trip_in_the_narrow_types() {
        for dtype in DType::FLOATS {
            let values = [0.0, -1.5, 3.25, 1024.0];
            let bytes = dtype.encode(&values);
            assert_eq!(bytes.len() as u64, 4 * dtype.size());
            assert_eq!(dtype.decode(&bytes), values, "{dtype}");
            assert_eq!(dtype.get(&bytes, 4), None);
        }
        assert_eq!(DType::F16.encode(&[1.0]).as_ref(), &[0x00, 0x3c]);
        assert_eq!(DType::BF16.encode(&[1.0]).as_ref(), &[0x80, 0x3f]);
    }

    #[test]
    fn integers_and_bool_truncate_saturate_and_round_trip() {
        assert_eq!(DType::I8.round(300.0), 127.0);
        assert_eq!(DType::U8.round(-3.0), 0.0);
        assert_eq!(DType::I32.round(-2.7), -2.0);
        assert_eq!(DType::I64.round(f32::NAN), 0.0);
        assert_eq!(DType::Bool.round(-0.5), 1.0);
        for dtype in DType::ALL {
            let values = [0.0, 1.0, 7.0, 100.0];
            let expected = values.map(|v| dtype.round(v));
            assert_eq!(dtype.decode(&dtype.encode(&values)), expected, "{dtype}");
        }
        assert_eq!(
            DType::Bool.decode(&DType::Bool.encode(&[0.0, 7.0])),
            [0.0, 1.0]
        );
        let mut big = Vec::new();
        DType::I64.push_f64(&mut big, 9_007_199_254_740_992.0);
        assert_eq!(DType::I64.get_f64(&big, 0), Some(9_007_199_254_740_992.0));
        assert_eq!(DType::I64.to_string(), "int64");
        assert_eq!(DType::Bool.size(), 1);
        assert!(DType::F64.is_float() && !DType::U8.is_float());
        assert_eq!(DType::Bool.kind(), DTypeKind::Bool);
        assert_eq!(DType::ALL[..3], DType::FLOATS);
    }
}
