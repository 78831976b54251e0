//! Invalid settings in the environment surface through the C API: `aclInit`,
//! `aclrtGetDeviceCount` and `aclrtSetDevice` fail with `ACL_ERROR_INVALID_PARAM`, and
//! `aclGetRecentErrMsg` names the variable and its value.
//!
//! The settings are read once per process, so each value runs in a child process: this test
//! executable again, with [`CHILD`] naming the variable the child must see reported.

use crate::common;
use braid_acl_sim::client::runtime::aclGetDeviceCapability;
use braid_acl_sim::exports::{aclGetRecentErrMsg, aclInit, aclrtGetDeviceCount, aclrtSetDevice};
use braid_acl_sim::{CAPACITY_ENV, DEVICES_ENV, PROFILE_ENV, TIMING_ONLY_ENV};
use braid_acl_sys::acl::ACL_DEVICE_INFO_AI_CORE_NUM;
use braid_backend_sim::Profile;
use std::ffi::CStr;
use std::process::Command;

/// Set in a child: the variable whose value is invalid.
const CHILD: &str = "BRAID_ACL_SIM_TEST_INVALID_VARIABLE";

const ACL_ERROR_INVALID_PARAM: i32 = 100_000;

/// This thread's last error text.
fn recent_message() -> String {
    let msg = aclGetRecentErrMsg();
    assert!(!msg.is_null(), "a failure leaves a message");
    // SAFETY: non-null and NUL-terminated, valid until the next call on this thread.
    unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned()
}

/// In a child: every call fails, naming `variable` and its value.
fn check_child(variable: &str) {
    let value = std::env::var(variable).expect("the parent set it");
    let named = format!("{variable}=\"{value}\"");

    assert_eq!(aclInit(std::ptr::null()), ACL_ERROR_INVALID_PARAM);
    let text = recent_message();
    assert!(text.contains(&named), "{text}");

    let mut count = 7u32;
    // SAFETY: `count` is a live out parameter.
    let code = unsafe { aclrtGetDeviceCount(&mut count) };
    assert_eq!(code, ACL_ERROR_INVALID_PARAM);
    assert_eq!(count, 7, "nothing written on failure");
    assert!(recent_message().contains(&named));

    assert_eq!(aclrtSetDevice(0), ACL_ERROR_INVALID_PARAM);
    assert!(recent_message().contains(&named));
}

#[test]
fn invalid_settings_fail_init_device_count_and_set_device_naming_the_variable() {
    if let Ok(variable) = std::env::var(CHILD) {
        check_child(&variable);
        return;
    }
    let exe = std::env::current_exe().expect("the test executable");
    for (variable, value) in [
        (DEVICES_ENV, "abc"),
        (DEVICES_ENV, "0"),
        (CAPACITY_ENV, "-1"),
        (TIMING_ONLY_ENV, "0,x"),
        (PROFILE_ENV, "/nonexistent/braid/profile.json"),
        // Set to nothing: an error, never the default.
        (DEVICES_ENV, ""),
        (TIMING_ONLY_ENV, ""),
    ] {
        let out = Command::new(&exe)
            .args([
                "--exact",
                "settings::invalid_settings_fail_init_device_count_and_set_device_naming_the_variable",
                "--nocapture",
            ])
            .env_remove(DEVICES_ENV)
            .env_remove(CAPACITY_ENV)
            .env_remove(TIMING_ONLY_ENV)
            .env_remove(PROFILE_ENV)
            .env(CHILD, variable)
            .env(variable, value)
            .output()
            .expect("the child runs");
        assert!(
            out.status.success(),
            "{variable}={value}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The child ran the check (and did not filter the test out).
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn valid_settings_are_used() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let mut child = common::child("settings::valid_settings_child");
    child
        .env(DEVICES_ENV, "3")
        .env(CAPACITY_ENV, "1048576")
        .env_remove(TIMING_ONLY_ENV)
        .env("BRAID_ACL_SIM_TEST_VALID", "1");
    common::passes(child);
}

/// Runs only in the child of [`valid_settings_are_used`].
#[test]
fn valid_settings_child() {
    if std::env::var_os("BRAID_ACL_SIM_TEST_VALID").is_none() {
        return;
    }
    assert_eq!(aclInit(std::ptr::null()), 0);
    let mut count = 0u32;
    // SAFETY: `count` is a live out parameter.
    assert_eq!(unsafe { aclrtGetDeviceCount(&mut count) }, 0);
    assert_eq!(count, 3);
    assert_eq!(aclrtSetDevice(2), 0);
}

#[test]
fn a_profile_file_gives_the_devices_its_figures() {
    if std::env::var_os(CHILD).is_some() || std::env::var_os("BRAID_ACL_SIM_TEST_VALID").is_some() {
        return;
    }
    let gpu = Profile::generic_gpu();
    let file =
        std::env::temp_dir().join(format!("braid-acl-sim-profile-{}.json", std::process::id()));
    std::fs::write(&file, gpu.to_json()).unwrap();
    let mut child = common::child("settings::profile_child");
    child
        .env_remove(CAPACITY_ENV)
        .env_remove(DEVICES_ENV)
        .env(PROFILE_ENV, &file)
        .env(
            "BRAID_ACL_SIM_TEST_PROFILE_CUBES",
            gpu.device.cube_units.to_string(),
        );
    common::passes(child);
    std::fs::remove_file(&file).unwrap();
    assert_ne!(
        gpu.device.cube_units,
        Profile::atlas_800t_a2().device.cube_units,
        "the two profiles tell apart"
    );
}

/// Runs only in the child of [`a_profile_file_gives_the_devices_its_figures`].
#[test]
fn profile_child() {
    let Ok(cubes) = std::env::var("BRAID_ACL_SIM_TEST_PROFILE_CUBES") else {
        return;
    };
    assert_eq!(aclInit(std::ptr::null()), 0);
    let mut value = 0i64;
    // SAFETY: `value` is a live out parameter.
    let code = unsafe { aclGetDeviceCapability(0, ACL_DEVICE_INFO_AI_CORE_NUM, &mut value) };
    assert_eq!(code, 0);
    assert_eq!(value.to_string(), cubes);
}
