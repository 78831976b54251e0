//! The `acl` feature: ACL is the default backend, and opening a device without a library is a
//! typed error. (Runs with `cargo test -p braid --features acl`.)
#![cfg(feature = "acl")]

use braid::core::hal::{Backend, HalError};

#[test]
fn acl_is_the_default_backend() {
    assert_eq!(<braid::DefaultBackend as Backend>::NAME, "acl");
}

#[test]
fn opening_without_a_library_is_a_typed_error() {
    if braid::acl::is_available() {
        return; // A real (or simulated) ACL is configured here.
    }
    match braid::acl_device(0) {
        Err(braid::StreamError::Backend(HalError::Native { name, message, .. })) => {
            assert_eq!(name, "BRAID_ACL_LIBRARY_UNAVAILABLE");
            assert!(message.contains("libascendcl.so"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}
