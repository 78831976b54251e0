//! The layout of the workspace's integration tests (ARCHITECTURE.md, "Tests"): one test binary
//! per crate, `tests/<crate>/main.rs`, with a module per subject, so that cargo compiles and
//! links one binary per crate instead of one per file. A file of a crate's test directory that
//! `main.rs` does not declare would never be compiled, and a new file at `tests/*.rs` would be
//! a binary of its own: both fail here.

use std::path::{Path, PathBuf};

/// The test files that are binaries of their own, each with the reason.
const OWN_BINARIES: &[(&str, &str)] = &[
    (
        "crates/acl-sim/tests/client_startup.rs",
        "asks for memory information before any device of the process is set, and resets devices",
    ),
    (
        "crates/backend-acl/tests/acl_sim_mixed_modes.rs",
        "sets braid-acl-sim's settings, which it reads once per process",
    ),
    (
        "crates/backend-acl/tests/loading.rs",
        "sets BRAID_ACL_LIB, which the backend reads once per process",
    ),
    (
        "crates/backend-acl/tests/sim_settings.rs",
        "sets braid-acl-sim's settings, which it reads once per process",
    ),
    (
        "crates/backend-sim/tests/host_budget.rs",
        "the host-memory budget's ledger is the process's",
    ),
    (
        "crates/backend-sim/tests/threads_env.rs",
        "sets BRAID_SIM_THREADS, which every device reads when it is made",
    ),
    (
        "crates/backend-sim/tests/resident/main.rs",
        "measures the process's resident set",
    ),
    (
        "crates/braid/tests/report_main.rs",
        "a program with its own `main` (harness = false)",
    ),
    (
        "crates/collective/tests/tracing.rs",
        "installs the process's tracing subscriber",
    ),
    (
        "crates/conformance/tests/model_check.rs",
        "built only with the `model-check` feature (shuttle's locks)",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.expect("an entry").path()).collect())
        .unwrap_or_default();
    all.sort();
    all
}

/// The modules `main` declares (`mod name;` lines, attributes allowed before them).
fn declared(main: &Path) -> Vec<String> {
    std::fs::read_to_string(main)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect()
}

#[test]
fn each_crate_has_one_test_binary_and_every_test_file_is_in_it() {
    let root = root();
    let mut errors = Vec::new();
    let mut own_seen = Vec::new();
    for krate in entries(&root.join("crates")) {
        let tests = krate.join("tests");
        let relative = |p: &Path| {
            p.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        };
        let binary = krate
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('-', "_");
        for entry in entries(&tests) {
            let name = entry.file_name().unwrap().to_string_lossy().into_owned();
            if entry.is_dir() {
                let main = entry.join("main.rs");
                if !main.exists() {
                    continue;
                }
                if name != binary {
                    if OWN_BINARIES.iter().any(|(f, _)| *f == relative(&main)) {
                        own_seen.push(relative(&main));
                    } else {
                        errors.push(format!(
                            "{}: a second test binary; the crate's is tests/{binary}/main.rs",
                            relative(&main)
                        ));
                    }
                }
                let mods = declared(&main);
                for file in entries(&entry) {
                    let module = file.file_stem().unwrap().to_string_lossy().into_owned();
                    let is_module =
                        file.extension().is_some_and(|e| e == "rs") || file.join("mod.rs").exists();
                    if is_module && module != "main" && !mods.contains(&module) {
                        errors.push(format!(
                            "{}: not declared in {} (`mod {module};`), so never compiled",
                            relative(&file),
                            relative(&main)
                        ));
                    }
                }
            } else if name.ends_with(".rs") {
                if OWN_BINARIES.iter().any(|(f, _)| *f == relative(&entry)) {
                    own_seen.push(relative(&entry));
                } else {
                    errors.push(format!(
                        "{}: a test binary of its own; move it to tests/{binary}/ and add \
                         `mod {};` to tests/{binary}/main.rs (or list it in OWN_BINARIES \
                         with the reason)",
                        relative(&entry),
                        name.trim_end_matches(".rs")
                    ));
                }
            }
        }
    }
    for (file, _) in OWN_BINARIES {
        if !own_seen.iter().any(|f| f == file) {
            errors.push(format!("OWN_BINARIES lists {file}, which is not there"));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
