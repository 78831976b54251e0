//! The exported aclnn symbols, each with the signature `braid-acl-sys` declares (checked at
//! the end of this file).

use super::ops::{Arith, FillValue, Other};
use super::{dtype_of, objects, op_work, ops, tensor, Objects, Planned, TensorDesc, Work};
use super::{REDUCE_SUM_WORKSPACE, RMS_NORM_WORKSPACE};
use crate::errmsg::{fail, ret, Fail};
use crate::registry::with;
use braid_acl_sys::aclnn::{
    aclDataType, aclFormat, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclTensorList,
    aclnnStatus, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_RUNTIME_ERROR,
    ACL_BOOL, ACL_DOUBLE, ACL_INT16, ACL_INT32, ACL_INT64, ACL_INT8, ACL_UINT16, ACL_UINT32,
    ACL_UINT64, ACL_UINT8,
};
use braid_stream_core::hal::Stream as _;
use braid_stream_core::ops::{Matmul, ReduceKind, RmsNorm, Scalar, TensorOp};
use std::ffi::c_void;

/// Reads `n` values at `p`.
///
/// # Safety
/// `p` is valid for `n` reads when `n > 0`.
unsafe fn values(p: *const i64, n: u64) -> Option<Vec<i64>> {
    if n == 0 {
        return Some(Vec::new());
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's guarantee.
    Some(unsafe { std::slice::from_raw_parts(p, usize::try_from(n).ok()?) }.to_vec())
}

/// The `aclDataType` values a descriptor takes (CANN's `acl_base.h`): a tensor of any of
/// them can be described; the operators say which they compute.
const KNOWN_DATA_TYPES: &[aclDataType] = &[
    0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 27, 29, 30, 33, 34, 35, 36, 37, 38, 39, 40,
    41,
];

/// `aclTensor *aclCreateTensor(...)`: null on bad arguments (a negative dimension or offset,
/// a null address for a tensor with elements, a data type CANN does not have).
///
/// # Safety
/// Each array is null or valid for its count of reads.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn aclCreateTensor(
    view_dims: *const i64,
    view_dims_num: u64,
    data_type: aclDataType,
    stride: *const i64,
    offset: i64,
    format: aclFormat,
    storage_dims: *const i64,
    storage_dims_num: u64,
    tensor_data: *mut c_void,
) -> *mut aclTensor {
    // SAFETY: the caller's guarantee on the arrays.
    let (dims, strides, storage) = unsafe {
        (
            values(view_dims, view_dims_num),
            values(stride, view_dims_num),
            values(storage_dims, storage_dims_num),
        )
    };
    let (Some(dims), Some(strides), Some(storage)) = (dims, strides, storage) else {
        return std::ptr::null_mut();
    };
    // A tensor without elements reads nothing: it may have no address (torch_npu passes
    // such tensors for the dimensions `aclnnIndex` takes whole).
    let empty = dims.contains(&0);
    if dims.iter().any(|&d| d < 0)
        || offset < 0
        || (tensor_data.is_null() && !empty)
        || !KNOWN_DATA_TYPES.contains(&data_type)
    {
        return std::ptr::null_mut();
    }
    let mut objs = objects();
    let h = objs.handle();
    objs.tensors.insert(
        h,
        TensorDesc {
            dims,
            strides,
            offset,
            dtype: data_type,
            format,
            storage,
            data: tensor_data as u64,
        },
    );
    h as *mut aclTensor
}

/// Removes `p` from `map`: success for null (as CANN's nnopbase: torch_npu releases the null
/// optional arguments of a call too), 161002 for an unknown handle.
fn destroy<T>(call: &str, map: impl FnOnce(&mut Objects) -> Option<T>, p: usize) -> aclnnStatus {
    if p == 0 {
        return 0;
    }
    match map(&mut objects()) {
        Some(_) => 0,
        None => ret(Err(fail(
            ACLNN_ERR_PARAM_INVALID,
            format!("{call}: {p:#x} is not live"),
        ))),
    }
}

/// `aclnnStatus aclDestroyTensor(const aclTensor *tensor)`.
#[no_mangle]
pub extern "C" fn aclDestroyTensor(tensor: *const aclTensor) -> aclnnStatus {
    let p = tensor as usize;
    destroy("aclDestroyTensor", |o| o.tensors.remove(&p), p)
}

/// The value of a scalar of type `data_type` at `value`: float, float16, bfloat16 and double
/// as floats, the signed and unsigned integers as integers (a `uint64` beyond `i64::MAX`
/// saturates), bool as bool; `None` for another type.
///
/// # Safety
/// `value` is non-null and points to a value of `data_type`.
unsafe fn scalar_value(value: *const c_void, data_type: aclDataType) -> Option<Scalar> {
    /// Reads a `T` at `value` (the caller's guarantee).
    macro_rules! read {
        ($t:ty) => {
            // SAFETY: `value` points to a `$t` (the caller's guarantee); unaligned reads
            // are fine.
            unsafe { value.cast::<$t>().read_unaligned() }
        };
    }
    Some(match data_type {
        ACL_DOUBLE => Scalar::Float(read!(f64)),
        ACL_INT8 => Scalar::Int(i64::from(read!(i8))),
        ACL_UINT8 => Scalar::Int(i64::from(read!(u8))),
        ACL_INT16 => Scalar::Int(i64::from(read!(i16))),
        ACL_UINT16 => Scalar::Int(i64::from(read!(u16))),
        ACL_INT32 => Scalar::Int(i64::from(read!(i32))),
        ACL_UINT32 => Scalar::Int(i64::from(read!(u32))),
        ACL_INT64 => Scalar::Int(read!(i64)),
        ACL_UINT64 => Scalar::Int(i64::try_from(read!(u64)).unwrap_or(i64::MAX)),
        ACL_BOOL => Scalar::Bool(read!(u8) != 0),
        _ => {
            let t = dtype_of(data_type).filter(|t| t.is_float())?;
            // SAFETY: a value of the type's size (the caller's guarantee).
            let bytes =
                unsafe { std::slice::from_raw_parts(value.cast::<u8>(), t.size() as usize) };
            Scalar::Float(t.get_f64(bytes, 0)?)
        }
    })
}

/// `aclScalar *aclCreateScalar(void *value, aclDataType dataType)`: copies the value (see
/// `scalar_value` for the types taken); null for a null value or another type.
///
/// # Safety
/// `value` is null or points to a value of `dataType`.
#[no_mangle]
pub unsafe extern "C" fn aclCreateScalar(
    value: *mut c_void,
    data_type: aclDataType,
) -> *mut aclScalar {
    if value.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: non-null, and the caller's guarantee on its type.
    let Some(v) = (unsafe { scalar_value(value, data_type) }) else {
        return std::ptr::null_mut();
    };
    let mut objs = objects();
    let h = objs.handle();
    objs.scalars.insert(h, v);
    h as *mut aclScalar
}

/// `aclnnStatus aclDestroyScalar(const aclScalar *scalar)`.
#[no_mangle]
pub extern "C" fn aclDestroyScalar(scalar: *const aclScalar) -> aclnnStatus {
    let p = scalar as usize;
    destroy("aclDestroyScalar", |o| o.scalars.remove(&p), p)
}

/// `aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)`.
///
/// # Safety
/// `value` is null or valid for `size` reads.
#[no_mangle]
pub unsafe extern "C" fn aclCreateIntArray(value: *const i64, size: u64) -> *mut aclIntArray {
    // SAFETY: the caller's guarantee.
    let Some(v) = (unsafe { values(value, size) }) else {
        return std::ptr::null_mut();
    };
    let mut objs = objects();
    let h = objs.handle();
    objs.int_arrays.insert(h, v);
    h as *mut aclIntArray
}

/// `aclnnStatus aclDestroyIntArray(const aclIntArray *array)`.
#[no_mangle]
pub extern "C" fn aclDestroyIntArray(array: *const aclIntArray) -> aclnnStatus {
    let p = array as usize;
    destroy("aclDestroyIntArray", |o| o.int_arrays.remove(&p), p)
}

/// `aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size)`: the
/// list takes the tensors (destroyed with it); null for a null array with a non-zero size, a
/// handle that is not a live tensor, or a tensor already in a list.
///
/// # Safety
/// `value` is null or valid for `size` reads.
#[no_mangle]
pub unsafe extern "C" fn aclCreateTensorList(
    value: *const *const aclTensor,
    size: u64,
) -> *mut aclTensorList {
    let handles: Vec<usize> = if size == 0 {
        Vec::new()
    } else if value.is_null() {
        return std::ptr::null_mut();
    } else {
        let Ok(n) = usize::try_from(size) else {
            return std::ptr::null_mut();
        };
        // SAFETY: valid for `size` reads (the caller's guarantee).
        unsafe { std::slice::from_raw_parts(value, n) }
            .iter()
            .map(|&t| t as usize)
            .collect()
    };
    let mut objs = objects();
    let listed = |h: &usize| objs.tensor_lists.values().any(|l| l.contains(h));
    if handles
        .iter()
        .any(|h| !objs.tensors.contains_key(h) || listed(h))
    {
        return std::ptr::null_mut();
    }
    let h = objs.handle();
    objs.tensor_lists.insert(h, handles);
    h as *mut aclTensorList
}

/// `aclnnStatus aclDestroyTensorList(const aclTensorList *array)`: destroys the list and the
/// tensors it holds.
#[no_mangle]
pub extern "C" fn aclDestroyTensorList(array: *const aclTensorList) -> aclnnStatus {
    let p = array as usize;
    destroy(
        "aclDestroyTensorList",
        |o| {
            let tensors = o.tensor_lists.remove(&p)?;
            for t in tensors {
                o.tensors.remove(&t);
            }
            Some(())
        },
        p,
    )
}

/// `aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)`.
#[no_mangle]
pub extern "C" fn aclSetAclOpExecutorRepeatable(executor: *mut aclOpExecutor) -> aclnnStatus {
    let p = executor as usize;
    match objects().executors.get_mut(&p) {
        Some(planned) => {
            planned.repeatable = true;
            0
        }
        None => ret(Err(fail(
            ACLNN_ERR_PARAM_INVALID,
            format!("aclSetAclOpExecutorRepeatable: {p:#x} is not a live executor"),
        ))),
    }
}

/// `aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)`: only a repeatable one.
#[no_mangle]
pub extern "C" fn aclDestroyAclOpExecutor(executor: *mut aclOpExecutor) -> aclnnStatus {
    let p = executor as usize;
    if p == 0 {
        return ret(Err(fail(
            561_103,
            "aclDestroyAclOpExecutor: executor is null",
        )));
    }
    let mut objs = objects();
    match objs.executors.get(&p) {
        Some(planned) if planned.repeatable => {
            objs.executors.remove(&p);
            0
        }
        Some(_) => ret(Err(fail(ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor: the executor is not repeatable (aclSetAclOpExecutorRepeatable)"))),
        None => ret(Err(fail(ACLNN_ERR_PARAM_INVALID, format!("aclDestroyAclOpExecutor: {p:#x} is not a live executor")))),
    }
}

/// braid's extension `aclnnStatus braidSimAclnnLiveObjects(uint64_t *counts)`: live tensors,
/// scalars, int arrays and executors.
///
/// # Safety
/// `counts` is null or valid for 4 writes.
#[no_mangle]
pub unsafe extern "C" fn braidSimAclnnLiveObjects(counts: *mut u64) -> aclnnStatus {
    if counts.is_null() {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            "braidSimAclnnLiveObjects: counts is null",
        )));
    }
    let live = objects().live();
    // SAFETY: valid for 4 writes, per the caller.
    unsafe { std::ptr::copy_nonoverlapping(live.as_ptr(), counts, 4) };
    0
}

/// A `GetWorkspaceSize`: checks the out pointers, plans with `f` and creates the executor.
///
/// # Safety
/// `ws` and `ex` are null or valid for a write.
pub(super) unsafe fn plan(
    call: &str,
    ws: *mut u64,
    ex: *mut *mut aclOpExecutor,
    f: impl FnOnce(&Objects) -> Result<(Work, u64), Fail>,
) -> aclnnStatus {
    if ws.is_null() || ex.is_null() {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{call}: workspaceSize or executor is null"),
        )));
    }
    let mut objs = objects();
    match f(&objs) {
        Ok((work, workspace)) => {
            let h = objs.handle();
            objs.executors.insert(
                h,
                Planned {
                    work,
                    workspace,
                    repeatable: false,
                },
            );
            // SAFETY: non-null and valid for a write, per the caller.
            unsafe {
                ws.write(workspace);
                ex.write(h as *mut aclOpExecutor);
            }
            0
        }
        Err(e) => ret(Err(e)),
    }
}

/// An operator launch: consumes the executor, checks the workspace, enqueues the work. A
/// refused launch fails the stream's device (`registry::failures`): a client that launches
/// from a queue of its own (torch_npu) may lose this error, never the results.
pub(super) fn launch(
    call: &'static str,
    workspace: *mut c_void,
    size: u64,
    executor: *mut aclOpExecutor,
    stream: *mut c_void,
) -> aclnnStatus {
    let result = enqueue(call, workspace, size, executor, stream);
    if let Err(refusal) = &result {
        let _ = with(|r| {
            r.note_refused_launch(stream as usize, refusal);
            Ok(())
        });
    }
    ret(result)
}

/// [`launch`]'s work.
fn enqueue(
    call: &'static str,
    workspace: *mut c_void,
    size: u64,
    executor: *mut aclOpExecutor,
    stream: *mut c_void,
) -> Result<(), Fail> {
    let p = executor as usize;
    if p == 0 {
        return Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{call}: executor is null"),
        ));
    }
    let planned = {
        let mut objs = objects();
        match objs.executors.get(&p).map(|e| e.repeatable) {
            None => {
                return Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{call}: {p:#x} is not a live executor (an executor runs once)"),
                ))
            }
            Some(true) => objs.executors[&p].clone(),
            Some(false) => objs.executors.remove(&p).expect("present"),
        }
    };
    if size < planned.workspace {
        return Err(fail(
            ACLNN_ERR_PARAM_INVALID,
            format!(
                "{call}: workspace of {size} bytes, the executor asked for {}",
                planned.workspace
            ),
        ));
    }
    if size > 0 && workspace.is_null() {
        return Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{call}: workspace is null with size {size}"),
        ));
    }
    let ws = (size > 0).then_some((workspace as u64, size));
    run_work(call, stream as usize, ws, &planned.work).map_err(|e| {
        let code = if e.code == ACLNN_ERR_PARAM_INVALID {
            e.code
        } else {
            ACLNN_ERR_RUNTIME_ERROR
        };
        fail(
            code,
            format!("{call}: runtime error {}: {}", e.code, e.message),
        )
    })
}

/// Enqueues `work` on `stream` (its workspace, if any, checked to be device memory);
/// the runtime's own code on failure.
pub(crate) fn run_work(
    call: &str,
    stream: usize,
    workspace: Option<(u64, u64)>,
    work: &Work,
) -> Result<(), Fail> {
    with(|r| {
        r.launch_aclnn(call, stream, workspace, |sim| match work {
            Work::Kernel(k) => sim.launch(k, call),
            Work::Kernels(ks) => ks.iter().try_for_each(|k| sim.launch(k, call)),
        })
    })
}

/// Exports the launch (phase 2) of each named operator.
macro_rules! launcher {
    ($($name:ident),*) => {$(
        #[doc = concat!("`aclnnStatus ", stringify!($name), "(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)`.")]
        #[no_mangle]
        pub extern "C" fn $name(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: *mut c_void) -> aclnnStatus {
            launch(stringify!($name), workspace, workspace_size, executor, stream)
        }
    )*};
}

pub(super) use launcher;

/// Exports `aclnnXxxGetWorkspaceSize` functions that plan their operator with [`plan`]. Each
/// is written as its C declaration (a doc line), its parameters before `workspaceSize` and
/// `executor`, and a body that plans it from the call's name and the handles' objects:
///
/// ```text
/// /// `aclnnFooGetWorkspaceSize(const aclTensor *self, aclTensor *out, workspaceSize, executor)`.
/// fn aclnnFooGetWorkspaceSize(self_: *const aclTensor, out: *mut aclTensor) |CALL, o| {
///     op_work(CALL, ..., 0)
/// }
/// ```
macro_rules! planner {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) |$call:ident, $objects:ident| $body:block
    )*) => {$(
        $(#[$meta])*
        ///
        /// # Safety
        /// Out pointers null or valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            $($arg: $ty,)*
            workspace_size: *mut u64,
            executor: *mut *mut aclOpExecutor,
        ) -> aclnnStatus {
            const $call: &str = stringify!($name);
            // SAFETY: forwarded: the caller's guarantee is `plan`'s.
            unsafe { plan($call, workspace_size, executor, |$objects| $body) }
        }
    )*};
}

pub(super) use planner;

launcher!(
    aclnnInplaceFillScalar,
    aclnnAdd,
    aclnnMuls,
    aclnnMm,
    aclnnInplaceCopy,
    aclnnReduceSum,
    aclnnRmsNorm
);

planner! {
    /// `aclnnInplaceFillScalarGetWorkspaceSize(selfRef, value, workspaceSize, executor)`.
    fn aclnnInplaceFillScalarGetWorkspaceSize(
        self_ref: *mut aclTensor,
        value: *const aclScalar,
    ) |CALL, o| {
        ops::fill(
            CALL,
            o,
            self_ref as usize,
            FillValue::Scalar(value as usize),
        )
    }

    /// `aclnnAddGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`: `out = self
    /// + alpha * other`, broadcasting, any alpha, strided tensors ([`ops::arith`]).
    fn aclnnAddGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclTensor,
        alpha: *const aclScalar,
        out: *mut aclTensor,
    ) |CALL, o| {
        let tensors = (self_ as usize, Other::Tensor(other as usize), out as usize);
        ops::arith(CALL, o, tensors, Arith::Add(alpha as usize))
    }

    /// `aclnnMulsGetWorkspaceSize(self, other, out, workspaceSize, executor)`.
    fn aclnnMulsGetWorkspaceSize(
        self_: *const aclTensor,
        other: *const aclScalar,
        out: *mut aclTensor,
    ) |CALL, o| {
        let tensors = (self_ as usize, Other::Scalar(other as usize), out as usize);
        ops::arith(CALL, o, tensors, Arith::Mul)
    }

    /// `aclnnMmGetWorkspaceSize(self, mat2, out, cubeMathType, workspaceSize, executor)`: a 2-D
    /// product; either operand may be a strided view (`nn.Linear` passes `W.t()`).
    fn aclnnMmGetWorkspaceSize(
        self_: *const aclTensor,
        mat2: *const aclTensor,
        out: *mut aclTensor,
        _cube_math_type: i8,
    ) |CALL, o| {
        let (a, b, out) = (
            tensor(o, CALL, "self", self_ as usize)?,
            tensor(o, CALL, "mat2", mat2 as usize)?,
            tensor(o, CALL, "out", out as usize)?,
        );
        if a.rank() != 2 || b.rank() != 2 {
            return Err(fail(
                ACLNN_ERR_PARAM_INVALID,
                format!(
                    "{CALL}: self and mat2 must be 2-D, have shapes {:?} and {:?}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        let mm = Matmul {
            a,
            b,
            bias: None,
            out,
            alpha: 1.0,
            beta: 1.0,
        };
        op_work(CALL, TensorOp::Matmul(mm), 0)
    }

    /// `aclnnInplaceCopyGetWorkspaceSize(selfRef, src, workspaceSize, executor)`.
    fn aclnnInplaceCopyGetWorkspaceSize(
        self_ref: *mut aclTensor,
        src: *const aclTensor,
    ) |CALL, o| {
        ops::copy(CALL, o, self_ref as usize, src as usize)
    }

    /// `aclnnReduceSumGetWorkspaceSize(self, dim, keepDim, dtype, out, workspaceSize, executor)`:
    /// the sum over the dimensions `dim` (all of them when it is empty), `keepDim` keeping them as
    /// 1; bool and integer inputs sum into an integer `out`.
    fn aclnnReduceSumGetWorkspaceSize(
        self_: *const aclTensor,
        dim: *const aclIntArray,
        keep_dim: bool,
        dtype: aclDataType,
        out: *mut aclTensor,
    ) |CALL, o| {
        ops::reduce(
            CALL,
            o,
            (self_ as usize, dim as usize, out as usize),
            (ReduceKind::Sum, keep_dim, dtype),
            REDUCE_SUM_WORKSPACE,
        )
    }

    /// `aclnnRmsNormGetWorkspaceSize(x, gamma, epsilon, yOut, rstdOut, workspaceSize, executor)`:
    /// `gamma` is the trailing dimensions of `x`; `rstdOut` is float32 with one value per row
    /// (any shape of that many elements, contiguous).
    fn aclnnRmsNormGetWorkspaceSize(
        x: *const aclTensor,
        gamma: *const aclTensor,
        epsilon: f64,
        y_out: *const aclTensor,
        rstd_out: *const aclTensor,
    ) |CALL, o| {
        let (x, gamma, y, rstd) = (
            tensor(o, CALL, "x", x as usize)?,
            tensor(o, CALL, "gamma", gamma as usize)?,
            tensor(o, CALL, "yOut", y_out as usize)?,
            tensor(o, CALL, "rstdOut", rstd_out as usize)?,
        );
        // The declaration keeps the normalised dimensions as 1; CANN documents one value
        // per row, whatever the shape.
        let mut shape = x.shape().to_vec();
        let keep = shape.len().saturating_sub(gamma.rank());
        shape[keep..].fill(1);
        let rstd = match rstd.reshape(&shape) {
            Ok(r) if r.numel() == rstd.numel() => r,
            _ => {
                return Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!(
                        "{CALL}: rstdOut has shape {:?}; it must be contiguous with one value per row of x ({shape:?})",
                        rstd.shape()
                    ),
                ))
            }
        };
        let op = RmsNorm {
            x,
            gamma,
            eps: epsilon,
            y,
            rstd,
        };
        op_work(CALL, TensorOp::RmsNorm(op), RMS_NORM_WORKSPACE)
    }
}

braid_acl_sys::aclnn_descriptor_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::descriptor_fns;)
);
braid_acl_sys::aclnn_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::operator_fns;)
);
