//! The task-group exports (`aclmdlRICaptureTaskGrp*`, `aclmdlRICaptureTaskUpdate*`), checked
//! with the rest of ACL's list at the end of [`super`].

use crate::errmsg::ret;
use crate::registry::with;
use braid_acl_sys::acl::aclError;
use std::ffi::c_void;

/// `aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream)`: 107029 when the stream does
/// not capture.
#[no_mangle]
pub extern "C" fn aclmdlRICaptureTaskGrpBegin(stream: *mut c_void) -> aclError {
    ret(with(|r| r.task_grp_begin(stream as usize)))
}

/// `aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle)`.
///
/// # Safety
/// `handle` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureTaskGrpEnd(
    stream: *mut c_void,
    handle: *mut *mut c_void,
) -> aclError {
    if handle.is_null() {
        return ret(Err(crate::errmsg::fail(
            crate::codes::ACL_ERROR_INVALID_PARAM,
            "aclmdlRICaptureTaskGrpEnd: null output pointer",
        )));
    }
    match with(|r| r.task_grp_end(stream as usize)) {
        Ok(h) => {
            // SAFETY: non-null and valid for a write (the caller's guarantee).
            unsafe { handle.write(h as *mut c_void) };
            0
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle)`: the
/// stream must not capture; 107017 for an unknown group.
#[no_mangle]
pub extern "C" fn aclmdlRICaptureTaskUpdateBegin(
    stream: *mut c_void,
    handle: *mut c_void,
) -> aclError {
    ret(with(|r| {
        r.task_update_begin(stream as usize, handle as usize)
    }))
}

/// `aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream)`: 107000, nothing changed, when
/// no update was begun on the stream or its tasks differ in count or type from the group's.
#[no_mangle]
pub extern "C" fn aclmdlRICaptureTaskUpdateEnd(stream: *mut c_void) -> aclError {
    ret(with(|r| r.task_update_end(stream as usize)))
}
