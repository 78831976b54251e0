//! Where a set of libraries is looked for: an explicit environment variable first, then
//! `lib64/<name>` under the CANN homes, then `<name>` on the loader path.
//!
//! This is only the list of candidates (no library is opened here); the loader (feature
//! `loader`) opens them with the rules of [`LibrarySet`].
//!
//! **Empty variables.** braid's rule for every `BRAID_*` variable: unset means the default;
//! set means that value, honoured or refused by name. A variable set to nothing (or blanks) is
//! refused ([`VariableError`]), never read as "unset": `BRAID_ACL_LIB=` does not quietly fall
//! back to braid-acl-sim. [`variable`] applies the rule; [`check_variables`] applies it to
//! every variable of the ACL family at once ([`VARIABLES`]).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// The variables a CANN install sets (`set_env.sh`) to its root, searched in this order for
/// `lib64/<name>`.
pub const HOME_VARS: [&str; 2] = ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"];

/// The variables that name libraries of the ACL family: ACL, aclnn's descriptors and
/// operators, HCCL.
pub const VARIABLES: [&str; 4] = [
    crate::acl::LIB_ENV,
    crate::aclnn::DESCRIPTOR_LIB_ENV,
    crate::aclnn::OPERATOR_LIBS_ENV,
    crate::hccl::LIB_ENV,
];

/// A `BRAID_*` variable whose value braid cannot use: set but empty, or a library list that
/// names no file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VariableError {
    /// The variable.
    pub variable: &'static str,
    /// Its value, as set.
    pub value: String,
    /// What is wrong and what to do.
    pub reason: &'static str,
}

impl fmt::Display for VariableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${}={:?}: {}", self.variable, self.value, self.reason)
    }
}

impl std::error::Error for VariableError {}

/// The value of `name` under `env`, by braid's rule: `None` when unset, the value when set,
/// and a [`VariableError`] naming it when it is set to nothing or only blanks.
pub fn variable(
    env: impl Fn(&str) -> Option<OsString>,
    name: &'static str,
) -> Result<Option<OsString>, VariableError> {
    match env(name) {
        Some(value) if value.to_string_lossy().trim().is_empty() => Err(VariableError {
            variable: name,
            value: value.to_string_lossy().into_owned(),
            reason: "set but empty: unset it for the default search, or give a value",
        }),
        other => Ok(other),
    }
}

/// Applies [`variable`]'s rule to every variable of [`VARIABLES`]: the first one set but
/// empty is the error.
pub fn check_variables(env: impl Fn(&str) -> Option<OsString>) -> Result<(), VariableError> {
    VARIABLES
        .iter()
        .try_for_each(|name| variable(&env, name).map(drop))
}

/// The CANN homes set under `env`, in [`HOME_VARS`] order (a variable set to nothing is not
/// a home).
pub fn homes(env: impl Fn(&str) -> Option<OsString>) -> Vec<(&'static str, PathBuf)> {
    HOME_VARS
        .iter()
        .filter_map(|var| {
            env(var)
                .filter(|v| !v.is_empty())
                .map(|home| (*var, PathBuf::from(home)))
        })
        .collect()
}

/// A set of libraries one symbol table is resolved from.
///
/// - When the variable [`env`](Self::env) is set, it lists the library files (paths
///   separated as in `PATH`, `:` on Unix) and only those are used: each must open, and the
///   table must resolve from them. Nothing else is tried. Set to nothing, or to a list that
///   names no file (`:`), it is a [`VariableError`] (see the module's rule).
/// - Otherwise each of [`names`](Self::names) is looked for as `lib64/<name>` under each of
///   [`HOME_VARS`] that is set, then as `<name>` on the loader path; the first that opens is
///   used. A symbol may come from any of the libraries found (aclnn's operators are in
///   `libopapi.so` on older CANN releases and split across `libopapi_math.so`,
///   `libopapi_nn.so`, ... on newer ones). A home that is set is configuration: when no
///   library of the set is found anywhere while one is set, the loader's error names it
///   rather than reporting that nothing is installed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LibrarySet {
    /// What the libraries provide, for messages ("ACL", "aclnn", "HCCL").
    pub what: &'static str,
    /// The environment variable that names the library files explicitly.
    pub env: &'static str,
    /// The library file names searched when the variable is not set.
    pub names: &'static [&'static str],
}

/// How a candidate library was found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Origin {
    /// Named by this environment variable: configured explicitly.
    Env(&'static str),
    /// `lib64/<name>` under the CANN home this variable names.
    Home(&'static str),
    /// A bare file name, found by the dynamic loader's own search (`LD_LIBRARY_PATH`, ...).
    LoaderPath,
    /// A path the caller gave.
    Given,
    /// A fallback the caller tries when nothing is configured or installed (braid-acl-sim
    /// next to the executable).
    Fallback,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env(var) => write!(f, "named by ${var}"),
            Origin::Home(var) => write!(f, "under ${var}"),
            Origin::LoaderPath => write!(f, "on the loader path"),
            Origin::Given => write!(f, "given"),
            Origin::Fallback => write!(f, "fallback, as nothing is configured"),
        }
    }
}

/// One place a library may be.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Candidate {
    /// The path (a bare file name for [`Origin::LoaderPath`]).
    pub path: PathBuf,
    /// How it was found.
    pub origin: Origin,
}

/// The candidates of a [`LibrarySet`] under one environment.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Search {
    /// The variable named these files: each must open, and nothing else is tried.
    Explicit(Vec<Candidate>),
    /// Per library name, its candidates in order: the first that opens is used.
    Installed(Vec<(&'static str, Vec<Candidate>)>),
}

impl LibrarySet {
    /// The candidates under the environment `env` (pass `|k| std::env::var_os(k)`), or the
    /// error of a variable set to nothing or to a list naming no file.
    pub fn search(&self, env: impl Fn(&str) -> Option<OsString>) -> Result<Search, VariableError> {
        if let Some(value) = variable(&env, self.env)? {
            let candidates: Vec<Candidate> = std::env::split_paths(&value)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|path| Candidate {
                    path,
                    origin: Origin::Env(self.env),
                })
                .collect();
            if candidates.is_empty() {
                return Err(VariableError {
                    variable: self.env,
                    value: value.to_string_lossy().into_owned(),
                    reason: "names no library file: give the paths of the libraries, \
                             separated by ':'",
                });
            }
            return Ok(Search::Explicit(candidates));
        }
        let homes = homes(&env);
        Ok(Search::Installed(
            self.names
                .iter()
                .map(|name| {
                    let mut candidates: Vec<Candidate> = Vec::new();
                    for (var, home) in &homes {
                        let path = home.join("lib64").join(name);
                        if !candidates.iter().any(|c| c.path == path) {
                            candidates.push(Candidate {
                                path,
                                origin: Origin::Home(var),
                            });
                        }
                    }
                    candidates.push(Candidate {
                        path: PathBuf::from(name),
                        origin: Origin::LoaderPath,
                    });
                    (*name, candidates)
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An environment of `pairs` only.
    pub(crate) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, OsString)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        }
    }

    const OPS: LibrarySet = LibrarySet {
        what: "aclnn",
        env: "BRAID_ACLNN_LIBS",
        names: &["libnnopbase.so", "libopapi.so"],
    };

    fn candidate(path: &str, origin: Origin) -> Candidate {
        Candidate {
            path: PathBuf::from(path),
            origin,
        }
    }

    #[test]
    fn an_explicit_variable_is_all_that_is_searched() {
        let env = env_of(&[
            ("BRAID_ACLNN_LIBS", "/a/libnnopbase.so:/b/libopapi_math.so"),
            ("ASCEND_HOME_PATH", "/usr/local/Ascend/latest"),
        ]);
        assert_eq!(
            OPS.search(env).unwrap(),
            Search::Explicit(vec![
                candidate("/a/libnnopbase.so", Origin::Env("BRAID_ACLNN_LIBS")),
                candidate("/b/libopapi_math.so", Origin::Env("BRAID_ACLNN_LIBS")),
            ])
        );
    }

    #[test]
    fn without_it_each_name_is_searched_under_the_cann_homes_then_on_the_loader_path() {
        let env = env_of(&[
            ("ASCEND_HOME_PATH", "/usr/local/Ascend/latest"),
            ("ASCEND_TOOLKIT_HOME", "/opt/toolkit"),
        ]);
        let home = Origin::Home("ASCEND_HOME_PATH");
        let toolkit = Origin::Home("ASCEND_TOOLKIT_HOME");
        assert_eq!(
            OPS.search(env).unwrap(),
            Search::Installed(vec![
                (
                    "libnnopbase.so",
                    vec![
                        candidate("/usr/local/Ascend/latest/lib64/libnnopbase.so", home),
                        candidate("/opt/toolkit/lib64/libnnopbase.so", toolkit),
                        candidate("libnnopbase.so", Origin::LoaderPath),
                    ]
                ),
                (
                    "libopapi.so",
                    vec![
                        candidate("/usr/local/Ascend/latest/lib64/libopapi.so", home),
                        candidate("/opt/toolkit/lib64/libopapi.so", toolkit),
                        candidate("libopapi.so", Origin::LoaderPath),
                    ]
                ),
            ])
        );
        // The same home twice is searched once; no home: the loader path only.
        let same = env_of(&[("ASCEND_HOME_PATH", "/h"), ("ASCEND_TOOLKIT_HOME", "/h")]);
        let Ok(Search::Installed(names)) = OPS.search(same) else {
            panic!("no explicit variable")
        };
        assert_eq!(names[0].1.len(), 2);
        assert_eq!(
            OPS.search(env_of(&[])).unwrap(),
            Search::Installed(vec![
                (
                    "libnnopbase.so",
                    vec![candidate("libnnopbase.so", Origin::LoaderPath)]
                ),
                (
                    "libopapi.so",
                    vec![candidate("libopapi.so", Origin::LoaderPath)]
                ),
            ])
        );
    }

    #[test]
    fn a_variable_set_to_nothing_is_refused_by_name_never_read_as_unset() {
        for value in ["", "  "] {
            let err = OPS
                .search(env_of(&[
                    ("BRAID_ACLNN_LIBS", value),
                    ("ASCEND_HOME_PATH", "/h"),
                ]))
                .unwrap_err();
            assert_eq!(
                (err.variable, err.value.as_str()),
                ("BRAID_ACLNN_LIBS", value)
            );
            let text = err.to_string();
            assert!(
                text.starts_with("$BRAID_ACLNN_LIBS=") && text.contains("set but empty: unset it"),
                "{text}"
            );
        }
        // A list naming no file is refused too.
        let err = OPS
            .search(env_of(&[("BRAID_ACLNN_LIBS", "::")]))
            .unwrap_err();
        assert!(err.to_string().contains("names no library file"), "{err}");
        // Every variable of the family, one rule.
        for name in VARIABLES {
            let err = check_variables(env_of(&[(name, "")])).unwrap_err();
            assert_eq!(err.variable, name);
        }
        check_variables(env_of(&[("BRAID_ACL_LIB", "/x/libascendcl.so")])).unwrap();
        assert_eq!(variable(env_of(&[]), "BRAID_ACL_LIB"), Ok(None));
    }

    #[test]
    fn origins_say_where_a_library_came_from() {
        assert_eq!(
            Origin::Env("BRAID_ACL_LIB").to_string(),
            "named by $BRAID_ACL_LIB"
        );
        assert_eq!(
            Origin::Home("ASCEND_HOME_PATH").to_string(),
            "under $ASCEND_HOME_PATH"
        );
        assert_eq!(Origin::LoaderPath.to_string(), "on the loader path");
    }
}
