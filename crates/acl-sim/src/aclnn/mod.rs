//! aclnn on the simulator: descriptors (tensors, scalars, int arrays), executors, and the
//! operators, with CANN's rules as far as they are documented.
//!
//! - `aclCreateTensor` returns null on bad arguments (null dims or strides with a non-zero
//!   count, an unknown data type, a negative dimension or offset, a null address for a
//!   tensor with elements).
//! - Every `GetWorkspaceSize` checks its parameters: null pointers are
//!   `ACLNN_ERR_PARAM_NULLPTR` (161001); a stale handle, a data type or a shape the operator
//!   does not take, or a layout the simulator cannot read (negative strides) are
//!   `ACLNN_ERR_PARAM_INVALID` (161002); `aclGetRecentErrMsg` says which, naming the call and
//!   the operand.
//! - Each operator becomes one of braid's tensor operators (`braid_stream_core::ops`), checked
//!   by the same declaration braid's Rust API uses and computed by the same implementation
//!   (`braid-kernels`), as a kernel on the simulated stream: the timeline and the sanitizer
//!   see it like any kernel, over exactly the bytes its tensors span. Tensors may be strided,
//!   transposed or broadcast views.
//! - An executor is used once: the launch consumes it whatever its result (CANN destroys a
//!   non-repeatable executor in the launch call); `aclSetAclOpExecutorRepeatable` followed by
//!   `aclDestroyAclOpExecutor` releases one that was never launched.
//! - A launch with less workspace than asked, or a workspace that is not device memory, is
//!   161002. The simulator asks for workspace for `aclnnReduceSum` and `aclnnRmsNorm`
//!   ([`REDUCE_SUM_WORKSPACE`], [`RMS_NORM_WORKSPACE`]; its own figures, not CANN's), so the
//!   workspace path is exercised.
//!
//! - `aclCreateTensorList` takes the tensors it lists: `aclDestroyTensorList` destroys them
//!   with it (as CANN documents), and a tensor may be in one list only.
//!
//! Live tensors, scalars, int arrays and executors are counted (`braidSimAclnnLiveObjects`;
//! a list's tensors count as tensors until the list is destroyed).

pub mod attention_exports;
pub mod client_exports;
pub mod exports;
pub mod format_exports;
pub mod index_exports;
pub mod layer_norm_exports;
mod ops;
pub mod pad_exports;
pub mod position_exports;
pub mod random_exports;
pub mod shape_exports;
pub mod tensor_exports;

/// The model operator table ([`braid_acl_sys::aclnn::AclnnModelOperators`]) is exported by
/// several modules, one per family: their signatures are checked here, together.
mod model_exports_check {
    #[allow(unused_imports)]
    use super::index_exports::*;
    #[allow(unused_imports)]
    use super::layer_norm_exports::*;
    #[allow(unused_imports)]
    use super::position_exports::*;
    #[allow(unused_imports)]
    use super::shape_exports::*;
    braid_acl_sys::aclnn_model_operator_functions!(
        braid_acl_sys::check_exports!(braid_acl_sys::aclnn::model_operator_fns;)
    );
}

use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::{ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR};
use braid_stream_core::dtype::DType;
use braid_stream_core::ops::{OpCheckError, Scalar, TensorOp};
use braid_stream_core::sync::{GlobalMutex, GlobalMutexGuard};
use braid_stream_core::tensor::Tensor;
use braid_stream_core::types::DevicePtr;
use braid_stream_core::TypedKernel;
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
    /// The `aclFormat` of its storage.
    pub format: i32,
    /// The storage's dimensions (the blocked shape of a private format).
    pub storage: Vec<i64>,
    pub data: u64,
}

/// What an executor runs.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    /// A kernel on the simulated stream.
    Kernel(TypedKernel),
    /// Kernels launched one after the other on the stream (an operator braid composes, such
    /// as a constant pad: a fill, then a copy into its middle).
    Kernels(Vec<TypedKernel>),
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
    pub scalars: HashMap<usize, Scalar>,
    pub int_arrays: HashMap<usize, Vec<i64>>,
    /// Tensor lists: the handles of the tensors each owns (they stay in `tensors`).
    pub tensor_lists: HashMap<usize, Vec<usize>>,
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
    pub fn scalar(&self, call: &str, what: &str, p: usize) -> Result<Scalar, Fail> {
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

    /// The tensors of list `p`, as braid's tensors (the `i`th named `what[i]` in messages).
    pub fn tensor_list(&self, call: &str, what: &str, p: usize) -> Result<Vec<Tensor>, Fail> {
        if p == 0 {
            return Err(fail(
                ACLNN_ERR_PARAM_NULLPTR,
                format!("{call}: {what} is null"),
            ));
        }
        let handles = self.tensor_lists.get(&p).ok_or_else(|| {
            fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("{call}: {what} ({p:#x}) is not a live aclTensorList"),
            )
        })?;
        handles
            .iter()
            .enumerate()
            .map(|(i, &h)| {
                let role = format!("{what}[{i}]");
                tensor_of(call, &role, self.tensor(call, &role, h)?)
            })
            .collect()
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

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// The tensor `t` describes (named `role` in messages): its data type, shape and strides,
/// its first element at `data + offset` elements. Negative strides are refused (the
/// simulator's limit: braid's tensors never have them), and so is a tensor stored in a
/// device-private format (`NC1HWC0`, `FRACTAL_NZ`, ...): its bytes are not its view's, and
/// reading them as such would compute wrong numbers.
pub(crate) fn tensor_of(call: &str, role: &str, t: &TensorDesc) -> Result<Tensor, Fail> {
    if braid_acl_sys::aclnn::PRIVATE_FORMATS.contains(&t.format) {
        return Err(invalid(
            call,
            format!(
                "{role} is stored in the device-private format {} (storage shape {:?}), which braid-acl-sim's operators do not read: convert it to ND first",
                t.format, t.storage
            ),
        ));
    }
    let dtype = braid_acl_sys::dtypes::dtype_of_acl(t.dtype).ok_or_else(|| {
        invalid(
            call,
            format!(
                "{role} has data type {}, which braid-acl-sim does not compute",
                t.dtype
            ),
        )
    })?;
    if t.strides.len() != t.dims.len() {
        return Err(invalid(
            call,
            format!(
                "{role} has {} strides for {} dimensions",
                t.strides.len(),
                t.dims.len()
            ),
        ));
    }
    let usizes = |v: &[i64], what: &str| {
        v.iter()
            .map(|&x| usize::try_from(x))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| {
                invalid(
                    call,
                    format!("{role} has negative {what} {v:?}, which braid-acl-sim does not take"),
                )
            })
    };
    let (shape, strides) = (
        usizes(&t.dims, "dimensions")?,
        usizes(&t.strides, "strides")?,
    );
    let ptr = (t.offset as u64)
        .checked_mul(dtype.size())
        .and_then(|o| t.data.checked_add(o))
        .ok_or_else(|| invalid(call, format!("{role}'s offset {} overflows", t.offset)))?;
    Tensor::strided(DevicePtr(ptr), dtype, &shape, &strides)
        .map_err(|e| invalid(call, format!("{role}: {e}")))
}

/// The tensor behind handle `p`, as braid's [`Tensor`].
pub(crate) fn tensor(o: &Objects, call: &str, role: &str, p: usize) -> Result<Tensor, Fail> {
    tensor_of(call, role, o.tensor(call, role, p)?)
}

/// The work of a tensor operator, checked by its declaration (a refusal is
/// `ACLNN_ERR_PARAM_INVALID` with the declaration's reason, naming the call and the operand).
pub(crate) fn op_work(call: &str, op: TensorOp, workspace: u64) -> Result<(Work, u64), Fail> {
    let kernel = op
        .kernel()
        .map_err(|e: OpCheckError| invalid(call, e.to_string()))?;
    Ok((Work::Kernel(kernel.into()), workspace))
}

/// braid's data type of an `aclDataType` (`None` for a type braid has none of).
pub(crate) fn dtype_of(acl: i32) -> Option<DType> {
    braid_acl_sys::dtypes::dtype_of_acl(acl)
}
