//! What the `braid` binary compiles: its normal dependency graph, as cargo resolves it for a
//! build of this package alone (`cargo tree`, offline, from the lock file; nothing is built),
//! leaves out the TCP root-info transport's async stack, which no command uses.

use std::path::Path;
use std::process::Command;

/// Crates that only `braid-collective`'s `tcp` feature brings in.
const LEFT_OUT: [&str; 2] = ["tokio", "async-trait"];

/// The names of the packages in braid-cli's normal (not dev, not build) dependency graph.
fn normal_dependencies() -> Vec<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            "braid-cli",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .expect("running cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_binary_compiles_no_async_runtime() {
    let packages = normal_dependencies();
    // The graph is the real one: it holds the crates the binary does use.
    for expected in ["braid", "braid-collective", "clap"] {
        assert!(
            packages.iter().any(|p| p == expected),
            "{expected} missing from braid-cli's dependencies: {packages:?}"
        );
    }
    for left_out in LEFT_OUT {
        assert!(
            !packages.iter().any(|p| p == left_out),
            "{left_out} is back in braid-cli's normal dependencies (something turned on \
             braid-collective's `tcp` feature, or braid's): {packages:?}"
        );
    }
}
