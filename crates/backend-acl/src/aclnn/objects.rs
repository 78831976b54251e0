//! Safe owners of aclnn descriptors: each is destroyed when its owner drops, on every path.

use super::AclnnApi;
use crate::error::AclError;
use braid_acl_sys::aclnn::{
    aclFormat, aclIntArray, aclScalar, aclTensor, aclTensorList, ACLNN_ERR_PARAM_INVALID, ACL_BOOL,
    ACL_DOUBLE, ACL_FLOAT, ACL_FORMAT_ND, ACL_INT64,
};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DevicePtr;
use std::ptr::NonNull;

/// The error of a create call that returned null.
fn null_from(api: &AclnnApi, call: &'static str) -> AclError {
    let message = api.recent_error_message();
    AclError {
        code: ACLNN_ERR_PARAM_INVALID,
        name: "ACLNN_ERR_PARAM_INVALID",
        call,
        message: if message.is_empty() {
            format!("{call} returned null")
        } else {
            message
        },
    }
}

/// An `aclTensor` over device memory: a contiguous row-major (`ACL_FORMAT_ND`) tensor of
/// `dims` in a data type, at a device address. Destroyed (`aclDestroyTensor`) on drop.
pub struct Tensor {
    api: &'static AclnnApi,
    raw: NonNull<aclTensor>,
}

// SAFETY: an aclTensor is a host-side description owned by this value alone; aclnn's
// functions may be called with it from any thread.
unsafe impl Send for Tensor {}
// SAFETY: shared references only pass the pointer to aclnn calls that read the description.
unsafe impl Sync for Tensor {}

impl Tensor {
    /// A contiguous tensor of `dims` elements of `dtype` at `data` (the description only:
    /// nothing is read or written until an operator that uses it runs). `aclCreateTensor`'s
    /// refusal is an error.
    pub fn new(
        api: &'static AclnnApi,
        dims: &[i64],
        dtype: DType,
        data: DevicePtr,
    ) -> Result<Tensor, AclError> {
        let mut strides = vec![1i64; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(dims[i + 1].max(1));
        }
        // SAFETY: `dims` and `strides` are live arrays of `dims.len()` values, copied by the
        // call; the data address is only recorded.
        let raw = unsafe {
            (api.descriptors().aclCreateTensor)(
                dims.as_ptr(),
                dims.len() as u64,
                super::acl_data_type(dtype),
                strides.as_ptr(),
                0,
                ACL_FORMAT_ND,
                dims.as_ptr(),
                dims.len() as u64,
                data.0 as *mut std::ffi::c_void,
            )
        };
        NonNull::new(raw)
            .map(|raw| Tensor { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateTensor"))
    }

    /// The descriptor of braid's tensor `t`: its data type, shape and strides, its first
    /// element at its address (storage: the elements its range spans).
    pub fn view(api: &'static AclnnApi, t: &braid_stream_core::Tensor) -> Result<Tensor, AclError> {
        let as_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
        let (dims, strides) = (as_i64(t.shape()), as_i64(t.strides()));
        let storage = [(t.range().len / t.dtype().size()) as i64];
        // SAFETY: the arrays are live for the call, which copies them; the data address is
        // only recorded.
        let raw = unsafe {
            (api.descriptors().aclCreateTensor)(
                dims.as_ptr(),
                dims.len() as u64,
                super::acl_data_type(t.dtype()),
                strides.as_ptr(),
                0,
                ACL_FORMAT_ND,
                storage.as_ptr(),
                1,
                t.ptr().0 as *mut std::ffi::c_void,
            )
        };
        NonNull::new(raw)
            .map(|raw| Tensor { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateTensor"))
    }

    /// The descriptor of braid's tensor `t` as a plain tensor whose dimensions `format`
    /// names (`ACL_FORMAT_NCHW`, ...), as [`Tensor::view`] otherwise.
    pub fn view_named(
        api: &'static AclnnApi,
        t: &braid_stream_core::Tensor,
        format: aclFormat,
    ) -> Result<Tensor, AclError> {
        let as_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
        let (dims, strides) = (as_i64(t.shape()), as_i64(t.strides()));
        let storage = [(t.range().len / t.dtype().size()) as i64];
        // SAFETY: as in `view`.
        let raw = unsafe {
            (api.descriptors().aclCreateTensor)(
                dims.as_ptr(),
                dims.len() as u64,
                super::acl_data_type(t.dtype()),
                strides.as_ptr(),
                0,
                format,
                storage.as_ptr(),
                1,
                t.ptr().0 as *mut std::ffi::c_void,
            )
        };
        NonNull::new(raw)
            .map(|raw| Tensor { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateTensor"))
    }

    /// The descriptor of a tensor stored in a device-private format: `storage` (the
    /// contiguous blocked storage) described as `layout`'s logical shape in `layout`'s format
    /// with `storage`'s dimensions, as torch_npu describes such a tensor.
    pub fn stored(
        api: &'static AclnnApi,
        storage: &braid_stream_core::Tensor,
        layout: &braid_stream_core::ops::Blocked,
    ) -> Result<Tensor, AclError> {
        let as_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
        let dims = as_i64(layout.shape());
        let strides = as_i64(&braid_stream_core::tensor::contiguous_strides(
            layout.shape(),
        ));
        let blocked = as_i64(storage.shape());
        // SAFETY: the arrays are live for the call, which copies them; the data address is
        // only recorded.
        let raw = unsafe {
            (api.descriptors().aclCreateTensor)(
                dims.as_ptr(),
                dims.len() as u64,
                super::acl_data_type(storage.dtype()),
                strides.as_ptr(),
                0,
                braid_acl_sys::formats::acl_of_private(layout.format()),
                blocked.as_ptr(),
                blocked.len() as u64,
                storage.ptr().0 as *mut std::ffi::c_void,
            )
        };
        NonNull::new(raw)
            .map(|raw| Tensor { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateTensor"))
    }

    /// The descriptor, for aclnn calls.
    pub fn as_ptr(&self) -> *mut aclTensor {
        self.raw.as_ptr()
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // SAFETY: created by aclCreateTensor, destroyed once.
        let status = unsafe { (self.api.descriptors().aclDestroyTensor)(self.raw.as_ptr()) };
        if let Err(err) = self.api.check("aclDestroyTensor", status) {
            tracing::warn!(%err, "destroying an aclTensor failed");
        }
    }
}

/// An `aclScalar` holding a `float` (`ACL_FLOAT`). Destroyed (`aclDestroyScalar`) on drop.
pub struct Scalar {
    api: &'static AclnnApi,
    raw: NonNull<aclScalar>,
}

// SAFETY: as for `Tensor`: a host-side value owned by this value alone.
unsafe impl Send for Scalar {}
// SAFETY: as for `Tensor`.
unsafe impl Sync for Scalar {}

impl Scalar {
    /// A float scalar of `value`.
    pub fn new(api: &'static AclnnApi, value: f32) -> Result<Scalar, AclError> {
        let mut value = value;
        // SAFETY: `value` is a live f32, copied by the call.
        let raw = unsafe {
            (api.descriptors().aclCreateScalar)(
                (&mut value as *mut f32).cast::<std::ffi::c_void>(),
                ACL_FLOAT,
            )
        };
        NonNull::new(raw)
            .map(|raw| Scalar { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateScalar"))
    }

    /// The scalar of braid's `value`: a double, an int64 or a bool.
    pub fn of(
        api: &'static AclnnApi,
        value: braid_stream_core::ops::Scalar,
    ) -> Result<Scalar, AclError> {
        use braid_stream_core::ops::Scalar as S;
        // The value lives in an 8-byte buffer in its type's layout.
        let (mut bytes, dtype) = match value {
            S::Float(v) => (v.to_ne_bytes(), ACL_DOUBLE),
            S::Int(v) => (v.to_ne_bytes(), ACL_INT64),
            S::Bool(v) => ([u8::from(v), 0, 0, 0, 0, 0, 0, 0], ACL_BOOL),
        };
        let ptr: *mut std::ffi::c_void = bytes.as_mut_ptr().cast();
        // SAFETY: `ptr` points to a live value of `dtype`, copied by the call.
        let raw = unsafe { (api.descriptors().aclCreateScalar)(ptr, dtype) };
        NonNull::new(raw)
            .map(|raw| Scalar { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateScalar"))
    }

    /// The descriptor, for aclnn calls.
    pub fn as_ptr(&self) -> *mut aclScalar {
        self.raw.as_ptr()
    }
}

impl Drop for Scalar {
    fn drop(&mut self) {
        // SAFETY: created by aclCreateScalar, destroyed once.
        let status = unsafe { (self.api.descriptors().aclDestroyScalar)(self.raw.as_ptr()) };
        if let Err(err) = self.api.check("aclDestroyScalar", status) {
            tracing::warn!(%err, "destroying an aclScalar failed");
        }
    }
}

/// An `aclIntArray`. Destroyed (`aclDestroyIntArray`) on drop.
pub struct IntArray {
    api: &'static AclnnApi,
    raw: NonNull<aclIntArray>,
}

// SAFETY: as for `Tensor`: a host-side value owned by this value alone.
unsafe impl Send for IntArray {}
// SAFETY: as for `Tensor`.
unsafe impl Sync for IntArray {}

impl IntArray {
    /// An array of `values`.
    pub fn new(api: &'static AclnnApi, values: &[i64]) -> Result<IntArray, AclError> {
        // SAFETY: `values` is a live array of its length, copied by the call.
        let raw =
            unsafe { (api.descriptors().aclCreateIntArray)(values.as_ptr(), values.len() as u64) };
        NonNull::new(raw)
            .map(|raw| IntArray { api, raw })
            .ok_or_else(|| null_from(api, "aclCreateIntArray"))
    }

    /// The descriptor, for aclnn calls.
    pub fn as_ptr(&self) -> *mut aclIntArray {
        self.raw.as_ptr()
    }
}

impl Drop for IntArray {
    fn drop(&mut self) {
        // SAFETY: created by aclCreateIntArray, destroyed once.
        let status = unsafe { (self.api.descriptors().aclDestroyIntArray)(self.raw.as_ptr()) };
        if let Err(err) = self.api.check("aclDestroyIntArray", status) {
            tracing::warn!(%err, "destroying an aclIntArray failed");
        }
    }
}

/// An `aclTensorList` owning its tensors. Destroyed (`aclDestroyTensorList`, which destroys
/// the tensors too) on drop.
pub struct TensorList {
    api: &'static AclnnApi,
    raw: NonNull<aclTensorList>,
    destroy: unsafe extern "C" fn(*const aclTensorList) -> i32,
}

// SAFETY: as for `Tensor`: a host-side value owned by this value alone.
unsafe impl Send for TensorList {}
// SAFETY: as for `Tensor`.
unsafe impl Sync for TensorList {}

impl TensorList {
    /// The list of `tensors`, which it takes over (a library without the list functions
    /// refuses it by name; the tensors are then destroyed as usual).
    pub fn new(api: &'static AclnnApi, tensors: Vec<Tensor>) -> Result<TensorList, HalError> {
        let d = api.descriptors();
        let (Some(create), Some(destroy)) = (d.aclCreateTensorList, d.aclDestroyTensorList) else {
            return Err(HalError::UnsupportedOperator(
                "aclCreateTensorList is not in the loaded aclnn libraries".to_string(),
            ));
        };
        let ptrs: Vec<*const aclTensor> = tensors.iter().map(|t| t.as_ptr().cast_const()).collect();
        // SAFETY: `ptrs` holds live tensor descriptors; the call copies the array.
        let raw = unsafe { create(ptrs.as_ptr(), ptrs.len() as u64) };
        let raw = NonNull::new(raw).ok_or_else(|| null_from(api, "aclCreateTensorList"))?;
        // The list owns the tensors now: destroying the list destroys them.
        tensors.into_iter().for_each(std::mem::forget);
        Ok(TensorList { api, raw, destroy })
    }

    /// The descriptor, for aclnn calls.
    pub fn as_ptr(&self) -> *mut aclTensorList {
        self.raw.as_ptr()
    }
}

impl Drop for TensorList {
    fn drop(&mut self) {
        // SAFETY: created by aclCreateTensorList, destroyed once.
        let status = unsafe { (self.destroy)(self.raw.as_ptr()) };
        if let Err(err) = self.api.check("aclDestroyTensorList", status) {
            tracing::warn!(%err, "destroying an aclTensorList failed");
        }
    }
}

/// The launch half of an aclnn operator (`aclnnXxx(void *workspace, uint64_t workspaceSize,
/// aclOpExecutor *executor, aclrtStream stream)`).
pub type LaunchFn = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    u64,
    *mut braid_acl_sys::aclnn::aclOpExecutor,
    *mut std::ffi::c_void,
) -> braid_acl_sys::aclnn::aclnnStatus;

/// The executor an operator's `GetWorkspaceSize` created, with the workspace it needs. Its
/// launch ([`Executor::launch`]) consumes it, as CANN does. Dropped unlaunched, it is released
/// with `aclSetAclOpExecutorRepeatable` then `aclDestroyAclOpExecutor` (CANN documents no
/// other way to free a non-repeatable executor that never ran); a library without those two
/// functions keeps it (a leak, logged).
pub struct Executor {
    api: &'static AclnnApi,
    raw: Option<NonNull<braid_acl_sys::aclnn::aclOpExecutor>>,
    workspace_size: u64,
}

// SAFETY: an executor is a host-side plan owned by this value alone, used by one call at a
// time (`launch` takes it by value).
unsafe impl Send for Executor {}
// SAFETY: shared references give only its workspace size.
unsafe impl Sync for Executor {}

impl Executor {
    /// Runs an operator's first phase: `get` is handed the workspace-size and executor out
    /// pointers and returns the status of `call` (`aclnnXxxGetWorkspaceSize`).
    pub fn plan(
        api: &'static AclnnApi,
        call: &'static str,
        get: impl FnOnce(*mut u64, *mut *mut braid_acl_sys::aclnn::aclOpExecutor) -> i32,
    ) -> Result<Executor, AclError> {
        let mut workspace_size = 0u64;
        let mut raw = std::ptr::null_mut();
        let status = get(&mut workspace_size, &mut raw);
        let executor = Executor {
            api,
            raw: NonNull::new(raw),
            workspace_size,
        };
        // On failure an executor that was made anyway is released by the drop.
        api.check(call, status)?;
        if executor.raw.is_none() {
            return Err(null_from(api, call));
        }
        Ok(executor)
    }

    /// Bytes of device workspace the launch needs.
    pub fn workspace_size(&self) -> u64 {
        self.workspace_size
    }

    /// Enqueues the operator on `stream` with `workspace` (at least
    /// [`Executor::workspace_size`] bytes; null when that is 0), through `launch`, the
    /// operator's launch function named `call`. The executor is consumed whatever the result.
    ///
    /// # Safety
    /// `launch` is the launch function of the operator this executor was planned for;
    /// `stream` is a live `aclrtStream` of the current device; the tensors' memory and the
    /// workspace stay reserved for the operator in stream order until it has run.
    pub unsafe fn launch(
        mut self,
        launch: LaunchFn,
        call: &'static str,
        workspace: *mut std::ffi::c_void,
        workspace_len: u64,
        stream: *mut std::ffi::c_void,
    ) -> Result<(), AclError> {
        let raw = self
            .raw
            .take()
            .map_or(std::ptr::null_mut(), NonNull::as_ptr);
        // SAFETY: the caller's contract; the executor is handed over (consumed by the call).
        let status = unsafe { launch(workspace, workspace_len, raw, stream) };
        self.api.check(call, status)
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        let Some(raw) = self.raw.take() else {
            return;
        };
        let d = self.api.descriptors();
        match (d.aclSetAclOpExecutorRepeatable, d.aclDestroyAclOpExecutor) {
            (Some(repeatable), Some(destroy)) => {
                // SAFETY: a live executor that was never launched, destroyed once.
                let status = unsafe {
                    match repeatable(raw.as_ptr()) {
                        0 => destroy(raw.as_ptr()),
                        failed => failed,
                    }
                };
                if let Err(err) = self.api.check("aclDestroyAclOpExecutor", status) {
                    tracing::warn!(%err, "releasing an unlaunched aclOpExecutor failed");
                }
            }
            _ => tracing::debug!(
                "an unlaunched aclOpExecutor is kept: the library cannot destroy it"
            ),
        }
    }
}
