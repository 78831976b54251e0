//! The C declarations of the ACL API braid uses (re-exported from `braid-acl-sys`, where they
//! are written once for this backend and for `braid-acl-sim`), and the C description of a
//! braid kernel for braid's kernel-launch extension.

pub use braid_acl_sys::acl::*;

use braid_stream_core::kernel::Kernel;

/// The C description of `kernel` ([`BraidKernelDesc`]).
pub fn kernel_desc(kernel: &Kernel) -> BraidKernelDesc {
    let mut d = BraidKernelDesc::default();
    let mut set = |i: usize, s: braid_stream_core::DeviceSlice| {
        d.ptr[i] = s.ptr.0;
        d.len[i] = s.len;
    };
    let (kind, scalar, mnk, duration) = match *kernel {
        Kernel::Fill { dst, value } => {
            set(0, dst);
            (kernel_kind::FILL, value, (0, 0, 0), 0)
        }
        Kernel::Add { a, b, out } => {
            set(0, a);
            set(1, b);
            set(2, out);
            (kernel_kind::ADD, 0.0, (0, 0, 0), 0)
        }
        Kernel::Scale { src, dst, factor } => {
            set(0, src);
            set(1, dst);
            (kernel_kind::SCALE, factor, (0, 0, 0), 0)
        }
        Kernel::Matmul { a, b, c, m, k, n } => {
            set(0, a);
            set(1, b);
            set(2, c);
            (kernel_kind::MATMUL, 0.0, (m, k, n), 0)
        }
        Kernel::Copy { src, dst } => {
            set(0, src);
            set(1, dst);
            (kernel_kind::COPY, 0.0, (0, 0, 0), 0)
        }
        Kernel::ReduceSum { src, dst } => {
            set(0, src);
            set(1, dst);
            (kernel_kind::REDUCE_SUM, 0.0, (0, 0, 0), 0)
        }
        Kernel::Busy { duration_ns } => (kernel_kind::BUSY, 0.0, (0, 0, 0), duration_ns),
    };
    d.kind = kind;
    d.scalar = scalar;
    (d.m, d.k, d.n) = mnk;
    d.duration_ns = duration;
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::{DevicePtr, DeviceSlice};

    #[test]
    fn kernels_become_c_descriptions() {
        let s = |a: u64, l: u64| DeviceSlice::new(DevicePtr(a), l);
        let d = kernel_desc(&Kernel::Matmul {
            a: s(0x100, 32),
            b: s(0x200, 32),
            c: s(0x300, 16),
            m: 2,
            k: 4,
            n: 2,
        });
        assert_eq!(d.kind, kernel_kind::MATMUL);
        assert_eq!((d.m, d.k, d.n), (2, 4, 2));
        assert_eq!(d.ptr, [0x100, 0x200, 0x300]);
        assert_eq!(d.len, [32, 32, 16]);
        let f = kernel_desc(&Kernel::Fill {
            dst: s(8, 4),
            value: 2.5,
        });
        assert_eq!(
            (f.kind, f.scalar, f.ptr[0], f.len[0]),
            (kernel_kind::FILL, 2.5, 8, 4)
        );
        let b = kernel_desc(&Kernel::Busy { duration_ns: 7 });
        assert_eq!((b.kind, b.duration_ns), (kernel_kind::BUSY, 7));
    }
}
