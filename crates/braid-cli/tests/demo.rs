//! `braid demo --backend acl` from the built binary: with no CANN configured it finds
//! `libbraid_acl_sim.so`, which cargo built into `target/<profile>/deps/` with braid-cli, and
//! prints the simulator's table.

use std::process::{Command, Output};

fn demo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("demo")
        .args(args)
        // No CANN: the search falls through to braid-acl-sim next to the binary.
        .env_remove("BRAID_ACL_LIB")
        .env_remove("ASCEND_HOME_PATH")
        .env_remove("ASCEND_TOOLKIT_HOME")
        .output()
        .expect("runs")
}

/// The table: everything after the title line.
fn table(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).expect("utf-8");
    text.lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn demo_through_acl_finds_braid_acl_sim_and_prints_the_simulator_table() {
    let acl = demo(&["--backend", "acl"]);
    let title = String::from_utf8_lossy(&acl.stdout);
    if title.starts_with("braid demo through ACL") && !title.contains("libbraid_acl_sim.so") {
        eprintln!(
            "note: a real libascendcl.so is on the loader path; not comparing with the simulator"
        );
        return;
    }
    assert!(
        title.starts_with("braid demo through ACL (") && title.contains("libbraid_acl_sim.so"),
        "{title}"
    );
    assert_eq!(table(&acl), table(&demo(&[])));
    assert_eq!(table(&acl), table(&demo(&["--backend", "sim"])));
}

#[test]
fn an_unknown_backend_is_refused() {
    let out = demo(&["--backend", "cuda"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values: sim, acl"));
}
