//! Loading the real PyTorch snapshots of the repository's `traces/` folder, shared by the trace
//! tests.

use braid_trace::Snapshot;
use std::path::PathBuf;

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces");

/// The snapshot `name` of `traces/` (part of the repository, so always there).
pub fn load(name: &str) -> Snapshot {
    let path = PathBuf::from(TRACES).join(name);
    Snapshot::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
