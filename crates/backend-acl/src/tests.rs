//! Unit tests of the hal wrapper over a mocked API table (`MockAclCalls`): every error path,
//! the fallbacks, thread binding and errors kept from `Drop`, without a library.

use crate::calls::MockAclCalls;
use crate::device::{AclConfig, AclDevice, OpenError};
use crate::error::codes::*;
use crate::ffi::*;
use crate::stream::CAPTURE_UNSUPPORTED;
use braid_stream_core::hal::{Device as _, Event as _, Graph as _, HalError, Stream as _};
use braid_stream_core::kernel::Kernel;
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags};
use mockall::predicate::eq;
use std::sync::Arc;

const STREAM: usize = 0x5000;
const EVENT: usize = 0xe000;
const MODEL: usize = 0x7000;

/// A mock that opens device `ordinal` of 2: `aclInit` answers `init_code`, `aclrtSetDevice`
/// succeeds (`set_device_times` times, if given), reset succeeds, it has no loaded table, and
/// every failure's text is "simulated failure text".
pub(crate) fn base(init_code: i32, set_device_times: Option<usize>) -> MockAclCalls {
    let mut m = MockAclCalls::new();
    m.expect_init().return_const(init_code);
    m.expect_device_count().returning(|| Ok(2));
    let set = m.expect_set_device().returning(|_| 0);
    if let Some(n) = set_device_times {
        set.times(n);
    }
    m.expect_reset_device().returning(|_| 0);
    m.expect_recent_error_message()
        .returning(|| "simulated failure text".to_string());
    // A table-less double: its allocations are noted under its own key.
    m.expect_acl_api().returning(|| None);
    m
}

fn open(m: MockAclCalls) -> AclDevice {
    AclDevice::with_calls(Arc::new(m), 0, AclConfig::default()).expect("open")
}

fn native(err: HalError) -> (i32, &'static str, String) {
    match err {
        HalError::Native {
            code,
            name,
            message,
        } => (code, name, message),
        other => panic!("expected a native error, got {other:?}"),
    }
}

fn slice(addr: u64, len: u64) -> DeviceSlice {
    DeviceSlice::new(DevicePtr(addr), len)
}

#[test]
fn a_repeated_init_is_not_an_error_but_other_init_failures_are() {
    let dev = open(base(ACL_ERROR_REPEAT_INITIALIZE, None));
    assert_eq!(dev.ordinal(), 0);
    drop(dev);

    let mut m = MockAclCalls::new();
    m.expect_init().return_const(ACL_ERROR_UNINITIALIZE);
    m.expect_recent_error_message()
        .returning(|| "no config".to_string());
    match AclDevice::with_calls(Arc::new(m), 0, AclConfig::default()) {
        Err(OpenError::Acl(e)) => {
            assert_eq!(
                (e.code, e.name, e.call),
                (100_001, "ACL_ERROR_UNINITIALIZE", "aclInit")
            );
            assert_eq!(e.message, "no config");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn the_device_count_is_acl_s_after_init_and_its_failures_are_typed() {
    assert_eq!(AclDevice::count_with(&base(0, None)).unwrap(), 2);
    let m = base(ACL_ERROR_REPEAT_INITIALIZE, None);
    assert_eq!(AclDevice::count_with(&m).unwrap(), 2);
    let m = base(ACL_ERROR_RT_FAILURE, None);
    assert!(matches!(
        AclDevice::count_with(&m),
        Err(OpenError::Acl(e)) if e.call == "aclInit"
    ));
}

#[test]
fn opening_a_missing_device_or_failing_set_device_is_typed() {
    let mut m = MockAclCalls::new();
    m.expect_init().return_const(0);
    m.expect_device_count().returning(|| Ok(1));
    let err = AclDevice::with_calls(Arc::new(m), 3, AclConfig::default()).unwrap_err();
    assert_eq!(
        err,
        OpenError::NoSuchDevice {
            ordinal: 3,
            count: 1
        }
    );
    assert!(matches!(HalError::from(err), HalError::InvalidArgument(_)));

    let mut m = MockAclCalls::new();
    m.expect_init().return_const(0);
    m.expect_device_count().returning(|| Ok(1));
    m.expect_set_device()
        .with(eq(0))
        .return_const(ACL_ERROR_RT_INVALID_DEVICEID);
    m.expect_recent_error_message()
        .returning(|| "bad id".to_string());
    let err = AclDevice::with_calls(Arc::new(m), 0, AclConfig::default()).unwrap_err();
    let (code, name, message) = native(err.into());
    assert_eq!((code, name), (107_001, "ACL_ERROR_RT_INVALID_DEVICEID"));
    assert_eq!(message, "aclrtSetDevice: bad id");

    let mut m = MockAclCalls::new();
    m.expect_init().return_const(0);
    m.expect_device_count()
        .returning(|| Err(ACL_ERROR_RT_FAILURE));
    m.expect_recent_error_message().returning(String::new);
    assert!(matches!(
        AclDevice::with_calls(Arc::new(m), 0, AclConfig::default()),
        Err(OpenError::Acl(e)) if e.code == ACL_ERROR_RT_FAILURE
    ));
}

#[test]
fn streams_use_fast_launch_and_sync_with_the_priority_and_fall_back_without_config() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .with(eq(3), eq(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC))
        .times(1)
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_create_stream_with_config()
        .with(eq(0), eq(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC))
        .times(1)
        .returning(|_, _| Some(Ok(STREAM + 1)));
    m.expect_destroy_stream().times(2).returning(|_| 0);
    let dev = open(m);
    let s = dev.create_stream(3).unwrap();
    assert_eq!(s.raw, STREAM);
    // Negative (higher than normal) priorities map to ACL's highest, 0.
    let t = dev.create_stream(-5).unwrap();
    assert_eq!(t.raw, STREAM + 1);
    drop((s, t));

    let mut m = base(0, None);
    m.expect_create_stream_with_config().returning(|_, _| None);
    m.expect_create_stream().times(1).returning(|| Ok(STREAM));
    m.expect_destroy_stream()
        .with(eq(STREAM))
        .times(1)
        .returning(|_| 0);
    let dev = open(m);
    assert_eq!(dev.create_stream(0).unwrap().raw, STREAM);

    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Err(ACL_ERROR_RT_NO_STREAM_RESOURCE)));
    let dev = open(m);
    let (code, name, message) = native(dev.create_stream(0).unwrap_err());
    assert_eq!((code, name), (207_008, "ACL_ERROR_RT_NO_STREAM_RESOURCE"));
    assert_eq!(
        message,
        "aclrtCreateStreamWithConfig: simulated failure text"
    );
}

#[test]
fn events_are_capture_safe_and_timing_events_have_time_line_with_fallback() {
    let mut m = base(0, None);
    m.expect_create_event_ex_with_flag()
        .with(eq(ACL_EVENT_SYNC))
        .times(1)
        .returning(|_| Some(Ok(EVENT)));
    m.expect_create_event_ex_with_flag()
        .with(eq(ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE))
        .times(1)
        .returning(|_| Some(Ok(EVENT + 1)));
    m.expect_destroy_event().times(2).returning(|_| 0);
    let dev = open(m);
    assert_eq!(dev.create_event(EventFlags::ORDERING).unwrap().raw, EVENT);
    assert_eq!(dev.create_event(EventFlags::TIMING).unwrap().raw, EVENT + 1);

    let mut m = base(0, None);
    m.expect_create_event_ex_with_flag().returning(|_| None);
    m.expect_create_event_with_flag()
        .with(eq(ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE))
        .times(1)
        .returning(|_| Ok(EVENT));
    m.expect_destroy_event().times(1).returning(|_| 0);
    let dev = open(m);
    assert_eq!(dev.create_event(EventFlags::TIMING).unwrap().raw, EVENT);
}

#[test]
fn event_record_query_synchronize_and_elapsed() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().returning(|_| 0);
    let mut n = 0;
    m.expect_create_event_ex_with_flag().returning(move |_| {
        n += 1;
        Some(Ok(EVENT + n))
    });
    m.expect_destroy_event().returning(|_| 0);
    m.expect_record_event()
        .with(eq(EVENT + 1), eq(STREAM))
        .times(1)
        .returning(|_, _| 0);
    m.expect_record_event()
        .with(eq(EVENT + 2), eq(STREAM))
        .times(1)
        .returning(|_, _| ACL_ERROR_RT_PARAM_INVALID);
    let mut status = vec![
        ACL_EVENT_RECORDED_STATUS_COMPLETE,
        ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ];
    m.expect_query_event_status()
        .times(2)
        .returning(move |_| Ok(status.pop().unwrap_or(0)));
    m.expect_synchronize_event()
        .times(1)
        .returning(|_| ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    m.expect_event_elapsed_time()
        .with(eq(EVENT + 1), eq(EVENT + 2))
        .returning(|_, _| Ok(1.5));
    let dev = open(m);
    let s = dev.create_stream(0).unwrap();
    let (a, b) = (
        dev.create_event(EventFlags::TIMING).unwrap(),
        dev.create_event(EventFlags::TIMING).unwrap(),
    );
    // Never recorded: complete, and ACL is not asked.
    assert!(a.query().unwrap());
    a.synchronize().unwrap();
    s.record(&a).unwrap();
    assert!(!a.query().unwrap());
    assert!(a.query().unwrap());
    let (code, name, _) = native(a.synchronize().unwrap_err());
    assert_eq!((code, name), (507_047, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT"));
    // A failed record leaves the event unrecorded.
    assert!(s.record(&b).is_err());
    assert!(b.query().unwrap());
    assert_eq!(a.elapsed_ms(&b).unwrap(), 1.5);
}

#[test]
fn device_oom_maps_to_the_allocators_oom_path() {
    for code in [
        ACL_ERROR_RT_DEVICE_OOM,
        ACL_ERROR_RT_MEMORY_ALLOCATION,
        ACL_ERROR_BAD_ALLOC,
    ] {
        let mut m = base(0, None);
        m.expect_malloc()
            .with(eq(1usize << 30), eq(ACL_MEM_MALLOC_HUGE_FIRST))
            .returning(move |_, _| Err(code));
        m.expect_mem_info()
            .with(eq(ACL_HBM_MEM))
            .returning(|_| Ok((100, 1000)));
        let dev = open(m);
        assert_eq!(
            dev.alloc(1 << 30).unwrap_err(),
            HalError::OutOfMemory {
                requested: 1 << 30,
                free: 100,
                total: 1000
            }
        );
    }
    // Other failures keep their number; OOM with a failing mem_info still is OOM.
    let mut m = base(0, None);
    m.expect_malloc()
        .with(eq(64usize), eq(ACL_MEM_MALLOC_HUGE_FIRST))
        .returning(|_, _| Err(ACL_ERROR_INVALID_PARAM));
    m.expect_malloc()
        .with(eq(128usize), eq(ACL_MEM_MALLOC_HUGE_FIRST))
        .returning(|_, _| Err(ACL_ERROR_RT_DEVICE_OOM));
    m.expect_malloc()
        .with(eq(256usize), eq(ACL_MEM_MALLOC_HUGE_FIRST))
        .returning(|_, _| Ok(0x1000));
    m.expect_mem_info().returning(|_| Err(ACL_ERROR_RT_FAILURE));
    m.expect_free()
        .with(eq(0x1000))
        .times(1)
        .returning(|_| ACL_ERROR_RT_MEMORY_FREE);
    let dev = open(m);
    assert_eq!(
        native(dev.alloc(64).unwrap_err()).0,
        ACL_ERROR_INVALID_PARAM
    );
    assert!(matches!(
        dev.alloc(128).unwrap_err(),
        HalError::OutOfMemory {
            requested: 128,
            free: 0,
            total: 0
        }
    ));
    let p = dev.alloc(256).unwrap();
    assert_eq!(p, DevicePtr(0x1000));
    // SAFETY: the address came from `alloc` above (and the mock touches no memory).
    let (code, name, _) = native(unsafe { dev.free(p) }.unwrap_err());
    assert_eq!((code, name), (207_002, "ACL_ERROR_RT_MEMORY_FREE"));
    assert_eq!(native(dev.mem_info().unwrap_err()).0, ACL_ERROR_RT_FAILURE);
}

#[test]
fn pinned_host_memory_maps_oom_and_keeps_other_codes() {
    let mut m = base(0, None);
    m.expect_malloc_host()
        .with(eq(4096usize))
        .returning(|_| Ok(0x10_0000));
    m.expect_malloc_host()
        .with(eq(8192usize))
        .returning(|_| Err(ACL_ERROR_BAD_ALLOC));
    m.expect_malloc_host()
        .with(eq(1usize))
        .returning(|_| Err(ACL_ERROR_INVALID_PARAM));
    m.expect_malloc_host().with(eq(2usize)).returning(|_| Ok(0));
    m.expect_free_host()
        .with(eq(0x10_0000usize))
        .times(2)
        .returning({
            let calls = std::sync::atomic::AtomicUsize::new(0);
            move |_| {
                if calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
                    0
                } else {
                    ACL_ERROR_RT_PARAM_INVALID
                }
            }
        });
    let dev = open(m);
    let p = dev.alloc_host(4096).unwrap();
    assert_eq!(p.addr(), 0x10_0000);
    assert_eq!(
        dev.alloc_host(8192).unwrap_err(),
        HalError::OutOfMemory {
            requested: 8192,
            free: 0,
            total: 0
        }
    );
    assert_eq!(
        native(dev.alloc_host(1).unwrap_err()).0,
        ACL_ERROR_INVALID_PARAM
    );
    // A null pointer reported as success is out of memory, never a null `HostPtr`.
    assert!(matches!(
        dev.alloc_host(2).unwrap_err(),
        HalError::OutOfMemory { requested: 2, .. }
    ));
    // SAFETY: the address came from `alloc_host` above (and the mock touches no memory).
    unsafe { dev.free_host(p) }.unwrap();
    // SAFETY: as above; the mock refuses the second free as ACL would.
    let (code, _, message) = native(unsafe { dev.free_host(p) }.unwrap_err());
    assert_eq!(code, ACL_ERROR_RT_PARAM_INVALID);
    assert!(message.contains("aclrtFreeHost"), "{message}");
}

#[test]
fn mem_info_and_device_synchronize() {
    let mut m = base(0, None);
    m.expect_mem_info()
        .with(eq(ACL_HBM_MEM))
        .returning(|_| Ok((3, 7)));
    m.expect_synchronize_device()
        .times(1)
        .return_const(ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    let dev = open(m);
    let info = dev.mem_info().unwrap();
    assert_eq!((info.free, info.total), (3, 7));
    let (code, name, message) = native(dev.synchronize().unwrap_err());
    assert_eq!(
        (code, name),
        (107_041, "ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC")
    );
    assert_eq!(message, "aclrtSynchronizeDevice: simulated failure text");
}

#[test]
fn copies_and_memset_pass_kinds_and_capacities() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().returning(|_| 0);
    m.expect_memcpy_async()
        .withf(|_, max, _, n, kind, s| {
            *kind == ACL_MEMCPY_HOST_TO_DEVICE && *max == 16 && *n == 16 && *s == STREAM
        })
        .times(1)
        .returning(|_, _, _, _, _, _| 0);
    m.expect_memcpy_async()
        .withf(|dst, _, src, _, kind, _| {
            *kind == ACL_MEMCPY_DEVICE_TO_DEVICE && *dst == 0x2000 && *src == 0x1000
        })
        .times(1)
        .returning(|_, _, _, _, _, _| 0);
    m.expect_memcpy_async()
        .withf(|_, _, src, _, kind, _| *kind == ACL_MEMCPY_DEVICE_TO_HOST && *src == 0x1000)
        .times(1)
        .returning(|_, _, _, _, _, _| ACL_ERROR_RT_PARAM_INVALID);
    m.expect_memset_async()
        .with(eq(0x1000), eq(8usize), eq(0xab), eq(8usize), eq(STREAM))
        .times(1)
        .returning(|_, _, _, _, _| 0);
    let dev = open(m);
    let s = dev.create_stream(0).unwrap();
    let host = [0u8; 16];
    // SAFETY: `host` outlives the (mocked) copy.
    unsafe { s.memcpy_h2d(DevicePtr(0x1000), host.as_ptr(), 16) }.unwrap();
    s.memcpy_d2d(DevicePtr(0x2000), DevicePtr(0x1000), 16)
        .unwrap();
    let mut back = [0u8; 16];
    // SAFETY: `back` outlives the (mocked) copy.
    let err = unsafe { s.memcpy_d2h(back.as_mut_ptr(), DevicePtr(0x1000), 16) }.unwrap_err();
    assert_eq!(native(err).0, ACL_ERROR_RT_PARAM_INVALID);
    s.memset(DevicePtr(0x1000), 0xab, 8).unwrap();
}

#[test]
fn synchronize_uses_the_timeout_where_available() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().returning(|_| 0);
    m.expect_synchronize_stream_with_timeout()
        .with(eq(STREAM), eq(250))
        .times(1)
        .returning(|_, _| Some(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT));
    let config = AclConfig {
        sync_timeout_ms: 250,
        ..AclConfig::default()
    };
    let dev = AclDevice::with_calls(Arc::new(m), 0, config).unwrap();
    let s = dev.create_stream(0).unwrap();
    let (code, name, _) = native(s.synchronize().unwrap_err());
    assert_eq!((code, name), (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"));

    // Without the symbol: plain aclrtSynchronizeStream (here on the default stream, null).
    let mut m = base(0, None);
    m.expect_synchronize_stream_with_timeout()
        .returning(|_, _| None);
    m.expect_synchronize_stream()
        .with(eq(0))
        .times(1)
        .returning(|_| 0);
    let dev = open(m);
    dev.default_stream().unwrap().synchronize().unwrap();
}

#[test]
fn stream_query_and_its_fallback_through_an_event() {
    let mut m = base(0, None);
    let mut answers = vec![ACL_STREAM_STATUS_NOT_READY, ACL_STREAM_STATUS_COMPLETE];
    m.expect_stream_query()
        .times(2)
        .returning(move |_| Some(Ok(answers.pop().unwrap_or(0))));
    let dev = open(m);
    let d = dev.default_stream().unwrap();
    assert!(d.query().unwrap());
    assert!(!d.query().unwrap());

    let mut m = base(0, None);
    m.expect_stream_query().returning(|_| None);
    m.expect_create_event_ex_with_flag()
        .with(eq(ACL_EVENT_SYNC))
        .times(1)
        .returning(|_| Some(Ok(EVENT)));
    m.expect_record_event()
        .with(eq(EVENT), eq(0))
        .times(1)
        .returning(|_, _| 0);
    m.expect_query_event_status()
        .with(eq(EVENT))
        .times(1)
        .returning(|_| Ok(ACL_EVENT_RECORDED_STATUS_COMPLETE));
    m.expect_destroy_event()
        .with(eq(EVENT))
        .times(1)
        .returning(|_| 0);
    let dev = open(m);
    assert!(dev.default_stream().unwrap().query().unwrap());
}

#[test]
fn wait_failures_keep_their_number_and_text() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().returning(|_| 0);
    m.expect_create_event_ex_with_flag()
        .returning(|_| Some(Ok(EVENT)));
    m.expect_destroy_event().returning(|_| 0);
    m.expect_stream_wait_event()
        .with(eq(STREAM), eq(EVENT))
        .returning(|_, _| ACL_ERROR_RT_CAPTURE_DEPENDENCY);
    let dev = open(m);
    let (s, e) = (
        dev.create_stream(0).unwrap(),
        dev.create_event(EventFlags::ORDERING).unwrap(),
    );
    let (code, name, message) = native(s.wait(&e).unwrap_err());
    assert_eq!((code, name), (107_024, "ACL_ERROR_RT_CAPTURE_DEPENDENCY"));
    assert_eq!(message, "aclrtStreamWaitEvent: simulated failure text");
}

#[test]
fn errors_from_drop_are_reported_by_the_next_call_then_cleared() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream()
        .with(eq(STREAM))
        .times(1)
        .returning(|_| ACL_ERROR_RT_INVALID_HANDLE);
    m.expect_create_event_ex_with_flag()
        .returning(|_| Some(Ok(EVENT)));
    m.expect_destroy_event()
        .times(1)
        .returning(|_| ACL_ERROR_RT_INTERNAL_ERROR);
    m.expect_mem_info().returning(|_| Ok((1, 2)));
    let dev = open(m);
    drop(dev.create_stream(0).unwrap());
    let (code, name, message) = native(dev.create_event(EventFlags::ORDERING).unwrap_err());
    assert_eq!((code, name), (107_017, "ACL_ERROR_RT_INVALID_HANDLE"));
    assert_eq!(message, "aclrtDestroyStream: simulated failure text");
    drop(dev.create_event(EventFlags::ORDERING).unwrap());
    let (code, name, _) = native(dev.mem_info().unwrap_err());
    assert_eq!((code, name), (507_000, "ACL_ERROR_RT_INTERNAL_ERROR"));
    assert_eq!(dev.mem_info().unwrap().total, 2);
}

#[test]
fn the_device_is_bound_on_each_thread_before_its_calls() {
    // Open (this thread) + the first call on another thread: two aclrtSetDevice in all.
    let mut m = base(0, Some(2));
    m.expect_mem_info().times(4).returning(|_| Ok((1, 2)));
    let dev = open(m);
    dev.mem_info().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            dev.mem_info().unwrap();
            dev.mem_info().unwrap();
        });
    });
    dev.mem_info().unwrap();
}

#[test]
fn switching_devices_on_a_thread_rebinds() {
    // Two devices opened on this thread: each call on the one not bound rebinds it.
    let mut m = base(0, None);
    m.expect_mem_info().returning(|_| Ok((1, 2)));
    let calls: Arc<MockAclCalls> = Arc::new(m);
    let a = AclDevice::with_calls(calls.clone(), 0, AclConfig::default()).unwrap();
    let b = AclDevice::with_calls(calls, 1, AclConfig::default()).unwrap();
    assert!(crate::bind::is_bound(b.shared_uid()));
    a.mem_info().unwrap();
    assert!(crate::bind::is_bound(a.shared_uid()));
    b.mem_info().unwrap();
    assert!(crate::bind::is_bound(b.shared_uid()));
}

#[test]
fn a_failing_bind_is_reported() {
    let mut m = MockAclCalls::new();
    m.expect_init().return_const(0);
    m.expect_device_count().returning(|| Ok(1));
    let mut first = true;
    m.expect_set_device().returning(move |_| {
        let code = if first { 0 } else { ACL_ERROR_RT_CONTEXT_NULL };
        first = false;
        code
    });
    m.expect_reset_device().returning(|_| 0);
    m.expect_recent_error_message().returning(String::new);
    let dev = open(m);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let (code, _, message) = native(dev.mem_info().unwrap_err());
            assert_eq!(code, ACL_ERROR_RT_CONTEXT_NULL);
            assert_eq!(message, "aclrtSetDevice");
        });
    });
}

#[test]
fn dropping_the_last_handle_resets_the_device() {
    let mut m = MockAclCalls::new();
    m.expect_init().return_const(0);
    m.expect_device_count().returning(|| Ok(1));
    m.expect_set_device().returning(|_| 0);
    m.expect_reset_device()
        .with(eq(0))
        .times(1)
        .returning(|_| 0);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().times(1).returning(|_| 0);
    let dev = open(m);
    let s = dev.create_stream(0).unwrap();
    drop(dev);
    // The stream keeps the device: destroyed first, then the reset.
    drop(s);
}

#[test]
fn sanitizer_reports_need_the_extension_and_errors_are_typed() {
    // CANN: no extension, nothing to ask.
    let mut m = base(0, None);
    m.expect_sanitizer_report_count().returning(|_| None);
    m.expect_clear_sanitizer_reports().returning(|_| None);
    let dev = open(m);
    assert_eq!(dev.sanitizer_reports().unwrap(), None);
    assert!(!dev.clear_sanitizer_reports().unwrap());

    // braid-acl-sim: the reports of this device, by index.
    let mut m = base(0, None);
    m.expect_sanitizer_report_count()
        .with(eq(0))
        .returning(|_| Some(Ok(2)));
    m.expect_sanitizer_report()
        .returning(|_, i| Some(Ok(format!("report {i}"))));
    m.expect_clear_sanitizer_reports()
        .with(eq(0))
        .times(1)
        .returning(|_| Some(0));
    let dev = open(m);
    assert_eq!(
        dev.sanitizer_reports().unwrap(),
        Some(vec!["report 0".to_string(), "report 1".to_string()])
    );
    assert!(dev.clear_sanitizer_reports().unwrap());

    let mut m = base(0, None);
    m.expect_sanitizer_report_count()
        .returning(|_| Some(Err(ACL_ERROR_RT_CONTEXT_NULL)));
    let dev = open(m);
    let err = dev.sanitizer_reports().unwrap_err();
    assert_eq!(
        (err.call, err.code, err.message.as_str()),
        (
            "braidSimSanitizerReportCount",
            ACL_ERROR_RT_CONTEXT_NULL,
            "simulated failure text"
        )
    );
}

#[test]
fn busy_has_no_operator_and_kernels_need_aclnn() {
    let mut m = base(0, None);
    m.expect_acl_api().returning(|| None);
    m.expect_busy().returning(|_, _| None);
    let dev = open(m);
    let d = dev.default_stream().unwrap();
    let err = d
        .launch(&TypedKernel::from(&Kernel::Busy { duration_ns: 1 }), "busy")
        .unwrap_err();
    assert_eq!(err, HalError::Unsupported(crate::aclnn::BUSY_UNSUPPORTED));
    // No ACL library behind the test double: aclnn cannot load, a typed error every time.
    let fill = TypedKernel::from(&Kernel::Fill {
        dst: slice(0x1000, 16),
        value: 2.0,
    });
    for _ in 0..2 {
        let (code, name, message) = native(d.launch(&fill, "init").unwrap_err());
        assert_eq!(
            (code, name),
            (
                crate::ACLNN_LOAD_FAILED_CODE,
                "BRAID_ACLNN_LIBRARY_UNAVAILABLE"
            )
        );
        assert!(message.contains("test double"), "{message}");
    }
}

#[test]
fn capture_without_the_api_is_unsupported_and_never_capturing() {
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().returning(|_| 0);
    m.expect_capture_begin().returning(|_, _| None);
    m.expect_capture_end().returning(|_| None);
    m.expect_capture_get_info().returning(|_| None);
    let dev = open(m);
    let s = dev.create_stream(0).unwrap();
    assert_eq!(
        s.begin_capture(CaptureMode::Global).unwrap_err(),
        HalError::Unsupported(CAPTURE_UNSUPPORTED)
    );
    assert!(matches!(
        s.end_capture().unwrap_err(),
        HalError::Unsupported(_)
    ));
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::None);
}

#[test]
fn capture_modes_map_and_captured_work_is_counted() {
    for (mode, number) in [
        (CaptureMode::Global, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
        (
            CaptureMode::ThreadLocal,
            ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
        ),
        (CaptureMode::Relaxed, ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
    ] {
        assert_eq!(crate::capture_mode_number(mode), number);
    }
    let mut m = base(0, None);
    m.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m.expect_destroy_stream().returning(|_| 0);
    m.expect_capture_begin()
        .with(eq(STREAM), eq(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL))
        .times(1)
        .returning(|_, _| Some(0));
    m.expect_capture_get_info()
        .with(eq(STREAM))
        .returning(|_| Some(Ok((ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, MODEL))));
    m.expect_memset_async().returning(|_, _, _, _, _| 0);
    m.expect_capture_end()
        .with(eq(STREAM))
        .times(1)
        .returning(|_| Some(Ok(MODEL)));
    m.expect_model_execute_async()
        .with(eq(MODEL), eq(0))
        .times(1)
        .returning(|_, _| Some(0));
    m.expect_capture_get_info()
        .with(eq(0))
        .returning(|_| Some(Ok((ACL_MODEL_RI_CAPTURE_STATUS_NONE, 0))));
    m.expect_model_destroy()
        .with(eq(MODEL))
        .times(1)
        .returning(|_| Some(ACL_ERROR_RT_MODEL_RUNNING));
    m.expect_mem_info().returning(|_| Ok((1, 2)));
    let dev = open(m);
    let s = dev.create_stream(0).unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::Active);
    s.memset(DevicePtr(0x1000), 0, 16).unwrap();
    s.memset(DevicePtr(0x1000), 0, 4).unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.node_count(), 2);
    graph.launch(&dev.default_stream().unwrap()).unwrap();
    drop(graph);
    // The destroy failure from Drop surfaces at the next call.
    assert_eq!(
        native(dev.mem_info().unwrap_err()).0,
        ACL_ERROR_RT_MODEL_RUNNING
    );
}

#[test]
fn an_unjoined_capture_end_is_107025_with_the_runtime_text() {
    let mut m2 = MockAclCalls::new();
    m2.expect_init().return_const(0);
    m2.expect_device_count().returning(|| Ok(1));
    m2.expect_set_device().returning(|_| 0);
    m2.expect_reset_device().returning(|_| 0);
    m2.expect_recent_error_message().returning(|| {
        "capture model contains a stream that was not joined to the original stream".to_string()
    });
    m2.expect_create_stream_with_config()
        .returning(|_, _| Some(Ok(STREAM)));
    m2.expect_destroy_stream().returning(|_| 0);
    m2.expect_capture_begin().returning(|_, _| Some(0));
    m2.expect_capture_get_info()
        .returning(|_| Some(Ok((ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED, MODEL))));
    m2.expect_capture_end()
        .returning(|_| Some(Err(ACL_ERROR_RT_STREAM_UNJOINED)));
    let dev = open(m2);
    let s = dev.create_stream(0).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::Invalidated);
    let (code, name, message) = native(s.end_capture().unwrap_err());
    assert_eq!((code, name), (107_025, "ACL_ERROR_RT_STREAM_UNJOINED"));
    assert!(
        message.contains("not joined to the original stream"),
        "{message}"
    );
}

#[test]
fn without_the_virtual_memory_symbols_vmm_is_unsupported() {
    let mut m = base(0, None);
    m.expect_vmm_granularity().returning(|_| None);
    m.expect_reserve_mem_address().returning(|_| None);
    m.expect_malloc_physical().returning(|_, _| None);
    let dev = open(m);
    assert_eq!(dev.vmm_granularity(), None);
    assert!(matches!(
        dev.reserve_address(2 << 20),
        Err(HalError::Unsupported(_))
    ));
    assert!(matches!(
        dev.map_physical(DevicePtr(0x1000_0000), 2 << 20),
        Err(HalError::Unsupported(_))
    ));
}

#[test]
fn a_failed_mapping_frees_its_handle_and_unmap_frees_it_after() {
    const PHYS: usize = 0x9000;
    let mut m = base(0, None);
    m.expect_vmm_granularity().returning(|_| Some(Ok(2 << 20)));
    m.expect_malloc_physical()
        .with(eq(2usize << 20), eq(0))
        .times(2)
        .returning(|_, _| Some(Ok(PHYS)));
    let mut first = true;
    m.expect_map_mem().times(2).returning(move |_, _, _| {
        let code = if first { ACL_ERROR_RT_PARAM_INVALID } else { 0 };
        first = false;
        Some(code)
    });
    m.expect_free_physical()
        .with(eq(PHYS))
        .times(2)
        .returning(|_| Some(0));
    m.expect_unmap_mem()
        .with(eq(0x4000_0000u64))
        .times(1)
        .returning(|_| Some(0));
    let dev = open(m);
    assert_eq!(dev.vmm_granularity(), Some(2 << 20));
    let at = DevicePtr(0x4000_0000);
    let (code, _, _) = native(dev.map_physical(at, 2 << 20).unwrap_err());
    assert_eq!(code, ACL_ERROR_RT_PARAM_INVALID);
    dev.map_physical(at, 2 << 20).unwrap();
    // SAFETY: the mock holds no memory.
    unsafe {
        assert!(matches!(
            dev.unmap_physical(at, 4 << 20),
            Err(HalError::InvalidArgument(_))
        ));
        dev.unmap_physical(at, 2 << 20).unwrap();
        assert!(dev.unmap_physical(at, 2 << 20).is_err());
    }
}

#[test]
fn the_thread_capture_mode_reaches_acl_and_falls_back_to_global_without_the_symbol() {
    let mut m = base(0, None);
    m.expect_capture_thread_exchange_mode()
        .with(eq(ACL_MODEL_RI_CAPTURE_MODE_RELAXED))
        .times(1)
        .returning(|_| Some(Ok(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL)));
    m.expect_capture_thread_exchange_mode()
        .with(eq(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL))
        .times(1)
        .returning(|_| Some(Err(ACL_ERROR_INVALID_PARAM)));
    let dev = open(m);
    dev.set_thread_capture_mode(CaptureMode::Relaxed).unwrap();
    let (code, name, _) = native(
        dev.set_thread_capture_mode(CaptureMode::ThreadLocal)
            .unwrap_err(),
    );
    assert_eq!((code, name), (100_000, "ACL_ERROR_INVALID_PARAM"));

    let mut old = base(0, None);
    old.expect_capture_thread_exchange_mode()
        .returning(|_| None);
    let dev = open(old);
    dev.set_thread_capture_mode(CaptureMode::Global).unwrap();
    assert!(matches!(
        dev.set_thread_capture_mode(CaptureMode::Relaxed),
        Err(HalError::Unsupported(msg)) if msg.contains("aclmdlRICaptureThreadExchangeMode")
    ));
}
