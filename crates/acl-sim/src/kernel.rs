//! braid's kernel-launch extension: the C description of a kernel (`BraidKernelDesc`, the same
//! layout as `braid_backend_acl::ffi::BraidKernelDesc`) back into a [`Kernel`].

use crate::codes::ACL_ERROR_INVALID_PARAM;
use crate::errmsg::{fail, Fail};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::{DevicePtr, DeviceSlice};

/// One kernel as a C struct (see `braid_backend_acl::ffi::BraidKernelDesc`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BraidKernelDesc {
    /// 0 fill, 1 add, 2 scale, 3 matmul, 4 copy, 5 reduce_sum, 6 busy.
    pub kind: u32,
    /// Matmul `m`.
    pub m: u32,
    /// Matmul `k`.
    pub k: u32,
    /// Matmul `n`.
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

/// The kernel `d` describes.
pub(crate) fn kernel_from_desc(d: &BraidKernelDesc) -> Result<Kernel, Fail> {
    let s = |i: usize| DeviceSlice::new(DevicePtr(d.ptr[i]), d.len[i]);
    Ok(match d.kind {
        0 => Kernel::Fill {
            dst: s(0),
            value: d.scalar,
        },
        1 => Kernel::Add {
            a: s(0),
            b: s(1),
            out: s(2),
        },
        2 => Kernel::Scale {
            src: s(0),
            dst: s(1),
            factor: d.scalar,
        },
        3 => Kernel::Matmul {
            a: s(0),
            b: s(1),
            c: s(2),
            m: d.m,
            k: d.k,
            n: d.n,
        },
        4 => Kernel::Copy {
            src: s(0),
            dst: s(1),
        },
        5 => Kernel::ReduceSum {
            src: s(0),
            dst: s(1),
        },
        6 => Kernel::Busy {
            duration_ns: d.duration_ns,
        },
        other => {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("braidSimLaunchKernel: unknown kernel kind {other}"),
            ))
        }
    })
}
