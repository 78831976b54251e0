//! Host memory registration, host callbacks and stream attributes: `aclrtHostRegisterV2` (pinned
//! registration: kept, the simulator copies every host range alike), `aclrtHostUnregister`,
//! `aclrtHostRegister` (a device address for host memory: refused, the simulated devices
//! cannot reach host memory), `aclrtSetStreamAttribute` (the failure mode and the
//! operator-information cache switch torch_npu sets on capturing streams are taken; the
//! overflow check and custom tag are refused with `ACL_ERROR_RT_PARAM_INVALID`), host functions as stream tasks (`aclrtSubscribeReport`,
//! `aclrtUnSubscribeReport`, `aclrtLaunchCallback`, `aclrtProcessReport`, and
//! `aclrtLaunchHostFunc` with the runtime's own thread: see the crate's `reports` module for
//! their semantics).

use crate::codes::*;
use crate::errmsg::{fail, ret, Fail};
use crate::registry::{with, Registry};
use crate::reports::{self, Runner};
use braid_acl_sys::acl::{
    ACL_CALLBACK_BLOCK, ACL_CALLBACK_NO_BLOCK, ACL_STREAM_ATTR_CACHE_OP_INFO,
    ACL_STREAM_ATTR_FAILURE_MODE,
};
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

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
/// aclrtStreamAttrValue *value)`: the failure mode (`ACL_STREAM_ATTR_FAILURE_MODE`, as
/// `aclrtSetStreamFailureMode` sets it) and the operator-information cache switch
/// (`ACL_STREAM_ATTR_CACHE_OP_INFO`, 0 or 1, which torch_npu sets on capturing streams; taken
/// as on a real CANN, and changing nothing: the simulator keeps no such cache). The overflow
/// check and the custom tag are refused (`ACL_ERROR_RT_PARAM_INVALID`, naming them): the
/// simulator detects no overflow.
#[no_mangle]
pub extern "C" fn aclrtSetStreamAttribute(
    stream: *mut c_void,
    attr: i32,
    value: *mut c_void,
) -> aclError {
    const CALL: &str = "aclrtSetStreamAttribute";
    if attr != ACL_STREAM_ATTR_FAILURE_MODE && attr != ACL_STREAM_ATTR_CACHE_OP_INFO {
        return ret(Err(fail(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("{CALL}: stream attribute {attr} is not simulated by braid-acl-sim"),
        )));
    }
    if value.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: value is null"),
        )));
    }
    if attr == ACL_STREAM_ATTR_FAILURE_MODE {
        // SAFETY: a non-null `aclrtStreamAttrValue` (the caller's guarantee), whose
        // `failureMode` member is a `uint64_t` at its start.
        let mode = unsafe { value.cast::<u64>().read_unaligned() };
        return super::runtime::aclrtSetStreamFailureMode(stream, mode);
    }
    // SAFETY: as above; `cacheOpInfoSwitch` is a `uint32_t` at its start.
    let switch = unsafe { value.cast::<u32>().read_unaligned() };
    if switch > 1 {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: cacheOpInfoSwitch is {switch}; it takes 0 or 1"),
        )));
    }
    ret(with(|r| r.is_capturing(CALL, stream as usize)).map(|_| ()))
}

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`: the host
/// callbacks launched on `stream` are run by thread `threadId` (its `pthread_t`) in its
/// `aclrtProcessReport`. A stream has one subscriber (`ACL_ERROR_RT_STREAM_SUBSCRIBE`).
#[no_mangle]
pub extern "C" fn aclrtSubscribeReport(thread_id: u64, stream: *mut c_void) -> aclError {
    const CALL: &str = "aclrtSubscribeReport";
    let handle = stream as usize;
    ret(with(|r| r.is_capturing(CALL, handle))
        .and_then(|_| reports::subscribe(CALL, thread_id, handle)))
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`: ends the
/// subscription; callbacks of the stream not yet run are dropped.
#[no_mangle]
pub extern "C" fn aclrtUnSubscribeReport(thread_id: u64, stream: *mut c_void) -> aclError {
    const CALL: &str = "aclrtUnSubscribeReport";
    let handle = stream as usize;
    ret(with(|r| r.is_capturing(CALL, handle))
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
    let blocking = block_type == ACL_CALLBACK_BLOCK;
    launch(CALL, stream as usize, func, user_data, blocking, |_| {
        let thread = reports::subscriber(CALL, stream as usize)?;
        Ok((thread, Runner::Subscriber))
    })
}

/// `aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args)`:
/// `fn(args)` as a task of `stream`, run on the stream's own host-function thread (made at
/// its first one, with the stream's device current); the stream's later work waits for it.
/// Inside a capture it becomes a node of the model, run at every replay, holding the
/// replay's later nodes the same way.
#[no_mangle]
pub extern "C" fn aclrtLaunchHostFunc(
    stream: *mut c_void,
    func: Option<unsafe extern "C" fn(*mut c_void)>,
    args: *mut c_void,
) -> aclError {
    const CALL: &str = "aclrtLaunchHostFunc";
    let Some(func) = func else {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{CALL}: fn is null"),
        )));
    };
    let handle = stream as usize;
    launch(CALL, handle, func, args, true, |r| {
        let thread = reports::host_func_thread(CALL, r.stream_key(CALL, handle)?)?;
        Ok((thread, Runner::HostFuncs(thread)))
    })
}

/// Launches `func(data)` on stream `handle` for `call`, run by the runner `runner` finds (and
/// the thread that brings simulated time up to it, eagerly); `blocking`: the stream's later
/// work waits for it.
fn launch(
    call: &'static str,
    handle: usize,
    func: reports::Callback,
    data: *mut c_void,
    blocking: bool,
    runner: impl FnOnce(&Registry) -> Result<(u64, Runner), Fail>,
) -> aclError {
    let launched = with(|r| {
        let capturing = r.is_capturing(call, handle)?;
        let (thread, runner) = runner(r)?;
        let subscribed = matches!(runner, Runner::Subscriber).then_some(handle);
        let gated = (blocking && !capturing).then(|| reports::gated_launch(subscribed));
        let callback = reports::Launched {
            runner,
            func,
            data: data as usize,
            handle,
            gated,
            graph_gate: (blocking && capturing).then(|| Arc::new(OnceLock::new())),
        };
        let made = r.launch_callback(call, handle, callback);
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
