//! `braid demo --backend acl` from the built binary: with no CANN configured it finds
//! `libbraid_acl_sim.so`, which cargo built into `target/<profile>/deps/` with braid-cli, and
//! prints the simulator's table.

use std::process::{Command, Output};

fn demo(args: &[&str]) -> Output {
    demo_with(args, &[])
}

/// `braid demo` with no ACL configured but the variables `vars`.
fn demo_with(args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("demo")
        .args(args)
        // No CANN: the search falls through to braid-acl-sim next to the binary.
        .env_remove("BRAID_ACL_LIB")
        .env_remove("ASCEND_HOME_PATH")
        .env_remove("ASCEND_TOOLKIT_HOME")
        .envs(vars.iter().copied())
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
    if acl.status.success() && !title.contains("libbraid_acl_sim.so") {
        eprintln!(
            "note: a real libascendcl.so is on the loader path; not comparing with the simulator"
        );
        return;
    }
    // The first line says it runs on the simulator.
    let first = title.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("braid demo through ACL on the simulator (braid-acl-sim: ")
            && first.contains("libbraid_acl_sim.so"),
        "{title}"
    );
    // Its simulated figures name their profile: braid-acl-sim's devices run the default one.
    assert!(first.contains(", profile atlas-800t-a2)"), "{title}");
    // Through ACL the built-in kernels are aclnn operators in float16, the default: the same
    // table as the simulator's; another type gives another table.
    assert!(first.ends_with(", in float16"), "{title}");
    assert_eq!(table(&acl), table(&demo(&[])));
    assert_ne!(table(&acl), table(&demo(&["--dtype", "float32"])));
}

#[test]
fn the_simulator_s_title_names_the_profile_its_figures_come_from() {
    let out = demo(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert_eq!(
        first, "braid demo on the simulated device (atlas-800t-a2), in float16",
        "{text}"
    );
}

#[test]
fn an_unknown_backend_is_refused() {
    let out = demo(&["--backend", "cuda"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values: sim, acl"));
}

#[test]
fn an_explicit_library_that_does_not_open_is_an_error_naming_it_never_the_simulator() {
    let out = demo_with(
        &["--backend", "acl"],
        &[("BRAID_ACL_LIB", "/nonexistent/libascendcl.so")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for needle in [
        "/nonexistent/libascendcl.so",
        "$BRAID_ACL_LIB",
        // The loader's own reason.
        "No such file or directory",
    ] {
        assert!(stderr.contains(needle), "missing {needle} in {stderr}");
    }
}

#[test]
fn a_broken_library_under_a_cann_home_is_an_error_naming_it_never_the_simulator() {
    let home = std::env::temp_dir().join(format!("braid-cli-demo-{}", std::process::id()));
    std::fs::create_dir_all(home.join("lib64")).unwrap();
    std::fs::write(home.join("lib64/libascendcl.so"), b"not a library").unwrap();
    let out = demo_with(
        &["--backend", "acl"],
        &[("ASCEND_HOME_PATH", home.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("lib64/libascendcl.so (under $ASCEND_HOME_PATH)"),
        "{stderr}"
    );
    std::fs::remove_dir_all(home).unwrap();
}
