//! Host memory registration, host callbacks and stream attributes: `aclrtHostRegisterV2` (pinned
//! registration: kept, the simulator copies every host range alike), `aclrtHostUnregister`,
//! `aclrtHostRegister` (a device address for host memory: refused, the simulated devices
//! cannot reach host memory), `aclrtSetStreamAttribute` (no attribute is simulated: refused
//! with `ACL_ERROR_RT_PARAM_INVALID`, CANN's answer for an attribute it does not know, which
//! torch_npu's graphs tolerate), host functions as stream tasks (`aclrtSubscribeReport`,
//! `aclrtUnSubscribeReport`, `aclrtLaunchCallback`, `aclrtProcessReport`: see
//! the crate's `reports` module for their semantics).

use crate::codes::*;
use crate::errmsg::{fail, ret};
use crate::registry::with;
use crate::reports;
use braid_acl_sys::acl::{ACL_CALLBACK_BLOCK, ACL_CALLBACK_NO_BLOCK};
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

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: the host
/// callbacks launched on `stream` are run by thread `threadId` (its `pthread_t`) in its
/// `aclrtProcessReport`. A stream has one subscriber (`ACL_ERROR_RT_STREAM_SUBSCRIBE`).
#[no_mangle]
pub extern "C" fn aclrtSubscribeReport(thread_id: u64, stream: *mut c_void) -> aclError {
    const CALL: &str = "aclrtSubscribeReport";
    let handle = stream as usize;
    ret(with(|r| r.report_stream(CALL, handle))
        .and_then(|key| reports::subscribe(CALL, thread_id, handle, key)))
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`: ends the
/// subscription; callbacks of the stream not yet run are dropped.
#[no_mangle]
pub extern "C" fn aclrtUnSubscribeReport(thread_id: u64, stream: *mut c_void) -> aclError {
    const CALL: &str = "aclrtUnSubscribeReport";
    let handle = stream as usize;
    ret(with(|r| r.report_stream(CALL, handle))
        .and_then(|_| reports::unsubscribe(CALL, thread_id, handle)))
}

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType
/// blockType, aclrtStream stream)`: `fn(userData)` as a task of `stream`, run by the thread
/// subscribed to it; `ACL_CALLBACK_BLOCK` (1) holds the stream's host waits until it has run,
/// `ACL_CALLBACK_NO_BLOCK` (0) does not. Inside a capture it becomes a node of the model,
/// run at every replay.
#[no_mangle]
pub extern "C" fn aclrtLaunchCallback(
    func: Option<unsafe extern "C" fn(*mut c_void)>,
    user_data: *mut c_void,
    block_type: i32,
    stream: *mut c_void,
) -> aclError {
    const CALL: &str = "aclrtLaunchCallback";
    let Some(func) = func else {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: fn is null"),
        )));
    };
    if block_type != ACL_CALLBACK_NO_BLOCK && block_type != ACL_CALLBACK_BLOCK {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: blockType {block_type} is not ACL_CALLBACK_NO_BLOCK (0) or ACL_CALLBACK_BLOCK (1)"),
        )));
    }
    let handle = stream as usize;
    let blocking = block_type == ACL_CALLBACK_BLOCK;
    let launched = with(|r| {
        let key = r.report_stream(CALL, handle)?;
        let thread = reports::subscriber(CALL, handle)?;
        let capturing = r.is_capturing(CALL, handle)?;
        let gated = (blocking && !capturing).then(|| reports::gated_launch(handle));
        let callback = reports::Launched {
            func,
            data: user_data as usize,
            blocking,
            handle,
            stream: key,
            gated,
        };
        let made = r.launch_callback(CALL, handle, callback);
        if let (Err(_), Some(launch)) = (&made, gated) {
            reports::abandon_launch(launch);
        }
        Ok((thread, gated, made?))
    });
    ret(launched.and_then(|(thread, gated, (marker, gate))| {
        if let Some(marker) = marker {
            reports::add_marker(thread, marker);
        }
        match (gated, gate) {
            (Some(launch), Some(gate)) => reports::set_gate(launch, gate),
            _ => Ok(()),
        }
    }))
}

/// `aclError aclrtProcessReport(int32_t timeout)`: runs, on the calling thread, the first
/// host callback reported to it, waiting up to `timeout` ms (-1: without end) for one
/// (`ACL_ERROR_RT_REPORT_TIMEOUT`); `ACL_ERROR_RT_THREAD_SUBSCRIBE` for a thread that
/// subscribed no stream.
#[no_mangle]
pub extern "C" fn aclrtProcessReport(timeout: i32) -> aclError {
    ret(reports::process("aclrtProcessReport", timeout))
}
