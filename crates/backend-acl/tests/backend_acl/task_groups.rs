//! CANN's task-group rules as `braid-acl-sim` exports them, called through the C functions
//! and through the backend: misuse is a code, never a crash, and the stream stays usable.

use crate::common;

use braid_backend_acl::codes;
use braid_stream_core::hal::{Device as _, HalError, Stream as _, TaskGroupHandle};
use braid_stream_core::types::CaptureMode;
use std::ptr;

fn code(err: HalError) -> i32 {
    match err {
        HalError::Native { code, .. } | HalError::NativeInvalidArgument { code, .. } => code,
        other => panic!("expected a native error, got {other:?}"),
    }
}

#[test]
fn task_group_calls_follow_canns_rules() {
    let dev = common::hal_device(0);
    let api = common::api();
    let s = dev.create_stream(0).unwrap();
    let u = dev.create_stream(0).unwrap();
    // A group on a stream that does not capture.
    assert_eq!(
        code(s.begin_task_group().unwrap_err()),
        codes::ACL_ERROR_RT_STREAM_NOT_CAPTURED
    );
    // An update end outside an update scope.
    assert_eq!(
        code(u.end_task_update(true).unwrap_err()),
        codes::ACL_ERROR_RT_PARAM_INVALID
    );
    // An unknown group.
    assert_eq!(
        code(
            u.begin_task_update(TaskGroupHandle(0xdead_0000))
                .unwrap_err()
        ),
        codes::ACL_ERROR_RT_INVALID_HANDLE
    );
    // A null output pointer.
    let end = api
        .aclmdlRICaptureTaskGrpEnd
        .expect("exported by braid-acl-sim");
    // SAFETY: a stream handle from this library; a null out pointer is refused, not written.
    let null = unsafe { end(s.as_raw(), ptr::null_mut()) };
    assert_ne!(null, 0);

    s.begin_capture(CaptureMode::Global).unwrap();
    s.begin_task_group().unwrap();
    // Nested groups are refused.
    assert_eq!(
        code(s.begin_task_group().unwrap_err()),
        codes::ACL_ERROR_RT_PARAM_INVALID
    );
    let group = s.end_task_group().unwrap();
    // An update on a capturing stream is refused.
    assert_eq!(
        code(s.begin_task_update(group).unwrap_err()),
        codes::ACL_ERROR_RT_PARAM_INVALID
    );
    let _graph = s.end_capture().unwrap();
    // An empty group updated with nothing: a complete update.
    u.begin_task_update(group).unwrap();
    u.end_task_update(true).unwrap();
    // The streams still work.
    s.synchronize().unwrap();
    u.synchronize().unwrap();
}
