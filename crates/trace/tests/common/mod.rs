//! Loading the real PyTorch snapshots of `shared/traces`, shared by the trace tests.

use braid_trace::Snapshot;
use std::path::PathBuf;

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces");

/// The snapshot `name` of `shared/traces`, or `None` (with a note) when the file is absent.
pub fn load(name: &str) -> Option<Snapshot> {
    let path = PathBuf::from(TRACES).join(name);
    if !path.exists() {
        eprintln!("note: {} is absent; skipping", path.display());
        return None;
    }
    Some(Snapshot::from_path(&path).expect("parses"))
}
