//! The ACL function table: found, opened and resolved once, the cudarc way.
//!
//! [`AclApi`] is the resolved [`AclFunctions`] table of `braid-acl-sys` (one function pointer
//! per symbol braid uses, declared once there and exported by `braid-acl-sim` against the
//! same declaration) and the library it came from; it dereferences to the table, so
//! `(api.aclrtMalloc)(..)` calls a function. Required symbols must all resolve or loading
//! fails naming them; optional symbols (newer or feature-specific APIs: streams with config,
//! events with flags, the `aclmdlRI*` capture API, virtual memory, braid's own `braidSim*`
//! extension for sanitizer reports, which only `braid-acl-sim` exports) are
//! `Option`s, and the backend falls back or reports `Unsupported` without them.
//!
//! Where ACL is looked for ([`LIBRARIES`], `braid_acl_sys`'s loader): `$BRAID_ACL_LIB`, then
//! `lib64/libascendcl.so` under `$ASCEND_HOME_PATH` and `$ASCEND_TOOLKIT_HOME`, then
//! `libascendcl.so` on the loader path. A library named by `$BRAID_ACL_LIB` (or present under
//! a CANN home) that does not open or lacks a required symbol is an error naming it, never a
//! fall-through to another candidate. A CANN home variable that is set is configuration too:
//! when it holds no `lib64/libascendcl.so` (and none is on the loader path) the error names it
//! ([`LoadError::HomeWithoutLibrary`]). [`AclApi::load_or_sim`] falls back to `braid-acl-sim`
//! only when nothing is configured and no ACL library is there at all.
//!
//! A table is resolved once per library file and kept for the life of the process (libraries
//! are never unloaded), so `&'static AclApi` can be shared freely.

use braid_acl_sys::acl::{AclFunctions, LIB_ENV, LIB_NAME};
use braid_acl_sys::loader::{self, Loaded};
use braid_acl_sys::{Candidate, LibrarySet, Origin, Symbol, SymbolTable};
use braid_stream_core::sync::GlobalMutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use braid_acl_sys::loader::LoadError;

/// Where ACL is looked for: `$BRAID_ACL_LIB`, else `libascendcl.so` under the CANN homes and
/// on the loader path.
pub const LIBRARIES: LibrarySet = LibrarySet {
    what: "ACL",
    env: LIB_ENV,
    names: &[LIB_NAME],
};

/// Every symbol braid resolves, in declaration order. The loader resolves exactly these, and
/// `braid-acl-sim` exports every one of them.
pub const SYMBOLS: &[Symbol] = <AclFunctions as SymbolTable>::SYMBOLS;

/// The resolved ACL function table of one library ([`AclFunctions`], through `Deref`).
pub struct AclApi {
    loaded: Loaded<AclFunctions>,
    path: PathBuf,
}

impl Deref for AclApi {
    type Target = AclFunctions;
    fn deref(&self) -> &AclFunctions {
        &self.loaded
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

/// Tables already resolved, by the path they were opened from. Leaked on purpose: a library
/// stays loaded for the life of the process.
fn resolved() -> &'static GlobalMutex<HashMap<PathBuf, &'static AclApi>> {
    static TABLES: OnceLock<GlobalMutex<HashMap<PathBuf, &'static AclApi>>> = OnceLock::new();
    TABLES.get_or_init(|| GlobalMutex::new(HashMap::new()))
}

/// The process-wide table of `loaded`: the one already resolved from the same file, or this
/// one, kept for the life of the process.
fn keep(loaded: Loaded<AclFunctions>) -> &'static AclApi {
    let path = loaded
        .libraries()
        .first()
        .map(|l| l.path.clone())
        .unwrap_or_default();
    let mut tables = resolved().lock();
    if let Some(api) = tables.get(&path) {
        // The same file again: its library stays loaded through the kept table.
        return api;
    }
    let api: &'static AclApi = Box::leak(Box::new(AclApi {
        loaded,
        path: path.clone(),
    }));
    tracing::info!(
        path = %path.display(),
        missing_optional = ?api.missing_optional(),
        "ACL loaded"
    );
    tables.insert(path, api);
    api
}

impl AclApi {
    /// `aclGetRecentErrMsg`'s text for this thread ("" when there is none).
    pub fn recent_error_message(&self) -> String {
        // SAFETY: no arguments; the returned pointer is null or a NUL-terminated string valid
        // until the next call on this thread, and it is copied at once.
        let msg = unsafe { (self.aclGetRecentErrMsg)() };
        if msg.is_null() {
            String::new()
        } else {
            // SAFETY: non-null, NUL-terminated (ACL's contract), read before any other call.
            unsafe { std::ffi::CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        }
    }

    /// The file the table was resolved from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Names of the optional symbols this library lacks.
    pub fn missing_optional(&self) -> Vec<&'static str> {
        self.loaded.missing_optional()
    }

    /// Loads ACL from [`LIBRARIES`] under the process environment. The table is resolved
    /// once per process; later calls return it.
    pub fn load() -> Result<&'static AclApi, LoadError> {
        static DEFAULT: OnceLock<&'static AclApi> = OnceLock::new();
        if let Some(api) = DEFAULT.get() {
            return Ok(api);
        }
        let api = Self::load_with(|k| std::env::var_os(k))?;
        Ok(*DEFAULT.get_or_init(|| api))
    }

    /// Loads ACL from [`LIBRARIES`] under the environment `env` (tests inject one). A
    /// variable of the ACL family ([`braid_acl_sys::VARIABLES`]) set to nothing is refused by
    /// name before anything is searched (braid's rule for every `BRAID_*` variable).
    pub fn load_with(env: impl Fn(&str) -> Option<OsString>) -> Result<&'static AclApi, LoadError> {
        braid_acl_sys::check_variables(&env).map_err(|source| LoadError::Variable {
            what: LIBRARIES.what,
            source,
        })?;
        LIBRARIES
            .load(env)
            .map(keep)
            .map_err(|e| e.with_hint(CANN_HINT))
    }

    /// Loads ACL from exactly `path` (resolved once per path and process).
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static AclApi, LoadError> {
        let path = path.as_ref();
        if let Some(api) = resolved().lock().get(path) {
            return Ok(api);
        }
        loader::load_from(LIBRARIES.what, &[path]).map(keep)
    }

    /// Loads ACL as [`AclApi::load`] does and, only when no ACL library is there at all
    /// and nothing is configured (no `$BRAID_ACL_LIB`, no `$ASCEND_HOME_PATH` or
    /// `$ASCEND_TOOLKIT_HOME`, no `libascendcl.so` on the loader path), `braid-acl-sim` built
    /// next to the running executable
    /// ([`sim_library_candidates`] of its directory). This is the search of binaries built in
    /// braid's workspace (`braid demo --backend acl`, the examples with `--features acl`):
    /// CANN when it is configured, else the simulator behind the same API
    /// ([`AclApi::is_braid_acl_sim`] tells which). A configured library that fails, or a
    /// CANN home without the library, is the error, never replaced by the simulator.
    pub fn load_or_sim() -> Result<&'static AclApi, LoadError> {
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        Self::load_or_sim_with(|k| std::env::var_os(k), exe_dir.as_deref())
    }

    /// [`AclApi::load_or_sim`] under the environment `env`, looking for `braid-acl-sim` in
    /// `exe_dir` (tests inject both). When nothing loads, the error lists every path tried,
    /// CANN's first.
    pub fn load_or_sim_with(
        env: impl Fn(&str) -> Option<OsString>,
        exe_dir: Option<&Path>,
    ) -> Result<&'static AclApi, LoadError> {
        let mut tried = match Self::load_with(env) {
            Err(LoadError::NotFound { tried, .. }) => tried,
            configured => return configured,
        };
        let candidates: Vec<Candidate> = exe_dir
            .map(sim_library_candidates)
            .unwrap_or_default()
            .into_iter()
            // Canonical where it exists, so the path reported (and the table's key) reads
            // plainly.
            .map(|path| Candidate {
                path: path.canonicalize().unwrap_or(path),
                origin: Origin::Fallback,
            })
            .collect();
        match loader::load_first(LIBRARIES.what, &candidates) {
            Ok(loaded) => Ok(keep(loaded)),
            Err(LoadError::NotFound {
                what, tried: sim, ..
            }) => {
                tried.extend(sim);
                Err(LoadError::NotFound {
                    what,
                    tried,
                    hint: Some(SIM_HINT),
                })
            }
            Err(err) => Err(err),
        }
    }

    /// Whether this library is `braid-acl-sim` (ACL's API on braid's simulator): it exports
    /// braid's sanitizer extension, which CANN does not.
    pub fn is_braid_acl_sim(&self) -> bool {
        self.supports_sanitizer_reports()
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

    /// Whether braid's sanitizer extension (`braidSimSanitizerReportCount`,
    /// `braidSimSanitizerReport`, `braidSimClearSanitizerReports`) is present (it is in
    /// `braid-acl-sim`, not in CANN).
    pub fn supports_sanitizer_reports(&self) -> bool {
        self.braidSimSanitizerReportCount.is_some()
            && self.braidSimSanitizerReport.is_some()
            && self.braidSimClearSanitizerReports.is_some()
    }
}

/// What [`AclApi::load`] says when no ACL library is there.
pub const CANN_HINT: &str = "On an Ascend machine, source CANN's set_env.sh (it sets \
    ASCEND_HOME_PATH) or set BRAID_ACL_LIB to libascendcl.so; without one, AclApi::load_or_sim \
    (braid::acl_device) also looks for braid-acl-sim, ACL on braid's simulator";

/// What [`AclApi::load_or_sim`] says when neither CANN nor `braid-acl-sim` is there.
pub const SIM_HINT: &str = "braid-acl-sim (ACL on braid's simulator) is not next to the \
    executable either. In a cargo project, depend on braid with features = [\"acl-sim\"]: \
    cargo then builds libbraid_acl_sim.so beside your binaries, tests and examples, where it is \
    looked for. Anywhere else, copy it out of a braid build with `braid acl-sim install --dir \
    DIR` and set BRAID_ACL_LIB=DIR/libbraid_acl_sim.so. On an Ascend machine, source CANN's \
    set_env.sh";

/// File name of the library `braid-acl-sim` builds (its cdylib).
pub const SIM_LIB_NAME: &str = "libbraid_acl_sim.so";

/// Where `braid-acl-sim`'s library lies when it was built in the same cargo target directory
/// as an executable in `exe_dir`: in `exe_dir` itself (test executables and dependencies'
/// libraries share `target/<profile>/deps/`), in `exe_dir/deps/` (binaries such as
/// `target/<profile>/braid`), and in `exe_dir/../deps/` (examples, in
/// `target/<profile>/examples/`). The ones that exist come first, the most recently built
/// first: the copy cargo puts in `target/<profile>/` when braid-acl-sim itself is built goes
/// stale when later builds rebuild it only as a dependency, in `deps/`.
pub fn sim_library_candidates(exe_dir: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![
        exe_dir.join(SIM_LIB_NAME),
        exe_dir.join("deps").join(SIM_LIB_NAME),
        exe_dir.join("..").join("deps").join(SIM_LIB_NAME),
    ];
    // Stable: paths that do not exist keep their order, after the ones that do.
    candidates.sort_by_key(|path| {
        std::cmp::Reverse(std::fs::metadata(path).and_then(|m| m.modified()).ok())
    });
    candidates
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

    /// The directory of this test executable, where cargo built `braid-acl-sim` (a
    /// dev-dependency).
    fn exe_dir() -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        exe.parent().unwrap().to_path_buf()
    }

    /// A scratch directory of this test process.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("braid-backend-acl-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib64")).unwrap();
        dir
    }

    /// Whether a real libascendcl.so is on this machine's loader path (then the fallback
    /// is never reached with an empty environment).
    fn cann_on_loader_path() -> bool {
        !matches!(AclApi::load_with(env_of(&[])), Err(e) if e.is_not_found())
    }

    #[test]
    fn an_explicit_library_that_does_not_open_is_an_error_never_the_simulator() {
        // braid-acl-sim lies next to this test: it must not be picked up.
        let env = env_of(&[("BRAID_ACL_LIB", "/nonexistent/libascendcl.so")]);
        let err = AclApi::load_or_sim_with(env, Some(&exe_dir())).unwrap_err();
        assert!(!err.is_not_found(), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("/nonexistent/libascendcl.so (named by $BRAID_ACL_LIB)"),
            "{text}"
        );
        assert!(text.contains("No such file or directory"), "{text}");
    }

    #[test]
    fn an_explicit_library_without_acl_symbols_is_an_error_never_the_simulator() {
        let env = env_of(&[("BRAID_ACL_LIB", "libm.so.6")]);
        let err = AclApi::load_or_sim_with(env, Some(&exe_dir())).unwrap_err();
        assert!(err.missing_symbols().contains(&"aclInit"), "{err:?}");
        assert!(
            err.to_string()
                .contains("libm.so.6 (named by $BRAID_ACL_LIB)"),
            "{err}"
        );
    }

    #[test]
    fn a_broken_library_under_a_cann_home_is_an_error_never_the_simulator() {
        let home = scratch("broken");
        std::fs::write(home.join("lib64").join(LIB_NAME), b"not a library").unwrap();
        let env = env_of(&[("ASCEND_HOME_PATH", home.to_str().unwrap())]);
        let err = AclApi::load_or_sim_with(env, Some(&exe_dir())).unwrap_err();
        assert!(
            err.to_string()
                .contains("libascendcl.so (under $ASCEND_HOME_PATH)"),
            "{err}"
        );
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn a_cann_home_without_the_library_is_an_error_never_the_simulator() {
        if cann_on_loader_path() {
            eprintln!("note: a libascendcl.so is on the loader path; it is found there");
            return;
        }
        // A set CANN home is configuration: braid-acl-sim next to this test is not taken.
        for var in braid_acl_sys::HOME_VARS {
            let home = scratch(&format!("empty-{var}"));
            let env = env_of(&[(var, home.to_str().unwrap())]);
            let err = AclApi::load_or_sim_with(env, Some(&exe_dir())).unwrap_err();
            assert!(!err.is_not_found(), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("${var}={:?}", home.to_str().unwrap())),
                "{text}"
            );
            assert!(text.contains("lib64/libascendcl.so (under $"), "{text}");
            std::fs::remove_dir_all(home).unwrap();
        }
        // $BRAID_ACL_LIB keeps its precedence over a wrong home.
        let home = scratch("empty-with-lib");
        let sim = sim_library_candidates(&exe_dir()).remove(0);
        let env = env_of(&[
            ("ASCEND_HOME_PATH", home.to_str().unwrap()),
            ("BRAID_ACL_LIB", sim.to_str().unwrap()),
        ]);
        let api = AclApi::load_or_sim_with(env, Some(&exe_dir())).expect("$BRAID_ACL_LIB");
        assert!(api.is_braid_acl_sim());
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn with_nothing_configured_the_simulator_next_to_the_executable_is_loaded() {
        if cann_on_loader_path() {
            eprintln!("note: a libascendcl.so is on the loader path; the fallback is not reached");
            return;
        }
        let api = AclApi::load_or_sim_with(env_of(&[]), Some(&exe_dir())).expect("braid-acl-sim");
        assert!(
            api.path().ends_with(SIM_LIB_NAME),
            "{}",
            api.path().display()
        );
        assert!(api.is_braid_acl_sim());

        // No simulator either: every path tried, CANN's first.
        let nowhere = scratch("nowhere");
        let err = AclApi::load_or_sim_with(env_of(&[]), Some(&nowhere)).unwrap_err();
        assert!(err.is_not_found());
        let paths = err.paths();
        assert_eq!(paths[0], Path::new(LIB_NAME));
        assert_eq!(paths.len(), 4, "{paths:?}");
        assert!(
            err.to_string()
                .contains("fallback, as nothing is configured: no such file"),
            "{err}"
        );
        // It says how to get braid-acl-sim.
        let text = err.to_string();
        assert!(
            text.contains("braid-acl-sim") && text.contains("features = [\"acl-sim\"]"),
            "{text}"
        );
        assert!(
            text.contains("braid acl-sim install --dir DIR")
                && text.contains("BRAID_ACL_LIB=DIR/libbraid_acl_sim.so"),
            "{text}"
        );
        std::fs::remove_dir_all(nowhere).unwrap();
    }

    #[test]
    fn a_missing_library_is_a_typed_error_listing_what_was_tried() {
        // This machine has no CANN: loading fails with every candidate named.
        if let Err(err) = load() {
            assert!(err.paths().contains(&Path::new(LIB_NAME)));
            assert!(err.to_string().contains("libascendcl.so"), "{err}");
            assert!(!is_available());
        }
        let err = AclApi::load_from("/nonexistent/libascendcl.so").unwrap_err();
        assert!(matches!(err, LoadError::Unopenable { .. }));
        assert!(
            err.to_string().contains("/nonexistent/libascendcl.so"),
            "{err}"
        );
    }

    #[test]
    fn an_acl_variable_set_to_nothing_is_refused_by_name_never_the_simulator() {
        for variable in braid_acl_sys::VARIABLES {
            let err =
                AclApi::load_or_sim_with(env_of(&[(variable, "")]), Some(&exe_dir())).unwrap_err();
            assert!(matches!(err, LoadError::Variable { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("${variable}=\"\"")) && text.contains("set but empty"),
                "{text}"
            );
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
    fn a_fresher_build_in_deps_is_preferred_to_a_stale_copy_beside_the_binary() {
        let dir = std::env::temp_dir().join(format!("braid-sim-candidates-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("deps")).unwrap();
        let stale = dir.join(SIM_LIB_NAME);
        let fresh = dir.join("deps").join(SIM_LIB_NAME);
        let now = std::time::SystemTime::now();
        for (path, age) in [(&stale, 3600), (&fresh, 0)] {
            let file = std::fs::File::create(path).unwrap();
            file.set_modified(now - std::time::Duration::from_secs(age))
                .unwrap();
        }
        let got = sim_library_candidates(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            got,
            vec![fresh, stale, dir.join("..").join("deps").join(SIM_LIB_NAME)]
        );
    }
}
