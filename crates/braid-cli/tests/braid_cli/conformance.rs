//! `braid conformance` from the built binary: with no CANN configured it runs the suite
//! through `libbraid_acl_sim.so` (built beside the binary with braid-cli) and prints every case
//! with a summary line; a library that does not load is an error and a non-zero exit.

use crate::common;

use braid_conformance::{CASES, COLLECTIVE_CASES};
use common::{braid, failed, succeeded};
use std::process::Output;

fn conformance(vars: &[(&str, &str)]) -> Output {
    braid()
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
    let text = succeeded(&conformance(&[]));
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
        summary.starts_with(&format!(
            "{total} cases: {total} passed, 0 failed, 0 skipped ("
        )),
        "{summary}"
    );
}

#[test]
fn a_library_that_does_not_load_is_an_error_naming_it_and_a_failing_exit() {
    let out = conformance(&[("BRAID_ACL_LIB", "/nonexistent/libascendcl.so")]);
    let err = failed(&out);
    assert!(err.contains("/nonexistent/libascendcl.so"), "{err}");
    assert!(out.stdout.is_empty(), "nothing ran");
}

#[test]
fn cases_needing_more_devices_than_the_machine_has_are_skipped_naming_the_count() {
    let text = succeeded(&conformance(&[("BRAID_ACL_SIM_DEVICES", "2")]));
    let skipped: Vec<&str> = text.lines().filter(|l| l.contains("  skip: ")).collect();
    assert!(!skipped.is_empty(), "{text}");
    for row in &skipped {
        assert!(
            row.contains("needs 3 devices") || row.contains("needs 4 devices"),
            "{row}"
        );
        assert!(row.contains("this machine has 2"), "{row}");
    }
    assert!(!text.contains("FAIL"), "{text}");
    let total = CASES.len() + COLLECTIVE_CASES.len();
    let summary = text.lines().last().unwrap();
    let passed = total - skipped.len();
    assert!(
        summary.starts_with(&format!(
            "{total} cases: {passed} passed, 0 failed, {} skipped (",
            skipped.len()
        )),
        "{summary}"
    );
}
