//! The reference counters of shared buffers (`braid_allocator::ipc`): files in a directory
//! every process can write (`/dev/shm`, or `BRAID_IPC_REFS_DIR`), so none may crash braid or
//! outlive its process:
//!
//! - a counter file that is cut short (zero bytes) is refused with a typed `IpcError::BadFile`,
//!   never mapped (an import killed the process with `SIGBUS`);
//! - the counter of an exporter that ended is refused with `IpcError::ExporterEnded` naming it
//!   and the memory's key, before anything is mapped;
//! - the counters that ended exporters left behind are removed by the first export of each
//!   later process (they stayed forever);
//! - a directory without room for a counter refuses the export with `IpcError::NoSpace` naming
//!   it and `BRAID_IPC_REFS_DIR` (the counter was a sparse file, whose first write by an
//!   importer would fault). This one runs in a child process over a full tmpfs of its own
//!   mount namespace; where the system allows none, it says so and checks nothing.
//!
//! The other tests of this binary never export, so the child processes' first export is the
//! one that sweeps.

use braid_allocator::ipc::REFS_DIR_ENV;
use braid_allocator::{import_ipc, AllocError, AllocatorConfig, CachingAllocator, IpcBufferHandle};
use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_conformance::child_process::run_over_small_tmpfs;
use braid_stream_core::{Device, IpcError, Kernel, StreamError};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROLE: &str = "BRAID_IPC_REFS_TEST_ROLE";
/// A counter's bytes (`braid_allocator::ipc`).
const REFS_BYTES: usize = 4096;

fn device() -> Device<SimBackend> {
    Device::new(SimDevice::new(SimConfig::new().capacity(1 << 30))).unwrap()
}

/// The directory of the counters, as the allocator finds it here.
fn refs_dir() -> PathBuf {
    match std::env::var_os(REFS_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    }
}

/// A scratch directory of this process for `name`.
fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("braid-ipc-refs-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The id of a process that ended (and was reaped).
fn ended_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn handle(refs: &str) -> IpcBufferHandle {
    format!(
        "braid-sim-ipc-{}-4000000 4096 {refs}",
        std::os::unix::process::parent_id()
    )
    .parse()
    .unwrap()
}

#[test]
fn a_counter_cut_short_is_refused_typed_never_mapped() {
    let device = device();
    // Named as a counter of a live process (this one's parent), so no sweep removes it.
    let name = format!(
        "braid-ipc-refs-{}-4000001",
        std::os::unix::process::parent_id()
    );
    let path = refs_dir().join(&name);
    std::fs::write(&path, b"").unwrap();
    match import_ipc(&device, &handle(&name)) {
        Err(AllocError::Stream(StreamError::Ipc(IpcError::BadFile { path: p, reason }))) => {
            assert_eq!(Path::new(&p), path);
            assert!(reason.contains("0 bytes, fewer than the 4096"), "{reason}");
        }
        other => panic!("a counter of 0 bytes: {other:?}"),
    }
    std::fs::remove_file(path).unwrap();
}

#[test]
fn an_ended_exporters_counter_is_refused_naming_it() {
    let device = device();
    let pid = ended_pid();
    let name = format!("braid-ipc-refs-{pid}-4000002");
    let path = refs_dir().join(&name);
    std::fs::write(&path, [0u8; REFS_BYTES]).unwrap();
    let handle = handle(&name);
    match import_ipc(&device, &handle) {
        Err(AllocError::Stream(StreamError::Ipc(IpcError::ExporterEnded { key, pid: p }))) => {
            assert_eq!((key.as_str(), p), (handle.key.as_str(), pid));
        }
        other => panic!("an ended exporter's buffer: {other:?}"),
    }
    // Nothing was counted in it.
    assert_eq!(std::fs::read(&path).unwrap(), vec![0u8; REFS_BYTES]);
    std::fs::remove_file(path).unwrap();
}

/// Exports one buffer (this process's first export) and checks what it swept.
fn exporting_child(dir: &Path) {
    let device = device();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let s = device.create_stream(0).unwrap();
    let shared = alloc.alloc(4096, &s).unwrap().export_ipc(false).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    let own = shared.handle().refs;
    let parent = format!("braid-ipc-refs-{}-1", std::os::unix::process::parent_id());
    let mut expected = vec![own, parent, "unrelated".to_string()];
    expected.sort();
    assert_eq!(left, expected, "the ended exporters' counters are gone");
}

#[test]
fn ended_exporters_counters_are_swept_by_the_next_export() {
    if let Ok(dir) = std::env::var(ROLE) {
        exporting_child(Path::new(&dir));
        return;
    }
    let dir = scratch("sweep");
    let ended = ended_pid();
    for name in [
        format!("braid-ipc-refs-{ended}-1"),
        format!("braid-ipc-refs-{ended}-2"),
        format!("braid-ipc-refs-{}-1", std::process::id()),
        "unrelated".to_string(),
    ] {
        std::fs::write(dir.join(name), [0u8; REFS_BYTES]).unwrap();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "ipc_refs::ended_exporters_counters_are_swept_by_the_next_export",
            "--exact",
            "--test-threads=1",
        ])
        .env(ROLE, &dir)
        .env(REFS_DIR_ENV, &dir)
        .output()
        .unwrap();
    // It passed, and it ran (the filter is the test's whole name, module included).
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the exporting child failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_full_directory_refuses_the_export_naming_it() {
    if std::env::var(ROLE).is_ok() {
        let dir = PathBuf::from(std::env::var(REFS_DIR_ENV).unwrap());
        // Fill it: whatever fits of a MiB.
        let _ = std::fs::write(dir.join("filler"), vec![1u8; 1 << 20]);
        let device = device();
        let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
        let s = device.create_stream(0).unwrap();
        let buf = alloc.alloc(4096, &s).unwrap();
        match buf.export_ipc(false) {
            Err(AllocError::Stream(StreamError::Ipc(IpcError::NoSpace {
                dir: d,
                variable,
                ..
            }))) => {
                assert_eq!((Path::new(&d), variable), (dir.as_path(), REFS_DIR_ENV));
            }
            other => panic!("a counter in a full directory: {other:?}"),
        }
        // The allocator and the device still serve.
        let again = alloc.alloc(4096, &s).unwrap();
        s.launch(&Kernel::Fill {
            dst: again.slice(),
            value: 2.0,
        })
        .unwrap();
        let back = s.copy_d2h(again.slice()).unwrap().wait_f32().unwrap();
        assert_eq!(back, vec![2.0; 1024]);
        alloc.check_invariants().unwrap();
        println!("refused");
        return;
    }
    let dir = scratch("full");
    let env = [
        (ROLE, "exporter".to_string()),
        (REFS_DIR_ENV, dir.display().to_string()),
    ];
    let test = "ipc_refs::a_full_directory_refuses_the_export_naming_it";
    let Some(out) = run_over_small_tmpfs(test, &dir, "1m", &env) else {
        eprintln!("note: no private mount namespace here (unshare -rm); the full directory is not checked");
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("refused"),
        "the exporter failed ({:?}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(dir).unwrap();
}
