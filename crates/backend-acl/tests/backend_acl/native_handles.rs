//! Native-handle interop through `braid-acl-sim`: streams and events created with the raw ACL
//! API, wrapped borrowed or owned, adopted by a braid device, ordering work through them; and
//! the typed errors of null handles and of a user operator with no ACL body.

use crate::common;

use braid_backend_acl::sys::acl::{aclrtEvent, aclrtStream, ACL_EVENT_SYNC};
use braid_backend_acl::{codes, AclBackend, Ownership};
use braid_stream_core::hal::HalError;
use braid_stream_core::{CustomOp, Device, EventFlags, Kernel, StreamError};
use std::ptr;

const ELEMENTS: usize = 1024;

/// A stream and an event made with the raw API, as another library (torch_npu) would.
fn raw_stream_and_event() -> (aclrtStream, aclrtEvent) {
    let api = common::api();
    let mut stream: aclrtStream = ptr::null_mut();
    let mut event: aclrtEvent = ptr::null_mut();
    // SAFETY: live out parameters; the calling thread has device 0 bound (opened before).
    unsafe {
        assert_eq!((api.aclrtSetDevice)(0), 0);
        assert_eq!((api.aclrtCreateStream)(&mut stream), 0);
        assert_eq!(
            (api.aclrtCreateEventWithFlag)(&mut event, ACL_EVENT_SYNC),
            0
        );
    }
    assert!(!stream.is_null() && !event.is_null());
    (stream, event)
}

fn device() -> Device<AclBackend> {
    common::device(0).expect("device 0 opens")
}

#[test]
fn borrowed_handles_order_braid_work_and_outlive_their_wrappers() {
    let dev = device();
    // Device 0 is the process's: other tests' reports are not this one's.
    assert!(dev.hal().clear_sanitizer_reports().unwrap());
    let (raw_stream, raw_event) = raw_stream_and_event();
    // SAFETY: both are live handles of device 0, destroyed below only after the wrappers drop.
    let (hal_stream, hal_event) = unsafe {
        (
            dev.hal()
                .wrap_stream(raw_stream, Ownership::Borrowed)
                .unwrap(),
            dev.hal()
                .wrap_event(raw_event, Ownership::Borrowed)
                .unwrap(),
        )
    };
    assert_eq!(hal_stream.as_raw(), raw_stream);
    assert_eq!(hal_event.as_raw(), raw_event);
    let adopted = dev.adopt_stream(hal_stream, 0);
    let event = dev.adopt_event(hal_event, EventFlags::ORDERING);
    // The round trip: braid's stream and event give the handles back.
    assert_eq!(adopted.hal().as_raw(), raw_stream);
    assert_eq!(event.hal().as_raw(), raw_event);

    let bytes = (ELEMENTS * 4) as u64;
    let (x, y) = (dev.alloc(bytes).unwrap(), dev.alloc(bytes).unwrap());
    // Long work on the adopted stream, then x = 7; the other stream waits on the event.
    adopted
        .launch(&Kernel::Busy {
            duration_ns: 1_000_000,
        })
        .unwrap();
    adopted
        .launch(&Kernel::Fill {
            dst: x.slice(),
            value: 7.0,
        })
        .unwrap();
    event.record(&adopted).unwrap();
    let other = dev.create_stream(0).unwrap();
    other.wait(&event).unwrap();
    other
        .launch(&Kernel::Add {
            a: x.slice(),
            b: x.slice(),
            out: y.slice(),
        })
        .unwrap();
    assert_eq!(
        other.copy_d2h(y.slice()).unwrap().wait_f32().unwrap(),
        vec![14.0; ELEMENTS]
    );
    // The model learnt the order from the event: no race reported.
    assert_eq!(dev.hal().sanitizer_reports().unwrap(), Some(vec![]));

    drop((event, adopted, other, x, y));
    dev.synchronize().unwrap();
    // braid did not destroy what it borrowed: the raw handles still work, and the owner
    // destroys them once (a second destroy is a stale handle).
    let api = common::api();
    // SAFETY: the handles are live (borrowed, never destroyed by braid); destroyed once here.
    unsafe {
        assert_eq!((api.aclrtSynchronizeStream)(raw_stream), 0);
        assert_eq!((api.aclrtRecordEvent)(raw_event, raw_stream), 0);
        assert_eq!((api.aclrtSynchronizeEvent)(raw_event), 0);
        assert_eq!((api.aclrtDestroyEvent)(raw_event), 0);
        assert_eq!((api.aclrtDestroyStream)(raw_stream), 0);
        assert_eq!(
            (api.aclrtDestroyStream)(raw_stream),
            codes::ACL_ERROR_RT_INVALID_HANDLE
        );
    }
}

#[test]
fn owned_wrappers_destroy_their_handles() {
    let dev = device();
    let (raw_stream, raw_event) = raw_stream_and_event();
    // SAFETY: live handles of device 0, handed over: nothing else destroys them.
    let (hal_stream, hal_event) = unsafe {
        (
            dev.hal().wrap_stream(raw_stream, Ownership::Owned).unwrap(),
            dev.hal().wrap_event(raw_event, Ownership::Owned).unwrap(),
        )
    };
    let adopted = dev.adopt_stream(hal_stream, 0);
    let event = dev.adopt_event(hal_event, EventFlags::ORDERING);
    let mem = dev.alloc(64).unwrap();
    adopted
        .launch(&Kernel::Fill {
            dst: mem.slice(),
            value: 1.0,
        })
        .unwrap();
    event.record(&adopted).unwrap();
    event.synchronize().unwrap();
    drop((event, adopted));
    let api = common::api();
    // SAFETY: braid-acl-sim never dereferences handles: a destroyed one is a code.
    unsafe {
        assert_eq!(
            (api.aclrtDestroyStream)(raw_stream),
            codes::ACL_ERROR_RT_INVALID_HANDLE,
            "the owned stream was destroyed with its wrapper"
        );
        assert_eq!(
            (api.aclrtDestroyEvent)(raw_event),
            codes::ACL_ERROR_RT_INVALID_HANDLE,
            "the owned event was destroyed with its wrapper"
        );
    }
    // The device goes on.
    let s = dev.create_stream(0).unwrap();
    s.launch(&Kernel::Fill {
        dst: mem.slice(),
        value: 3.0,
    })
    .unwrap();
    assert_eq!(
        s.copy_d2h(mem.slice()).unwrap().wait_f32().unwrap(),
        vec![3.0; 16]
    );
}

#[test]
fn null_handles_are_typed_errors() {
    let dev = device();
    for ownership in [Ownership::Borrowed, Ownership::Owned] {
        // SAFETY: null is checked before anything uses it.
        let stream = unsafe { dev.hal().wrap_stream(ptr::null_mut(), ownership) };
        match stream {
            Err(HalError::InvalidArgument(msg)) => {
                assert!(msg.contains("null aclrtStream"), "{msg}")
            }
            other => panic!(
                "expected a typed error, got {:?}",
                other.map(|s| s.as_raw())
            ),
        }
        // SAFETY: as above.
        let event = unsafe { dev.hal().wrap_event(ptr::null_mut(), ownership) };
        match event {
            Err(HalError::InvalidArgument(msg)) => {
                assert!(msg.contains("null aclrtEvent"), "{msg}")
            }
            other => panic!(
                "expected a typed error, got {:?}",
                other.map(|e| e.as_raw())
            ),
        }
    }
    // The default stream's handle is ACL's null stream; braid's own streams have real ones.
    assert!(dev.default_stream().hal().as_raw().is_null());
    assert!(!dev.create_stream(0).unwrap().hal().as_raw().is_null());
}

#[test]
fn a_user_operator_without_an_acl_body_is_a_typed_error_naming_it() {
    let dev = device();
    let s = dev.create_stream(0).unwrap();
    let mem = dev.alloc(256).unwrap();
    let before = s.position();
    let op = CustomOp::<AclBackend>::new("my_layer_norm").write(mem.slice());
    let err = s.launch_op(&op).unwrap_err();
    match &err {
        StreamError::Backend(HalError::InvalidArgument(msg)) => {
            assert!(
                msg.contains("my_layer_norm") && msg.contains("no ACL body"),
                "{msg}"
            )
        }
        other => panic!("expected a typed backend error, got {other:?}"),
    }
    assert_eq!(s.position(), before, "the refused launch took no position");
    // Everything stays usable.
    s.launch(&Kernel::Fill {
        dst: mem.slice(),
        value: 2.0,
    })
    .unwrap();
    assert_eq!(
        s.copy_d2h(mem.slice()).unwrap().wait_f32().unwrap(),
        vec![2.0; 64]
    );
    dev.synchronize().unwrap();
}
