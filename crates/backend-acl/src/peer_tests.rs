//! Unit tests of peer access over a mocked API table: what ACL is asked, once per peer, and
//! the typed refusals.

use crate::calls::{AclCalls, MockAclCalls};
use crate::device::{AclConfig, AclDevice};
use crate::tests::base;
use braid_stream_core::hal::{Device as _, HalError};
use mockall::predicate::eq;
use std::sync::Arc;

/// Devices 0 and 1 over one mocked library.
fn pair(m: MockAclCalls) -> (AclDevice, AclDevice) {
    let calls: Arc<dyn AclCalls> = Arc::new(m);
    let open = |ordinal| {
        AclDevice::with_calls(calls.clone(), ordinal, AclConfig::default()).expect("open")
    };
    (open(0), open(1))
}

#[test]
fn peer_access_is_asked_of_acl_and_enabled_once_per_peer() {
    let mut m = base(0, None);
    m.expect_can_access_peer()
        .with(eq(0), eq(1))
        .returning(|_, _| Some(Ok(1)));
    m.expect_enable_peer_access()
        .with(eq(1), eq(0))
        .times(1)
        .returning(|_, _| Some(0));
    let (d0, d1) = pair(m);
    assert!(d0.can_access_peer(&d1).unwrap());
    // The device itself is no peer: ACL is not asked.
    assert!(!d0.can_access_peer(&d0).unwrap());
    d0.enable_peer_access(&d1).unwrap();
    d0.enable_peer_access(&d1).unwrap();
    assert!(matches!(
        d0.enable_peer_access(&d0),
        Err(HalError::InvalidArgument(m)) if m.contains("to itself")
    ));
}

#[test]
fn a_peer_acl_refuses_or_a_library_without_the_symbols_is_a_typed_error() {
    let mut m = base(0, None);
    m.expect_can_access_peer()
        .with(eq(0), eq(1))
        .returning(|_, _| Some(Ok(0)));
    m.expect_can_access_peer()
        .with(eq(1), eq(0))
        .returning(|_, _| Some(Err(107_001)));
    m.expect_enable_peer_access().never();
    let (d0, d1) = pair(m);
    assert!(!d0.can_access_peer(&d1).unwrap());
    match d0.enable_peer_access(&d1) {
        Err(HalError::InvalidArgument(m)) => assert!(m.contains("cannot access"), "{m}"),
        other => panic!("unexpected {other:?}"),
    }
    match d1.can_access_peer(&d0) {
        Err(HalError::Native { code, name, .. }) => {
            assert_eq!((code, name), (107_001, "ACL_ERROR_RT_INVALID_DEVICEID"))
        }
        other => panic!("unexpected {other:?}"),
    }

    let mut m = base(0, None);
    m.expect_can_access_peer().returning(|_, _| None);
    m.expect_enable_peer_access().returning(|_, _| None);
    let (d0, d1) = pair(m);
    assert!(!d0.can_access_peer(&d1).unwrap());
    assert!(matches!(
        d0.enable_peer_access(&d1),
        Err(HalError::InvalidArgument(_))
    ));
}
