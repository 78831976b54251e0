//! `braid acl-sim install --dir DIR` from the built binary: copies braid-acl-sim out of the
//! cargo build, links CANN's library names to the copy, prints the `BRAID_ACL_LIB=` and
//! `LD_LIBRARY_PATH=` lines, and the copy is what a program then loads.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn install_copies_the_library_and_prints_the_variable_to_set() {
    let dir = scratch("acl-sim").join("lib");
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["acl-sim", "install", "--dir"])
        .arg(&dir)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = dir.canonicalize().unwrap().join("libbraid_acl_sim.so");
    assert!(installed.is_file());
    assert!(
        stdout.contains(&format!("export BRAID_ACL_LIB={}", installed.display())),
        "{stdout}"
    );
    let dir = installed.parent().unwrap();
    for name in [
        "libascendcl.so",
        "libhccl.so",
        "libopapi.so",
        "libnnopbase.so",
    ] {
        assert_eq!(
            std::fs::canonicalize(dir.join(name)).unwrap(),
            installed,
            "{name} is the copy"
        );
    }
    assert!(
        stdout.contains(&format!("export LD_LIBRARY_PATH={}", dir.display())),
        "{stdout}"
    );
    // The variable it prints is all a program needs: the demo through ACL loads the copy.
    let demo = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["demo", "--backend", "acl"])
        .env("BRAID_ACL_LIB", &installed)
        .output()
        .expect("runs");
    let first = String::from_utf8_lossy(&demo.stdout);
    let first = first.lines().next().unwrap_or_default();
    assert!(first.contains(&installed.display().to_string()), "{first}");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn install_into_a_path_that_cannot_be_a_directory_is_an_error_naming_it() {
    let file = scratch("not-a-dir");
    std::fs::write(&file, b"a file").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["acl-sim", "install", "--dir"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    std::fs::remove_file(file).unwrap();
}

#[test]
fn a_device_count_torch_npu_cannot_use_is_refused_before_anything_is_laid_out() {
    let dir = scratch("devices");
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["acl-sim", "install", "--devices", "33", "--dir"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--devices 33"), "{stderr}");
    assert!(!dir.exists(), "nothing is laid out");
}
