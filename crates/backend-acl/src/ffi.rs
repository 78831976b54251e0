//! The C types, flags and enums of the ACL API braid uses (`reference/acl-runtime.md` §1.2–1.9),
//! and braid's kernel-launch extension.

use braid_stream_core::kernel::Kernel;
use std::ffi::c_void;

/// `aclError`: 0 is success.
pub type AclErrorCode = i32;
/// `aclrtStream` (null is the default stream).
pub type AclrtStream = *mut c_void;
/// `aclrtEvent`.
pub type AclrtEvent = *mut c_void;
/// `aclmdlRI`: a model run instance (a captured graph).
pub type AclmdlRI = *mut c_void;
/// `aclrtDrvMemHandle`: a physical memory handle (virtual-memory API).
pub type AclrtDrvMemHandle = *mut c_void;

/// `aclrtCreateStreamWithConfig` flag: pre-allocate resources for faster task submission.
pub const ACL_STREAM_FAST_LAUNCH: u32 = 0x1;
/// `aclrtCreateStreamWithConfig` flag: busy-poll in `aclrtSynchronizeStream`.
pub const ACL_STREAM_FAST_SYNC: u32 = 0x2;

/// Event flag: the event can be waited on (`aclrtStreamWaitEvent`) and used in capture.
pub const ACL_EVENT_SYNC: u32 = 0x1;
/// Event flag: the event tracks a capturing stream's progress.
pub const ACL_EVENT_CAPTURE_STREAM_PROGRESS: u32 = 0x2;
/// Event flag: the event records timestamps (`aclrtEventElapsedTime`).
pub const ACL_EVENT_TIME_LINE: u32 = 0x8;

/// `aclrtStreamStatus::ACL_STREAM_STATUS_COMPLETE`.
pub const ACL_STREAM_STATUS_COMPLETE: u32 = 0;
/// `aclrtStreamStatus::ACL_STREAM_STATUS_NOT_READY`.
pub const ACL_STREAM_STATUS_NOT_READY: u32 = 1;

/// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_NOT_READY` (note: 0, unlike streams).
pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: u32 = 0;
/// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_COMPLETE`.
pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: u32 = 1;

/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST`: 2 MB pages, normal pages when they run out.
pub const ACL_MEM_MALLOC_HUGE_FIRST: u32 = 0;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_ONLY`.
pub const ACL_MEM_MALLOC_HUGE_ONLY: u32 = 1;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_NORMAL_ONLY`.
pub const ACL_MEM_MALLOC_NORMAL_ONLY: u32 = 2;

/// `aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_HOST`.
pub const ACL_MEMCPY_HOST_TO_HOST: u32 = 0;
/// `aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE`.
pub const ACL_MEMCPY_HOST_TO_DEVICE: u32 = 1;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST`.
pub const ACL_MEMCPY_DEVICE_TO_HOST: u32 = 2;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_DEVICE`.
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: u32 = 3;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEFAULT`: direction inferred from the addresses.
pub const ACL_MEMCPY_DEFAULT: u32 = 4;

/// `aclrtMemAttr::ACL_DDR_MEM`.
pub const ACL_DDR_MEM: u32 = 0;
/// `aclrtMemAttr::ACL_HBM_MEM`: device memory, what torch_npu asks `aclrtGetMemInfo` about.
pub const ACL_HBM_MEM: u32 = 1;

/// `aclmdlRICaptureMode::ACL_MODEL_RI_CAPTURE_MODE_GLOBAL`.
pub const ACL_MODEL_RI_CAPTURE_MODE_GLOBAL: u32 = 0;
/// `aclmdlRICaptureMode::ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL`.
pub const ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL: u32 = 1;
/// `aclmdlRICaptureMode::ACL_MODEL_RI_CAPTURE_MODE_RELAXED`.
pub const ACL_MODEL_RI_CAPTURE_MODE_RELAXED: u32 = 2;

/// `aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_NONE`.
pub const ACL_MODEL_RI_CAPTURE_STATUS_NONE: u32 = 0;
/// `aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE`.
pub const ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE: u32 = 1;
/// `aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED`.
pub const ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED: u32 = 2;

/// `aclrtMemAttr::ACL_HBM_MEM_HUGE`: HBM in huge pages (physical memory of expandable
/// segments).
pub const ACL_HBM_MEM_HUGE: u32 = 4;
/// `aclrtMemHandleType::ACL_MEM_HANDLE_TYPE_NONE`.
pub const ACL_MEM_HANDLE_TYPE_NONE: u32 = 0;
/// `aclrtMemAllocationType::ACL_MEM_ALLOCATION_TYPE_PINNED`.
pub const ACL_MEM_ALLOCATION_TYPE_PINNED: u32 = 0;
/// `aclrtMemLocationType::ACL_MEM_LOCATION_TYPE_DEVICE`.
pub const ACL_MEM_LOCATION_TYPE_DEVICE: u32 = 1;
/// `aclrtMemGranularityOptions::ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM`.
pub const ACL_MEM_GRANULARITY_MINIMUM: u32 = 0;

/// `aclrtPhysicalMemProp` (virtual-memory API, for expandable segments).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclrtPhysicalMemProp {
    /// `aclrtMemHandleType`.
    pub handle_type: u32,
    /// `aclrtMemAllocationType`.
    pub allocation_type: u32,
    /// `aclrtMemAttr`.
    pub mem_attr: u32,
    /// `aclrtMemLocation::id`.
    pub location_id: u32,
    /// `aclrtMemLocation::type`.
    pub location_type: u32,
    /// Reserved, 0.
    pub reserve: u64,
}

/// Kinds of [`BraidKernelDesc`].
pub mod kernel_kind {
    /// [`Kernel::Fill`](braid_stream_core::Kernel::Fill).
    pub const FILL: u32 = 0;
    /// [`Kernel::Add`](braid_stream_core::Kernel::Add).
    pub const ADD: u32 = 1;
    /// [`Kernel::Scale`](braid_stream_core::Kernel::Scale).
    pub const SCALE: u32 = 2;
    /// [`Kernel::Matmul`](braid_stream_core::Kernel::Matmul).
    pub const MATMUL: u32 = 3;
    /// [`Kernel::Copy`](braid_stream_core::Kernel::Copy).
    pub const COPY: u32 = 4;
    /// [`Kernel::ReduceSum`](braid_stream_core::Kernel::ReduceSum).
    pub const REDUCE_SUM: u32 = 5;
    /// [`Kernel::Busy`](braid_stream_core::Kernel::Busy).
    pub const BUSY: u32 = 6;
}

/// Name of braid's optional kernel-launch extension symbol:
/// `aclError braidSimLaunchKernel(aclrtStream, const BraidKernelDesc*, size_t descSize, const
/// char *label)`. `braid-acl-sim` exports it; CANN does not (real operators run through aclnn,
/// which braid does not bind yet).
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

impl BraidKernelDesc {
    /// The C description of `kernel`.
    pub fn from_kernel(kernel: &Kernel) -> Self {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::{DevicePtr, DeviceSlice};

    #[test]
    fn kernels_become_c_descriptions() {
        let s = |a: u64, l: u64| DeviceSlice::new(DevicePtr(a), l);
        let d = BraidKernelDesc::from_kernel(&Kernel::Matmul {
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
        let f = BraidKernelDesc::from_kernel(&Kernel::Fill {
            dst: s(8, 4),
            value: 2.5,
        });
        assert_eq!(
            (f.kind, f.scalar, f.ptr[0], f.len[0]),
            (kernel_kind::FILL, 2.5, 8, 4)
        );
        let b = BraidKernelDesc::from_kernel(&Kernel::Busy { duration_ns: 7 });
        assert_eq!((b.kind, b.duration_ns), (kernel_kind::BUSY, 7));
        assert_eq!(std::mem::size_of::<BraidKernelDesc>(), 80);
    }
}
