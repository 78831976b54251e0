//! ACL's semantics as `braid-acl-sim` reproduces them, seen through the backend: return codes,
//! names and `aclGetRecentErrMsg` texts of the error paths the backend maps.

use crate::common;

use braid_backend_acl::codes;
use braid_stream_core::hal::{Device as _, Event as _, HalError, Stream as _};
use braid_stream_core::kernel::TypedKernel;
use braid_stream_core::types::{CaptureMode, CaptureStatus, EventFlags};
use braid_stream_core::{DevicePtr, Kernel};
use std::ffi::CStr;
use std::ptr;

fn code_of(err: HalError) -> (i32, &'static str, String) {
    match err {
        HalError::Native {
            code,
            name,
            message,
        } => (code, name, message),
        other => panic!("expected a native error, got {other:?}"),
    }
}

#[test]
fn repeated_init_and_error_text_fetched_then_cleared() {
    common::exclusive();
    let api = common::api();
    // SAFETY: a null config path is allowed.
    let first = unsafe { (api.aclInit)(ptr::null()) };
    assert!(first == 0 || first == codes::ACL_ERROR_REPEAT_INITIALIZE);
    // SAFETY: as above.
    let again = unsafe { (api.aclInit)(ptr::null()) };
    assert_eq!(again, codes::ACL_ERROR_REPEAT_INITIALIZE);
    // SAFETY: no arguments; the pointer is read at once.
    let msg = unsafe { (api.aclGetRecentErrMsg)() };
    assert!(!msg.is_null());
    // SAFETY: non-null, NUL-terminated.
    let text = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    assert!(text.contains("repeated"), "{text}");
    // SAFETY: no arguments.
    let cleared = unsafe { (api.aclGetRecentErrMsg)() };
    assert!(cleared.is_null(), "fetching clears the text");
    // Stale handles are codes, not crashes.
    // SAFETY: braid-acl-sim never dereferences handles.
    let code = unsafe { (api.aclrtDestroyStream)(0xdead_0000 as *mut _) };
    assert_eq!(code, codes::ACL_ERROR_RT_INVALID_HANDLE);
}

#[test]
fn a_thread_without_a_device_is_refused_and_the_backend_binds_it() {
    let dev = common::hal_device(0);
    let api = common::api();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut p: *mut std::ffi::c_void = ptr::null_mut();
            // SAFETY: live out parameter.
            let code = unsafe { (api.aclrtMalloc)(&mut p, 64, 0) };
            assert_eq!(code, codes::ACL_ERROR_RT_CONTEXT_NULL);
            // The backend binds the device on this thread first.
            let p = dev.alloc(64).expect("alloc on a fresh thread");
            // SAFETY: allocated above, unused.
            unsafe { dev.free(p) }.unwrap();
        });
    });
}

#[test]
fn device_oom_is_207018_and_the_hal_reports_out_of_memory() {
    let dev = common::hal_device(0);
    let info = dev.mem_info().unwrap();
    match dev.alloc(info.total + 1).unwrap_err() {
        HalError::OutOfMemory {
            requested, total, ..
        } => assert_eq!((requested, total), (info.total + 1, info.total)),
        other => panic!("unexpected {other:?}"),
    }
    let api = common::api();
    let mut p: *mut std::ffi::c_void = ptr::null_mut();
    // SAFETY: live out parameter.
    let code = unsafe { (api.aclrtMalloc)(&mut p, usize::MAX / 2, 0) };
    assert_eq!(code, codes::ACL_ERROR_RT_DEVICE_OOM);
}

#[test]
fn pinned_host_memory_through_acl_malloc_host_and_free_host() {
    let dev = common::hal_device(0);
    let p = dev.alloc_host(4096).unwrap();
    // SAFETY: `p` is a live 4096-byte pinned allocation no copy uses.
    unsafe { ptr::write_bytes(p.as_ptr(), 0xab, 4096) };
    // SAFETY: as above; no work uses it.
    unsafe { dev.free_host(p) }.unwrap();
    // SAFETY: `p` is no longer live: the library refuses it instead of freeing it twice.
    let (code, name, message) = code_of(unsafe { dev.free_host(p) }.unwrap_err());
    assert_eq!((code, name), (107_000, "ACL_ERROR_RT_PARAM_INVALID"));
    assert!(message.contains("aclrtFreeHost"), "{message}");
    assert_eq!(code_of(dev.alloc_host(0).unwrap_err()).0, 100_000);
    let api = common::api();
    let mut q: *mut std::ffi::c_void = ptr::null_mut();
    // SAFETY: live out parameter; the request exceeds the simulated host capacity.
    let code = unsafe { (api.aclrtMallocHost)(&mut q, usize::MAX / 2) };
    assert_eq!(code, 207_001, "ACL_ERROR_RT_MEMORY_ALLOCATION");
    assert!(matches!(
        dev.alloc_host(u64::MAX / 2).unwrap_err(),
        HalError::OutOfMemory { .. }
    ));
}

#[test]
fn waiting_on_an_event_without_sync_fails() {
    let dev = common::hal_device(0);
    let api = common::api();
    let s = dev.create_stream(0).unwrap();
    let mut ev: *mut std::ffi::c_void = ptr::null_mut();
    let create = api
        .aclrtCreateEventExWithFlag
        .expect("exported by braid-acl-sim");
    // SAFETY: live out parameter; flag 0: no ACL_EVENT_SYNC.
    assert_eq!(unsafe { create(&mut ev, 0) }, 0);
    // SAFETY: handles from this library.
    assert_eq!(unsafe { (api.aclrtRecordEvent)(ev, s.as_raw()) }, 0);
    // SAFETY: as above.
    let code = unsafe { (api.aclrtStreamWaitEvent)(s.as_raw(), ev) };
    assert_eq!(code, codes::ACL_ERROR_RT_PARAM_INVALID);
    // SAFETY: no arguments.
    let text = unsafe { CStr::from_ptr((api.aclGetRecentErrMsg)()) }
        .to_string_lossy()
        .into_owned();
    assert!(text.contains("ACL_EVENT_SYNC"), "{text}");
    // Timing needs ACL_EVENT_TIME_LINE: the backend's ordering events have none.
    let (a, b) = (
        dev.create_event(EventFlags::ORDERING).unwrap(),
        dev.create_event(EventFlags::ORDERING).unwrap(),
    );
    s.record(&a).unwrap();
    s.record(&b).unwrap();
    s.synchronize().unwrap();
    let (code, _, message) = code_of(a.elapsed_ms(&b).unwrap_err());
    assert_eq!(code, codes::ACL_ERROR_RT_PARAM_INVALID);
    assert!(message.contains("ACL_EVENT_TIME_LINE"), "{message}");
    // SAFETY: created above, no longer used.
    assert_eq!(unsafe { (api.aclrtDestroyEvent)(ev) }, 0);
}

#[test]
fn blocking_calls_during_capture_are_107041_or_107030_by_mode() {
    let dev = common::hal_device(0);
    let (s, other) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(256).unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert_eq!(s.capture_status().unwrap(), CaptureStatus::Active);
    s.memset(mem, 1, 256).unwrap();
    // The capture's own stream: no mode allows it.
    for err in [s.synchronize().unwrap_err(), s.query().unwrap_err()] {
        let (code, name, message) = code_of(err);
        assert_eq!(
            (code, name),
            (107_041, "ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC")
        );
        assert!(message.contains("ret=107041"), "{message}");
    }
    // Another stream may be synchronized and queried in any mode (CANN's modes restrict
    // memsets and copies; torch_npu's generator synchronizes its default stream while it
    // captures).
    other.synchronize().unwrap();
    other.query().unwrap();
    // The device: the capturing thread would need relaxed mode.
    let (code, name, message) = code_of(dev.synchronize().unwrap_err());
    assert_eq!(
        (code, name),
        (107_030, "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT")
    );
    assert!(
        message
            .contains("the capture mode of the current thread is ACL_MODEL_RI_CAPTURE_MODE_GLOBAL")
            && message.contains("allowed in ACL_MODEL_RI_CAPTURE_MODE_RELAXED"),
        "{message}"
    );
    // The default stream would add an implicit dependency.
    let (code, _, _) = code_of(dev.default_stream().unwrap().memset(mem, 0, 4).unwrap_err());
    assert_eq!(code, codes::ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT);
    // In relaxed mode the capturing thread may synchronize what is not the capture's.
    dev.set_thread_capture_mode(CaptureMode::Relaxed).unwrap();
    other.synchronize().unwrap();
    dev.synchronize().unwrap();
    assert_eq!(code_of(s.query().unwrap_err()).0, 107_041);
    dev.set_thread_capture_mode(CaptureMode::Global).unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(braid_stream_core::hal::Graph::node_count(&graph), 1);
    s.synchronize().unwrap();
    // SAFETY: no work uses `mem` any more (synchronized).
    unsafe { dev.free(mem) }.unwrap();
}

#[test]
fn the_thread_capture_mode_is_exchanged_per_thread() {
    let dev = common::hal_device(0);
    let api = common::api();
    let exchange = api.aclmdlRICaptureThreadExchangeMode.expect("exported");
    let mut mode = codes_mode(CaptureMode::ThreadLocal);
    // SAFETY: `mode` is live for a read and a write.
    assert_eq!(unsafe { exchange(&mut mode) }, 0);
    assert_eq!(mode, codes_mode(CaptureMode::Global), "the default mode");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut other = codes_mode(CaptureMode::Relaxed);
            // SAFETY: as above.
            assert_eq!(unsafe { exchange(&mut other) }, 0);
            assert_eq!(other, codes_mode(CaptureMode::Global), "per thread");
        });
    });
    let mut unknown = 7u32;
    // SAFETY: as above.
    let code = unsafe { exchange(&mut unknown) };
    assert_eq!(code, codes::ACL_ERROR_INVALID_PARAM);
    assert_eq!(unknown, 7, "a refused exchange writes nothing back");
    // SAFETY: a null pointer is refused before any access.
    let code = unsafe { exchange(ptr::null_mut()) };
    assert_eq!(code, codes::ACL_ERROR_INVALID_PARAM);
    let mut back = codes_mode(CaptureMode::Global);
    // SAFETY: as above.
    assert_eq!(unsafe { exchange(&mut back) }, 0);
    assert_eq!(back, codes_mode(CaptureMode::ThreadLocal));
    // Another thread's thread-local capture restricts nothing here; a global one does until
    // this thread switches to thread-local mode.
    let (s, other) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    std::thread::scope(|scope| {
        let (begun_tx, begun_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let s = &s;
        scope.spawn(move || {
            s.begin_capture(CaptureMode::Global).unwrap();
            begun_tx.send(()).unwrap();
            done_rx.recv().unwrap();
            s.end_capture().unwrap();
        });
        begun_rx.recv().unwrap();
        assert_eq!(code_of(dev.synchronize().unwrap_err()).0, 107_030);
        other.synchronize().unwrap();
        dev.set_thread_capture_mode(CaptureMode::ThreadLocal)
            .unwrap();
        dev.synchronize().unwrap();
        dev.set_thread_capture_mode(CaptureMode::Global).unwrap();
        done_tx.send(()).unwrap();
    });
}

fn codes_mode(mode: CaptureMode) -> u32 {
    braid_backend_acl::capture_mode_number(mode)
}

#[test]
fn an_unjoined_stream_fails_the_capture_end_with_107025() {
    let dev = common::hal_device(0);
    let (origin, side) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(1024).unwrap();
    let fork = dev.create_event(EventFlags::ORDERING).unwrap();
    origin.begin_capture(CaptureMode::Global).unwrap();
    origin
        .launch(
            &TypedKernel::from(&Kernel::Fill {
                dst: braid_stream_core::DeviceSlice::new(DevicePtr(mem.0 + 512), 512),
                value: 1.0,
            }),
            "origin work",
        )
        .unwrap();
    origin.record(&fork).unwrap();
    side.wait(&fork).unwrap();
    assert_eq!(side.capture_status().unwrap(), CaptureStatus::Active);
    side.memset(DevicePtr(mem.0), 0, 512).unwrap();
    let (code, name, message) = code_of(origin.end_capture().unwrap_err());
    assert_eq!((code, name), (107_025, "ACL_ERROR_RT_STREAM_UNJOINED"));
    assert!(
        message
            .contains("capture model contains a stream that was not joined to the original stream"),
        "{message}"
    );
    // Every stream is back to eager work.
    assert_eq!(side.capture_status().unwrap(), CaptureStatus::None);
    assert_eq!(origin.capture_status().unwrap(), CaptureStatus::None);

    // Joined back: the end succeeds and the graph holds both streams' work.
    let join = dev.create_event(EventFlags::ORDERING).unwrap();
    origin.begin_capture(CaptureMode::Relaxed).unwrap();
    origin.record(&fork).unwrap();
    side.wait(&fork).unwrap();
    side.memset(DevicePtr(mem.0), 0, 512).unwrap();
    side.record(&join).unwrap();
    origin.wait(&join).unwrap();
    let graph = origin.end_capture().unwrap();
    assert_eq!(braid_stream_core::hal::Graph::node_count(&graph), 1);
    braid_stream_core::hal::Graph::launch(&graph, &origin).unwrap();
    origin.synchronize().unwrap();
}

#[test]
fn the_sanitizer_extension_reports_a_race_and_clears() {
    use braid_stream_core::DeviceSlice;
    let dev = common::hal_device(0);
    assert!(common::api().supports_sanitizer_reports());
    assert!(dev.clear_sanitizer_reports().unwrap());
    assert_eq!(dev.sanitizer_reports().unwrap(), Some(vec![]));
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let ptr = dev.alloc(4096).unwrap();
    let fill = Kernel::Fill {
        dst: DeviceSlice::new(ptr, 4096),
        value: 1.0,
    };
    // Two writes on unordered streams: a write-write race.
    a.launch(&TypedKernel::from(&fill), "first").unwrap();
    b.launch(&TypedKernel::from(&fill), "second").unwrap();
    dev.synchronize().unwrap();
    let reports = dev
        .sanitizer_reports()
        .unwrap()
        .expect("braid-acl-sim has the extension");
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        // aclnn launches carry no label: the simulator names them by their operator.
        reports[0].contains("write-write race") && reports[0].contains("`aclnnInplaceFillScalar`"),
        "{reports:?}"
    );

    // The raw extension: sizes, and typed failures with a message.
    let api = common::api();
    let report = api.braidSimSanitizerReport.unwrap();
    let count = api.braidSimSanitizerReportCount.unwrap();
    let mut needed = 0usize;
    // SAFETY: a null buffer asks for the size; live out parameter.
    assert_eq!(unsafe { report(0, 0, ptr::null_mut(), 0, &mut needed) }, 0);
    assert_eq!(needed, reports[0].len() + 1);
    let mut small = vec![0 as std::ffi::c_char; needed - 1];
    // SAFETY: `small` is valid for its length; live out parameter.
    let code = unsafe { report(0, 0, small.as_mut_ptr(), small.len(), &mut needed) };
    assert_eq!(code, codes::ACL_ERROR_INVALID_PARAM);
    // SAFETY: as above.
    let code = unsafe { report(0, 1, ptr::null_mut(), 0, &mut needed) };
    assert_eq!(code, codes::ACL_ERROR_INVALID_PARAM);
    let mut n = 0u64;
    // SAFETY: live out parameter.
    let code = unsafe { count(64, &mut n) };
    assert_eq!(code, codes::ACL_ERROR_RT_INVALID_DEVICEID);

    assert!(dev.clear_sanitizer_reports().unwrap());
    assert_eq!(dev.sanitizer_reports().unwrap(), Some(vec![]));
    // SAFETY: the allocation is no longer used (the device was synchronized).
    unsafe { dev.free(ptr) }.unwrap();
}

#[test]
fn waits_the_capture_rule_refuses_are_107024_with_its_reason() {
    let dev = common::hal_device(0);
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let mem = dev.alloc(256).unwrap();
    let eager = dev.create_event(EventFlags::ORDERING).unwrap();
    b.record(&eager).unwrap();
    // Capturing stream waiting on an eagerly recorded event: capture isolation.
    a.begin_capture(CaptureMode::Global).unwrap();
    a.memset(mem, 1, 256).unwrap();
    let (code, _, message) = code_of(a.wait(&eager).unwrap_err());
    assert_eq!(code, codes::ACL_ERROR_RT_CAPTURE_DEPENDENCY);
    assert!(
        message.contains("recorded outside the capture"),
        "{message}"
    );
    let inside = dev.create_event(EventFlags::ORDERING).unwrap();
    a.record(&inside).unwrap();
    a.end_capture().unwrap();
    // Eager stream waiting on an event recorded in a capture that has ended.
    let (code, _, message) = code_of(b.wait(&inside).unwrap_err());
    assert_eq!(code, codes::ACL_ERROR_RT_CAPTURE_DEPENDENCY);
    assert!(message.contains("capture that has ended"), "{message}");
    b.synchronize().unwrap();
    // SAFETY: no work uses `mem` any more (the capture ended unlaunched, b synchronized).
    unsafe { dev.free(mem) }.unwrap();
}

#[test]
fn aclnn_errors_are_typed_and_leave_no_live_objects() {
    use braid_backend_acl::aclnn::{AclnnApi, Executor, Tensor};
    use braid_stream_core::DType;
    let _dev = common::hal_device(0);
    let api = AclnnApi::load_for(common::api()).expect("braid-acl-sim exports aclnn");
    let before = api.live_objects().expect("counted");
    {
        let a = Tensor::new(api, &[4], DType::F16, DevicePtr(0x1000)).unwrap();
        let ops = api.operators();
        // A null `other` and alpha: ACLNN_ERR_PARAM_NULLPTR, with aclGetRecentErrMsg's text.
        let err = Executor::plan(api, "aclnnAddGetWorkspaceSize", |ws, ex| {
            // SAFETY: a live descriptor, null where the check must catch it, live out pointers.
            unsafe {
                (ops.aclnnAddGetWorkspaceSize)(
                    a.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null(),
                    a.as_ptr(),
                    ws,
                    ex,
                )
            }
        })
        .err()
        .expect("null other is refused");
        assert_eq!((err.code, err.name), (161_001, "ACLNN_ERR_PARAM_NULLPTR"));
        assert!(err.message.contains("other is null"), "{err}");
        // An output of another shape than the input: ACLNN_ERR_PARAM_INVALID.
        let out = Tensor::new(api, &[3], DType::F16, DevicePtr(0x2000)).unwrap();
        let err = Executor::plan(api, "aclnnMulsGetWorkspaceSize", |ws, ex| {
            let s = braid_backend_acl::aclnn::Scalar::new(api, 2.0).unwrap();
            // SAFETY: live descriptors and out pointers.
            unsafe { (ops.aclnnMulsGetWorkspaceSize)(a.as_ptr(), s.as_ptr(), out.as_ptr(), ws, ex) }
        })
        .err()
        .expect("an output of another shape is refused");
        assert_eq!(err.name, "ACLNN_ERR_PARAM_INVALID");
        // A planned executor dropped unlaunched is released.
        let planned = Executor::plan(api, "aclnnInplaceCopyGetWorkspaceSize", |ws, ex| {
            // SAFETY: live descriptors and out pointers.
            unsafe { (ops.aclnnInplaceCopyGetWorkspaceSize)(a.as_ptr(), a.as_ptr(), ws, ex) }
        })
        .unwrap();
        drop(planned);
    }
    assert_eq!(api.live_objects(), Some(before));
}

#[test]
fn a_missing_aclnn_library_or_symbol_is_named() {
    use braid_backend_acl::aclnn::AclnnApi;
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| std::ffi::OsString::from(v))
        }
    };
    let err = AclnnApi::load_with(
        env(&[("BRAID_ACLNN_BASE_LIB", "/nonexistent/libnnopbase.so")]),
        common::api(),
    )
    .expect_err("a configured library that does not open is an error");
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/libnnopbase.so (named by $BRAID_ACLNN_BASE_LIB)"),
        "{text}"
    );
    let sim = common::sim_library();
    let sim: &'static str = Box::leak(sim.to_string_lossy().into_owned().into_boxed_str());
    let pairs: &'static [(&'static str, &'static str)] = Box::leak(
        vec![
            ("BRAID_ACLNN_BASE_LIB", sim),
            ("BRAID_ACLNN_LIBS", "libm.so.6"),
        ]
        .into_boxed_slice(),
    );
    let err = AclnnApi::load_with(env(pairs), common::api()).expect_err("libm has no operators");
    assert!(
        err.missing_symbols()
            .contains(&"aclnnRmsNormGetWorkspaceSize"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("libm.so.6 (named by $BRAID_ACLNN_LIBS)"),
        "{err}"
    );
    // Set to nothing: refused by name, never read as unset (which would take aclnn from
    // braid-acl-sim).
    for variable in ["BRAID_ACLNN_LIBS", "BRAID_ACLNN_BASE_LIB"] {
        let pairs: &'static [(&'static str, &'static str)] =
            Box::leak(vec![(variable, "")].into_boxed_slice());
        let err = AclnnApi::load_with(env(pairs), common::api()).expect_err("empty");
        assert!(
            err.to_string()
                .contains(&format!("${variable}=\"\": set but empty")),
            "{err}"
        );
    }
    // One variable set alone: the other's library is looked for in the CANN homes, and when it
    // is not there the error names the variable that sent the search there.
    let pairs: &'static [(&'static str, &'static str)] =
        Box::leak(vec![("BRAID_ACLNN_LIBS", sim)].into_boxed_slice());
    match AclnnApi::load_with(env(pairs), common::api()) {
        Err(err) if err.is_not_found() => assert!(
            err.to_string().contains("$BRAID_ACLNN_LIBS is set")
                && err.to_string().contains("$BRAID_ACLNN_BASE_LIB"),
            "{err}"
        ),
        Err(other) => panic!("{other}"),
        Ok(_) => eprintln!("note: a libnnopbase.so is installed here; the hint is not reached"),
    }
}

/// External events (graph-to-graph record and wait nodes) are not bound on the ACL backend: a
/// typed `Unsupported` before any runtime call, and the device keeps working.
#[test]
fn external_events_are_unsupported() {
    let dev = common::hal_device(0);
    assert!(matches!(
        dev.create_event(EventFlags::EXTERNAL),
        Err(HalError::Unsupported(_))
    ));
    assert!(dev.create_event(EventFlags::ORDERING).is_ok());
}
