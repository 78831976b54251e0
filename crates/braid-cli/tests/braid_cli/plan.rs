//! `braid plan` from the built binary: the figures name their profile, each mode says what it
//! sits against, the link bound matches the overlapped step when the links set the pace, and
//! bad requests are errors naming what is wrong.

use crate::common;

use common::{braid, failed, succeeded};
use std::process::Output;

fn plan(args: &[&str]) -> Output {
    braid().arg("plan").args(args).output().expect("runs")
}

fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn a_prefill_step_names_the_profile_and_sits_against_the_links_when_overlapped() {
    let text = succeeded(&plan(&[
        "--devices",
        "4",
        "--layers",
        "2",
        "--batch",
        "1",
        "--seq-len",
        "2048",
    ]));
    assert!(
        text.starts_with("braid plan, simulated with profile atlas-800t-a2:"),
        "{text}"
    );
    let result = text.lines().last().unwrap();
    assert!(
        result.starts_with("RESULT profile=atlas-800t-a2 devices=4 "),
        "{result}"
    );
    let (serial, overlap) = (field(result, "serial_us"), field(result, "overlap_us"));
    assert!(overlap < serial, "{result}");
    let overlapped = text
        .lines()
        .find(|l| l.starts_with("all-reduce overlapped on its own stream"))
        .unwrap();
    assert!(overlapped.contains("link ("), "{overlapped}");
    // The links' time alone is within a few percent of the overlapped step.
    let bounds = text
        .lines()
        .find(|l| l.starts_with("one device's step"))
        .unwrap();
    let link: f64 = bounds
        .split("link ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (link - overlap).abs() / overlap < 0.05,
        "{link} vs {overlap}"
    );
}

#[test]
fn a_small_decode_batch_is_host_bound_eagerly_and_the_graph_wins() {
    let text = succeeded(&plan(&[
        "--devices",
        "4",
        "--layers",
        "4",
        "--batch",
        "32",
        "--seq-len",
        "1",
    ]));
    let result = text.lines().last().unwrap();
    let graph = field(result, "graph_us");
    assert!(graph < field(result, "serial_us") && graph < field(result, "overlap_us"));
    assert!(text.contains("host launches"), "{text}");
}

#[test]
fn bad_requests_are_errors_naming_what_is_wrong() {
    assert!(failed(&plan(&["--devices", "1"])).contains("--devices 1"));
    let gpu = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../backend-sim/profiles/generic_gpu.json"
    );
    assert!(failed(&plan(&["--profile", gpu])).contains("describes no node"));
    assert!(failed(&plan(&["--profile", "/nonexistent/profile.json"]))
        .contains("/nonexistent/profile.json"));
}

/// An error names the flags and the rule in the command's terms: no Rust struct, no internal
/// field name.
#[track_caller]
fn refused_in_user_terms(args: &[&str], wants: &[&str]) {
    let err = failed(&plan(args));
    for want in wants {
        assert!(err.contains(want), "{args:?}: no {want:?} in {err}");
    }
    assert!(
        !err.contains("Shape {") && !err.contains("batch: "),
        "{args:?}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
}

#[test]
fn a_zero_size_is_refused_naming_its_flag() {
    for flag in [
        "--batch",
        "--seq-len",
        "--layers",
        "--hidden",
        "--ffn",
        "--micro-batches",
    ] {
        refused_in_user_terms(&[flag, "0"], &[&format!("{flag} 0"), "at least 1"]);
    }
}

#[test]
fn sizes_that_do_not_split_name_the_flags_and_the_rule() {
    refused_in_user_terms(
        &["--devices", "3"],
        &["--hidden 4096", "--devices 3", "multiple of"],
    );
    refused_in_user_terms(
        &["--devices", "4", "--ffn", "11010"],
        &["--ffn 11010", "--devices 4", "multiple of"],
    );
    refused_in_user_terms(
        &["--batch", "3", "--seq-len", "1", "--micro-batches", "2"],
        &[
            "--batch 3",
            "--seq-len 1",
            "3 tokens",
            "--micro-batches 2",
            "multiple of",
        ],
    );
    refused_in_user_terms(
        &["--batch", "65536", "--seq-len", "65536"],
        &["--batch 65536", "--seq-len 65536", "tokens"],
    );
}
