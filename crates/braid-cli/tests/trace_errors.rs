//! `braid trace replay` on files that need no real trace: errors that name the file, a pickle
//! that is not a snapshot, and which allocator configuration wins.

use braid_trace::{Action, Snapshot, TraceEvent};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

/// `braid trace replay ARGS` with `env` set and no `BRAID_ALLOC_CONF` unless `env` sets it.
fn replay(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_braid"));
    command
        .args(["trace", "replay", "--runs", "1"])
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

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_missing_file_is_named() {
    let out = replay(&["/nonexistent/x.pickle"], &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).starts_with("braid: /nonexistent/x.pickle: "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_pickle_that_is_not_a_snapshot_is_an_error_saying_what_is_missing() {
    let dict = BTreeMap::from([("a", 1)]);
    let file = TempFile::new(
        "not-a-snapshot.pickle",
        &serde_pickle::to_vec(&dict, serde_pickle::SerOptions::new()).unwrap(),
    );
    let out = replay(&[file.path()], &[]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains(file.path())
            && msg.contains("not a PyTorch memory snapshot")
            && msg.contains("`segments`")
            && msg.contains("`device_traces`"),
        "{msg}"
    );
    assert!(!stdout(&out).contains("peak reserved"), "no table");
}

#[test]
fn braid_alloc_conf_configures_the_replay_and_conf_wins_over_it() {
    let file = snapshot("conf-wins");
    let env = replay(
        &[file.path()],
        &[("BRAID_ALLOC_CONF", "max_split_size_mb:64")],
    );
    assert!(env.status.success(), "{}", stderr(&env));
    let text = stdout(&env);
    assert_eq!(
        text.lines().next(),
        Some("allocator configuration: `max_split_size_mb:64` from BRAID_ALLOC_CONF")
    );
    assert!(text.contains("conf    max_split_size_mb:64"), "{text}");

    let both = replay(
        &["--conf", "max_split_size_mb:200", file.path()],
        &[("BRAID_ALLOC_CONF", "max_split_size_mb:64")],
    );
    assert!(both.status.success(), "{}", stderr(&both));
    let text = stdout(&both);
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
    assert!(json.status.success(), "{}", stderr(&json));
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("one JSON object");
    assert_eq!(v["conf"], "max_split_size_mb:200");
    assert!(stderr(&json).contains("from --conf"), "{}", stderr(&json));

    let defaults = replay(&[file.path()], &[]);
    assert!(stdout(&defaults)
        .starts_with("allocator configuration: defaults (BRAID_ALLOC_CONF unset)\n"));
}

#[test]
fn malformed_configurations_are_errors_naming_the_key() {
    let file = snapshot("malformed");
    let bad_env = replay(
        &[file.path()],
        &[("BRAID_ALLOC_CONF", "roundup_power2_divisions:three")],
    );
    assert!(!bad_env.status.success());
    let msg = stderr(&bad_env);
    assert!(
        msg.starts_with("braid: BRAID_ALLOC_CONF: ") && msg.contains("roundup_power2_divisions"),
        "{msg}"
    );
    // --conf wins, but a malformed variable is never ignored.
    let overridden = replay(
        &["--conf", "max_split_size_mb:200", file.path()],
        &[("BRAID_ALLOC_CONF", "no_such_key:1")],
    );
    assert!(!overridden.status.success());
    assert!(stderr(&overridden).contains("no_such_key"));
    let bad_flag = replay(&["--conf", "no_such_key:1", file.path()], &[]);
    assert!(!bad_flag.status.success());
    let msg = stderr(&bad_flag);
    assert!(
        msg.starts_with("braid: --conf: ") && msg.contains("no_such_key"),
        "{msg}"
    );
}
