//! Backend-neutral descriptions of device work.
//!
//! Every kernel declares the byte ranges it reads and writes. The front layer uses the
//! declarations to validate launches, the allocator (automatic mode) to note cross-stream uses,
//! and the simulator to compute results, cost and races.

use crate::types::DeviceSlice;
use std::fmt;

/// Which contended hardware resource a piece of work occupies.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ComputeUnit {
    /// Matrix ("cube") units: matmuls.
    Cube,
    /// Vector units: element-wise work, reductions, memset.
    Vector,
    /// The copy / communication engine: host transfers and device-to-device copies.
    Copy,
    /// No shared resource (for example a kernel that only spins).
    None,
}

/// One kernel launch. Element-wise kernels work on `f32` data.
#[derive(Clone, PartialEq, Debug)]
pub enum Kernel {
    /// `dst[i] = value` for every `f32` in `dst`.
    Fill {
        /// Written range.
        dst: DeviceSlice,
        /// Value stored in every element.
        value: f32,
    },
    /// `out[i] = a[i] + b[i]`.
    Add {
        /// First input.
        a: DeviceSlice,
        /// Second input, same length as `a`.
        b: DeviceSlice,
        /// Output, same length as `a`.
        out: DeviceSlice,
    },
    /// `dst[i] = src[i] * factor`.
    Scale {
        /// Input.
        src: DeviceSlice,
        /// Output, same length as `src`.
        dst: DeviceSlice,
        /// Multiplier.
        factor: f32,
    },
    /// `c = a × b` for row-major `a: m×k`, `b: k×n`, `c: m×n`.
    Matmul {
        /// Left operand, `m*k` elements.
        a: DeviceSlice,
        /// Right operand, `k*n` elements.
        b: DeviceSlice,
        /// Output, `m*n` elements.
        c: DeviceSlice,
        /// Rows of `a` and `c`.
        m: u32,
        /// Columns of `a`, rows of `b`.
        k: u32,
        /// Columns of `b` and `c`.
        n: u32,
    },
    /// `dst[i] = src[i]` as a kernel (byte copy, same lengths).
    Copy {
        /// Input.
        src: DeviceSlice,
        /// Output, same length as `src`.
        dst: DeviceSlice,
    },
    /// `dst[0] = Σ src[i]` over the `f32` elements of `src`.
    ReduceSum {
        /// Input.
        src: DeviceSlice,
        /// Output: exactly one `f32`.
        dst: DeviceSlice,
    },
    /// Occupies the stream for a fixed time and touches no memory.
    Busy {
        /// Device time in nanoseconds.
        duration_ns: u64,
    },
}

/// A kernel whose declared ranges do not fit its shape.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("invalid {kernel} launch: {reason}")]
pub struct KernelError {
    /// Kernel name.
    pub kernel: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl Kernel {
    /// Short name used as the default label.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Fill { .. } => "fill",
            Kernel::Add { .. } => "add",
            Kernel::Scale { .. } => "scale",
            Kernel::Matmul { .. } => "matmul",
            Kernel::Copy { .. } => "copy",
            Kernel::ReduceSum { .. } => "reduce_sum",
            Kernel::Busy { .. } => "busy",
        }
    }

    /// Ranges the kernel reads.
    pub fn reads(&self) -> impl Iterator<Item = DeviceSlice> {
        let r: [Option<DeviceSlice>; 2] = match *self {
            Kernel::Fill { .. } | Kernel::Busy { .. } => [None, None],
            Kernel::Add { a, b, .. } => [Some(a), Some(b)],
            Kernel::Scale { src, .. }
            | Kernel::Copy { src, .. }
            | Kernel::ReduceSum { src, .. } => [Some(src), None],
            Kernel::Matmul { a, b, .. } => [Some(a), Some(b)],
        };
        r.into_iter().flatten()
    }

    /// Ranges the kernel writes.
    pub fn writes(&self) -> impl Iterator<Item = DeviceSlice> {
        let w: Option<DeviceSlice> = match *self {
            Kernel::Busy { .. } => None,
            Kernel::Fill { dst, .. } => Some(dst),
            Kernel::Add { out, .. } => Some(out),
            Kernel::Scale { dst, .. }
            | Kernel::Copy { dst, .. }
            | Kernel::ReduceSum { dst, .. } => Some(dst),
            Kernel::Matmul { c, .. } => Some(c),
        };
        w.into_iter()
    }

    /// The resource the kernel occupies while it runs.
    pub fn unit(&self) -> ComputeUnit {
        match self {
            Kernel::Matmul { .. } => ComputeUnit::Cube,
            Kernel::Busy { .. } => ComputeUnit::None,
            _ => ComputeUnit::Vector,
        }
    }

    /// Floating-point operations the kernel performs.
    pub fn flops(&self) -> u64 {
        match *self {
            Kernel::Matmul { m, k, n, .. } => 2u64
                .saturating_mul(m as u64)
                .saturating_mul(k as u64)
                .saturating_mul(n as u64),
            Kernel::Add { out, .. } => out.f32_len(),
            Kernel::Scale { dst, .. } => dst.f32_len(),
            Kernel::ReduceSum { src, .. } => src.f32_len(),
            Kernel::Fill { .. } | Kernel::Copy { .. } | Kernel::Busy { .. } => 0,
        }
    }

    /// Bytes of device memory the kernel moves (reads plus writes).
    pub fn bytes_moved(&self) -> u64 {
        self.reads()
            .chain(self.writes())
            .fold(0u64, |acc, s| acc.saturating_add(s.len))
    }

    /// Checks that the declared ranges fit the kernel's shape.
    pub fn validate(&self) -> Result<(), KernelError> {
        let name = self.name();
        let fail = |reason: String| {
            Err(KernelError {
                kernel: name,
                reason,
            })
        };
        for s in self.reads().chain(self.writes()) {
            if s.ptr.0.checked_add(s.len).is_none() {
                return fail(format!(
                    "range at {} of {} bytes overflows the address space",
                    s.ptr, s.len
                ));
            }
        }
        let f32_aligned = |s: &DeviceSlice| s.len % 4 == 0;
        match self {
            Kernel::Fill { dst, .. } if !f32_aligned(dst) => fail(format!(
                "dst length {} is not a whole number of f32",
                dst.len
            )),
            Kernel::Add { a, b, out } => {
                if a.len != b.len || a.len != out.len {
                    fail(format!(
                        "lengths differ: a={} b={} out={}",
                        a.len, b.len, out.len
                    ))
                } else if !f32_aligned(a) {
                    fail(format!("length {} is not a whole number of f32", a.len))
                } else {
                    Ok(())
                }
            }
            Kernel::Scale { src, dst, .. } => {
                if src.len != dst.len {
                    fail(format!("lengths differ: src={} dst={}", src.len, dst.len))
                } else if !f32_aligned(src) {
                    fail(format!("length {} is not a whole number of f32", src.len))
                } else {
                    Ok(())
                }
            }
            Kernel::Copy { src, dst } if src.len != dst.len => {
                fail(format!("lengths differ: src={} dst={}", src.len, dst.len))
            }
            Kernel::ReduceSum { src, dst } => {
                if dst.len != 4 {
                    fail(format!(
                        "dst must hold exactly one f32, has {} bytes",
                        dst.len
                    ))
                } else if !f32_aligned(src) {
                    fail(format!(
                        "src length {} is not a whole number of f32",
                        src.len
                    ))
                } else {
                    Ok(())
                }
            }
            Kernel::Matmul { a, b, c, m, k, n } => {
                // u32 × u32 × 4 fits in u64, so this cannot overflow.
                let need = |rows: u32, cols: u32| rows as u64 * cols as u64 * 4;
                if *m == 0 || *k == 0 || *n == 0 {
                    fail(format!("empty shape m={m} k={k} n={n}"))
                } else if a.len < need(*m, *k) {
                    fail(format!(
                        "a has {} bytes, needs {} for {m}x{k}",
                        a.len,
                        need(*m, *k)
                    ))
                } else if b.len < need(*k, *n) {
                    fail(format!(
                        "b has {} bytes, needs {} for {k}x{n}",
                        b.len,
                        need(*k, *n)
                    ))
                } else if c.len < need(*m, *n) {
                    fail(format!(
                        "c has {} bytes, needs {} for {m}x{n}",
                        c.len,
                        need(*m, *n)
                    ))
                } else if c.overlaps(a) || c.overlaps(b) {
                    fail("output overlaps an input".to_string())
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kernel::Matmul { m, k, n, .. } => write!(f, "matmul {m}x{k}x{n}"),
            Kernel::Busy { duration_ns } => write!(f, "busy {duration_ns}ns"),
            other => {
                let bytes: u64 = other.writes().map(|s| s.len).sum();
                write!(f, "{} {}B", other.name(), bytes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DevicePtr;

    fn s(addr: u64, len: u64) -> DeviceSlice {
        DeviceSlice::new(DevicePtr(addr), len)
    }

    #[test]
    fn declared_ranges_match_kernel_shape() {
        let k = Kernel::Add {
            a: s(0, 16),
            b: s(16, 16),
            out: s(32, 16),
        };
        assert_eq!(k.reads().collect::<Vec<_>>(), vec![s(0, 16), s(16, 16)]);
        assert_eq!(k.writes().collect::<Vec<_>>(), vec![s(32, 16)]);
        assert_eq!(k.bytes_moved(), 48);
        assert_eq!(Kernel::Busy { duration_ns: 5 }.reads().count(), 0);
    }

    #[test]
    fn validate_rejects_mismatched_shapes() {
        assert!(Kernel::Add {
            a: s(0, 16),
            b: s(16, 12),
            out: s(32, 16)
        }
        .validate()
        .is_err());
        assert!(Kernel::ReduceSum {
            src: s(0, 16),
            dst: s(16, 8)
        }
        .validate()
        .is_err());
        let mm = Kernel::Matmul {
            a: s(0, 32),
            b: s(64, 32),
            c: s(128, 16),
            m: 2,
            k: 4,
            n: 2,
        };
        assert!(mm.validate().is_ok());
        assert_eq!(mm.flops(), 32);
        let short = Kernel::Matmul {
            a: s(0, 31),
            b: s(64, 32),
            c: s(128, 16),
            m: 2,
            k: 4,
            n: 2,
        };
        let err = short.validate().unwrap_err();
        assert!(err.to_string().contains("a has 31 bytes"), "{err}");
        assert!(Kernel::Fill {
            dst: s(u64::MAX - 2, 8),
            value: 0.0
        }
        .validate()
        .is_err());
    }
}
