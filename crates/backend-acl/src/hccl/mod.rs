//! HCCL, CANN's collective communication library, loaded at run time: the resolved table
//! ([`HcclApi`]), the calls the backend makes through it (`calls`, mocked in unit tests as
//! `crate::calls` is for ACL), communicators ([`AclComm`]: `HcclCommInitAll` over devices of
//! this process, or `HcclGetRootInfo` / `HcclCommInitRootInfo` across processes) and one
//! rank's part of a collective enqueued on a stream (the hal's collective extension,
//! `CollectiveBackend` for [`AclBackend`](crate::AclBackend)).
//!
//! Where the library is looked for (`braid_acl_sys::hccl::LIBRARIES`): `$BRAID_HCCL_LIB`, else
//! `lib64/libhccl.so` under `$ASCEND_HOME_PATH` / `$ASCEND_TOOLKIT_HOME`, then `libhccl.so`
//! on the loader path, with ACL's rules: a library named by the variable (or present under a
//! CANN home) that fails is an error naming it, never a fall-through. When the variable is
//! not set and the ACL library is `braid-acl-sim`, HCCL comes from it too (it exports HCCL on
//! the simulated node).
//!
//! Errors are [`AclError`]s carrying the `HcclResult`, its name
//! (`braid_acl_sys::hccl::result_name`, `HCCL_E_PARA`, ...), the call and
//! `HcclGetErrorString`'s text (with `aclGetRecentErrMsg`'s where the runtime left one), as
//! `HalError::Native`; a refused parameter (`HCCL_E_PARA`) as
//! `HalError::NativeInvalidArgument`.

mod async_error;
mod average;
pub(crate) mod calls;
mod comm;
pub(crate) mod error;
mod group;
mod sub_comm;
#[cfg(test)]
mod tests;
mod variable;

pub use comm::{dtype_of, reduce_op_of, AclComm};

use crate::api::AclApi;
use crate::error::AclError;
use braid_acl_sys::hccl::{HcclFunctions, HcclResult, LIBRARIES, LIB_ENV};
use braid_acl_sys::loader::{self, LoadError, Loaded};
use braid_stream_core::sync::GlobalMutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The resolved HCCL table ([`HcclFunctions`], through `Deref`) and the ACL library whose
/// `aclGetRecentErrMsg` completes its errors. Resolved once per ACL library and kept for the
/// life of the process.
pub struct HcclApi {
    acl: &'static AclApi,
    loaded: Loaded<HcclFunctions>,
}

impl Deref for HcclApi {
    type Target = HcclFunctions;
    fn deref(&self) -> &HcclFunctions {
        &self.loaded
    }
}

impl fmt::Debug for HcclApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HcclApi")
            .field("libraries", &self.libraries())
            .finish()
    }
}

/// Tables already resolved, by the path of the ACL library they go with.
fn resolved() -> &'static GlobalMutex<HashMap<PathBuf, &'static HcclApi>> {
    static TABLES: OnceLock<GlobalMutex<HashMap<PathBuf, &'static HcclApi>>> = OnceLock::new();
    TABLES.get_or_init(|| GlobalMutex::new(HashMap::new()))
}

impl HcclApi {
    /// Loads the HCCL table that goes with `acl` under the process environment (see the
    /// [module](self)); resolved once per ACL library.
    pub fn load_for(acl: &'static AclApi) -> Result<&'static HcclApi, LoadError> {
        let mut tables = resolved().lock();
        if let Some(api) = tables.get(acl.path()) {
            return Ok(api);
        }
        let api: &'static HcclApi =
            Box::leak(Box::new(Self::load_with(|k| std::env::var_os(k), acl)?));
        tracing::info!(libraries = ?api.libraries(), "HCCL loaded");
        tables.insert(acl.path().to_path_buf(), api);
        Ok(api)
    }

    /// Loads the HCCL table for `acl` under the environment `env` (tests inject one), not
    /// kept: the library is unloaded when the value drops.
    pub fn load_with(
        env: impl Fn(&str) -> Option<OsString>,
        acl: &'static AclApi,
    ) -> Result<HcclApi, LoadError> {
        // braid's rule: a variable set to nothing is refused by name, never read as unset
        // (which would take HCCL from braid-acl-sim).
        let configured = braid_acl_sys::variable(&env, LIB_ENV)
            .map_err(|source| LoadError::Variable {
                what: LIBRARIES.what,
                source,
            })?
            .is_some();
        let loaded = if !configured && acl.is_braid_acl_sim() {
            loader::load_from(LIBRARIES.what, &[acl.path()])?
        } else {
            LIBRARIES.load(&env)?
        };
        Ok(HcclApi { acl, loaded })
    }

    /// The libraries the table was resolved from.
    pub fn libraries(&self) -> Vec<PathBuf> {
        self.loaded
            .libraries()
            .into_iter()
            .map(|l| l.path)
            .collect()
    }

    /// Names of the optional symbols this library lacks (`HcclAlltoAll` on older releases).
    pub fn missing_optional(&self) -> Vec<&'static str> {
        braid_acl_sys::SymbolTable::missing_optional(&*self.loaded)
    }

    /// `HcclGetErrorString`'s text for `code` ("" when the library gives none).
    pub fn error_string(&self, code: HcclResult) -> String {
        // SAFETY: takes a number; returns null or a static NUL-terminated string.
        let text = unsafe { (self.HcclGetErrorString)(code) };
        if text.is_null() {
            String::new()
        } else {
            // SAFETY: non-null and NUL-terminated (HCCL's contract); copied at once.
            unsafe { std::ffi::CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        }
    }

    /// `Ok` for `HCCL_SUCCESS`, else the typed error of `call`: the result, its name,
    /// `HcclGetErrorString`'s text and `aclGetRecentErrMsg`'s, where there is one.
    pub fn check(&self, call: &'static str, code: HcclResult) -> Result<(), AclError> {
        if code == 0 {
            return Ok(());
        }
        let text = self.error_string(code);
        Err(error::error_of(
            call,
            code,
            text,
            self.acl.recent_error_message(),
        ))
    }
}

/// The HCCL table of the ACL library [`AclApi::load_or_sim`] finds (CANN when configured,
/// else `braid-acl-sim` built next to the executable).
pub fn api() -> Result<&'static HcclApi, LoadError> {
    HcclApi::load_for(AclApi::load_or_sim()?)
}
