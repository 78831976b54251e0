//! Backend-neutral descriptions of device work.
//!
//! Every kernel declares the byte ranges it reads and writes. The front layer uses the
//! declarations to validate launches, the allocator (automatic mode) to note cross-stream uses,
//! and the simulator to compute results, cost and races.

use crate::dtype::DType;
use crate::ops::{OpKernel, OpSpec};
use crate::types::DeviceSlice;
use crate::uses::Access;
use std::fmt;

/// The most ranges a built-in kernel declares (two reads and a write).
pub const MAX_KERNEL_RANGES: usize = 3;

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

/// One of braid's built-in kernels. Element counts and values of the flat kernels follow the
/// data type it is launched with ([`Kernel::typed`]; `f32` unless said otherwise); a tensor
/// operator ([`Kernel::Op`]) carries its operands' types itself.
#[derive(Clone, PartialEq, Debug)]
pub enum Kernel {
    /// `dst[i] = value` for every element of `dst`.
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
    /// `dst[0] = Σ src[i]` over the elements of `src`.
    ReduceSum {
        /// Input.
        src: DeviceSlice,
        /// Output: exactly one element.
        dst: DeviceSlice,
    },
    /// Occupies the stream for a fixed time and touches no memory.
    Busy {
        /// Device time in nanoseconds.
        duration_ns: u64,
    },
    /// A tensor operator ([`crate::ops`]), checked when it was made
    /// ([`TensorOp::kernel`](crate::ops::TensorOp::kernel)).
    Op(OpKernel),
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
            Kernel::Op(op) => op.name(),
        }
    }

    /// Every range the kernel declares with how it uses it, reads first: the first `count`
    /// entries of the array, the same as [`Kernel::reads`] then [`Kernel::writes`] (a test
    /// holds them equal). One match and no iterator to build: the front layer walks it
    /// twice on every launch.
    pub(crate) fn declared(&self) -> ([(DeviceSlice, Access); MAX_KERNEL_RANGES], usize) {
        let (read, write) = (Access::Read, Access::Write);
        let none = (DeviceSlice::default(), read);
        match *self {
            // A tensor operator's ranges are [`OpKernel::uses`]: callers take them there.
            Kernel::Busy { .. } | Kernel::Op(_) => ([none; MAX_KERNEL_RANGES], 0),
            Kernel::Fill { dst, .. } => ([(dst, write), none, none], 1),
            Kernel::Add { a, b, out } | Kernel::Matmul { a, b, c: out, .. } => {
                ([(a, read), (b, read), (out, write)], 3)
            }
            Kernel::Scale { src, dst, .. }
            | Kernel::Copy { src, dst }
            | Kernel::ReduceSum { src, dst } => ([(src, read), (dst, write), none], 2),
        }
    }

    /// Every range the kernel declares with how it uses it, reads first.
    pub fn uses(&self) -> KernelUses<'_> {
        match self {
            Kernel::Op(op) => KernelUses::Op(op.uses().iter()),
            other => {
                let (uses, len) = other.declared();
                KernelUses::Inline { uses, next: 0, len }
            }
        }
    }

    /// Ranges the kernel reads.
    pub fn reads(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.uses()
            .filter(|(_, a)| *a == Access::Read)
            .map(|(s, _)| s)
    }

    /// Ranges the kernel writes.
    pub fn writes(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.uses()
            .filter(|(_, a)| *a == Access::Write)
            .map(|(s, _)| s)
    }

    /// The resource the kernel occupies while it runs.
    pub fn unit(&self) -> ComputeUnit {
        match self {
            Kernel::Matmul { .. } => ComputeUnit::Cube,
            Kernel::Busy { .. } => ComputeUnit::None,
            Kernel::Op(op) => op.op().unit(),
            _ => ComputeUnit::Vector,
        }
    }

    /// The data type it computes in when launched as it is: a tensor operator's
    /// [`OpSpec::compute_dtype`], `f32` for the flat kernels.
    pub fn default_dtype(&self) -> DType {
        match self {
            Kernel::Op(op) => op.op().compute_dtype(),
            _ => DType::F32,
        }
    }

    /// This kernel computing in `dtype`.
    pub fn typed(self, dtype: DType) -> TypedKernel {
        TypedKernel {
            kernel: self,
            dtype,
        }
    }
}

/// The ranges a kernel declares with their accesses ([`Kernel::uses`]), without allocating.
#[derive(Clone, Debug)]
pub enum KernelUses<'a> {
    /// A flat kernel's: `uses[next..len]` are left.
    Inline {
        /// The ranges.
        uses: [(DeviceSlice, Access); MAX_KERNEL_RANGES],
        /// The next one.
        next: usize,
        /// How many there are.
        len: usize,
    },
    /// A tensor operator's.
    Op(std::slice::Iter<'a, (DeviceSlice, Access)>),
}

impl Iterator for KernelUses<'_> {
    type Item = (DeviceSlice, Access);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            KernelUses::Inline { uses, next, len } => {
                let used = uses[..*len].get(*next).copied();
                *next += usize::from(used.is_some());
                used
            }
            KernelUses::Op(it) => it.next().copied(),
        }
    }
}

/// A kernel with the data type it computes in: what a stream launches. `&Kernel` converts into
/// one computing in `f32`, so `stream.launch(&kernel)` keeps meaning single precision;
/// `stream.launch(kernel.typed(DType::F16))` computes in half precision.
#[derive(Clone, PartialEq, Debug)]
pub struct TypedKernel {
    /// The work.
    pub kernel: Kernel,
    /// The element type of every input and output (scalars such as `Fill`'s value are rounded
    /// to it).
    pub dtype: DType,
}

impl From<Kernel> for TypedKernel {
    fn from(kernel: Kernel) -> Self {
        let dtype = kernel.default_dtype();
        kernel.typed(dtype)
    }
}

impl From<&Kernel> for TypedKernel {
    fn from(kernel: &Kernel) -> Self {
        kernel.clone().into()
    }
}

impl From<&TypedKernel> for TypedKernel {
    fn from(kernel: &TypedKernel) -> Self {
        kernel.clone()
    }
}

impl TypedKernel {
    /// Short name used as the default label.
    pub fn name(&self) -> &'static str {
        self.kernel.name()
    }

    /// Ranges the kernel reads.
    pub fn reads(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.kernel.reads()
    }

    /// Ranges the kernel writes.
    pub fn writes(&self) -> impl Iterator<Item = DeviceSlice> + '_ {
        self.kernel.writes()
    }

    /// The resource the kernel occupies while it runs.
    pub fn unit(&self) -> ComputeUnit {
        self.kernel.unit()
    }

    /// Floating-point operations the kernel performs.
    pub fn flops(&self) -> u64 {
        let elements = |s: DeviceSlice| self.dtype.elements(s.len);
        match self.kernel {
            Kernel::Matmul { m, k, n, .. } => 2u64
                .saturating_mul(m as u64)
                .saturating_mul(k as u64)
                .saturating_mul(n as u64),
            Kernel::Add { out, .. } => elements(out),
            Kernel::Scale { dst, .. } => elements(dst),
            Kernel::ReduceSum { src, .. } => elements(src),
            Kernel::Op(ref op) => op.flops(),
            Kernel::Fill { .. } | Kernel::Copy { .. } | Kernel::Busy { .. } => 0,
        }
    }

    /// Bytes of device memory the kernel moves (reads plus writes).
    pub fn bytes_moved(&self) -> u64 {
        self.reads()
            .chain(self.writes())
            .fold(0u64, |acc, s| acc.saturating_add(s.len))
    }

    /// Checks that the declared ranges fit the kernel's shape in its data type.
    pub fn validate(&self) -> Result<(), KernelError> {
        let name = self.name();
        let dtype = self.dtype;
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
        let whole = |s: &DeviceSlice| s.len % dtype.size() == 0;
        let not_whole = |what: &str, len: u64| {
            fail(format!(
                "{what} length {len} is not a whole number of {dtype}"
            ))
        };
        match &self.kernel {
            Kernel::Op(op) if op.op().compute_dtype() != dtype => fail(format!(
                "a tensor operator computes in its operands' types ({}), not {dtype}: launch it without typed()",
                op.op().compute_dtype()
            )),
            Kernel::Fill { dst, .. } if !whole(dst) => not_whole("dst", dst.len),
            Kernel::Add { a, b, out } => {
                if a.len != b.len || a.len != out.len {
                    fail(format!(
                        "lengths differ: a={} b={} out={}",
                        a.len, b.len, out.len
                    ))
                } else if !whole(a) {
                    not_whole("a", a.len)
                } else {
                    Ok(())
                }
            }
            Kernel::Scale { src, dst, .. } => {
                if src.len != dst.len {
                    fail(format!("lengths differ: src={} dst={}", src.len, dst.len))
                } else if !whole(src) {
                    not_whole("src", src.len)
                } else {
                    Ok(())
                }
            }
            Kernel::Copy { src, dst } if src.len != dst.len => {
                fail(format!("lengths differ: src={} dst={}", src.len, dst.len))
            }
            Kernel::ReduceSum { src, dst } => {
                if dst.len != dtype.size() {
                    fail(format!(
                        "dst must hold exactly one {dtype}, has {} bytes",
                        dst.len
                    ))
                } else if !whole(src) {
                    not_whole("src", src.len)
                } else {
                    Ok(())
                }
            }
            Kernel::Matmul { a, b, c, m, k, n } => {
                // u32 × u32 × 4 fits in u64, so this cannot overflow.
                let need = |rows: u32, cols: u32| rows as u64 * cols as u64 * dtype.size();
                if *m == 0 || *k == 0 || *n == 0 {
                    fail(format!("empty shape m={m} k={k} n={n}"))
                } else if a.len < need(*m, *k) {
                    fail(format!(
                        "a has {} bytes, needs {} for {m}x{k} {dtype}",
                        a.len,
                        need(*m, *k)
                    ))
                } else if b.len < need(*k, *n) {
                    fail(format!(
                        "b has {} bytes, needs {} for {k}x{n} {dtype}",
                        b.len,
                        need(*k, *n)
                    ))
                } else if c.len < need(*m, *n) {
                    fail(format!(
                        "c has {} bytes, needs {} for {m}x{n} {dtype}",
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

impl fmt::Display for TypedKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kernel, self.dtype)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kernel::Matmul { m, k, n, .. } => write!(f, "matmul {m}x{k}x{n}"),
            Kernel::Busy { duration_ns } => write!(f, "busy {duration_ns}ns"),
            Kernel::Op(op) => write!(f, "{op}"),
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
        }
        .typed(DType::F32);
        assert_eq!(k.reads().collect::<Vec<_>>(), vec![s(0, 16), s(16, 16)]);
        assert_eq!(k.writes().collect::<Vec<_>>(), vec![s(32, 16)]);
        assert_eq!(k.bytes_moved(), 48);
        assert_eq!(Kernel::Busy { duration_ns: 5 }.reads().count(), 0);
    }

    #[test]
    fn declared_is_reads_then_writes_for_every_kernel() {
        let kernels = [
            Kernel::Fill {
                dst: s(0, 16),
                value: 1.0,
            },
            Kernel::Add {
                a: s(0, 16),
                b: s(16, 16),
                out: s(32, 16),
            },
            Kernel::Scale {
                src: s(0, 16),
                dst: s(16, 16),
                factor: 2.0,
            },
            Kernel::Matmul {
                a: s(0, 32),
                b: s(64, 32),
                c: s(128, 16),
                m: 2,
                k: 4,
                n: 2,
            },
            Kernel::Copy {
                src: s(0, 16),
                dst: s(16, 16),
            },
            Kernel::ReduceSum {
                src: s(0, 16),
                dst: s(16, 4),
            },
            Kernel::Busy { duration_ns: 5 },
        ];
        for kernel in kernels {
            let (ranges, count) = kernel.declared();
            let expected: Vec<_> = kernel
                .reads()
                .map(|r| (r, Access::Read))
                .chain(kernel.writes().map(|w| (w, Access::Write)))
                .collect();
            assert_eq!(ranges[..count].to_vec(), expected, "{kernel:?}");
        }
    }

    #[test]
    fn validate_rejects_mismatched_shapes() {
        assert!(TypedKernel::from(Kernel::Add {
            a: s(0, 16),
            b: s(16, 12),
            out: s(32, 16)
        })
        .validate()
        .is_err());
        assert!(TypedKernel::from(Kernel::ReduceSum {
            src: s(0, 16),
            dst: s(16, 8)
        })
        .validate()
        .is_err());
        let mm = Kernel::Matmul {
            a: s(0, 32),
            b: s(64, 32),
            c: s(128, 16),
            m: 2,
            k: 4,
            n: 2,
        }
        .typed(DType::F32);
        assert!(mm.validate().is_ok());
        assert_eq!(mm.flops(), 32);
        let short = Kernel::Matmul {
            a: s(0, 31),
            b: s(64, 32),
            c: s(128, 16),
            m: 2,
            k: 4,
            n: 2,
        }
        .typed(DType::F32);
        let err = short.validate().unwrap_err();
        assert!(err.to_string().contains("a has 31 bytes"), "{err}");
        assert!(TypedKernel::from(Kernel::Fill {
            dst: s(u64::MAX - 2, 8),
            value: 0.0
        })
        .validate()
        .is_err());
    }

    #[test]
    fn the_data_type_sets_element_sizes() {
        let add = |len| Kernel::Add {
            a: s(0, len),
            b: s(64, len),
            out: s(128, len),
        };
        assert!(add(6).typed(DType::F16).validate().is_ok());
        let err = add(6).typed(DType::F32).validate().unwrap_err();
        assert!(err.to_string().contains("whole number of float32"), "{err}");
        assert_eq!(add(8).typed(DType::F16).flops(), 4);
        assert_eq!(add(8).typed(DType::F32).flops(), 2);
        let mm = Kernel::Matmul {
            a: s(0, 16),
            b: s(64, 16),
            c: s(128, 8),
            m: 2,
            k: 4,
            n: 2,
        };
        assert!(mm.clone().typed(DType::BF16).validate().is_ok());
        assert!(mm.typed(DType::F32).validate().is_err());
        let sum = Kernel::ReduceSum {
            src: s(0, 8),
            dst: s(64, 2),
        };
        assert!(sum.clone().typed(DType::F16).validate().is_ok());
        assert!(sum.typed(DType::F32).validate().is_err());
    }
}
