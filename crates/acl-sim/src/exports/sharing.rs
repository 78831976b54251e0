//! The exported C symbols of serving: the calling thread's capture mode, and memory,
//! physical memory and events shared with other processes (`registry::ipc`). Each checks its
//! pointers, then calls the registry; [`super`] checks their signatures against
//! `braid-acl-sys`'s declarations with the rest.

use crate::codes::*;
use crate::errmsg::{fail, ret, Fail};
use crate::registry::with;
use std::ffi::{c_char, c_void, CStr};

/// A NUL-terminated key, or the error for a null or non-UTF-8 one.
///
/// # Safety
/// `key` is null or a NUL-terminated string.
unsafe fn key_of<'a>(call: &str, key: *const c_char) -> Result<&'a str, Fail> {
    if key.is_null() {
        return Err(fail(ACL_ERROR_INVALID_PARAM, format!("{call}: null key")));
    }
    // SAFETY: non-null and NUL-terminated (the caller's guarantee).
    unsafe { CStr::from_ptr(key) }.to_str().map_err(|_| {
        fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: the key is not text"),
        )
    })
}

/// `num` process ids at `pid`, or the error for a null pointer or an empty list.
///
/// # Safety
/// `pid` is null or valid for reads of `num` ids.
unsafe fn pids_of<'a>(call: &str, pid: *mut i32, num: usize) -> Result<&'a [i32], Fail> {
    if pid.is_null() || num == 0 {
        return Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: no process ids (null pointer or a count of 0)"),
        ));
    }
    // SAFETY: non-null and valid for `num` reads (the caller's guarantee).
    Ok(unsafe { std::slice::from_raw_parts(pid, num) })
}

/// Writes `v` through the out pointer `p`, or the error for a null one.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn put<T>(call: &str, p: *mut T, v: Result<T, Fail>) -> aclError {
    if p.is_null() {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: null output pointer"),
        )));
    }
    match v {
        Ok(v) => {
            // SAFETY: non-null and valid for a write (the caller's guarantee).
            unsafe { p.write(v) };
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclrtDeviceGetBareTgid(int32_t *pid)`: this process's id.
///
/// # Safety
/// `pid` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
    let v = with(|r| r.bare_tgid());
    // SAFETY: the caller's guarantee on `pid`.
    unsafe { put("aclrtDeviceGetBareTgid", pid, v) }
}

/// `aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len,
/// uint64_t flags)`: `len` must hold the 65-byte key (CANN fixes it to 65); `flags`
/// `ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT` (importers on the allow-list) or
/// `..._DISABLE_PID_VALIDATION`.
///
/// # Safety
/// `key` is null or valid for writes of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    dev_ptr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    const CALL: &str = "aclrtIpcMemGetExportKey";
    if key.is_null() || len < ACL_IPC_MEM_KEY_LEN {
        return ret(Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!(
                "{CALL}: the key buffer must hold {ACL_IPC_MEM_KEY_LEN} bytes (null, or len {len})"
            ),
        )));
    }
    match with(|r| r.ipc_export(dev_ptr as u64, size, flags)) {
        Ok(k) => {
            let bytes = k.as_bytes();
            let n = bytes.len().min(ACL_IPC_MEM_KEY_LEN - 1);
            // SAFETY: `key` is valid for `len >= 65 > n` bytes (the caller's guarantee).
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), key.cast::<u8>(), n);
                key.add(n).write(0);
            }
            ACL_SUCCESS
        }
        Err(e) => ret(Err(e)),
    }
}

/// `aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)`.
///
/// # Safety
/// `key` is null or NUL-terminated; `pid` is null or valid for `num` reads.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
    key: *const c_char,
    pid: *mut i32,
    num: usize,
) -> aclError {
    const CALL: &str = "aclrtIpcMemSetImportPid";
    // SAFETY: the caller's guarantees on `key` and `pid`.
    let args = unsafe { key_of(CALL, key).and_then(|k| Ok((k, pids_of(CALL, pid, num)?))) };
    ret(args.and_then(|(k, pids)| with(|r| r.ipc_set_import_pid(k, pids))))
}

/// `aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)`: maps
/// the memory onto the current device.
///
/// # Safety
/// `dev_ptr` is null or valid for a write; `key` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemImportByKey(
    dev_ptr: *mut *mut c_void,
    key: *const c_char,
    flags: u64,
) -> aclError {
    const CALL: &str = "aclrtIpcMemImportByKey";
    // SAFETY: the caller's guarantee on `key`.
    let v = unsafe { key_of(CALL, key) }
        .and_then(|k| with(|r| r.ipc_import(k, flags)))
        .map(|p| p as *mut c_void);
    // SAFETY: the caller's guarantee on `dev_ptr`.
    unsafe { put(CALL, dev_ptr, v) }
}

/// `aclError aclrtIpcMemClose(const char *key)`.
///
/// # Safety
/// `key` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> aclError {
    const CALL: &str = "aclrtIpcMemClose";
    // SAFETY: the caller's guarantee on `key`.
    ret(unsafe { key_of(CALL, key) }.and_then(|k| with(|r| r.ipc_close(k))))
}

/// `aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle, aclrtMemHandleType
/// handleType, uint64_t flags, uint64_t *shareableHandle)`: once per physical handle.
///
/// # Safety
/// `shareable_handle` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
    handle: *mut c_void,
    handle_type: u32,
    flags: u64,
    shareable_handle: *mut u64,
) -> aclError {
    let v = with(|r| r.export_shareable(handle as usize, handle_type, flags));
    // SAFETY: the caller's guarantee on `shareable_handle`.
    unsafe { put("aclrtMemExportToShareableHandle", shareable_handle, v) }
}

/// `aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId,
/// aclrtDrvMemHandle *handle)`.
///
/// # Safety
/// `handle` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
    shareable_handle: u64,
    device_id: i32,
    handle: *mut *mut c_void,
) -> aclError {
    let v = with(|r| r.import_shareable(shareable_handle, device_id)).map(|h| h as *mut c_void);
    // SAFETY: the caller's guarantee on `handle`.
    unsafe { put("aclrtMemImportFromShareableHandle", handle, v) }
}

/// `aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid, size_t
/// pidNum)`.
///
/// # Safety
/// `pid` is null or valid for `pid_num` reads.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
    shareable_handle: u64,
    pid: *mut i32,
    pid_num: usize,
) -> aclError {
    const CALL: &str = "aclrtMemSetPidToShareableHandle";
    // SAFETY: the caller's guarantee on `pid`.
    let pids = unsafe { pids_of(CALL, pid, pid_num) };
    ret(pids.and_then(|p| with(|r| r.set_pid_to_shareable(shareable_handle, p))))
}

/// `aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle)`: the
/// event must come from `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)`.
///
/// # Safety
/// `handle` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: *mut c_void,
    handle: *mut aclrtIpcEventHandle,
) -> aclError {
    let v = with(|r| r.ipc_event_handle(event as usize)).map(|bytes| aclrtIpcEventHandle {
        reserved: bytes.map(|b| b as c_char),
    });
    // SAFETY: the caller's guarantee on `handle`.
    unsafe { put("aclrtIpcGetEventHandle", handle, v) }
}

/// `aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event)`:
/// another process's IPC event on the current device (wait on it, query or synchronize it).
///
/// # Safety
/// `event` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: aclrtIpcEventHandle,
    event: *mut *mut c_void,
) -> aclError {
    let bytes = handle.reserved.map(|b| b as u8);
    let v = with(|r| r.ipc_open_event(&bytes)).map(|h| h as *mut c_void);
    // SAFETY: the caller's guarantee on `event`.
    unsafe { put("aclrtIpcOpenEventHandle", event, v) }
}
