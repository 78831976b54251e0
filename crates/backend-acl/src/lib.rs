//! braid's Ascend backend: ACL (`libascendcl.so`) loaded at run time, the cudarc way.
//!
//! **Status:** only locating and loading the library is implemented ([`load`],
//! [`is_available`]). The hal implementation over ACL streams, events, memory and
//! `aclmdlRI*` capture arrives with the ACL backend issue (DESIGN.md §7). Because the library is
//! opened at run time, this crate builds and tests on machines without CANN.

use std::ffi::OsString;
use std::path::PathBuf;

/// Environment variable naming the library file to load, tried first.
pub const LIB_ENV: &str = "BRAID_ACL_LIB";

/// Library file name on the loader path.
pub const LIB_NAME: &str = "libascendcl.so";

/// Failure to open ACL.
#[derive(Debug, thiserror::Error)]
#[error("could not load ACL ({LIB_NAME}); tried: {}", .tried.iter().map(|(p, e)| format!("{} ({e})", p.display())).collect::<Vec<_>>().join("; "))]
pub struct LoadError {
    /// Each candidate and why it failed to open.
    pub tried: Vec<(PathBuf, String)>,
}

/// An opened ACL library.
#[derive(Debug)]
pub struct AclLibrary {
    path: PathBuf,
    _library: libloading::Library,
}

impl AclLibrary {
    /// The file that was opened.
    pub fn path(&self) -> &std::path::Path {
        &self.path
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

/// Opens the first candidate of [`library_candidates`] (with the process environment) that
/// loads.
pub fn load() -> Result<AclLibrary, LoadError> {
    let mut tried = Vec::new();
    for path in library_candidates(|k| std::env::var_os(k)) {
        // SAFETY: opening a shared library runs its initializers; libascendcl (or braid-acl-sim,
        // which exports the same API) is designed to be loaded this way by its vendor's runtime.
        match unsafe { libloading::Library::new(&path) } {
            Ok(library) => {
                return Ok(AclLibrary {
                    path,
                    _library: library,
                })
            }
            Err(err) => tried.push((path, err.to_string())),
        }
    }
    Err(LoadError { tried })
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
    }
}
