//! Host memory registration, host callbacks and stream attributes: `aclrtHostRegisterV2` (pinned
//! registration: kept, the simulator copies every host range alike), `aclrtHostUnregister`,
//! `aclrtHostRegister` (a device address for host memory: refused, the simulated devices
//! cannot reach host memory), `aclrtSetStreamAttribute` (no attribute is simulated: refused
//! with `ACL_ERROR_RT_PARAM_INVALID`, CANN's answer for an attribute it does not know, which
//! torch_npu's graphs tolerate), host functions as stream tasks (`aclrtSubscribeReport`,
//! `aclrtUnSubscribeReport`, `aclrtLaunchCallback`: refused, the simulated streams run no
//! host code).

use crate::codes::*;
use crate::errmsg::{fail, ret};
use crate::registry::with;
use std::ffi::c_void;

/// `aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)`: registers a host
/// range as pinned.
#[no_mangle]
pub extern "C" fn aclrtHostRegisterV2(ptr: *mut c_void, size: u64, _flag: u32) -> aclError {
    ret(with(|r| r.host_register(ptr as u64, size)))
}

/// `aclError aclrtHostUnregister(void *ptr)`: forgets a registration of
/// `aclrtHostRegisterV2`.
#[no_mangle]
pub extern "C" fn aclrtHostUnregister(ptr: *mut c_void) -> aclError {
    ret(with(|r| r.host_unregister(ptr as u64)))
}

/// `aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type, void
/// **devPtr)`: maps host memory into the device's address space; refused
/// (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`): a simulated device reads its own memory only.
#[no_mangle]
pub extern "C" fn aclrtHostRegister(
    _ptr: *mut c_void,
    _size: u64,
    _type: i32,
    _dev_ptr: *mut *mut c_void,
) -> aclError {
    ret(Err(fail(
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        "aclrtHostRegister: not supported by braid-acl-sim (a simulated device cannot read host memory through a device address; aclrtHostRegisterV2 registers pinned memory)",
    )))
}

/// `aclError aclrtSetStreamAttribute(aclrtStream stream, aclrtStreamAttr stmAttrType,
/// aclrtStreamAttrValue *value)`: no stream attribute is simulated
/// (`ACL_ERROR_RT_PARAM_INVALID`, naming it).
#[no_mangle]
pub extern "C" fn aclrtSetStreamAttribute(
    _stream: *mut c_void,
    attr: i32,
    _value: *mut c_void,
) -> aclError {
    ret(Err(fail(
        ACL_ERROR_RT_PARAM_INVALID,
        format!(
            "aclrtSetStreamAttribute: stream attribute {attr} is not simulated by braid-acl-sim"
        ),
    )))
}

/// The refusal of the host-callback calls.
fn no_callbacks(call: &str) -> aclError {
    ret(Err(fail(
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        format!("{call}: not supported by braid-acl-sim (host callbacks are not simulated: a simulated stream runs no host code)"),
    )))
}

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: refused
/// (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`).
#[no_mangle]
pub extern "C" fn aclrtSubscribeReport(_thread_id: u64, _stream: *mut c_void) -> aclError {
    no_callbacks("aclrtSubscribeReport")
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`: refused.
#[no_mangle]
pub extern "C" fn aclrtUnSubscribeReport(_thread_id: u64, _stream: *mut c_void) -> aclError {
    no_callbacks("aclrtUnSubscribeReport")
}

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType
/// blockType, aclrtStream stream)`: refused.
#[no_mangle]
pub extern "C" fn aclrtLaunchCallback(
    _func: Option<unsafe extern "C" fn(*mut c_void)>,
    _user_data: *mut c_void,
    _block_type: i32,
    _stream: *mut c_void,
) -> aclError {
    no_callbacks("aclrtLaunchCallback")
}
