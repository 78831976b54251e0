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
}

impl DType {
    /// Every data type, narrowest last.
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// Bytes per element.
    pub const fn size(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// The name users know (`float32`, `float16`, `bfloat16`, as in PyTorch).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
        }
    }

    /// `value` rounded to this type (round to nearest even), as an `f32`.
    pub fn round(self, value: f32) -> f32 {
        match self {
            DType::F32 => value,
            DType::F16 => f16::from_f32(value).to_f32(),
            DType::BF16 => bf16::from_f32(value).to_f32(),
        }
    }

    /// Appends `value`, rounded to this type, in its little-endian layout.
    pub fn push(self, out: &mut Vec<u8>, value: f32) {
        match self {
            DType::F32 => out.extend_from_slice(&value.to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f32(value).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&bf16::from_f32(value).to_le_bytes()),
        }
    }

    /// The element at index `i` of `bytes`, widened to `f32`; `None` past the end.
    pub fn get(self, bytes: &[u8], i: usize) -> Option<f32> {
        let size = self.size() as usize;
        let at = i.checked_mul(size)?;
        let raw = bytes.get(at..at.checked_add(size)?)?;
        Some(match self {
            DType::F32 => f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
            DType::F16 => f16::from_le_bytes([raw[0], raw[1]]).to_f32(),
            DType::BF16 => bf16::from_le_bytes([raw[0], raw[1]]).to_f32(),
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
        for dtype in DType::ALL {
            let values = [0.0, -1.5, 3.25, 1024.0];
            let bytes = dtype.encode(&values);
            assert_eq!(bytes.len() as u64, 4 * dtype.size());
            assert_eq!(dtype.decode(&bytes), values, "{dtype}");
            assert_eq!(dtype.get(&bytes, 4), None);
        }
        assert_eq!(DType::F16.encode(&[1.0]).as_ref(), &[0x00, 0x3c]);
        assert_eq!(DType::BF16.encode(&[1.0]).as_ref(), &[0x80, 0x3f]);
    }
}
