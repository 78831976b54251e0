//! `braid plan` from the built binary: the figures name their profile, each mode says what it
//! sits against, the link bound matches the overlapped step when the links set the pace, and
//! bad requests are errors naming what is wrong.

use std::process::{Command, Output};

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("plan")
        .args(args)
        .output()
        .expect("runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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
    let text = stdout(&plan(&[
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
    let text = stdout(&plan(&[
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
    let out = plan(&["--devices", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--devices 1"));
    let gpu = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../backend-sim/profiles/generic_gpu.json"
    );
    let out = plan(&["--profile", gpu]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("describes no node"));
    let out = plan(&["--profile", "/nonexistent/profile.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/profile.json"));
}
