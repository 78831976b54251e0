//! Start-up and host-memory calls torch_npu makes, the failure a refused launch leaves, and
//! tensors in a device-private format:
//! the CANN version the simulated API matches, `aclrtGetMemInfo` before any `aclrtSetDevice`,
//! pinned host registration, and a refused operator failing its device's later waits until
//! the device is reset (never silent zeros).

#[path = "acl_sim/common/mod.rs"]
mod common;

use braid_acl_sim::client::op_path::{aclopCompileAndExecute, aclopCompileAndExecuteV2};
use braid_acl_sim::client::runtime::*;
use braid_acl_sim::exports::*;
use braid_acl_sys::acl::{aclCANNPackageVersion, ACL_HBM_MEM};
use common::{message, ok};
use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

const ACL_ERROR_INVALID_PARAM: i32 = 100_000;
const ACL_ERROR_OP_NOT_FOUND: i32 = 100_024;
const ACL_ERROR_RT_PARAM_INVALID: i32 = 107_000;
const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207_000;

fn text(bytes: &[std::ffi::c_char]) -> String {
    // SAFETY: a NUL-terminated string inside the array (the call wrote one).
    unsafe { CStr::from_ptr(bytes.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_cann_version_is_the_one_the_simulated_api_matches() {
    // SAFETY: an all-zero value of a plain C struct.
    let mut v: aclCANNPackageVersion = unsafe { std::mem::zeroed() };
    // SAFETY: a live out parameter.
    ok(unsafe { aclsysGetCANNVersion(0, &mut v) });
    assert_eq!(text(&v.version), "8.5.0");
    assert_eq!(
        (text(&v.major_version), text(&v.minor_version)),
        ("8".into(), "5".into())
    );
    // SAFETY: as above.
    let driver = unsafe { aclsysGetCANNVersion(7, &mut v) };
    assert_eq!(driver, ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert!(message().contains("without a driver"));
    // SAFETY: as above.
    let unknown = unsafe { aclsysGetCANNVersion(42, &mut v) };
    assert_eq!(unknown, ACL_ERROR_INVALID_PARAM);
    let mut out = [0 as std::ffi::c_char; 128];
    // SAFETY: a NUL-terminated name and a 128-byte buffer.
    ok(unsafe { aclsysGetVersionStr(c"runtime".as_ptr().cast_mut(), out.as_mut_ptr()) });
    assert_eq!(text(&out), "8.5.0");
    // SAFETY: as above.
    let code =
        unsafe { aclsysGetVersionStr(c"no-such-package".as_ptr().cast_mut(), out.as_mut_ptr()) };
    assert_eq!(code, ACL_ERROR_INVALID_PARAM);
    assert!(message().contains("no-such-package"));
}

#[test]
fn memory_info_before_any_device_is_set_is_device_0_s() {
    std::thread::spawn(|| {
        let code = aclInit(null());
        assert!(code == 0 || code == 100_002, "aclInit: {code}");
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: live out parameters.
        ok(unsafe { aclrtGetMemInfo(ACL_HBM_MEM, &mut free, &mut total) });
        assert!(free <= total, "{free} of {total}");
        // A data device's bytes are host memory: it has the profile's memory, or less when
        // the host-memory budget cannot back that much, so a program sizing its work from
        // what the device reports fits.
        let profile = braid_backend_sim::Profile::atlas_800t_a2()
            .device
            .memory_bytes;
        let budget = braid_backend_sim::host_budget::default_budget();
        assert_eq!(total as u64, profile.min(budget));
        // The same answer as device 0's once it is set.
        ok(aclrtSetDevice(0));
        let (mut free0, mut total0) = (0usize, 0usize);
        // SAFETY: as above.
        ok(unsafe { aclrtGetMemInfo(ACL_HBM_MEM, &mut free0, &mut total0) });
        assert_eq!(total0, total);
        ok(aclrtResetDevice(0));
    })
    .join()
    .unwrap();
}

#[test]
fn pinned_host_registration_is_kept_and_checked() {
    let mut buf = vec![0u8; 3 * 4096];
    let p = buf.as_mut_ptr().cast::<c_void>();
    ok(aclrtHostRegisterV2(p, 8192, 0));
    // An overlapping range, a second unregister and a null pointer are refused.
    // SAFETY: only an address computed, never dereferenced.
    let inside = unsafe { p.cast::<u8>().add(4096) }.cast::<c_void>();
    assert_eq!(
        aclrtHostRegisterV2(inside, 4096, 0),
        ACL_ERROR_RT_PARAM_INVALID
    );
    assert!(message().contains("overlaps"));
    assert_eq!(
        aclrtHostRegisterV2(null_mut(), 4096, 0),
        ACL_ERROR_INVALID_PARAM
    );
    ok(aclrtHostUnregister(p));
    assert_eq!(aclrtHostUnregister(p), ACL_ERROR_RT_PARAM_INVALID);
    // After unregistering, the range can be registered again.
    ok(aclrtHostRegisterV2(inside, 4096, 0));
    ok(aclrtHostUnregister(inside));
    // Mapping host memory for the device is refused, naming the call.
    let mut dev = null_mut();
    assert_eq!(
        aclrtHostRegister(p, 4096, 0, &mut dev),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    );
    assert!(message().starts_with("aclrtHostRegister: not supported"));
    drop(buf);
}

#[test]
fn a_refused_launch_fails_the_device_s_waits_until_it_is_reset() {
    std::thread::spawn(|| {
        let code = aclInit(null());
        assert!(code == 0 || code == 100_002, "aclInit: {code}");
        ok(aclrtSetDevice(5));
        let mut mem = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtMalloc(&mut mem, 64, 0) });
        ok(aclrtSynchronizeDevice());
        // SAFETY: a NUL-terminated operator name, no tensors.
        let code = unsafe {
            aclopCompileAndExecuteV2(
                c"Exp".as_ptr(),
                0,
                null_mut(),
                null_mut(),
                0,
                null_mut(),
                null_mut(),
                null_mut(),
                0,
                0,
                null(),
                null_mut(),
            )
        };
        assert_eq!(code, ACL_ERROR_OP_NOT_FOUND);
        assert!(message().starts_with("aclopCompileAndExecuteV2: operator Exp is not computed"));
        // A later refusal does not replace the first.
        // SAFETY: as above.
        let code = unsafe {
            aclopCompileAndExecute(
                c"Range".as_ptr(),
                0,
                null(),
                null(),
                0,
                null(),
                null(),
                null(),
                0,
                0,
                null(),
                null_mut(),
            )
        };
        assert_eq!(code, ACL_ERROR_OP_NOT_FOUND);
        // Every host wait now reports the first refusal.
        assert_eq!(aclrtSynchronizeDevice(), ACL_ERROR_OP_NOT_FOUND);
        let m = message();
        assert!(
            m.starts_with("aclrtSynchronizeDevice: device 5 failed"),
            "{m}"
        );
        assert!(m.contains("operator Exp") && !m.contains("Range"), "{m}");
        assert_eq!(aclrtSynchronizeStream(null_mut()), ACL_ERROR_OP_NOT_FOUND);
        let mut host = [0u8; 64];
        // SAFETY: `host` and `mem` hold 64 bytes.
        let code = unsafe { aclrtMemcpy(host.as_mut_ptr().cast(), 64, mem, 64, 2) };
        assert_eq!(code, ACL_ERROR_OP_NOT_FOUND);
        assert!(message().contains("its results were never computed"));
        // Released and set again: the device works.
        ok(aclrtResetDevice(5));
        ok(aclrtSetDevice(5));
        ok(aclrtSynchronizeDevice());
        // SAFETY: as above.
        ok(unsafe { aclrtMemcpy(host.as_mut_ptr().cast(), 64, mem, 64, 2) });
        ok(aclrtFree(mem));
        ok(aclrtResetDevice(5));
    })
    .join()
    .unwrap();
}

#[test]
fn a_tensor_in_a_private_format_is_refused_naming_it_never_read_as_nd() {
    use braid_acl_sim::aclnn::client_exports::aclnnInplaceZeroGetWorkspaceSize;
    use braid_acl_sim::aclnn::exports::{aclCreateTensor, aclDestroyTensor};
    std::thread::spawn(|| {
        let code = aclInit(null());
        assert!(code == 0 || code == 100_002, "aclInit: {code}");
        ok(aclrtSetDevice(6));
        let mut mem = null_mut();
        // SAFETY: a live out parameter.
        ok(unsafe { aclrtMalloc(&mut mem, 4096, 0) });
        let (dims, strides, storage) = ([20i64, 20], [20i64, 1], [2i64, 2, 16, 16]);
        let (mut ws, mut ex) = (0u64, null_mut());
        for (format, refused) in [(29, true), (3, true), (2, false), (0, false)] {
            // SAFETY: the arrays hold the counts given; `mem` is device memory.
            let t = unsafe {
                aclCreateTensor(
                    dims.as_ptr(),
                    2,
                    0,
                    strides.as_ptr(),
                    0,
                    format,
                    storage.as_ptr(),
                    4,
                    mem,
                )
            };
            assert!(!t.is_null());
            // SAFETY: live descriptors and out pointers.
            let code = unsafe { aclnnInplaceZeroGetWorkspaceSize(t, &mut ws, &mut ex) };
            if refused {
                assert_eq!(code, 161_002);
                let m = message();
                assert!(
                    m.contains(&format!("device-private format {format}")) && m.contains("selfRef"),
                    "{m}"
                );
            } else {
                assert_eq!(code, 0, "{}", message());
                // The executor was just planned; released unlaunched.
                ok(braid_acl_sim::aclnn::exports::aclSetAclOpExecutorRepeatable(ex));
                ok(braid_acl_sim::aclnn::exports::aclDestroyAclOpExecutor(ex));
            }
            ok(aclDestroyTensor(t));
        }
        ok(aclrtFree(mem));
        ok(aclrtResetDevice(6));
    })
    .join()
    .unwrap();
}
