//! A stream with device buffers, and aclnn descriptors over them, for the tests that run
//! aclnn operators through their C ABI.

use super::ok;
use braid_acl_sim::aclnn::exports::{aclCreateScalar, aclCreateTensor};
use braid_acl_sim::client::runtime::aclrtMemcpy;
use braid_acl_sim::exports::*;
use braid_acl_sys::aclnn::{aclOpExecutor, aclScalar, aclTensor};
use braid_stream_core::DType;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// The `aclDataType` of `t`.
pub fn acl_type(t: DType) -> i32 {
    braid_acl_sys::dtypes::acl_data_type(t)
}

/// A stream of `device` on this thread, and a way to make device tensors on it.
pub struct Bench {
    pub stream: *mut c_void,
    buffers: Vec<*mut c_void>,
}

impl Bench {
    pub fn new(device: i32) -> Bench {
        let code = aclInit(null());
        assert!(code == 0 || code == 100_002);
        ok(aclrtSetDevice(device));
        let mut stream = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtCreateStream(&mut stream) });
        Bench {
            stream,
            buffers: Vec::new(),
        }
    }

    /// Device memory holding `values` in `t` (storage of `values.len()` elements).
    pub fn storage(&mut self, values: &[f32], t: DType) -> *mut c_void {
        let bytes = t.encode(values);
        let mut dev = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtMalloc(&mut dev, bytes.len().max(1), 0) });
        // SAFETY: `bytes` is valid for its length during the call.
        ok(unsafe { aclrtMemcpy(dev, bytes.len(), bytes.as_ptr().cast(), bytes.len(), 1) });
        self.buffers.push(dev);
        dev
    }

    /// The elements of `len` values of `t` at `dev`.
    pub fn read(&self, dev: *mut c_void, len: usize, t: DType) -> Vec<f32> {
        ok(aclrtSynchronizeStream(self.stream));
        let mut bytes = vec![0u8; len * t.size() as usize];
        // SAFETY: `bytes` is valid for its length during the call.
        ok(unsafe { aclrtMemcpy(bytes.as_mut_ptr().cast(), bytes.len(), dev, bytes.len(), 2) });
        t.decode(&bytes)
    }

    /// Runs a planned operator on the bench's stream with the workspace it asks for.
    pub fn run(
        &mut self,
        plan: impl FnOnce(*mut u64, *mut *mut aclOpExecutor) -> i32,
        launch: extern "C" fn(*mut c_void, u64, *mut aclOpExecutor, *mut c_void) -> i32,
    ) {
        let (mut ws, mut ex) = (0u64, null_mut());
        ok(plan(&mut ws, &mut ex));
        let workspace = if ws > 0 {
            let mut p = null_mut();
            // SAFETY: a live out parameter.
            ok(unsafe { aclrtMalloc(&mut p, ws as usize, 0) });
            self.buffers.push(p);
            p
        } else {
            null_mut()
        };
        ok(launch(workspace, ws, ex, self.stream));
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = aclrtSynchronizeStream(self.stream);
        for b in self.buffers.drain(..) {
            let _ = aclrtFree(b);
        }
        let _ = aclrtDestroyStream(self.stream);
    }
}

/// An aclTensor over `data` of the view `dims` / `strides` / `offset` (elements).
pub fn tensor(
    data: *mut c_void,
    t: DType,
    dims: &[i64],
    strides: &[i64],
    offset: i64,
    storage: i64,
) -> *mut aclTensor {
    let storage = [storage];
    // SAFETY: the arrays are valid for their lengths.
    let p = unsafe {
        aclCreateTensor(
            dims.as_ptr(),
            dims.len() as u64,
            acl_type(t),
            strides.as_ptr(),
            offset,
            2,
            storage.as_ptr(),
            1,
            data,
        )
    };
    assert!(!p.is_null());
    p
}

/// A contiguous aclTensor of `dims` over `data`.
pub fn contiguous(data: *mut c_void, t: DType, dims: &[i64]) -> *mut aclTensor {
    let mut strides = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    tensor(data, t, dims, &strides, 0, dims.iter().product())
}

/// A double aclScalar.
pub fn scalar_f64(v: f64) -> *mut aclScalar {
    let mut v = v;
    // SAFETY: a double, as declared (11 = ACL_DOUBLE).
    unsafe { aclCreateScalar((&mut v as *mut f64).cast(), 11) }
}
