//! `braid trace replay` on files that need no real trace: errors that name the file, a pickle
//! that is not a snapshot, and which allocator configuration wins.

use crate::common;

use braid_trace::{Action, Snapshot, TraceEvent};
use common::{braid, failed, succeeded};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

/// `braid trace replay ARGS` with `env` set and no `BRAID_ALLOC_CONF` unless `env` sets it.
fn replay(args: &[&str], env: &[(&str, &str)]) -> Output {
    replay_runs("1", args, env)
}

/// [`replay`] with `--runs RUNS`.
fn replay_runs(runs: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = braid();
    command
        .args(["trace", "replay", "--runs", runs])
        .args(args)
        .env_remove("BRAID_ALLOC_CONF")
        .env_remove("RUST_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("runs")
}

/// A file of this test process under the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("braid-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).expect("temp file written");
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// A small snapshot, in a file of its own named after `test`: two allocations on the default
/// stream, one freed.
fn snapshot(test: &str) -> TempFile {
    let snap = Snapshot {
        device_traces: vec![vec![
            TraceEvent::new(Action::Alloc, 0x1000, 4 << 20, 0),
            TraceEvent::new(Action::Alloc, 0x900000, 1024, 0),
            TraceEvent::new(Action::FreeRequested, 0x1000, 4 << 20, 0),
        ]],
        ..Snapshot::default()
    };
    TempFile::new(&format!("{test}.pickle"), &snap.to_pickle().unwrap())
}

#[test]
fn a_missing_file_is_named() {
    let msg = failed(&replay(&["/nonexistent/x.pickle"], &[]));
    assert!(msg.starts_with("braid: /nonexistent/x.pickle: "), "{msg}");
}

#[test]
fn a_pickle_that_is_not_a_snapshot_is_an_error_saying_what_is_missing() {
    let dict = BTreeMap::from([("a", 1)]);
    let file = TempFile::new(
        "not-a-snapshot.pickle",
        &serde_pickle::to_vec(&dict, serde_pickle::SerOptions::new()).unwrap(),
    );
    let out = replay(&[file.path()], &[]);
    let msg = failed(&out);
    assert!(
        msg.contains(file.path())
            && msg.contains("not a PyTorch memory snapshot")
            && msg.contains("`segments`")
            && msg.contains("`device_traces`"),
        "{msg}"
    );
    assert!(out.stdout.is_empty(), "no table");
}

#[test]
fn braid_alloc_conf_configures_the_replay_and_conf_wins_over_it() {
    let file = snapshot("conf-wins");
    let text = succeeded(&replay(
        &[file.path()],
        &[("BRAID_ALLOC_CONF", "max_split_size_mb:64")],
    ));
    assert_eq!(
        text.lines().next(),
        Some("allocator configuration: `max_split_size_mb:64` from BRAID_ALLOC_CONF")
    );
    assert!(text.contains("conf    max_split_size_mb:64"), "{text}");

    let text = succeeded(&replay(
        &["--conf", "max_split_size_mb:200", file.path()],
        &[("BRAID_ALLOC_CONF", "max_split_size_mb:64")],
    ));
    assert_eq!(
        text.lines().next(),
        Some(
            "allocator configuration: `max_split_size_mb:200` from --conf \
             (BRAID_ALLOC_CONF=`max_split_size_mb:64` overridden)"
        )
    );
    assert!(text.contains("conf    max_split_size_mb:200"), "{text}");

    // With --json, stdout is the JSON object alone and the line goes to stderr.
    let json = replay(
        &["--json", "--conf", "max_split_size_mb:200", file.path()],
        &[("BRAID_ALLOC_CONF", "max_split_size_mb:64")],
    );
    let v: serde_json::Value = serde_json::from_str(&succeeded(&json)).expect("one JSON object");
    assert_eq!(v["conf"], "max_split_size_mb:200");
    let line = String::from_utf8_lossy(&json.stderr);
    assert!(line.contains("from --conf"), "{line}");

    let defaults = succeeded(&replay(&[file.path()], &[]));
    assert!(defaults.starts_with("allocator configuration: defaults (BRAID_ALLOC_CONF unset)\n"));
}

#[test]
fn malformed_configurations_are_errors_naming_the_key() {
    let file = snapshot("malformed");
    let msg = failed(&replay(
        &[file.path()],
        &[("BRAID_ALLOC_CONF", "roundup_power2_divisions:three")],
    ));
    assert!(
        msg.starts_with("braid: BRAID_ALLOC_CONF: ") && msg.contains("roundup_power2_divisions"),
        "{msg}"
    );
    // --conf wins, but a malformed variable is never ignored.
    let overridden = failed(&replay(
        &["--conf", "max_split_size_mb:200", file.path()],
        &[("BRAID_ALLOC_CONF", "no_such_key:1")],
    ));
    assert!(overridden.contains("no_such_key"), "{overridden}");
    let msg = failed(&replay(&["--conf", "no_such_key:1", file.path()], &[]));
    assert!(
        msg.starts_with("braid: --conf: ") && msg.contains("no_such_key"),
        "{msg}"
    );
}

#[test]
fn zero_runs_are_refused_naming_the_flag() {
    let file = snapshot("zero-runs");
    let msg = failed(&replay_runs("0", &[file.path()], &[]));
    assert!(
        msg.contains("--runs") && msg.contains("at least once"),
        "{msg}"
    );
    succeeded(&replay_runs("2", &[file.path()], &[]));
}
