//! aclnn on the simulator: descriptors (tensors, scalars, int arrays), executors, and the
//! operators braid uses, with CANN's rules as far as they are documented.
//!
//! - `aclCreateTensor` returns null on bad arguments (null dims or strides with a non-zero
//!   count, an unknown data type, a negative dimension or offset, a null address).
//! - Every `GetWorkspaceSize` checks its parameters: null pointers are
//!   `ACLNN_ERR_PARAM_NULLPTR` (161001); a stale handle, a data type the operator does not
//!   take (braid's f32, f16, bf16), mixed data types or shapes that do not fit are
//!   `ACLNN_ERR_PARAM_INVALID` (161002); `aclGetRecentErrMsg` says which. Tensors must be
//!   contiguous (the simulator's own limit, not CANN's).
//! - An executor is used once: the launch consumes it whatever its result (CANN destroys a
//!   non-repeatable executor in the launch call); `aclSetAclOpExecutorRepeatable` followed by
//!   `aclDestroyAclOpExecutor` releases one that was never launched.
//! - A launch with less workspace than asked, or a workspace that is not device memory, is
//!   161002. The simulator asks for workspace for `aclnnReduceSum` and `aclnnRmsNorm`
//!   ([`REDUCE_SUM_WORKSPACE`], [`RMS_NORM_WORKSPACE`]; its own figures, not CANN's), so the
//!   workspace path is exercised.
//! - The launch enqueues the matching simulator kernel, or for `aclnnRmsNorm` and for
//!   `aclnnAdd` with `alpha` ≠ 1 (`out = self + alpha · other`, computed in f32 and rounded
//!   once to the tensors' type) a host operator over exactly the tensors' ranges, so the
//!   timeline and sanitizer see it.
//!
//! Live tensors, scalars, int arrays and executors are counted (`braidSimAclnnLiveObjects`).

pub mod client_exports;
pub mod exports;
mod ops;
mod strided;

use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR};
use braid_backend_sim::SimBackend;
use braid_stream_core::dtype::DType;
use braid_stream_core::sync::{GlobalMutex, GlobalMutexGuard};
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use braid_stream_core::{CustomOp, TypedKernel};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Workspace bytes the simulator's `aclnnReduceSum` asks for.
pub const REDUCE_SUM_WORKSPACE: u64 = 1024;
/// Workspace bytes the simulator's `aclnnRmsNorm` asks for.
pub const RMS_NORM_WORKSPACE: u64 = 512;

/// A tensor descriptor.
#[derive(Clone, Debug)]
pub(crate) struct TensorDesc {
    pub dims: Vec<i64>,
    pub strides: Vec<i64>,
    pub offset: i64,
    pub dtype: i32,
    pub data: u64,
}

impl TensorDesc {
    pub fn numel(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product()
    }
}

/// What an executor runs.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    Kernel(TypedKernel),
    /// A host operator over strided tensors ([`strided`]).
    Custom(CustomOp<SimBackend>),
    RmsNorm {
        x: DeviceSlice,
        gamma: DeviceSlice,
        y: DeviceSlice,
        rstd: DeviceSlice,
        cols: usize,
        dtype: DType,
        epsilon: f64,
    },
}

/// An executor: its work and the workspace it asked for.
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub work: Work,
    pub workspace: u64,
    pub repeatable: bool,
}

/// Every live aclnn object, by handle.
#[derive(Default)]
pub(crate) struct Objects {
    pub tensors: HashMap<usize, TensorDesc>,
    pub scalars: HashMap<usize, f64>,
    pub int_arrays: HashMap<usize, Vec<i64>>,
    pub executors: HashMap<usize, Planned>,
    next: usize,
}

impl Objects {
    pub fn handle(&mut self) -> usize {
        self.next += 1;
        0x0a11_0000 + self.next * 0x40
    }

    /// The tensor `p` (named `what` in messages).
    pub fn tensor(&self, call: &str, what: &str, p: usize) -> Result<&TensorDesc, Fail> {
        if p == 0 {
            return Err(fail(
                ACLNN_ERR_PARAM_NULLPTR,
                format!("{call}: {what} is null"),
            ));
        }
        self.tensors.get(&p).ok_or_else(|| {
            fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("{call}: {what} ({p:#x}) is not a live aclTensor"),
            )
        })
    }

    /// The scalar `p`.
    pub fn scalar(&self, call: &str, what: &str, p: usize) -> Result<f64, Fail> {
        if p == 0 {
            return Err(fail(
                ACLNN_ERR_PARAM_NULLPTR,
                format!("{call}: {what} is null"),
            ));
        }
        self.scalars.get(&p).copied().ok_or_else(|| {
            fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("{call}: {what} ({p:#x}) is not a live aclScalar"),
            )
        })
    }

    /// The int array `p`.
    pub fn int_array(&self, call: &str, what: &str, p: usize) -> Result<&Vec<i64>, Fail> {
        if p == 0 {
            return Err(fail(
                ACLNN_ERR_PARAM_NULLPTR,
                format!("{call}: {what} is null"),
            ));
        }
        self.int_arrays.get(&p).ok_or_else(|| {
            fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("{call}: {what} ({p:#x}) is not a live aclIntArray"),
            )
        })
    }

    /// `[tensors, scalars, int arrays, executors]` alive.
    pub fn live(&self) -> [u64; 4] {
        [
            self.tensors.len() as u64,
            self.scalars.len() as u64,
            self.int_arrays.len() as u64,
            self.executors.len() as u64,
        ]
    }
}

/// The process-wide objects.
pub(crate) fn objects() -> GlobalMutexGuard<'static, Objects> {
    static OBJECTS: OnceLock<GlobalMutex<Objects>> = OnceLock::new();
    OBJECTS
        .get_or_init(|| GlobalMutex::new(Objects::default()))
        .lock()
}

/// braid's data type of an `aclDataType` the operators take (float32, float16, bfloat16).
pub(crate) fn dtype_of(acl: i32) -> Option<DType> {
    braid_acl_sys::dtypes::dtype_of_acl(acl).filter(|d| DType::FLOATS.contains(d))
}

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// The data type all of `tensors` share, which must be one the operators take.
pub(crate) fn common_dtype(call: &str, tensors: &[(&str, &TensorDesc)]) -> Result<DType, Fail> {
    let first = tensors[0].1.dtype;
    for (name, t) in tensors {
        if t.dtype != first {
            return Err(invalid(
                call,
                format!(
                    "{name} has data type {}, {} has {first}: they must match",
                    t.dtype, tensors[0].0
                ),
            ));
        }
    }
    dtype_of(first).ok_or_else(|| {
        invalid(
            call,
            format!("data type {first} is not supported (float32, float16, bfloat16)"),
        )
    })
}

/// The bytes a contiguous tensor covers, in `dtype`.
pub(crate) fn slice_of(
    call: &str,
    name: &str,
    t: &TensorDesc,
    dtype: DType,
) -> Result<DeviceSlice, Fail> {
    let mut expect = 1i64;
    for (d, s) in t.dims.iter().zip(&t.strides).rev() {
        if *d > 1 && *s != expect {
            return Err(invalid(
                call,
                format!(
                    "{name} is not contiguous (strides {:?} for dims {:?})",
                    t.strides, t.dims
                ),
            ));
        }
        expect = expect.saturating_mul((*d).max(1));
    }
    let size = dtype.size();
    Ok(DeviceSlice::new(
        DevicePtr(t.data + t.offset as u64 * size),
        t.numel() * size,
    ))
}

/// Checks that `t` has exactly `dims`.
pub(crate) fn expect_dims(
    call: &str,
    name: &str,
    t: &TensorDesc,
    dims: &[i64],
) -> Result<(), Fail> {
    if t.dims != dims {
        return Err(invalid(
            call,
            format!("{name} has shape {:?}, expected {dims:?}", t.dims),
        ));
    }
    Ok(())
}
