//! The `acl` feature: ACL is the default backend, and without CANN a device opens on
//! braid-acl-sim. (Runs with `cargo test -p braid --features acl`.)
#![cfg(feature = "acl")]

use braid::core::hal::{Backend, HalError};

#[test]
fn acl_is_the_default_backend() {
    assert_eq!(<braid::DefaultBackend as Backend>::NAME, "acl");
}

/// Without CANN, `acl_device` opens braid-acl-sim beside the executable, as the demo does:
/// cargo builds it beside this test (a dev-dependency; for a program of your own, the feature
/// `acl-sim`). Where nothing at all is found, the error says how to get braid-acl-sim
/// (`braid_backend_acl`'s tests check that message).
#[test]
fn without_cann_acl_device_opens_braid_acl_sim_beside_the_executable() {
    if braid::acl::is_available() {
        return; // A real ACL (or BRAID_ACL_LIB) is configured here.
    }
    // The binary's other ACL modules need braid-acl-sim under the node settings, which its
    // first call reads: whichever module loads it first sets them.
    #[cfg(feature = "sim")]
    let _turn = {
        crate::common::acl_sim();
        crate::common::DEVICES.lock()
    };
    match braid::acl_device(0) {
        Ok(device) => {
            let api = braid::acl::AclApi::load_or_sim().unwrap();
            assert!(api.is_braid_acl_sim(), "{}", api.path().display());
            let buf = device.alloc(64).unwrap();
            device.default_stream().memset(buf.slice(), 0).unwrap();
            device.synchronize().unwrap();
        }
        Err(braid::StreamError::Backend(HalError::Native { name, message, .. })) => {
            // No braid-acl-sim either (a test binary moved away from its build).
            assert_eq!(name, "BRAID_ACL_LIBRARY_UNAVAILABLE");
            assert!(message.contains("braid-acl-sim"), "{message}");
        }
        Err(other) => panic!("unexpected {other:?}"),
    }
}
