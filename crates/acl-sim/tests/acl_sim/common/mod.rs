//! Helpers shared by the tests that call `braid-acl-sim`'s exports through their C ABI.
#![allow(dead_code)]

pub mod bench;

use braid_acl_sim::exports::aclGetRecentErrMsg;
use std::ffi::CStr;
use std::process::Command;

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

/// This test executable running its test `name` alone, for a test that needs a process of
/// its own (settings read once per process); add its environment, then [`passes`].
pub fn child(name: &str) -> Command {
    let exe = std::env::current_exe().expect("the test executable");
    let mut command = Command::new(exe);
    command.args(["--exact", name, "--nocapture"]);
    command
}

/// Runs `child`, asserts that it ran its one test and passed it; what it printed.
pub fn passes(mut child: Command) -> String {
    let out = child.output().expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
