//! The outputs braid-acl-sim writes for the program it runs: the sanitizer's reports
//! (`BRAID_ACL_SIM_RACE_REPORT`) and the timeline (`BRAID_ACL_SIM_TIMELINE`), at
//! `aclFinalize`, or at process exit for a program that never finalizes.
//!
//! The settings are read once per process, so each scenario runs in a child process: this
//! test executable again, with [`CHILD`] naming the scenario.

use crate::common;
use braid_acl_sim::client::runtime::{aclFinalize, aclrtDestroyStreamForce};
use braid_acl_sim::exports::*;
use braid_acl_sim::{RACE_REPORT_ENV, TIMELINE_ENV};
use serde_json::Value;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

/// Set in a child: the scenario it runs.
const CHILD: &str = "BRAID_ACL_SIM_TEST_OUTPUTS";

const ACL_ERROR_UNINITIALIZE: i32 = 100_001;
const ACL_ERROR_REPEAT_FINALIZE: i32 = 100_037;

fn ok(code: i32) {
    assert_eq!(code, 0, "code {code}");
}

/// In a child: a fill on one stream and a read of the same bytes on another, unordered;
/// prints the two streams' handles and returns them.
fn racy_program() -> (*mut c_void, *mut c_void) {
    ok(aclInit(null()));
    ok(aclrtSetDevice(0));
    let (mut s1, mut s2, mut buf) = (null_mut(), null_mut(), null_mut());
    // SAFETY: live out parameters.
    unsafe {
        ok(aclrtCreateStream(&mut s1));
        ok(aclrtCreateStream(&mut s2));
        ok(aclrtMalloc(&mut buf, 4096, 0));
    }
    ok(aclrtMemsetAsync(buf, 4096, 1, 4096, s1));
    let mut host = vec![0u8; 4096];
    // SAFETY: `host` stays valid until the stream is synchronized below.
    ok(unsafe { aclrtMemcpyAsync(host.as_mut_ptr().cast::<c_void>(), 4096, buf, 4096, 2, s2) });
    ok(aclrtSynchronizeDevice());
    println!("streams {:#x} {:#x}", s1 as usize, s2 as usize);
    (s1, s2)
}

fn child(scenario: &str) {
    match scenario {
        "finalize" => {
            let _ = racy_program();
            ok(aclFinalize());
            assert_eq!(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
            // The devices stay usable after finalizing.
            ok(aclrtSynchronizeDevice());
        }
        "exit" => {
            assert_eq!(aclFinalize(), ACL_ERROR_UNINITIALIZE);
            let (s1, s2) = racy_program();
            // Streams destroyed before the outputs are written (torch_npu destroys its
            // streams at exit) keep their handles in them.
            ok(aclrtDestroyStream(s1));
            ok(aclrtDestroyStreamForce(s2));
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// Runs `scenario` in a child with both outputs asked for in `dir`; returns the streams'
/// handles it printed.
fn run(scenario: &str, dir: &Path) -> (String, String) {
    let mut child = common::child("outputs::outputs_are_written_at_finalize_and_at_exit");
    child
        .env(CHILD, scenario)
        .env(RACE_REPORT_ENV, dir.join("races.json"))
        .env(TIMELINE_ENV, dir.join("timeline.json"));
    let stdout = common::passes(child);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("streams "))
        .expect("the child printed its streams");
    let (a, b) = line.split_once(' ').expect("two handles");
    (a.to_string(), b.to_string())
}

fn read(path: PathBuf) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")),
    )
    .expect("JSON")
}

#[test]
fn outputs_are_written_at_finalize_and_at_exit() {
    if let Ok(scenario) = std::env::var(CHILD) {
        child(&scenario);
        return;
    }
    for scenario in ["finalize", "exit"] {
        let dir =
            std::env::temp_dir().join(format!("braid-outputs-{scenario}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (s1, s2) = run(scenario, &dir);

        let report = read(dir.join("races.json"));
        assert_eq!(report["tool"], "braid-acl-sim sanitizer");
        assert_eq!(report["count"], 1, "{report}");
        let race = &report["reports"][0];
        assert_eq!(race["kind"], "read-write race");
        assert_eq!(race["bytes"], 4096);
        assert_eq!(
            (&race["first"]["acl_stream"], &race["first"]["operator"]),
            (&Value::from(s1.clone()), &Value::from("memset"))
        );
        assert_eq!(
            (&race["second"]["acl_stream"], &race["second"]["operator"]),
            (&Value::from(s2.clone()), &Value::from("memcpy_d2h"))
        );

        let timeline = read(dir.join("timeline.json"));
        let names: Vec<String> = timeline["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0)
            .map(|e| e["args"]["name"].as_str().unwrap_or_default().to_string())
            .collect();
        for s in [&s1, &s2] {
            assert!(
                names
                    .iter()
                    .any(|n| n.ends_with(&format!("(aclrtStream {s})"))),
                "{scenario}: no track for {s} in {names:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
