//! Helpers shared by the tests that call `braid-acl-sim`'s exports through their C ABI.
#![allow(dead_code)]

pub mod bench;

use braid_acl_sim::exports::aclGetRecentErrMsg;
use std::ffi::CStr;

/// This thread's last error text (a failure always leaves one).
pub fn message() -> String {
    let p = aclGetRecentErrMsg();
    assert!(!p.is_null(), "a failure leaves a message");
    // SAFETY: non-null and NUL-terminated, valid until the next call on this thread.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Asserts `code` is success, with the failure's text.
pub fn ok(code: i32) {
    assert_eq!(code, 0, "{}", message());
}
