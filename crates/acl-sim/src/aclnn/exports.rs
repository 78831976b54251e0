//! The exported aclnn symbols, each with the signature `braid-acl-sys` declares (checked at
//! the end of this file).

use super::{
    common_dtype, dtype_of, expect_dims, objects, slice_of, Objects, Planned, TensorDesc, Work,
};
use super::{REDUCE_SUM_WORKSPACE, RMS_NORM_WORKSPACE};
use crate::errmsg::{fail, ret, Fail};
use crate::registry::with;
use braid_acl_sys::aclnn::{
    aclDataType, aclFormat, aclIntArray, aclOpExecutor, aclScalar, aclTensor, aclnnStatus,
    ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_RUNTIME_ERROR, ACL_DOUBLE,
};
use braid_backend_sim::{host_op, SimBackend};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::Stream as _;
use braid_stream_core::kernel::Kernel;
use braid_stream_core::{ComputeUnit, CustomOp, OpCost};
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

/// `aclTensor *aclCreateTensor(...)`: null on bad arguments.
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
    _format: aclFormat,
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
    let (Some(dims), Some(strides), Some(_)) = (dims, strides, storage) else {
        return std::ptr::null_mut();
    };
    if dims.iter().any(|&d| d < 0)
        || offset < 0
        || tensor_data.is_null()
        || dtype_of(data_type).is_none() && data_type != ACL_DOUBLE
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
            data: tensor_data as u64,
        },
    );
    h as *mut aclTensor
}

/// Removes `p` from `map`: 161001 for null, 161002 for an unknown handle.
fn destroy<T>(call: &str, map: impl FnOnce(&mut Objects) -> Option<T>, p: usize) -> aclnnStatus {
    if p == 0 {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{call}: null handle"),
        )));
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

/// `aclScalar *aclCreateScalar(void *value, aclDataType dataType)`: float, float16 (as f32
/// bits are not taken: float16 and bfloat16 values are 2 bytes), double.
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
    let v = match (data_type, dtype_of(data_type)) {
        // SAFETY: a double, per the caller.
        (ACL_DOUBLE, _) => unsafe { value.cast::<f64>().read_unaligned() },
        (_, Some(t)) => {
            let size = t.size() as usize;
            // SAFETY: a value of the type's size, per the caller.
            let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) };
            t.get(bytes, 0).map_or(f64::NAN, f64::from)
        }
        _ => return std::ptr::null_mut(),
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
unsafe fn plan(
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

fn kernel(k: Kernel, t: DType, ws: u64) -> Result<(Work, u64), Fail> {
    Ok((Work::Kernel(k.typed(t)), ws))
}

/// An operator launch: consumes the executor, checks the workspace, enqueues the work.
fn launch(
    call: &'static str,
    workspace: *mut c_void,
    size: u64,
    executor: *mut aclOpExecutor,
    stream: *mut c_void,
) -> aclnnStatus {
    let p = executor as usize;
    if p == 0 {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{call}: executor is null"),
        )));
    }
    let planned = {
        let mut objs = objects();
        match objs.executors.get(&p).map(|e| e.repeatable) {
            None => {
                return ret(Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{call}: {p:#x} is not a live executor (an executor runs once)"),
                )))
            }
            Some(true) => objs.executors[&p].clone(),
            Some(false) => objs.executors.remove(&p).expect("present"),
        }
    };
    if size < planned.workspace {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_INVALID,
            format!(
                "{call}: workspace of {size} bytes, the executor asked for {}",
                planned.workspace
            ),
        )));
    }
    if size > 0 && workspace.is_null() {
        return ret(Err(fail(
            ACLNN_ERR_PARAM_NULLPTR,
            format!("{call}: workspace is null with size {size}"),
        )));
    }
    let ws = (size > 0).then_some((workspace as u64, size));
    let result = with(|r| {
        r.launch_aclnn(call, stream as usize, ws, |sim| match &planned.work {
            Work::Kernel(k) => sim.launch(k, call),
            Work::AddScaled {
                a,
                b,
                out,
                alpha,
                dtype,
            } => sim.launch_operator(&add_scaled_op(*a, *b, *out, *alpha, *dtype).lower()),
            Work::RmsNorm {
                x,
                gamma,
                y,
                rstd,
                cols,
                dtype,
                epsilon,
            } => sim.launch_operator(
                &rms_norm_op(*x, *gamma, *y, *rstd, *cols, *dtype, *epsilon).lower(),
            ),
        })
    });
    ret(result.map_err(|e| {
        let code = if e.code == ACLNN_ERR_PARAM_INVALID {
            e.code
        } else {
            ACLNN_ERR_RUNTIME_ERROR
        };
        fail(
            code,
            format!("{call}: runtime error {}: {}", e.code, e.message),
        )
    }))
}

/// The simulator's `aclnnAdd` with `alpha` ≠ 1: `out = a + alpha · b`, each element computed
/// in f32 and rounded once to `t`; a host operator over exactly the tensors' ranges (`out` may
/// be `a` or `b`: the inputs are read before anything is written).
fn add_scaled_op(
    a: braid_stream_core::DeviceSlice,
    b: braid_stream_core::DeviceSlice,
    out: braid_stream_core::DeviceSlice,
    alpha: f32,
    t: DType,
) -> CustomOp<SimBackend> {
    let body = host_op(move |inputs, outputs| {
        let (xs, ys) = (t.decode(inputs[0]), t.decode(inputs[1]));
        let mut sums = Vec::with_capacity(outputs[0].len());
        for (x, y) in xs.iter().zip(&ys) {
            t.push(&mut sums, x + alpha * y);
        }
        outputs[0].copy_from_slice(&sums);
    });
    let elements = a.len / t.size();
    CustomOp::new("aclnnAdd")
        .dtype(t)
        .read(a)
        .read(b)
        .write(out)
        .in_place()
        .cost(OpCost::Work {
            unit: ComputeUnit::Vector,
            flops: 2 * elements,
            bytes: a.len + b.len + out.len,
        })
        .body(body)
}

/// The simulator's RMSNorm: a host operator over exactly the tensors' ranges.
fn rms_norm_op(
    x: braid_stream_core::DeviceSlice,
    gamma: braid_stream_core::DeviceSlice,
    y: braid_stream_core::DeviceSlice,
    rstd: braid_stream_core::DeviceSlice,
    cols: usize,
    t: DType,
    eps: f64,
) -> CustomOp<SimBackend> {
    let body = host_op(move |inputs, outputs| {
        let (xs, gs) = (t.decode(inputs[0]), t.decode(inputs[1]));
        let (mut ys, mut rs) = (Vec::with_capacity(outputs[0].len()), Vec::new());
        for row in xs.chunks(cols.max(1)) {
            let mean_sq = row.iter().map(|v| f64::from(v * v)).sum::<f64>() / cols.max(1) as f64;
            let r = (1.0 / (mean_sq + eps).sqrt()) as f32;
            rs.push(r);
            row.iter()
                .zip(&gs)
                .for_each(|(v, g)| t.push(&mut ys, v * r * g));
        }
        outputs[0].copy_from_slice(&ys);
        outputs[1].copy_from_slice(&DType::F32.encode(&rs));
    });
    CustomOp::new("aclnnRmsNorm")
        .dtype(t)
        .read(x)
        .read(gamma)
        .write(y)
        .write(rstd)
        .cost(OpCost::Work {
            unit: ComputeUnit::Vector,
            flops: 4 * (x.len / t.size()),
            bytes: x.len + gamma.len + y.len + rstd.len,
        })
        .body(body)
}

macro_rules! launcher {
    ($($name:ident),*) => {$(
        #[doc = concat!("`aclnnStatus ", stringify!($name), "(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)`.")]
        #[no_mangle]
        pub extern "C" fn $name(workspace: *mut c_void, workspace_size: u64, executor: *mut aclOpExecutor, stream: *mut c_void) -> aclnnStatus {
            launch(stringify!($name), workspace, workspace_size, executor, stream)
        }
    )*};
}

launcher!(
    aclnnInplaceFillScalar,
    aclnnAdd,
    aclnnMuls,
    aclnnMm,
    aclnnInplaceCopy,
    aclnnReduceSum,
    aclnnRmsNorm
);

/// `aclnnInplaceFillScalarGetWorkspaceSize(selfRef, value, workspaceSize, executor)`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceFillScalarGetWorkspaceSize(
    self_ref: *mut aclTensor,
    value: *const aclScalar,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceFillScalarGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let d = o.tensor(CALL, "selfRef", self_ref as usize)?;
            let v = o.scalar(CALL, "value", value as usize)?;
            let t = common_dtype(CALL, &[("selfRef", d)])?;
            kernel(
                Kernel::Fill {
                    dst: slice_of(CALL, "selfRef", d, t)?,
                    value: v as f32,
                },
                t,
                0,
            )
        })
    }
}

/// `aclnnAddGetWorkspaceSize(self, other, alpha, out, workspaceSize, executor)`:
/// `out = self + alpha · other`, same shapes (the simulator does not broadcast).
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnAddGetWorkspaceSize(
    self_: *const aclTensor,
    other: *const aclTensor,
    alpha: *const aclScalar,
    out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnAddGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let (a, b, c) = (
                o.tensor(CALL, "self", self_ as usize)?,
                o.tensor(CALL, "other", other as usize)?,
                o.tensor(CALL, "out", out as usize)?,
            );
            let alpha = o.scalar(CALL, "alpha", alpha as usize)?;
            let t = common_dtype(CALL, &[("self", a), ("other", b), ("out", c)])?;
            expect_dims(CALL, "other", b, &a.dims)?;
            expect_dims(CALL, "out", c, &a.dims)?;
            let (a, b, out) = (
                slice_of(CALL, "self", a, t)?,
                slice_of(CALL, "other", b, t)?,
                slice_of(CALL, "out", c, t)?,
            );
            if alpha == 1.0 {
                return kernel(Kernel::Add { a, b, out }, t, 0);
            }
            let work = Work::AddScaled {
                a,
                b,
                out,
                alpha: alpha as f32,
                dtype: t,
            };
            Ok((work, 0))
        })
    }
}

/// `aclnnMulsGetWorkspaceSize(self, other, out, workspaceSize, executor)`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnMulsGetWorkspaceSize(
    self_: *const aclTensor,
    other: *const aclScalar,
    out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnMulsGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let (a, c) = (
                o.tensor(CALL, "self", self_ as usize)?,
                o.tensor(CALL, "out", out as usize)?,
            );
            let factor = o.scalar(CALL, "other", other as usize)?;
            let t = common_dtype(CALL, &[("self", a), ("out", c)])?;
            expect_dims(CALL, "out", c, &a.dims)?;
            kernel(
                Kernel::Scale {
                    src: slice_of(CALL, "self", a, t)?,
                    dst: slice_of(CALL, "out", c, t)?,
                    factor: factor as f32,
                },
                t,
                0,
            )
        })
    }
}

/// `aclnnMmGetWorkspaceSize(self, mat2, out, cubeMathType, workspaceSize, executor)`: 2-D.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnMmGetWorkspaceSize(
    self_: *const aclTensor,
    mat2: *const aclTensor,
    out: *mut aclTensor,
    _cube_math_type: i8,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnMmGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let (a, b, c) = (
                o.tensor(CALL, "self", self_ as usize)?,
                o.tensor(CALL, "mat2", mat2 as usize)?,
                o.tensor(CALL, "out", out as usize)?,
            );
            let t = common_dtype(CALL, &[("self", a), ("mat2", b), ("out", c)])?;
            let [m, k] = a.dims[..] else {
                return Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{CALL}: self must be 2-D, has shape {:?}", a.dims),
                ));
            };
            let n = b.dims.get(1).copied().unwrap_or(-1);
            expect_dims(CALL, "mat2", b, &[k, n])?;
            expect_dims(CALL, "out", c, &[m, n])?;
            let dim = |v: i64| {
                u32::try_from(v).map_err(|_| {
                    fail(
                        ACLNN_ERR_PARAM_INVALID,
                        format!("{CALL}: dimension {v} out of range"),
                    )
                })
            };
            kernel(
                Kernel::Matmul {
                    a: slice_of(CALL, "self", a, t)?,
                    b: slice_of(CALL, "mat2", b, t)?,
                    c: slice_of(CALL, "out", c, t)?,
                    m: dim(m)?,
                    k: dim(k)?,
                    n: dim(n)?,
                },
                t,
                0,
            )
        })
    }
}

/// `aclnnInplaceCopyGetWorkspaceSize(selfRef, src, workspaceSize, executor)`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnInplaceCopyGetWorkspaceSize(
    self_ref: *mut aclTensor,
    src: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnInplaceCopyGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let (d, s) = (
                o.tensor(CALL, "selfRef", self_ref as usize)?,
                o.tensor(CALL, "src", src as usize)?,
            );
            let t = common_dtype(CALL, &[("selfRef", d), ("src", s)])?;
            expect_dims(CALL, "src", s, &d.dims)?;
            kernel(
                Kernel::Copy {
                    src: slice_of(CALL, "src", s, t)?,
                    dst: slice_of(CALL, "selfRef", d, t)?,
                },
                t,
                0,
            )
        })
    }
}

/// `aclnnReduceSumGetWorkspaceSize(self, dim, keepDim, dtype, out, workspaceSize, executor)`:
/// the simulator sums every element (`dim` must name every dimension) into a 1-element `out`.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnReduceSumGetWorkspaceSize(
    self_: *const aclTensor,
    dim: *const aclIntArray,
    _keep_dim: bool,
    dtype: aclDataType,
    out: *mut aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnReduceSumGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let (a, c) = (
                o.tensor(CALL, "self", self_ as usize)?,
                o.tensor(CALL, "out", out as usize)?,
            );
            let dims = o.int_array(CALL, "dim", dim as usize)?;
            let t = common_dtype(CALL, &[("self", a), ("out", c)])?;
            if dtype != c.dtype {
                return Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{CALL}: dtype {dtype} differs from out's {}", c.dtype),
                ));
            }
            let mut all: Vec<i64> = (0..a.dims.len() as i64).collect();
            let mut given = dims.clone();
            given.sort_unstable();
            all.sort_unstable();
            if given != all || c.numel() != 1 {
                return Err(fail(ACLNN_ERR_PARAM_INVALID, format!("{CALL}: the simulator reduces every dimension into one element (dim {dims:?}, out shape {:?})", c.dims)));
            }
            kernel(
                Kernel::ReduceSum {
                    src: slice_of(CALL, "self", a, t)?,
                    dst: slice_of(CALL, "out", c, t)?,
                },
                t,
                REDUCE_SUM_WORKSPACE,
            )
        })
    }
}

/// `aclnnRmsNormGetWorkspaceSize(x, gamma, epsilon, yOut, rstdOut, workspaceSize, executor)`:
/// `gamma` is 1-D over the last dimension of `x`; `rstdOut` is float32 with one value per row.
///
/// # Safety
/// Out pointers null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclnnRmsNormGetWorkspaceSize(
    x: *const aclTensor,
    gamma: *const aclTensor,
    epsilon: f64,
    y_out: *const aclTensor,
    rstd_out: *const aclTensor,
    workspace_size: *mut u64,
    executor: *mut *mut aclOpExecutor,
) -> aclnnStatus {
    const CALL: &str = "aclnnRmsNormGetWorkspaceSize";
    // SAFETY: forwarded.
    unsafe {
        plan(CALL, workspace_size, executor, |o| {
            let (xt, g, y, r) = (
                o.tensor(CALL, "x", x as usize)?,
                o.tensor(CALL, "gamma", gamma as usize)?,
                o.tensor(CALL, "yOut", y_out as usize)?,
                o.tensor(CALL, "rstdOut", rstd_out as usize)?,
            );
            let t = common_dtype(CALL, &[("x", xt), ("gamma", g), ("yOut", y)])?;
            let cols = *xt.dims.last().ok_or_else(|| {
                fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{CALL}: x has no dimension"),
                )
            })?;
            expect_dims(CALL, "gamma", g, &[cols])?;
            expect_dims(CALL, "yOut", y, &xt.dims)?;
            if dtype_of(r.dtype) != Some(DType::F32) || r.numel() * cols.max(1) as u64 != xt.numel()
            {
                return Err(fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{CALL}: rstdOut must be float32 with one value per row of x"),
                ));
            }
            Ok((
                Work::RmsNorm {
                    x: slice_of(CALL, "x", xt, t)?,
                    gamma: slice_of(CALL, "gamma", g, t)?,
                    y: slice_of(CALL, "yOut", y, t)?,
                    rstd: slice_of(CALL, "rstdOut", r, DType::F32)?,
                    cols: cols as usize,
                    dtype: t,
                    epsilon,
                },
                RMS_NORM_WORKSPACE,
            ))
        })
    }
}

braid_acl_sys::aclnn_descriptor_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::descriptor_fns;)
);
braid_acl_sys::aclnn_operator_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::aclnn::operator_fns;)
);
