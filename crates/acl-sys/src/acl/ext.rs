//! braid's kernel-launch extension (`braidSimLaunchKernel`, which `braid-acl-sim` exports and
//! CANN does not): the C description of one of braid's kernels.

/// Kinds of [`BraidKernelDesc`] (braid's `Kernel` variants).
pub mod kernel_kind {
    /// `Kernel::Fill`.
    pub const FILL: u32 = 0;
    /// `Kernel::Add`.
    pub const ADD: u32 = 1;
    /// `Kernel::Scale`.
    pub const SCALE: u32 = 2;
    /// `Kernel::Matmul`.
    pub const MATMUL: u32 = 3;
    /// `Kernel::Copy`.
    pub const COPY: u32 = 4;
    /// `Kernel::ReduceSum`.
    pub const REDUCE_SUM: u32 = 5;
    /// `Kernel::Busy`.
    pub const BUSY: u32 = 6;
}

/// Name of braid's optional kernel-launch extension symbol (see
/// [`fns::braidSimLaunchKernel`](super::fns::braidSimLaunchKernel)). `braid-acl-sim` exports
/// it; CANN does not (real operators run through aclnn).
pub const KERNEL_EXTENSION_SYMBOL: &str = "braidSimLaunchKernel";

/// One of braid's backend-neutral kernels as a C struct, for the kernel-launch extension.
///
/// Operands are `(ptr, len)` byte ranges in `ptr`/`len`: fill `[dst]`, add `[a, b, out]`, scale
/// `[src, dst]`, matmul `[a, b, c]` with `m`, `k`, `n`, copy `[src, dst]`, reduce_sum
/// `[src, dst]`, busy none. `scalar` is the fill value or the scale factor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BraidKernelDesc {
    /// One of [`kernel_kind`].
    pub kind: u32,
    /// Matmul rows of `a` and `c`.
    pub m: u32,
    /// Matmul columns of `a`, rows of `b`.
    pub k: u32,
    /// Matmul columns of `b` and `c`.
    pub n: u32,
    /// Operand addresses.
    pub ptr: [u64; 3],
    /// Operand lengths in bytes.
    pub len: [u64; 3],
    /// Fill value or scale factor.
    pub scalar: f32,
    /// Zero.
    pub reserved: u32,
    /// Busy duration in nanoseconds.
    pub duration_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_description_has_its_c_size() {
        assert_eq!(std::mem::size_of::<BraidKernelDesc>(), 80);
        assert_eq!(std::mem::offset_of!(BraidKernelDesc, duration_ns), 72);
    }
}
