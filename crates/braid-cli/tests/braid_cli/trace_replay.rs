//! `braid trace replay` on a real PyTorch snapshot of the repository's `traces/`.

use std::path::PathBuf;
use std::process::Command;

const INFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../traces/cs336_wedsonlin_medium_128_inference_memory_snapshot.pickle"
);

fn trace() -> PathBuf {
    PathBuf::from(INFERENCE)
}

#[test]
fn json_has_every_field() {
    let path = trace();
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["trace", "replay", "--json", "--runs", "1"])
        .arg(&path)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 1, "one JSON object: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    for key in [
        "alloc_events",
        "free_events",
        "prologue_bytes",
        "peak_live_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "fragmentation",
        "device_mallocs",
        "replay_ns_per_event",
        "torch_peak_reserved_bytes",
        "torch_device_mallocs",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {text}");
    }
    assert_eq!(v["alloc_events"], 1280);
    assert_eq!(v["free_events"], 1280);
    assert_eq!(v["torch_peak_reserved_bytes"], 1_763_704_832u64);
}

#[test]
fn table_and_errors() {
    let path = trace();
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args([
            "trace",
            "replay",
            "--runs",
            "1",
            "--conf",
            "max_split_size_mb:200",
        ])
        .arg(&path)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("peak reserved") && table.contains("pytorch"),
        "{table}"
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["trace", "replay", "--conf", "no_such_key:1"])
        .arg(&path)
        .output()
        .expect("runs");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no_such_key"));

    let missing = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["trace", "replay", "/nonexistent/x.pickle"])
        .output()
        .expect("runs");
    assert!(!missing.status.success());
}

#[test]
fn export_writes_braids_memory_for_memory_viz() {
    let path = trace();
    let out_file =
        std::env::temp_dir().join(format!("braid-cli-export-{}.pickle", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["trace", "replay", "--runs", "1", "--export"])
        .arg(&out_file)
        .arg(&path)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported = braid_trace::Snapshot::from_path(&out_file).expect("the export parses");
    std::fs::remove_file(&out_file).expect("cleanup");
    let events = &exported.device_traces[0];
    let allocs = events
        .iter()
        .filter(|e| e.action == braid_trace::Action::Alloc)
        .count();
    // The replay's whole history: every alloc of the trace window plus the prologue's.
    assert!(allocs >= 1280, "{allocs} alloc events exported");
    assert!(!exported.segments.is_empty());
}
