//! The ACL function table: found, opened and resolved once, the cudarc way.
//!
//! [`AclApi`] holds the opened library and one function pointer per symbol braid uses.
//! Required symbols must all resolve or loading fails with [`LoadFailure::MissingSymbols`]
//! naming them; optional symbols (newer or feature-specific APIs: streams with config, events
//! with flags, the `aclmdlRI*` capture API, virtual memory, braid's own `braidSim*`
//! extensions for kernels and sanitizer reports, which only `braid-acl-sim` exports) are
//! `Option`s, and the backend falls back or reports `Unsupported` without them.
//!
//! A table is resolved once per library file and kept for the life of the process (libraries
//! are never unloaded), so `&'static AclApi` can be shared freely.

use crate::ffi::{
    AclErrorCode, AclmdlRI, AclrtDrvMemHandle, AclrtEvent, AclrtPhysicalMemProp, AclrtStream,
    BraidKernelDesc,
};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Environment variable naming the library file to load, tried first.
pub const LIB_ENV: &str = "BRAID_ACL_LIB";

/// Library file name on the loader path.
pub const LIB_NAME: &str = "libascendcl.so";

/// One symbol of the table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Symbol {
    /// Its C name.
    pub name: &'static str,
    /// Whether loading fails without it.
    pub required: bool,
}

macro_rules! acl_api {
    (
        required { $( $rname:ident : fn( $($rarg:ident : $rty:ty),* $(,)? ) $(-> $rret:ty)?; )* }
        optional { $( $oname:ident : fn( $($oarg:ident : $oty:ty),* $(,)? ) $(-> $oret:ty)?; )* }
    ) => {
        /// Every symbol braid resolves, required ones first. The loader resolves exactly these,
        /// and `braid-acl-sim` must export every one of them.
        pub const SYMBOLS: &[Symbol] = &[
            $( Symbol { name: stringify!($rname), required: true }, )*
            $( Symbol { name: stringify!($oname), required: false }, )*
        ];

        /// The resolved function table of one ACL library.
        ///
        /// Calling a pointer is `unsafe`: the caller upholds the C API's contract (valid
        /// handles, pointers valid for the lengths given).
        #[allow(non_snake_case)]
        pub struct AclApi {
            path: PathBuf,
            _library: libloading::Library,
            $(
                #[doc = concat!("`", stringify!($rname), "` (required).")]
                pub $rname: unsafe extern "C" fn($($rty),*) $(-> $rret)?,
            )*
            $(
                #[doc = concat!("`", stringify!($oname), "` (optional).")]
                pub $oname: Option<unsafe extern "C" fn($($oty),*) $(-> $oret)?>,
            )*
        }

        impl AclApi {
            /// Resolves the table from an opened library. Missing required symbols are listed.
            #[allow(non_snake_case)]
            fn resolve(path: PathBuf, library: libloading::Library) -> Result<AclApi, LoadFailure> {
                let missing: Vec<&'static str> = SYMBOLS
                    .iter()
                    .filter(|s| s.required)
                    .filter(|s| {
                        let name = format!("{}\0", s.name);
                        // SAFETY: only the symbol's presence is checked; the pointer is not used.
                        unsafe { library.get::<*const c_void>(name.as_bytes()) }.is_err()
                    })
                    .map(|s| s.name)
                    .collect();
                if !missing.is_empty() {
                    return Err(LoadFailure::MissingSymbols(missing));
                }
                $(
                    // SAFETY: the symbol is ACL's function of this name, whose C signature is
                    // the one declared in the table (CANN's acl_rt.h / acl_mdl.h).
                    let $rname = unsafe {
                        library.get::<unsafe extern "C" fn($($rty),*) $(-> $rret)?>(
                            concat!(stringify!($rname), "\0").as_bytes(),
                        )
                    }
                    .map(|s| *s)
                    .map_err(|_| LoadFailure::MissingSymbols(vec![stringify!($rname)]))?;
                )*
                $(
                    // SAFETY: as above; an absent optional symbol is `None`.
                    let $oname = unsafe {
                        library.get::<unsafe extern "C" fn($($oty),*) $(-> $oret)?>(
                            concat!(stringify!($oname), "\0").as_bytes(),
                        )
                    }
                    .ok()
                    .map(|s| *s);
                )*
                Ok(AclApi { path, _library: library, $($rname,)* $($oname,)* })
            }

            /// Names of the optional symbols this library lacks.
            pub fn missing_optional(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if self.$oname.is_none() { out.push(stringify!($oname)); } )*
                out
            }
        }
    };
}

acl_api! {
    required {
        aclInit: fn(config_path: *const c_char) -> AclErrorCode;
        aclGetRecentErrMsg: fn() -> *const c_char;
        aclrtSetDevice: fn(device_id: i32) -> AclErrorCode;
        aclrtResetDevice: fn(device_id: i32) -> AclErrorCode;
        aclrtGetDeviceCount: fn(count: *mut u32) -> AclErrorCode;
        aclrtGetMemInfo: fn(attr: u32, free: *mut usize, total: *mut usize) -> AclErrorCode;
        aclrtSynchronizeDevice: fn() -> AclErrorCode;
        aclrtCreateStream: fn(stream: *mut AclrtStream) -> AclErrorCode;
        aclrtDestroyStream: fn(stream: AclrtStream) -> AclErrorCode;
        aclrtSynchronizeStream: fn(stream: AclrtStream) -> AclErrorCode;
        aclrtStreamWaitEvent: fn(stream: AclrtStream, event: AclrtEvent) -> AclErrorCode;
        aclrtCreateEventWithFlag: fn(event: *mut AclrtEvent, flag: u32) -> AclErrorCode;
        aclrtDestroyEvent: fn(event: AclrtEvent) -> AclErrorCode;
        aclrtRecordEvent: fn(event: AclrtEvent, stream: AclrtStream) -> AclErrorCode;
        aclrtQueryEventStatus: fn(event: AclrtEvent, status: *mut u32) -> AclErrorCode;
        aclrtSynchronizeEvent: fn(event: AclrtEvent) -> AclErrorCode;
        aclrtEventElapsedTime: fn(ms: *mut f32, start: AclrtEvent, end: AclrtEvent) -> AclErrorCode;
        aclrtMalloc: fn(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> AclErrorCode;
        aclrtFree: fn(dev_ptr: *mut c_void) -> AclErrorCode;
        aclrtMallocHost: fn(host_ptr: *mut *mut c_void, size: usize) -> AclErrorCode;
        aclrtFreeHost: fn(host_ptr: *mut c_void) -> AclErrorCode;
        aclrtMemcpyAsync: fn(
            dst: *mut c_void,
            dest_max: usize,
            src: *const c_void,
            count: usize,
            kind: u32,
            stream: AclrtStream,
        ) -> AclErrorCode;
        aclrtMemsetAsync: fn(
            dev_ptr: *mut c_void,
            max_count: usize,
            value: i32,
            count: usize,
            stream: AclrtStream,
        ) -> AclErrorCode;
    }
    optional {
        aclrtCreateStreamWithConfig: fn(stream: *mut AclrtStream, priority: u32, flag: u32) -> AclErrorCode;
        aclrtSynchronizeStreamWithTimeout: fn(stream: AclrtStream, timeout: i32) -> AclErrorCode;
        aclrtStreamQuery: fn(stream: AclrtStream, status: *mut u32) -> AclErrorCode;
        aclrtCreateEventExWithFlag: fn(event: *mut AclrtEvent, flag: u32) -> AclErrorCode;
        aclmdlRICaptureBegin: fn(stream: AclrtStream, mode: u32) -> AclErrorCode;
        aclmdlRICaptureGetInfo: fn(stream: AclrtStream, status: *mut u32, model_ri: *mut AclmdlRI) -> AclErrorCode;
        aclmdlRICaptureEnd: fn(stream: AclrtStream, model_ri: *mut AclmdlRI) -> AclErrorCode;
        aclmdlRIExecuteAsync: fn(model_ri: AclmdlRI, stream: AclrtStream) -> AclErrorCode;
        aclmdlRIDestroy: fn(model_ri: AclmdlRI) -> AclErrorCode;
        aclrtReserveMemAddress: fn(
            vir_ptr: *mut *mut c_void,
            size: usize,
            alignment: usize,
            expect_ptr: *mut c_void,
            flags: u64,
        ) -> AclErrorCode;
        aclrtReleaseMemAddress: fn(vir_ptr: *mut c_void) -> AclErrorCode;
        aclrtMallocPhysical: fn(
            handle: *mut AclrtDrvMemHandle,
            size: usize,
            prop: *const AclrtPhysicalMemProp,
            flags: u64,
        ) -> AclErrorCode;
        aclrtFreePhysical: fn(handle: AclrtDrvMemHandle) -> AclErrorCode;
        aclrtMapMem: fn(
            vir_ptr: *mut c_void,
            size: usize,
            offset: usize,
            handle: AclrtDrvMemHandle,
            flags: u64,
        ) -> AclErrorCode;
        aclrtUnmapMem: fn(vir_ptr: *mut c_void) -> AclErrorCode;
        aclrtMemGetAllocationGranularity: fn(
            prop: *const AclrtPhysicalMemProp,
            option: u32,
            granularity: *mut usize,
        ) -> AclErrorCode;
        braidSimLaunchKernel: fn(
            stream: AclrtStream,
            desc: *const BraidKernelDesc,
            desc_size: usize,
            label: *const c_char,
        ) -> AclErrorCode;
        braidSimSanitizerReportCount: fn(device_id: i32, count: *mut u64) -> AclErrorCode;
        braidSimSanitizerReport: fn(
            device_id: i32,
            index: u64,
            buf: *mut c_char,
            buf_len: usize,
            needed: *mut usize,
        ) -> AclErrorCode;
        braidSimClearSanitizerReports: fn(device_id: i32) -> AclErrorCode;
    }
}

impl fmt::Debug for AclApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclApi")
            .field("path", &self.path)
            .field("missing_optional", &self.missing_optional())
            .finish()
    }
}

/// Why one candidate library could not be used.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum LoadFailure {
    /// The file could not be opened (the loader's message).
    Open(String),
    /// The library opened but lacks these required symbols.
    MissingSymbols(Vec<&'static str>),
}

impl fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadFailure::Open(msg) => write!(f, "{msg}"),
            LoadFailure::MissingSymbols(names) => {
                write!(f, "missing required symbols: {}", names.join(", "))
            }
        }
    }
}

/// Failure to load ACL: every candidate tried and why it failed.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("could not load ACL ({LIB_NAME}); tried: {}", .tried.iter().map(|(p, e)| format!("{} ({e})", p.display())).collect::<Vec<_>>().join("; "))]
pub struct LoadError {
    /// Each candidate and why it could not be used.
    pub tried: Vec<(PathBuf, LoadFailure)>,
}

impl LoadError {
    /// The required symbols missing from the candidates that opened.
    pub fn missing_symbols(&self) -> Vec<&'static str> {
        self.tried
            .iter()
            .filter_map(|(_, f)| match f {
                LoadFailure::MissingSymbols(names) => Some(names.clone()),
                LoadFailure::Open(_) => None,
            })
            .flatten()
            .collect()
    }
}

/// The candidates in search order: `$BRAID_ACL_LIB`, then `lib64/libascendcl.so` under
/// `$ASCEND_HOME_PATH` and `$ASCEND_TOOLKIT_HOME`, then the bare name for the loader path.
/// `env` looks up an environment variable (pass `std::env::var_os`).
pub fn library_candidates(env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(explicit) = env(LIB_ENV).filter(|v| !v.is_empty()) {
        out.push(PathBuf::from(explicit));
    }
    for var in ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"] {
        if let Some(home) = env(var).filter(|v| !v.is_empty()) {
            let candidate = PathBuf::from(home).join("lib64").join(LIB_NAME);
            if !out.contains(&candidate) {
                out.push(candidate);
            }
        }
    }
    out.push(PathBuf::from(LIB_NAME));
    out
}

/// Tables already resolved, by the path they were opened from. Leaked on purpose: a library
/// stays loaded for the life of the process.
fn resolved() -> &'static Mutex<HashMap<PathBuf, &'static AclApi>> {
    static TABLES: OnceLock<Mutex<HashMap<PathBuf, &'static AclApi>>> = OnceLock::new();
    TABLES.get_or_init(|| Mutex::new(HashMap::new()))
}

impl AclApi {
    /// The file the table was resolved from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads ACL from the first candidate of [`library_candidates`] (with the process
    /// environment) that opens and has every required symbol. The table is resolved once per
    /// process; later calls return it.
    pub fn load() -> Result<&'static AclApi, LoadError> {
        static DEFAULT: OnceLock<&'static AclApi> = OnceLock::new();
        if let Some(api) = DEFAULT.get() {
            return Ok(api);
        }
        let mut tried = Vec::new();
        for path in library_candidates(|k| std::env::var_os(k)) {
            match Self::open(&path) {
                Ok(api) => return Ok(*DEFAULT.get_or_init(|| api)),
                Err(failure) => tried.push((path, failure)),
            }
        }
        Err(LoadError { tried })
    }

    /// Loads ACL from exactly `path` (resolved once per path and process).
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static AclApi, LoadError> {
        let path = path.as_ref();
        Self::open(path).map_err(|failure| LoadError {
            tried: vec![(path.to_path_buf(), failure)],
        })
    }

    fn open(path: &Path) -> Result<&'static AclApi, LoadFailure> {
        let mut tables = resolved().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(api) = tables.get(path) {
            return Ok(api);
        }
        // SAFETY: opening a shared library runs its initializers; libascendcl (or braid-acl-sim,
        // which exports the same API) is designed to be loaded this way by its vendor's runtime.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| LoadFailure::Open(e.to_string()))?;
        let api: &'static AclApi = Box::leak(Box::new(Self::resolve(path.to_path_buf(), library)?));
        tracing::info!(
            path = %path.display(),
            missing_optional = ?api.missing_optional(),
            "ACL loaded"
        );
        tables.insert(path.to_path_buf(), api);
        Ok(api)
    }

    /// Whether the `aclmdlRI*` capture API is complete in this library.
    pub fn supports_capture(&self) -> bool {
        self.aclmdlRICaptureBegin.is_some()
            && self.aclmdlRICaptureGetInfo.is_some()
            && self.aclmdlRICaptureEnd.is_some()
            && self.aclmdlRIExecuteAsync.is_some()
            && self.aclmdlRIDestroy.is_some()
    }

    /// Whether the virtual-memory API (for expandable segments) is complete in this library.
    pub fn supports_virtual_memory(&self) -> bool {
        self.aclrtReserveMemAddress.is_some()
            && self.aclrtReleaseMemAddress.is_some()
            && self.aclrtMallocPhysical.is_some()
            && self.aclrtFreePhysical.is_some()
            && self.aclrtMapMem.is_some()
            && self.aclrtUnmapMem.is_some()
            && self.aclrtMemGetAllocationGranularity.is_some()
    }

    /// Whether braid's kernel-launch extension ([`crate::ffi::KERNEL_EXTENSION_SYMBOL`]) is
    /// present (it is in `braid-acl-sim`, not in CANN).
    pub fn supports_kernel_launch(&self) -> bool {
        self.braidSimLaunchKernel.is_some()
    }

    /// Whether braid's sanitizer extension (`braidSimSanitizerReportCount`,
    /// `braidSimSanitizerReport`, `braidSimClearSanitizerReports`) is present (it is in
    /// `braid-acl-sim`, not in CANN).
    pub fn supports_sanitizer_reports(&self) -> bool {
        self.braidSimSanitizerReportCount.is_some()
            && self.braidSimSanitizerReport.is_some()
            && self.braidSimClearSanitizerReports.is_some()
    }

    /// Loads ACL as [`AclApi::load`] does and, when no candidate works, `braid-acl-sim` built
    /// next to the running executable ([`sim_library_candidates`] of its directory). This is
    /// the search of binaries built in braid's workspace (`braid demo --backend acl`, the
    /// examples with `--features acl`): CANN when it is configured, else the simulator behind
    /// the same API. The error lists every path tried, CANN's first.
    pub fn load_or_sim() -> Result<&'static AclApi, LoadError> {
        let err = match Self::load() {
            Ok(api) => return Ok(api),
            Err(err) => err,
        };
        let mut tried = err.tried;
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        for path in exe_dir.iter().flat_map(|dir| sim_library_candidates(dir)) {
            // Canonical, so the path reported (and the table's key) reads plainly.
            let Ok(path) = path.canonicalize() else {
                tried.push((path, LoadFailure::Open("no such file".to_string())));
                continue;
            };
            match Self::open(&path) {
                Ok(api) => return Ok(api),
                Err(failure) => tried.push((path, failure)),
            }
        }
        Err(LoadError { tried })
    }
}

/// File name of the library `braid-acl-sim` builds (its cdylib).
pub const SIM_LIB_NAME: &str = "libbraid_acl_sim.so";

/// Where `braid-acl-sim`'s library lies when it was built in the same cargo target directory
/// as an executable in `exe_dir`: in `exe_dir` itself (test executables and dependencies'
/// libraries share `target/<profile>/deps/`), in `exe_dir/deps/` (binaries such as
/// `target/<profile>/braid`), and in `exe_dir/../deps/` (examples, in
/// `target/<profile>/examples/`).
pub fn sim_library_candidates(exe_dir: &Path) -> Vec<PathBuf> {
    vec![
        exe_dir.join(SIM_LIB_NAME),
        exe_dir.join("deps").join(SIM_LIB_NAME),
        exe_dir.join("..").join("deps").join(SIM_LIB_NAME),
    ]
}

/// Loads ACL with [`AclApi::load`].
pub fn load() -> Result<&'static AclApi, LoadError> {
    AclApi::load()
}

/// Whether ACL can be loaded here; tests and benches use it to decide whether to run.
pub fn is_available() -> bool {
    load().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn search_order_is_explicit_then_cann_homes_then_loader_path() {
        let got = library_candidates(env_of(&[
            ("BRAID_ACL_LIB", "/opt/sim/libacl.so"),
            (
                "ASCEND_HOME_PATH",
                "/usr/local/Ascend/ascend-toolkit/latest",
            ),
            ("ASCEND_TOOLKIT_HOME", "/opt/toolkit"),
        ]));
        assert_eq!(
            got,
            vec![
                PathBuf::from("/opt/sim/libacl.so"),
                PathBuf::from("/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so"),
                PathBuf::from("/opt/toolkit/lib64/libascendcl.so"),
                PathBuf::from("libascendcl.so"),
            ]
        );
        assert_eq!(
            library_candidates(env_of(&[])),
            vec![PathBuf::from("libascendcl.so")]
        );
    }

    #[test]
    fn a_missing_library_is_a_typed_error_listing_what_was_tried() {
        // This machine has no CANN: loading fails with every candidate named.
        if let Err(err) = load() {
            assert!(err.tried.iter().any(|(p, _)| p == &PathBuf::from(LIB_NAME)));
            assert!(err.to_string().contains("libascendcl.so"), "{err}");
            assert!(!is_available());
        }
        let err = AclApi::load_from("/nonexistent/libascendcl.so").unwrap_err();
        assert_eq!(err.tried.len(), 1);
        assert!(matches!(err.tried[0].1, LoadFailure::Open(_)));
        assert!(
            err.to_string().contains("/nonexistent/libascendcl.so"),
            "{err}"
        );
    }

    #[test]
    fn the_symbol_list_has_no_duplicates_and_the_required_core() {
        let mut names: Vec<&str> = SYMBOLS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SYMBOLS.len());
        for required in [
            "aclInit",
            "aclrtSetDevice",
            "aclrtMalloc",
            "aclrtMallocHost",
            "aclrtFreeHost",
            "aclrtMemcpyAsync",
        ] {
            assert!(SYMBOLS.iter().any(|s| s.name == required && s.required));
        }
        for optional in [
            "aclrtCreateStreamWithConfig",
            "aclrtCreateEventExWithFlag",
            "aclmdlRICaptureBegin",
            "aclrtReserveMemAddress",
            "braidSimLaunchKernel",
            "braidSimSanitizerReportCount",
            "braidSimSanitizerReport",
            "braidSimClearSanitizerReports",
        ] {
            assert!(SYMBOLS.iter().any(|s| s.name == optional && !s.required));
        }
    }

    #[test]
    fn the_simulator_is_looked_for_next_to_binaries_tests_and_examples() {
        let got = sim_library_candidates(Path::new("/t/release"));
        assert_eq!(
            got,
            vec![
                PathBuf::from("/t/release/libbraid_acl_sim.so"),
                PathBuf::from("/t/release/deps/libbraid_acl_sim.so"),
                PathBuf::from("/t/release/../deps/libbraid_acl_sim.so"),
            ]
        );
    }

    #[test]
    fn missing_symbols_are_named() {
        let err = LoadError {
            tried: vec![(
                PathBuf::from("/x/libascendcl.so"),
                LoadFailure::MissingSymbols(vec!["aclrtMalloc", "aclrtFree"]),
            )],
        };
        assert_eq!(err.missing_symbols(), vec!["aclrtMalloc", "aclrtFree"]);
        assert!(err
            .to_string()
            .contains("missing required symbols: aclrtMalloc, aclrtFree"));
    }
}
