//! The ACL runtime functions foreign CANN clients (torch_npu) bind beyond braid's calls,
//! through their C ABI: every declared symbol is exported by the built library, and each has
//! the behaviour its documentation gives (per-thread device and context, SoC name and
//! capabilities, system parameters, blocking copy and fill, forced stream destruction, event
//! reset, model ids), or refuses with CANN's code naming the call.
//!
//! The runtime is one per process and these tests run in parallel: each uses its own device
//! (every device computes under the default settings).

use crate::common;

use braid_acl_sim::client::op_path::*;
use braid_acl_sim::client::profiling::*;
use braid_acl_sim::client::runtime::*;
use braid_acl_sim::exports::sharing::aclrtDeviceGetBareTgid;
use braid_acl_sim::exports::*;
use braid_acl_sys::acl::{AclClientFunctions, AclFunctions, AclOpFunctions};
use braid_acl_sys::aclnn::{
    AclnnAttentionOperators, AclnnClientOperators, AclnnDescriptors, AclnnOperators,
    AclnnTensorOperators,
};
use braid_acl_sys::hccl::{HcclClientFunctions, HcclFunctions};
use braid_acl_sys::msprof::MsprofFunctions;
use braid_acl_sys::rt::RtFunctions;
use braid_acl_sys::SymbolTable;
use common::{message, ok};
use std::ffi::{c_void, CStr};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

const ACL_ERROR_INVALID_PARAM: i32 = 100_000;
const ACL_ERROR_OP_NOT_FOUND: i32 = 100_024;
const ACL_ERROR_RT_PARAM_INVALID: i32 = 107_000;
const ACL_ERROR_RT_CONTEXT_NULL: i32 = 107_002;
const ACL_ERROR_RT_INVALID_HANDLE: i32 = 107_017;
const ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT: i32 = 107_030;
const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207_000;

/// Initializes ACL (a repeat is fine) and binds `device` to this thread.
fn on_device(device: i32) {
    let code = aclInit(null());
    assert!(code == 0 || code == 100_002, "aclInit: {code}");
    ok(aclrtSetDevice(device));
}

fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable");
    let dir = exe.parent().expect("in a directory");
    [
        dir.join("libbraid_acl_sim.so"),
        dir.join("../libbraid_acl_sim.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("cargo builds the cdylib next to the test")
}

/// Every optional symbol of `T` is exported by the library.
fn all_exported<T: SymbolTable>(what: &'static str) {
    let lib = library();
    let table = braid_acl_sys::loader::load_from::<T>(what, &[lib.as_path()])
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(table.missing_optional(), Vec::<&str>::new(), "{what}");
}

#[test]
fn every_declared_symbol_is_exported_by_the_built_library() {
    all_exported::<AclFunctions>("ACL");
    all_exported::<AclClientFunctions>("ACL client");
    all_exported::<AclOpFunctions>("ACL single-operator path");
    all_exported::<AclnnDescriptors>("aclnn descriptors");
    all_exported::<AclnnOperators>("aclnn operators");
    all_exported::<AclnnClientOperators>("aclnn client operators");
    all_exported::<AclnnTensorOperators>("aclnn tensor operators");
    all_exported::<AclnnAttentionOperators>("aclnn attention operators");
    all_exported::<HcclFunctions>("HCCL");
    all_exported::<HcclClientFunctions>("HCCL client");
    all_exported::<MsprofFunctions>("profiling");
    all_exported::<RtFunctions>("legacy runtime");
}

#[test]
fn the_current_device_and_context_are_per_thread() {
    std::thread::spawn(|| {
        let mut device = -1;
        // SAFETY: a live out parameter.
        let code = unsafe { aclrtGetDevice(&mut device) };
        assert_eq!(code, ACL_ERROR_RT_CONTEXT_NULL);
        assert!(message().contains("aclrtGetDevice: no device is set"));
    })
    .join()
    .unwrap();
    let context_of = |device: i32| {
        std::thread::spawn(move || {
            on_device(device);
            let (mut current, mut context) = (-1, null_mut());
            // SAFETY: live out parameters.
            unsafe {
                ok(aclrtGetDevice(&mut current));
                ok(aclrtGetCurrentContext(&mut context));
            }
            assert_eq!(current, device);
            context as usize
        })
        .join()
        .unwrap()
    };
    let (c2, c3) = (context_of(2), context_of(3));
    assert_ne!(c2, c3);
    assert_eq!(context_of(2), c2, "one context per device");
    std::thread::spawn(move || {
        // A thread with no device takes device 3 by its context.
        ok(aclrtSetCurrentContext(c3 as *mut c_void));
        let mut current = -1;
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtGetDevice(&mut current) });
        assert_eq!(current, 3);
        assert_eq!(
            aclrtSetCurrentContext(0x1234 as *mut c_void),
            ACL_ERROR_RT_INVALID_HANDLE
        );
    })
    .join()
    .unwrap();
}

#[test]
fn the_soc_its_capabilities_and_attributes() {
    on_device(1);
    let name = aclrtGetSocName();
    assert_eq!(
        // SAFETY: non-null names are NUL-terminated and static.
        unsafe { CStr::from_ptr(name) }.to_str().unwrap(),
        braid_acl_sim::DEFAULT_SOC
    );
    let capability = |info: i32| {
        let mut value = -1i64;
        // SAFETY: a live out parameter.
        let code = unsafe { aclGetDeviceCapability(1, info, &mut value) };
        (code, value)
    };
    assert_eq!(
        capability(0),
        (0, 24),
        "AI (cube) cores of the 910B profile"
    );
    assert_eq!(capability(1), (0, 48), "vector cores");
    assert_eq!(capability(2).0, ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert!(message().contains("does not model an L2 cache"));
    assert_eq!(capability(9).0, ACL_ERROR_INVALID_PARAM);
    let attribute = |attr: i32| {
        let mut value = -1;
        // SAFETY: a live out parameter.
        let code = unsafe { aclGetCannAttribute(attr, &mut value) };
        (code, value)
    };
    assert_eq!(
        [attribute(0), attribute(1), attribute(2)],
        [(0, 1), (0, 1), (0, 0)]
    );
    assert_eq!(attribute(7).0, ACL_ERROR_INVALID_PARAM);
}

#[test]
fn system_parameters_of_the_process_and_of_a_context() {
    std::thread::spawn(|| {
        on_device(4);
        let get = |f: unsafe extern "C" fn(i32, *mut i64) -> i32, opt| {
            let mut v = -1;
            // SAFETY: a live out parameter.
            ok(unsafe { f(opt, &mut v) });
            v
        };
        // Strong consistency (2) is this test's own option: nothing else sets it.
        assert_eq!(get(aclrtGetSysParamOpt, 2), 0, "0 until set");
        ok(aclrtSetSysParamOpt(2, 1));
        assert_eq!(get(aclrtGetSysParamOpt, 2), 1);
        assert_eq!(
            get(aclrtCtxGetSysParamOpt, 2),
            1,
            "a context falls back to the process"
        );
        ok(aclrtCtxSetSysParamOpt(2, 7));
        assert_eq!(get(aclrtCtxGetSysParamOpt, 2), 7);
        assert_eq!(
            get(aclrtGetSysParamOpt, 2),
            1,
            "the process's value is its own"
        );
        assert_eq!(aclrtSetSysParamOpt(3, 1), ACL_ERROR_INVALID_PARAM);
        assert!(message().contains("3 is not an aclSysParamOpt"));
    })
    .join()
    .unwrap();
}

#[test]
fn the_overflow_mode_and_timeouts_are_taken() {
    ok(aclrtSetOpWaitTimeout(30));
    ok(aclrtSetOpExecuteTimeOut(1800));
    let mut actual = 0u64;
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtSetOpExecuteTimeOutV2(5_000_000, &mut actual) });
    assert_eq!(actual, 5_000_000);
    let mut mode = -1;
    ok(aclrtSetDeviceSatMode(1));
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtGetDeviceSatMode(&mut mode) });
    assert_eq!(mode, 1);
    assert_eq!(aclrtSetDeviceSatMode(2), ACL_ERROR_INVALID_PARAM);
}

#[test]
fn blocking_copies_and_fills_return_with_the_data_in_place() {
    std::thread::spawn(|| {
        on_device(5);
        let mut dev = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtMallocAlign32(&mut dev, 64, 0) });
        ok(aclrtMemset(dev, 64, 7, 64));
        let mut back = [0u8; 64];
        // SAFETY: `back` is valid for 64 bytes during the call.
        ok(unsafe { aclrtMemcpy(back.as_mut_ptr().cast(), 64, dev, 64, 2) });
        assert_eq!(back, [7u8; 64]);
        let data: Vec<u8> = (0..64).collect();
        // SAFETY: `data` is valid for 64 bytes during the call.
        ok(unsafe { aclrtMemcpy(dev, 64, data.as_ptr().cast(), 64, 1) });
        // SAFETY: as above.
        ok(unsafe { aclrtMemcpy(back.as_mut_ptr().cast(), 64, dev, 64, 2) });
        assert_eq!(back.to_vec(), data);
        // SAFETY: as above; more than destMax is refused before anything is copied.
        let code = unsafe { aclrtMemcpy(back.as_mut_ptr().cast(), 32, dev, 64, 2) };
        assert_eq!(code, ACL_ERROR_INVALID_PARAM);
        assert!(message().starts_with("aclrtMemcpy: count 64 exceeds destMax 32"));

        // A blocking fill during a global-mode capture is refused: the capturing thread would
        // need relaxed mode (107030, `ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT`).
        let mut stream = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtCreateStream(&mut stream) });
        ok(aclmdlRICaptureBegin(stream, 0));
        assert_eq!(
            aclrtMemset(dev, 64, 0, 64),
            ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
        );
        let mut model = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclmdlRICaptureEnd(stream, &mut model) });
        let mut id = 0u32;
        // SAFETY: a live out parameter.
        ok(unsafe { aclmdlRIGetId(model, &mut id) });
        assert!(id > 0);
        ok(aclmdlRIDestroy(model));
        assert_eq!(
            // SAFETY: a live out parameter.
            unsafe { aclmdlRIGetId(model, &mut id) },
            ACL_ERROR_RT_INVALID_HANDLE
        );
        ok(aclrtDestroyStream(stream));
        ok(aclrtFree(dev));
    })
    .join()
    .unwrap();
}

#[test]
fn a_forced_destroy_and_the_failure_mode_act_on_live_streams_only() {
    std::thread::spawn(|| {
        on_device(6);
        let mut stream = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtCreateStream(&mut stream) });
        ok(aclrtSetStreamFailureMode(stream, 1));
        assert_eq!(
            aclrtSetStreamFailureMode(stream, 2),
            ACL_ERROR_INVALID_PARAM
        );
        ok(aclrtDestroyStreamForce(stream));
        assert_eq!(aclrtDestroyStreamForce(stream), ACL_ERROR_RT_INVALID_HANDLE);
        assert_eq!(
            aclrtSetStreamFailureMode(stream, 1),
            ACL_ERROR_RT_INVALID_HANDLE
        );
    })
    .join()
    .unwrap();
}

#[test]
fn stream_attributes_take_the_failure_mode_and_the_cache_switch_and_name_the_others() {
    use braid_acl_sim::client::host::aclrtSetStreamAttribute;
    std::thread::spawn(|| {
        on_device(6);
        let mut stream = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtCreateStream(&mut stream) });
        // aclrtStreamAttrValue: a union of 16 bytes.
        let mut value = [0u64; 2];
        let set = |attr: i32, value: &mut [u64; 2]| {
            aclrtSetStreamAttribute(stream, attr, value.as_mut_ptr().cast())
        };
        // The failure mode (1) as aclrtSetStreamFailureMode takes it.
        value[0] = 1;
        ok(set(1, &mut value));
        value[0] = 2;
        assert_eq!(set(1, &mut value), ACL_ERROR_INVALID_PARAM);
        // The operator-information cache switch (4): 0 or 1.
        for switch in [1, 0] {
            value[0] = switch;
            ok(set(4, &mut value));
        }
        value[0] = 2;
        assert_eq!(set(4, &mut value), ACL_ERROR_INVALID_PARAM);
        assert!(
            message().contains("cacheOpInfoSwitch is 2"),
            "{}",
            message()
        );
        assert_eq!(
            aclrtSetStreamAttribute(stream, 4, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        // The overflow check and the custom tag are refused by name.
        for attr in [2, 3] {
            value[0] = 1;
            assert_eq!(set(attr, &mut value), ACL_ERROR_RT_PARAM_INVALID);
            assert!(
                message().contains(&format!("stream attribute {attr} is not simulated")),
                "{}",
                message()
            );
        }
        ok(aclrtDestroyStream(stream));
        value[0] = 1;
        assert_eq!(set(4, &mut value), ACL_ERROR_RT_INVALID_HANDLE);
    })
    .join()
    .unwrap();
}

#[test]
fn a_reset_event_is_unrecorded_again() {
    std::thread::spawn(|| {
        on_device(7);
        let (mut start, mut end) = (null_mut(), null_mut());
        // SAFETY: live out parameters; ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE.
        unsafe {
            ok(aclrtCreateEventWithFlag(&mut start, 0x9));
            ok(aclrtCreateEventWithFlag(&mut end, 0x9));
        }
        ok(aclrtRecordEvent(start, null_mut()));
        ok(braidSimBusy(null_mut(), 1_000_000));
        ok(aclrtRecordEvent(end, null_mut()));
        ok(aclrtSynchronizeEvent(end));
        let mut ms = 0f32;
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtEventElapsedTime(&mut ms, start, end) });
        assert!(ms >= 1.0, "{ms}");
        ok(aclrtResetEvent(end, null_mut()));
        // SAFETY: a live out parameter.
        let code = unsafe { aclrtEventElapsedTime(&mut ms, start, end) };
        assert_eq!(code, ACL_ERROR_RT_PARAM_INVALID);
        assert!(message().contains("the end event was not recorded"));
        let mut status = 7u32;
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtQueryEventStatus(end, &mut status) });
        // A reset event can be recorded again.
        ok(aclrtRecordEvent(end, null_mut()));
        ok(aclrtSynchronizeEvent(end));
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtEventElapsedTime(&mut ms, start, end) });
        ok(aclrtDestroyEvent(start));
        ok(aclrtDestroyEvent(end));
    })
    .join()
    .unwrap();
}

#[test]
fn what_the_simulator_has_no_meaning_for_is_refused_naming_the_call() {
    type Call = Box<dyn Fn() -> i32>;
    let cases: [(&str, Call); 7] = [
        (
            "aclrtHostRegister",
            Box::new(|| aclrtHostRegister(null_mut(), 0, 0, null_mut())),
        ),
        ("aclmdlInitDump", Box::new(|| aclmdlInitDump())),
        ("aclmdlSetDump", Box::new(|| aclmdlSetDump(null()))),
        ("aclmdlFinalizeDump", Box::new(|| aclmdlFinalizeDump())),
        (
            "aclrtBinaryLoadFromData",
            Box::new(|| aclrtBinaryLoadFromData(null(), 0, null(), null_mut())),
        ),
        (
            "rtKernelLaunch",
            Box::new(|| rtKernelLaunch(null(), 1, null_mut(), 0, null_mut(), null_mut())),
        ),
        (
            "rtGetC2cCtrlAddr",
            Box::new(|| rtGetC2cCtrlAddr(null_mut(), null_mut())),
        ),
    ];
    for (call, f) in cases {
        assert_eq!(f(), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "{call}");
        let text = message();
        assert!(
            text.starts_with(&format!("{call}: not supported by braid-acl-sim")),
            "{text}"
        );
    }
    assert_eq!(MsprofReportApi(0, null()), -1);
    assert!(message().contains("collects no CANN profiling data"));
    assert_eq!(MsprofRegisterCallback(1, None), -1);
    let (a, b) = (MsprofSysCycleTime(), MsprofSysCycleTime());
    assert!(b >= a);
    let mut pid = 0;
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtDeviceGetBareTgid(&mut pid) });
    assert_eq!(pid as u32, std::process::id());
}

#[test]
fn the_old_operator_path_keeps_its_objects_and_refuses_to_compute() {
    let dims = [2i64, 3];
    // SAFETY: `dims` is valid for 2 reads.
    let desc = unsafe { aclCreateTensorDesc(1, 2, dims.as_ptr(), 2) };
    assert!(!desc.is_null());
    // SAFETY: a NUL-terminated name.
    unsafe { aclSetTensorDescName(desc, c"x".as_ptr()) };
    let mut dim = 0;
    // SAFETY: a live out parameter.
    ok(unsafe { aclGetTensorDescDimV2(desc, 1, &mut dim) });
    assert_eq!(
        (
            dim,
            aclGetTensorDescNumDims(desc),
            aclGetTensorDescType(desc),
            aclGetTensorDescFormat(desc)
        ),
        (3, 2, 1, 2)
    );
    assert_eq!(
        // SAFETY: non-null names are NUL-terminated.
        unsafe { CStr::from_ptr(aclGetTensorDescName(desc)) }
            .to_str()
            .unwrap(),
        "x"
    );
    assert_eq!(
        // SAFETY: a live out parameter.
        unsafe { aclGetTensorDescDimV2(desc, 2, &mut dim) },
        ACL_ERROR_INVALID_PARAM
    );
    let attr = aclopCreateAttr();
    // SAFETY: NUL-terminated names.
    ok(unsafe { aclopSetAttrInt(attr, c"dst_type".as_ptr(), 0) });
    let inputs = [desc as *const _];
    // SAFETY: one live description per count; the rest is not read.
    let code = unsafe {
        aclopCompileAndExecute(
            c"Cast".as_ptr(),
            1,
            inputs.as_ptr(),
            null(),
            1,
            inputs.as_ptr(),
            null(),
            attr,
            0,
            0,
            null(),
            null_mut(),
        )
    };
    assert_eq!(code, ACL_ERROR_OP_NOT_FOUND);
    let text = message();
    assert!(
        text.starts_with("aclopCompileAndExecute: operator Cast is not computed by braid-acl-sim"),
        "{text}"
    );
    assert!(
        text.contains("inputs [x dtype 1 [2, 3]]") && text.contains("attributes [dst_type=0]"),
        "{text}"
    );
    // The V2 path (operators whose output shapes the call updates) is refused the same way.
    let mut descs = [desc];
    // SAFETY: as above.
    let code = unsafe {
        aclopCompileAndExecuteV2(
            c"NonZero".as_ptr(),
            1,
            descs.as_mut_ptr(),
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            attr,
            0,
            0,
            null(),
            null_mut(),
        )
    };
    assert_eq!(code, ACL_ERROR_OP_NOT_FOUND);
    let text = message();
    assert!(
        text.starts_with(
            "aclopCompileAndExecuteV2: operator NonZero is not computed by braid-acl-sim"
        ) && text.contains("inputs [x dtype 1 [2, 3]]"),
        "{text}"
    );
    aclopDestroyAttr(attr);
    aclDestroyTensorDesc(desc);
    assert_eq!(aclGetTensorDescNumDims(desc), 0, "destroyed");

    let buffer = aclCreateDataBuffer(0x1000 as *mut c_void, 64);
    ok(aclDestroyDataBuffer(buffer));
    assert_eq!(aclDestroyDataBuffer(buffer), ACL_ERROR_INVALID_PARAM);

    // Before any set, the JIT option answers the Atlas A2/A3 default torch_npu reads at
    // start-up: binary (aclnn) operators, no online compilation.
    let mut jit = [0 as std::ffi::c_char; 16];
    // SAFETY: `jit` is valid for 16 writes.
    ok(unsafe { aclGetCompileopt(10, jit.as_mut_ptr(), jit.len()) });
    assert_eq!(
        // SAFETY: NUL-terminated by the call.
        unsafe { CStr::from_ptr(jit.as_ptr()) }.to_str().unwrap(),
        "disable"
    );
    // SAFETY: a NUL-terminated value.
    ok(unsafe { aclSetCompileopt(12, c"custom".as_ptr()) });
    let mut value = [0 as std::ffi::c_char; 16];
    // SAFETY: `value` is valid for 16 writes.
    ok(unsafe { aclGetCompileopt(12, value.as_mut_ptr(), value.len()) });
    assert_eq!(
        // SAFETY: NUL-terminated by the call.
        unsafe { CStr::from_ptr(value.as_ptr()) }.to_str().unwrap(),
        "custom"
    );
    assert_eq!(aclGetCompileoptSize(12), COMPILE_OPT_MAX);
    assert_eq!(
        // SAFETY: a NUL-terminated value.
        unsafe { aclSetCompileopt(99, c"x".as_ptr()) },
        ACL_ERROR_INVALID_PARAM
    );
}

#[test]
fn a_communicator_made_with_a_configuration_works_as_one_made_without() {
    use braid_acl_sim::client::hccl::HcclCommInitRootInfoConfig;
    use braid_acl_sim::hccl::exports::*;
    use braid_acl_sys::hccl::HcclRootInfo;
    std::thread::spawn(|| {
        on_device(3);
        let mut info = HcclRootInfo::default();
        // SAFETY: a live out parameter.
        assert_eq!(unsafe { HcclGetRootInfo(&mut info) }, 0);
        let mut comm = null_mut();
        // SAFETY: live in and out parameters; the configuration is not read.
        let code = unsafe { HcclCommInitRootInfoConfig(1, &info, 0, null(), &mut comm) };
        assert_eq!(code, 0, "{}", message());
        let mut size = 0;
        // SAFETY: a live out parameter.
        assert_eq!(unsafe { HcclGetRankSize(comm, &mut size) }, 0);
        assert_eq!(size, 1);
        // SAFETY: live in and out parameters.
        let code = unsafe { HcclCommInitRootInfoConfig(1, &info, 1, null(), &mut comm) };
        assert_eq!(code, 1, "HCCL_E_PARA: rank 1 of 1");
        assert_eq!(HcclCommDestroy(comm), 0);
    })
    .join()
    .unwrap();
}
