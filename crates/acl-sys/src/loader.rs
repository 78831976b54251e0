//! The run-time loader (feature `loader`): opens a [`LibrarySet`] with libloading and
//! resolves a [`SymbolTable`] from it.
//!
//! The rules, so that configuration is never silently ignored:
//! - the set's variable set to nothing (or to a list naming no file) is
//!   [`LoadError::Variable`], naming it: it is never read as unset;
//! - a library named by the set's variable ([`Origin::Env`]) that does not open, or a set of
//!   them that lacks a required symbol, is an error naming it: nothing else is tried;
//! - a library present under a CANN home ([`Origin::Home`]) or at a caller's fallback path
//!   ([`Origin::Fallback`]) that does not open is an error too (an absent one is simply not
//!   there);
//! - a bare name the loader cannot find is not there;
//! - a CANN home variable ([`HOME_VARS`](crate::search::HOME_VARS)) that is set is
//!   configuration too: when no library of the set is there at all (under the homes nor on the
//!   loader path) while one is set, the error is [`LoadError::HomeWithoutLibrary`], naming it;
//! - only when no library of the set is there at all and nothing is configured is the error
//!   [`LoadError::NotFound`], the one case a caller may answer with a fallback.
//!
//! Every error lists the paths tried with the loader's own reason (`dlerror`'s text), and a
//! missing symbol names the symbol and the libraries searched.

use crate::search::{Candidate, LibrarySet, Origin, Search};
use crate::table::{MissingSymbols, SymbolTable};
use std::error::Error as _;
use std::ffi::{c_void, OsString};
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A candidate that was tried and not used, and why.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Attempt {
    /// The path tried.
    pub path: PathBuf,
    /// How it was found.
    pub origin: Origin,
    /// Why it was not used: the loader's message, or "no such file".
    pub reason: String,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}: {})",
            self.path.display(),
            self.origin,
            self.reason
        )
    }
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a symbol table could not be loaded.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum LoadError {
    /// A library that was configured (named by the set's variable, or present under a CANN
    /// home) could not be opened.
    #[error("could not load {what}: {} ({}) could not be opened: {}", .attempt.path.display(), .attempt.origin, .attempt.reason)]
    Unopenable {
        /// What the set provides ("ACL").
        what: &'static str,
        /// The library and the loader's reason.
        attempt: Attempt,
    },
    /// The libraries opened, but no one of them exports these required symbols.
    #[error("could not load {what}: required symbols missing: {}; searched: {}{}", .symbols.join(", "), list(.searched), if .tried.is_empty() { String::new() } else { format!("; also tried: {}", list(.tried)) })]
    MissingSymbols {
        /// What the set provides.
        what: &'static str,
        /// The required symbols that no library exports.
        symbols: Vec<&'static str>,
        /// The libraries searched for them.
        searched: Vec<Searched>,
        /// Candidates that were not there.
        tried: Vec<Attempt>,
    },
    /// A variable of the set is set to nothing, or to a list naming no file: braid refuses
    /// it rather than searching as if it were unset.
    #[error("could not load {what}: {source}")]
    Variable {
        /// What the set provides.
        what: &'static str,
        /// The variable and what is wrong with it.
        source: crate::search::VariableError,
    },
    /// A CANN home variable is set, and no library of the set is there: not under it (nor
    /// under another home, nor on the loader path). A set variable is configuration, so this
    /// is an error naming it, never the "nothing installed" a caller may fall back on.
    #[error("could not load {what}: {} set, but no {what} library is there: tried: {}. Point it at a CANN install (source that install's set_env.sh), name the library with ${env}, or unset {} where no CANN is installed", homes_text(.homes), list(.tried), home_names(.homes))]
    HomeWithoutLibrary {
        /// What the set provides.
        what: &'static str,
        /// The home variables that are set, with their values.
        homes: Vec<(&'static str, PathBuf)>,
        /// The set's own variable, which names the library files explicitly.
        env: &'static str,
        /// Every candidate and why it was not used.
        tried: Vec<Attempt>,
    },
    /// No library of the set is there: nothing is configured or installed.
    #[error("could not load {what}: not found; tried: {}{}", list(.tried), .hint.map(|h| format!(". {h}")).unwrap_or_default())]
    NotFound {
        /// What the set provides.
        what: &'static str,
        /// Every candidate and why it was not used.
        tried: Vec<Attempt>,
        /// What to do about it, where the caller knows ([`LoadError::with_hint`]).
        hint: Option<&'static str>,
    },
}

/// `$ASCEND_HOME_PATH="/x" is` (or `... and $ASCEND_TOOLKIT_HOME="/y" are`).
fn homes_text(homes: &[(&'static str, PathBuf)]) -> String {
    let each: Vec<String> = homes
        .iter()
        .map(|(var, home)| format!("${var}={:?}", home.display().to_string()))
        .collect();
    let verb = if each.len() == 1 { "is" } else { "are" };
    format!("{} {verb}", each.join(" and "))
}

/// `$ASCEND_HOME_PATH` (or `$ASCEND_HOME_PATH and $ASCEND_TOOLKIT_HOME`).
fn home_names(homes: &[(&'static str, PathBuf)]) -> String {
    let names: Vec<String> = homes.iter().map(|(var, _)| format!("${var}")).collect();
    names.join(" and ")
}

/// A library that was opened and searched for symbols.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Searched {
    /// Its path.
    pub path: PathBuf,
    /// How it was found.
    pub origin: Origin,
}

impl fmt::Display for Searched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.origin)
    }
}

impl LoadError {
    /// Whether no library was there at all: the only failure a caller may answer with a
    /// fallback (a configured or broken library is never replaced silently).
    pub fn is_not_found(&self) -> bool {
        matches!(self, LoadError::NotFound { .. })
    }

    /// A [`LoadError::NotFound`] with `hint` (what to do about it) added to its message; any
    /// other error unchanged.
    pub fn with_hint(self, hint: &'static str) -> Self {
        match self {
            LoadError::NotFound { what, tried, .. } => LoadError::NotFound {
                what,
                tried,
                hint: Some(hint),
            },
            other => other,
        }
    }

    /// The required symbols that are missing (empty unless [`LoadError::MissingSymbols`]).
    pub fn missing_symbols(&self) -> &[&'static str] {
        match self {
            LoadError::MissingSymbols { symbols, .. } => symbols,
            _ => &[],
        }
    }

    /// Every path tried: the library that failed, the libraries searched, and the candidates
    /// that were not there.
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            LoadError::Unopenable { attempt, .. } => vec![attempt.path.as_path()],
            LoadError::MissingSymbols {
                searched, tried, ..
            } => searched
                .iter()
                .map(|s| s.path.as_path())
                .chain(tried.iter().map(|a| a.path.as_path()))
                .collect(),
            LoadError::NotFound { tried, .. } | LoadError::HomeWithoutLibrary { tried, .. } => {
                tried.iter().map(|a| a.path.as_path()).collect()
            }
            LoadError::Variable { .. } => Vec::new(),
        }
    }
}

/// An opened library.
struct Opened {
    path: PathBuf,
    origin: Origin,
    library: libloading::Library,
}

/// A resolved symbol table and the libraries its pointers point into. Dropping it unloads
/// them; keep it for as long as the table is used (callers keeping tables for the life of
/// the process leak it).
pub struct Loaded<T> {
    table: T,
    libraries: Vec<Opened>,
}

impl<T> Deref for Loaded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.table
    }
}

impl<T> Loaded<T> {
    /// The libraries the table was resolved from, in search order.
    pub fn libraries(&self) -> Vec<Searched> {
        self.libraries
            .iter()
            .map(|l| Searched {
                path: l.path.clone(),
                origin: l.origin,
            })
            .collect()
    }
}

impl<T: fmt::Debug> fmt::Debug for Loaded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loaded")
            .field("table", &self.table)
            .field("libraries", &self.libraries())
            .finish()
    }
}

/// Whether candidates of `origin` are paths looked at in turn (an absent one is skipped, a
/// present one that does not open is an error), rather than configured (must open) or bare
/// names (the loader searches).
fn is_path_searched(origin: Origin) -> bool {
    matches!(origin, Origin::Home(_) | Origin::Fallback)
}

/// Opens the first of `candidates` that is there, noting in `tried` those that are not.
/// `Ok(None)`: none is there; `Err`: one is there and does not open.
fn open_first(
    candidates: &[Candidate],
    tried: &mut Vec<Attempt>,
) -> Result<Option<Opened>, Attempt> {
    for candidate in candidates {
        match open(candidate) {
            Ok(library) => return Ok(Some(library)),
            Err(attempt) if is_path_searched(candidate.origin) && candidate.path.exists() => {
                return Err(attempt)
            }
            Err(attempt) => tried.push(attempt),
        }
    }
    Ok(None)
}

/// Opens `candidate`, or says why it could not be.
fn open(candidate: &Candidate) -> Result<Opened, Attempt> {
    let attempt = |reason: String| Attempt {
        path: candidate.path.clone(),
        origin: candidate.origin,
        reason,
    };
    if is_path_searched(candidate.origin) && !candidate.path.exists() {
        return Err(attempt("no such file".to_string()));
    }
    // SAFETY: opening a shared library runs its initializers; the libraries of a set (CANN's,
    // or braid-acl-sim, which exports the same API) are designed to be loaded this way.
    match unsafe { libloading::Library::new(&candidate.path) } {
        Ok(library) => Ok(Opened {
            path: candidate.path.clone(),
            origin: candidate.origin,
            library,
        }),
        // The loader's own text (`dlerror`) is the source; libloading's message only says
        // which call failed.
        Err(e) => Err(attempt(
            e.source().map_or_else(|| e.to_string(), |s| s.to_string()),
        )),
    }
}

/// Resolves `T` from `libraries`: each symbol from the first library that exports it.
fn resolve<T: SymbolTable>(
    what: &'static str,
    libraries: Vec<Opened>,
    tried: Vec<Attempt>,
) -> Result<Loaded<T>, LoadError> {
    let lookup = |name: &'static str| {
        libraries
            .iter()
            .find_map(|l| {
                // SAFETY: only the symbol's address is read; it is called only through the
                // table, whose signature for this name is the C API's.
                unsafe { l.library.get::<*mut c_void>(name) }
                    .ok()
                    .map(|s| *s)
            })
            .unwrap_or(std::ptr::null_mut())
    };
    // SAFETY: each address is the C function of that name in a library of the set, which
    // declares it with the table's signature; the libraries stay loaded inside `Loaded`.
    match unsafe { T::resolve(lookup) } {
        Ok(table) => Ok(Loaded { table, libraries }),
        Err(MissingSymbols(symbols)) => Err(LoadError::MissingSymbols {
            what,
            symbols,
            searched: libraries
                .iter()
                .map(|l| Searched {
                    path: l.path.clone(),
                    origin: l.origin,
                })
                .collect(),
            tried,
        }),
    }
}

impl LibrarySet {
    /// Loads `T` from this set under the environment `env` (pass `|k| std::env::var_os(k)`),
    /// with the rules of the [module](self).
    pub fn load<T: SymbolTable>(
        &self,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Loaded<T>, LoadError> {
        let what = self.what;
        let search = self
            .search(&env)
            .map_err(|source| LoadError::Variable { what, source })?;
        match search {
            Search::Explicit(candidates) => {
                let libraries = candidates
                    .iter()
                    .map(open)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|attempt| LoadError::Unopenable { what, attempt })?;
                resolve(what, libraries, Vec::new())
            }
            Search::Installed(names) => {
                let mut libraries = Vec::new();
                let mut tried = Vec::new();
                for (_, candidates) in names {
                    if let Some(library) = open_first(&candidates, &mut tried)
                        .map_err(|attempt| LoadError::Unopenable { what, attempt })?
                    {
                        libraries.push(library);
                    }
                }
                if libraries.is_empty() {
                    let homes = crate::search::homes(&env);
                    if !homes.is_empty() {
                        return Err(LoadError::HomeWithoutLibrary {
                            what,
                            homes,
                            env: self.env,
                            tried,
                        });
                    }
                    return Err(LoadError::NotFound {
                        what,
                        tried,
                        hint: None,
                    });
                }
                resolve(what, libraries, tried)
            }
        }
    }
}

/// Loads `T` from the first of `candidates` that is there (one library; the rules of the
/// [module](self) by each candidate's origin). `what` names the API in errors.
pub fn load_first<T: SymbolTable>(
    what: &'static str,
    candidates: &[Candidate],
) -> Result<Loaded<T>, LoadError> {
    let mut tried = Vec::new();
    match open_first(candidates, &mut tried)
        .map_err(|attempt| LoadError::Unopenable { what, attempt })?
    {
        Some(library) => resolve(what, vec![library], tried),
        None => Err(LoadError::NotFound {
            what,
            tried,
            hint: None,
        }),
    }
}

/// Loads `T` from exactly `paths` (each must open; a symbol comes from the first that
/// exports it). `what` names the API in errors.
pub fn load_from<T: SymbolTable>(
    what: &'static str,
    paths: &[&Path],
) -> Result<Loaded<T>, LoadError> {
    let libraries = paths
        .iter()
        .map(|path| {
            open(&Candidate {
                path: path.to_path_buf(),
                origin: Origin::Given,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|attempt| LoadError::Unopenable { what, attempt })?;
    resolve(what, libraries, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::AclFunctions;
    use crate::search::tests::env_of;

    const ACL: LibrarySet = LibrarySet {
        what: "ACL",
        env: "BRAID_ACL_LIB",
        names: &["libbraid_no_such_library.so"],
    };

    /// A scratch directory of this test process.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("braid-acl-sys-{}-{name}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib64")).unwrap();
        dir
    }

    /// The C library: it opens everywhere and exports none of ACL's symbols.
    fn libc() -> &'static str {
        [
            "libc.so.6",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/libc.so.6",
        ]
        .into_iter()
        .find(|p| {
            load_from::<AclFunctions>("ACL", &[Path::new(p)])
                .is_err_and(|e| !e.missing_symbols().is_empty())
        })
        .expect("the C library opens")
    }

    #[test]
    fn an_explicit_library_that_does_not_open_is_an_error_with_the_loaders_reason() {
        let env = env_of(&[("BRAID_ACL_LIB", "/nonexistent/libascendcl.so")]);
        let err = ACL.load::<AclFunctions>(env).unwrap_err();
        assert!(!err.is_not_found(), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("/nonexistent/libascendcl.so"), "{text}");
        assert!(text.contains("$BRAID_ACL_LIB"), "{text}");
        // dlerror's own text, not only "dlopen failed".
        assert!(text.contains("No such file or directory"), "{text}");
        assert_eq!(err.paths(), vec![Path::new("/nonexistent/libascendcl.so")]);
    }

    #[test]
    fn an_explicit_library_without_the_symbols_is_an_error_naming_them_and_it() {
        let env = env_of(&[("BRAID_ACL_LIB", libc())]);
        let err = ACL.load::<AclFunctions>(env).unwrap_err();
        let required: Vec<&str> = <AclFunctions as SymbolTable>::SYMBOLS
            .iter()
            .filter(|s| s.required)
            .map(|s| s.name)
            .collect();
        assert_eq!(err.missing_symbols(), required.as_slice());
        let text = err.to_string();
        assert!(
            text.contains("required symbols missing: aclInit, "),
            "{text}"
        );
        assert!(
            text.contains(&format!("searched: {} (named by $BRAID_ACL_LIB)", libc())),
            "{text}"
        );
    }

    #[test]
    fn a_library_present_under_a_cann_home_that_does_not_open_is_an_error() {
        let home = scratch("broken-home");
        let lib = home.join("lib64").join(ACL.names[0]);
        std::fs::write(&lib, b"not an ELF file").unwrap();
        let env = env_of(&[("ASCEND_HOME_PATH", home.to_str().unwrap())]);
        let err = ACL.load::<AclFunctions>(env).unwrap_err();
        match &err {
            LoadError::Unopenable { attempt, .. } => {
                assert_eq!(attempt.path, lib);
                assert_eq!(attempt.origin, Origin::Home("ASCEND_HOME_PATH"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("under $ASCEND_HOME_PATH"), "{err}");
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn nothing_there_is_not_found_listing_every_candidate() {
        let err = ACL.load::<AclFunctions>(env_of(&[])).unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
        assert_eq!(err.paths(), vec![Path::new(ACL.names[0])]);
        // The loader's reason for the bare name.
        let text = err.to_string();
        assert!(text.contains("libbraid_no_such_library.so (on the loader path: libbraid_no_such_library.so: cannot open shared object file"), "{text}");
    }

    #[test]
    fn a_cann_home_without_the_library_is_an_error_naming_it_not_nothing_found() {
        let home = scratch("empty-home");
        let toolkit = scratch("empty-toolkit");
        for env in [
            env_of(&[("ASCEND_HOME_PATH", home.to_str().unwrap())]),
            env_of(&[
                ("ASCEND_HOME_PATH", home.to_str().unwrap()),
                ("ASCEND_TOOLKIT_HOME", toolkit.to_str().unwrap()),
            ]),
        ] {
            let err = ACL.load::<AclFunctions>(env).unwrap_err();
            // A set home is configuration: never the "nothing installed" a caller falls back on.
            assert!(!err.is_not_found(), "{err:?}");
            assert!(
                matches!(err, LoadError::HomeWithoutLibrary { .. }),
                "{err:?}"
            );
            let text = err.to_string();
            assert!(
                text.contains(&format!("$ASCEND_HOME_PATH={:?}", home.to_str().unwrap())),
                "{text}"
            );
            assert!(
                text.contains(&format!(
                    "{} (under $ASCEND_HOME_PATH: no such file)",
                    home.join("lib64").join(ACL.names[0]).display()
                )),
                "{text}"
            );
            assert!(text.contains("$BRAID_ACL_LIB"), "{text}");
            assert_eq!(err.paths()[0], home.join("lib64").join(ACL.names[0]));
            assert_eq!(err.paths().last(), Some(&Path::new(ACL.names[0])));
        }
        // Both homes set, the second one wrong: named too.
        let err = ACL
            .load::<AclFunctions>(env_of(&[
                ("ASCEND_HOME_PATH", home.to_str().unwrap()),
                ("ASCEND_TOOLKIT_HOME", toolkit.to_str().unwrap()),
            ]))
            .unwrap_err();
        assert!(err.to_string().contains("$ASCEND_TOOLKIT_HOME="), "{err}");
        // The explicit variable still comes first: the homes are not looked at.
        let err = ACL
            .load::<AclFunctions>(env_of(&[
                ("BRAID_ACL_LIB", "/nonexistent/libascendcl.so"),
                ("ASCEND_HOME_PATH", home.to_str().unwrap()),
            ]))
            .unwrap_err();
        assert!(matches!(err, LoadError::Unopenable { .. }), "{err:?}");
        std::fs::remove_dir_all(home).unwrap();
        std::fs::remove_dir_all(toolkit).unwrap();
    }

    /// A table over two C libraries: `strlen` is in libc, `cos` in libm only.
    mod two_libraries {
        use std::ffi::c_char;
        crate::c_api! {
            /// Test table.
            pub struct StringAndMath;
            /// `size_t strlen(const char *)`.
            required fn strlen(s: *const c_char) -> usize;
            /// `double cos(double)`.
            required fn cos(x: f64) -> f64;
            /// Exported by neither.
            optional fn braidNoSuchFunction() -> i32;
        }
    }

    #[test]
    fn each_symbol_comes_from_the_first_library_of_the_set_that_exports_it() {
        use two_libraries::StringAndMath;
        let both = load_from::<StringAndMath>("test", &[Path::new(libc()), Path::new("libm.so.6")])
            .expect("strlen from libc, cos from libm");
        // SAFETY: a NUL-terminated string; a plain double.
        let (len, one) = unsafe { ((both.strlen)(c"four".as_ptr()), (both.cos)(0.0)) };
        assert_eq!((len, one), (4, 1.0));
        assert_eq!(both.missing_optional(), vec!["braidNoSuchFunction"]);
        assert_eq!(both.libraries().len(), 2);

        // libc alone lacks cos: the symbol and the library searched are named.
        let err = load_from::<StringAndMath>("test", &[Path::new(libc())]).unwrap_err();
        assert_eq!(err.missing_symbols(), ["cos"]);
        assert!(
            err.to_string().contains(&format!(
                "required symbols missing: cos; searched: {} (given)",
                libc()
            )),
            "{err}"
        );
    }
}
