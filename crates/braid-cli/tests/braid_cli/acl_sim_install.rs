//! `braid acl-sim install --dir DIR` from the built binary: copies braid-acl-sim out of the
//! cargo build, links CANN's library names to the copy, prints the `BRAID_ACL_LIB=` and
//! `LD_LIBRARY_PATH=` lines, and the copy is what a program then loads.

use crate::common;

use common::{braid, failed, succeeded};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `braid acl-sim install --dir DIR ARGS`.
fn install(dir: &Path, args: &[&str]) -> std::process::Output {
    braid()
        .args(["acl-sim", "install"])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("runs")
}

/// Every entry of `dir`: a link's target, or a file's bytes.
fn contents(dir: &Path) -> BTreeMap<String, (Option<PathBuf>, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let target = std::fs::read_link(&path).ok();
            let bytes = if target.is_some() {
                Vec::new()
            } else {
                std::fs::read(&path).unwrap()
            };
            (name, (target, bytes))
        })
        .collect()
}

#[test]
fn a_failed_install_leaves_a_working_install_as_it_was() {
    let dir = scratch("failed-over-working");
    succeeded(&install(&dir, &[]));
    let before = contents(&dir);
    assert!(before.contains_key("libhccl.so"), "{:?}", before.keys());
    let stderr = failed(&install(&dir, &["--lib", "/etc/passwd"]));
    assert!(stderr.contains("/etc/passwd"), "{stderr}");
    assert!(
        contents(&dir) == before,
        "the directory changed: {:?}",
        contents(&dir).keys()
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // Into a directory that did not exist, nothing is left behind.
    let stderr = failed(&install(&dir, &["--lib", "/etc/passwd"]));
    assert!(stderr.contains("/etc/passwd"), "{stderr}");
    assert!(!dir.exists(), "a failed install made {}", dir.display());
}

#[test]
fn install_copies_the_library_and_prints_the_variable_to_set() {
    let dir = scratch("acl-sim").join("lib");
    let stdout = succeeded(&install(&dir, &[]));
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
    let demo = braid()
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
    let stderr = failed(&install(&file, &[]));
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    std::fs::remove_file(file).unwrap();
}

#[test]
fn a_device_count_torch_npu_cannot_use_is_refused_before_anything_is_laid_out() {
    let dir = scratch("devices");
    let stderr = failed(&install(&dir, &["--devices", "33"]));
    assert!(stderr.contains("--devices 33"), "{stderr}");
    assert!(!dir.exists(), "nothing is laid out");
}
