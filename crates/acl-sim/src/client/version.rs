//! The CANN version braid-acl-sim answers (`aclsysGetCANNVersion`, `aclsysGetVersionStr`):
//! [`CANN_VERSION`], the release whose C API it implements, so that clients that gate
//! features on the version (torch_npu does, and so do its tests) take the paths that API
//! serves.
//!
//! Why 8.5.0: the calls braid-acl-sim exports are those of CANN 8.5.0 — the per-package
//! version query `aclsysGetVersionStr` and its package names (new in 8.5), aclmdlRI capture
//! with task groups and capture modes, the aclnn random family with its `...Tensor` members
//! for capture — and not those of 9.0 and later (`aclrtGetDeviceInfo`, the aclnn format cast
//! `aclnnNpuFormatCastCalculateSizeAndFormat`), which torch_npu would then look for. The
//! driver has no version: braid-acl-sim runs without one (`ACL_PKG_NAME_DRIVER` is refused).

use crate::codes::*;
use crate::errmsg::{fail, ret};
use braid_acl_sys::acl::{aclCANNPackageVersion, ACL_PKG_NAME_CANN, ACL_PKG_NAME_DRIVER};
use std::ffi::{c_char, CStr};

/// The CANN release braid-acl-sim's C API matches.
pub const CANN_VERSION: &str = "8.5.0";

/// The package names `aclsysGetVersionStr` knows (CANN 8.5's packages).
const PACKAGES: &[&str] = &[
    "acl_extend",
    "aoe",
    "asc-devkit",
    "ascendnpu-ir",
    "asc-tools",
    "bisheng-compiler",
    "dflow-executor",
    "dvpp",
    "ge-compiler",
    "ge-executor",
    "graph_autofusion",
    "hccl",
    "hcomm",
    "hixl",
    "metadef",
    "ncs",
    "oam_tools",
    "opbase",
    "ops_cv",
    "ops_legacy",
    "ops_math",
    "ops_nn",
    "ops_transformer",
    "pto_isa",
    "pyACL",
    "runtime",
    "tbe-tik",
    "test-ops",
];

/// Copies `text` with its NUL into `dst` (`N` bytes, `text` shorter).
fn put<const N: usize>(dst: &mut [c_char; N], text: &str) {
    dst.fill(0);
    for (d, b) in dst.iter_mut().zip(text.bytes()) {
        *d = b as c_char;
    }
}

/// `aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion
/// *version)`: [`CANN_VERSION`] for the CANN packages (`ACL_PKG_NAME_CANN` to
/// `ACL_PKG_NAME_OPP_KERNEL`); `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` for the driver, which the
/// simulator has none of; `ACL_ERROR_INVALID_PARAM` for another name or a null `version`.
///
/// # Safety
/// `version` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclsysGetCANNVersion(
    name: i32,
    version: *mut aclCANNPackageVersion,
) -> aclError {
    const CALL: &str = "aclsysGetCANNVersion";
    ret((|| {
        if version.is_null() {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: version is null"),
            ));
        }
        match name {
            ACL_PKG_NAME_DRIVER => {
                return Err(fail(
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    format!("{CALL}: braid-acl-sim runs without a driver, which has no version"),
                ))
            }
            ACL_PKG_NAME_CANN..ACL_PKG_NAME_DRIVER => {}
            _ => {
                return Err(fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!("{CALL}: {name} is not an aclCANNPackageName"),
                ))
            }
        }
        // SAFETY: non-null and valid for a write (the caller's guarantee); every byte is
        // written below.
        let v = unsafe { &mut *version };
        let parts: Vec<&str> = CANN_VERSION.split('.').collect();
        put(&mut v.version, CANN_VERSION);
        put(&mut v.major_version, parts[0]);
        put(&mut v.minor_version, parts[1]);
        put(&mut v.release_version, parts[2]);
        put(&mut v.patch_version, "");
        put(&mut v.reserved, "");
        Ok(())
    })())
}

/// `aclError aclsysGetVersionStr(char *pkgName, char *versionStr)`: [`CANN_VERSION`] for
/// every package of CANN 8.5 (`runtime`, `hccl`, `opbase`, `ops_math`, ...) into
/// `versionStr` (`ACL_PKG_VERSION_MAX_SIZE` bytes); `ACL_ERROR_INVALID_PARAM` for a null
/// argument or another name.
///
/// # Safety
/// `pkg_name` is null or NUL-terminated; `version_str` is null or valid for
/// `ACL_PKG_VERSION_MAX_SIZE` writes.
#[no_mangle]
pub unsafe extern "C" fn aclsysGetVersionStr(
    pkg_name: *mut c_char,
    version_str: *mut c_char,
) -> aclError {
    const CALL: &str = "aclsysGetVersionStr";
    ret((|| {
        if pkg_name.is_null() || version_str.is_null() {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: pkgName or versionStr is null"),
            ));
        }
        // SAFETY: non-null and NUL-terminated (the caller's guarantee).
        let name = unsafe { CStr::from_ptr(pkg_name) }.to_string_lossy();
        if !PACKAGES.contains(&name.as_ref()) {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: {name:?} is not a package of CANN {CANN_VERSION}"),
            ));
        }
        let mut text = [0 as c_char; braid_acl_sys::acl::ACL_PKG_VERSION_MAX_SIZE];
        put(&mut text, CANN_VERSION);
        // SAFETY: valid for ACL_PKG_VERSION_MAX_SIZE writes (the caller's guarantee).
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), version_str, text.len()) };
        Ok(())
    })())
}
