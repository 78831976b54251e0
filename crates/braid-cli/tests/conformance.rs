//! `braid conformance` from the built binary: with no CANN configured it runs the suite
//! through `libbraid_acl_sim.so` (built beside the binary with braid-cli) and prints every case
//! with a summary line; a library that does not load is an error and a non-zero exit.

use braid_conformance::{CASES, COLLECTIVE_CASES};
use std::process::{Command, Output};

fn conformance(vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("conformance")
        .env_remove("BRAID_ACL_LIB")
        .env_remove("ASCEND_HOME_PATH")
        .env_remove("ASCEND_TOOLKIT_HOME")
        .env_remove("BRAID_ACL_SIM_TIMING_ONLY")
        .envs(vars.iter().copied())
        .output()
        .expect("runs")
}

#[test]
fn the_suite_passes_through_braid_acl_sim_and_every_case_has_a_row() {
    let out = conformance(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let title = text.lines().next().unwrap();
    assert!(
        title.contains("libbraid_acl_sim.so") && title.contains("braid-acl-sim"),
        "{title}"
    );
    for case in CASES.iter().chain(COLLECTIVE_CASES) {
        assert!(
            text.lines()
                .any(|l| l.starts_with(case) && l.trim_end().ends_with("pass")),
            "no passing row for {case}:\n{text}"
        );
    }
    let total = CASES.len() + COLLECTIVE_CASES.len();
    let summary = text.lines().last().unwrap();
    assert!(
        summary.starts_with(&format!("{total} cases: {total} passed, 0 failed (")),
        "{summary}"
    );
}

#[test]
fn a_library_that_does_not_load_is_an_error_naming_it_and_a_failing_exit() {
    let out = conformance(&[("BRAID_ACL_LIB", "/nonexistent/libascendcl.so")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/libascendcl.so"), "{err}");
    assert!(out.stdout.is_empty(), "nothing ran");
}
