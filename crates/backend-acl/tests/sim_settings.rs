//! An invalid `braid-acl-sim` setting reaches the backend as a typed ACL error naming the
//! variable, through the real loading path.
//!
//! The simulator reads its settings once per process, at its first call: this file's single
//! test sets the variable before loading it, in its own test executable.

// The helpers of the main test binary (`tests/backend_acl/`).
#[path = "backend_acl/common/mod.rs"]
mod common;

use braid_backend_acl::{AclApi, AclConfig, AclDevice, OpenError};

#[test]
fn an_invalid_simulator_setting_fails_opening_a_device_naming_the_variable() {
    std::env::set_var(braid_acl_sim::DEVICES_ENV, "abc");
    let api = AclApi::load_from(common::sim_library()).expect("loads");
    match AclDevice::open_with(api, 0, AclConfig::default()) {
        Err(OpenError::Acl(e)) => {
            assert_eq!((e.call, e.name), ("aclInit", "ACL_ERROR_INVALID_PARAM"));
            assert!(
                e.message.contains("BRAID_ACL_SIM_DEVICES=\"abc\""),
                "{}",
                e.message
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    // It stays an error (the settings do not change under the running process).
    let again = AclDevice::open_with(api, 0, AclConfig::default()).unwrap_err();
    assert!(
        again.to_string().contains("BRAID_ACL_SIM_DEVICES"),
        "{again}"
    );
}
