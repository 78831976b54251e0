//! braid's built-in kernels as aclnn operators, in their data type: Fill →
//! `aclnnInplaceFillScalar`, Add → `aclnnAdd` (alpha 1), Scale → `aclnnMuls`, Matmul →
//! `aclnnMm` (keeping the data type), ReduceSum → `aclnnReduceSum` over the one dimension with
//! `keepDim` (a 1-element output), Copy → a device-to-device `aclrtMemcpyAsync` (any byte
//! length, no operator); Busy has no operator: it runs on `braid-acl-sim` through braid's
//! `braidSimBusy` extension and is [`BUSY_UNSUPPORTED`] elsewhere.
//!
//! Descriptors live in the prepared value until its launch has been enqueued and are
//! destroyed right after it (as torch_npu releases its converted arguments after the launch
//! call, without synchronizing).

use super::objects::{Executor, IntArray, LaunchFn, Scalar, Tensor};
use super::AclnnApi;
use crate::error::AclError;
use braid_acl_sys::aclnn::CUBE_MATH_KEEP_DTYPE;
pub use braid_acl_sys::dtypes::acl_data_type;
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::{HalError, PreparedLaunch};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::types::{DevicePtr, DeviceSlice};

/// What [`hal::Stream::prepare`](braid_stream_core::hal::Stream::prepare) reports for
/// `Kernel::Busy` on ACL.
pub const BUSY_UNSUPPORTED: &str =
    "Kernel::Busy has no aclnn operator (it only occupies a simulated device: braid-acl-sim runs it through its braidSimBusy extension)";

/// Descriptors kept alive until the launch.
pub(crate) type Held = Box<dyn Send + Sync>;

/// A planned operator: its executor, launch function and descriptors.
pub(crate) struct Operator {
    pub(crate) executor: Executor,
    pub(crate) launch: LaunchFn,
    pub(crate) call: &'static str,
    pub(crate) _held: Vec<Held>,
}

/// A built-in kernel prepared for ACL: an aclnn operator with its executor (the workspace it
/// needs is [`PreparedLaunch::workspace_size`]), or a device-to-device copy.
pub struct AclPrepared {
    pub(crate) kind: Kind,
}

pub(crate) enum Kind {
    Operator(Operator),
    DeviceCopy {
        dst: DevicePtr,
        src: DevicePtr,
        len: u64,
    },
    Busy {
        duration_ns: u64,
    },
}

impl PreparedLaunch for AclPrepared {
    fn workspace_size(&self) -> u64 {
        match &self.kind {
            Kind::Operator(op) => op.executor.workspace_size(),
            Kind::DeviceCopy { .. } | Kind::Busy { .. } => 0,
        }
    }
}

impl AclPrepared {
    pub(crate) fn busy(duration_ns: u64) -> Self {
        AclPrepared {
            kind: Kind::Busy { duration_ns },
        }
    }

    /// The aclnn launch function it calls (`"aclrtMemcpyAsync"` for a copy).
    pub fn call(&self) -> &'static str {
        match &self.kind {
            Kind::Operator(op) => op.call,
            Kind::DeviceCopy { .. } => "aclrtMemcpyAsync",
            Kind::Busy { .. } => "braidSimBusy",
        }
    }
}

fn elements(dtype: DType, s: DeviceSlice) -> Result<i64, HalError> {
    i64::try_from(s.len / dtype.size())
        .map_err(|_| HalError::InvalidArgument(format!("{s} has too many elements for aclnn")))
}

/// Plans `kernel` as its aclnn operator (its `GetWorkspaceSize`).
pub(crate) fn prepare(
    api: &'static AclnnApi,
    kernel: &TypedKernel,
) -> Result<AclPrepared, HalError> {
    let t = kernel.dtype;
    let ops = api.operators();
    let tensor = |dims: &[i64], s: DeviceSlice| Tensor::new(api, dims, t, s.ptr);
    let op = |executor: Result<Executor, AclError>,
              launch: LaunchFn,
              call: &'static str,
              held: Vec<Held>| {
        Ok(AclPrepared {
            kind: Kind::Operator(Operator {
                executor: executor?,
                launch,
                call,
                _held: held,
            }),
        })
    };
    match kernel.kernel {
        Kernel::Fill { dst, value } => {
            let dst = tensor(&[elements(t, dst)?], dst)?;
            let value = Scalar::new(api, value)?;
            let executor =
                Executor::plan(api, "aclnnInplaceFillScalarGetWorkspaceSize", |ws, ex| {
                    // SAFETY: live descriptors and out pointers.
                    unsafe {
                        (ops.aclnnInplaceFillScalarGetWorkspaceSize)(
                            dst.as_ptr(),
                            value.as_ptr(),
                            ws,
                            ex,
                        )
                    }
                });
            op(
                executor,
                ops.aclnnInplaceFillScalar,
                "aclnnInplaceFillScalar",
                vec![Box::new(dst) as Held, Box::new(value) as Held],
            )
        }
        Kernel::Add { a, b, out } => {
            let n = elements(t, a)?;
            let (a, b, out) = (tensor(&[n], a)?, tensor(&[n], b)?, tensor(&[n], out)?);
            let alpha = Scalar::new(api, 1.0)?;
            let executor = Executor::plan(api, "aclnnAddGetWorkspaceSize", |ws, ex| {
                // SAFETY: live descriptors and out pointers.
                unsafe {
                    (ops.aclnnAddGetWorkspaceSize)(
                        a.as_ptr(),
                        b.as_ptr(),
                        alpha.as_ptr(),
                        out.as_ptr(),
                        ws,
                        ex,
                    )
                }
            });
            op(
                executor,
                ops.aclnnAdd,
                "aclnnAdd",
                vec![
                    Box::new(a) as Held,
                    Box::new(b) as Held,
                    Box::new(out) as Held,
                    Box::new(alpha) as Held,
                ],
            )
        }
        Kernel::Scale { src, dst, factor } => {
            let n = elements(t, src)?;
            let (src, dst) = (tensor(&[n], src)?, tensor(&[n], dst)?);
            let factor = Scalar::new(api, factor)?;
            let executor = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
                // SAFETY: live descriptors and out pointers.
                unsafe {
                    (ops.aclnnMulsGetWorkspaceSize)(
                        src.as_ptr(),
                        factor.as_ptr(),
                        dst.as_ptr(),
                        ws,
                        ex,
                    )
                }
            });
            op(
                executor,
                ops.aclnnMuls,
                "aclnnMuls",
                vec![
                    Box::new(src) as Held,
                    Box::new(dst) as Held,
                    Box::new(factor) as Held,
                ],
            )
        }
        Kernel::Matmul { a, b, c, m, k, n } => {
            let (m, k, n) = (i64::from(m), i64::from(k), i64::from(n));
            let (a, b, c) = (
                tensor(&[m, k], a)?,
                tensor(&[k, n], b)?,
                tensor(&[m, n], c)?,
            );
            let executor = Executor::plan(api, "aclnnMmGetWorkspaceSize", |ws, ex| {
                // SAFETY: live descriptors and out pointers.
                unsafe {
                    (ops.aclnnMmGetWorkspaceSize)(
                        a.as_ptr(),
                        b.as_ptr(),
                        c.as_ptr(),
                        CUBE_MATH_KEEP_DTYPE,
                        ws,
                        ex,
                    )
                }
            });
            op(
                executor,
                ops.aclnnMm,
                "aclnnMm",
                vec![
                    Box::new(a) as Held,
                    Box::new(b) as Held,
                    Box::new(c) as Held,
                ],
            )
        }
        Kernel::ReduceSum { src, dst } => {
            let src = tensor(&[elements(t, src)?], src)?;
            let dst = tensor(&[1], dst)?;
            let dims = IntArray::new(api, &[0])?;
            let executor = Executor::plan(api, "aclnnReduceSumGetWorkspaceSize", |ws, ex| {
                // SAFETY: live descriptors and out pointers.
                unsafe {
                    (ops.aclnnReduceSumGetWorkspaceSize)(
                        src.as_ptr(),
                        dims.as_ptr(),
                        true,
                        acl_data_type(t),
                        dst.as_ptr(),
                        ws,
                        ex,
                    )
                }
            });
            op(
                executor,
                ops.aclnnReduceSum,
                "aclnnReduceSum",
                vec![
                    Box::new(src) as Held,
                    Box::new(dst) as Held,
                    Box::new(dims) as Held,
                ],
            )
        }
        Kernel::Copy { src, dst } => Ok(AclPrepared {
            kind: Kind::DeviceCopy {
                dst: dst.ptr,
                src: src.ptr,
                len: src.len,
            },
        }),
        Kernel::Busy { duration_ns } => Ok(AclPrepared {
            kind: Kind::Busy { duration_ns },
        }),
        Kernel::Op(ref op) => super::lower::prepare(api, op),
    }
}
