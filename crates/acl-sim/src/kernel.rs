//! braid's kernel-launch extension: the C description of a kernel ([`BraidKernelDesc`],
//! declared in `braid-acl-sys`) back into a [`Kernel`].

use crate::codes::{kernel_kind, BraidKernelDesc, ACL_ERROR_INVALID_PARAM};
use crate::errmsg::{fail, Fail};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::types::{DevicePtr, DeviceSlice};

/// The kernel `d` describes.
pub(crate) fn kernel_from_desc(d: &BraidKernelDesc) -> Result<Kernel, Fail> {
    let s = |i: usize| DeviceSlice::new(DevicePtr(d.ptr[i]), d.len[i]);
    Ok(match d.kind {
        kernel_kind::FILL => Kernel::Fill {
            dst: s(0),
            value: d.scalar,
        },
        kernel_kind::ADD => Kernel::Add {
            a: s(0),
            b: s(1),
            out: s(2),
        },
        kernel_kind::SCALE => Kernel::Scale {
            src: s(0),
            dst: s(1),
            factor: d.scalar,
        },
        kernel_kind::MATMUL => Kernel::Matmul {
            a: s(0),
            b: s(1),
            c: s(2),
            m: d.m,
            k: d.k,
            n: d.n,
        },
        kernel_kind::COPY => Kernel::Copy {
            src: s(0),
            dst: s(1),
        },
        kernel_kind::REDUCE_SUM => Kernel::ReduceSum {
            src: s(0),
            dst: s(1),
        },
        kernel_kind::BUSY => Kernel::Busy {
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
