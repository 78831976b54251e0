//! The files through which simulated devices of different processes share (`crate::ipc`)
//! cannot crash a process, and what an ended exporter leaves behind is refused:
//!
//! - a file planted in the shared directory (a zero-length memory, event or shareable file,
//!   or a header claiming more bytes than the file holds) is refused with a typed
//!   `IpcError::BadFile`, never mapped (it killed the importer with `SIGBUS`);
//! - an export larger than the room left in the directory is `IpcError::NoSpace` naming the
//!   directory and `BRAID_SIM_IPC_DIR` (it killed the exporter with `SIGBUS`). This one runs in
//!   a child process in its own mount namespace, over a 1 MiB tmpfs (`unshare -rm` and
//!   `mount`); where the system allows neither, it says so and checks nothing. There too, an
//!   export closed with no importer gives its room back at once (closed exports held their
//!   files until their memory was freed);
//! - the memory and events of an exporter that ended are refused at once: an import
//!   (`IpcError::ExporterEnded`), and a wait on an event whose record it never published
//!   (which blocked the host for the whole IPC timeout);
//! - a range is shared through one file at a time: shared again once its earlier export is
//!   closed and no process imports it (a cached block the allocator hands out again, which
//!   was refused as "overlap a range already shared"), refused saying what to do while the
//!   earlier export is open or still imported.
//!
//! The planted files are named as keys of another live process (this one's parent), so that
//! no sweep of ended processes' files removes them first.

use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_conformance::child_process::{next_line, run_over_small_tmpfs, ChildTest};
use braid_stream_core::hal::Device as _;
use braid_stream_core::{
    Device, DeviceSlice, IpcError, IpcEventHandle, IpcMemKey, Kernel, StreamError,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ROLE: &str = "BRAID_SIM_IPC_FILES_ROLE";
const OUT: &str = "BRAID_SIM_IPC_FILES_OUT";
const DIR_ENV: &str = "BRAID_SIM_IPC_DIR";
/// The header of a shared file (see `crate::ipc::file`).
const HEADER: usize = 64 << 10;

/// The directory the simulator shares through here, as it finds it (the tests of this
/// binary run in one process, so none of them changes it).
fn shared_dir() -> PathBuf {
    match std::env::var_os(DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    }
}

/// A scratch directory of this process for `name`.
fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("braid-sim-ipc-files-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn device(timeout: Duration) -> Device<SimBackend> {
    Device::new(SimDevice::new(
        SimConfig::new().capacity(1 << 30).ipc_timeout(timeout),
    ))
    .unwrap()
}

/// A key of a live process other than this one (the parent), `n`-th.
fn planted_key(n: u32) -> String {
    format!(
        "braid-sim-ipc-{}-{}",
        std::os::unix::process::parent_id(),
        4_000_000 + n
    )
}

/// A header as the simulator writes it: magic, kind (1 memory, 2 event), open, `size` bytes,
/// exporter `pid`.
fn header(kind: u32, size: u64, pid: u32) -> Vec<u8> {
    let mut h = vec![0u8; HEADER];
    h[0..8].copy_from_slice(b"BRAIDIPC");
    h[8..12].copy_from_slice(&kind.to_le_bytes());
    h[12..16].copy_from_slice(&1u32.to_le_bytes());
    h[16..24].copy_from_slice(&size.to_le_bytes());
    h[24..28].copy_from_slice(&pid.to_le_bytes());
    h
}

fn handle_of(key: &str) -> IpcEventHandle {
    let mut bytes = [0u8; 64];
    bytes[..key.len()].copy_from_slice(key.as_bytes());
    IpcEventHandle(bytes)
}

fn assert_bad_file(err: StreamError, path: &Path, why: &str) {
    match &err {
        StreamError::Ipc(IpcError::BadFile { path: p, reason }) => {
            assert_eq!(Path::new(p), path, "{err}");
            assert!(reason.contains(why), "{err}");
        }
        other => panic!("not a typed refusal of {}: {other:?}", path.display()),
    }
}

/// The device still shares and computes after a refusal.
fn still_works(device: &Device<SimBackend>) {
    let s = device.create_stream(0).unwrap();
    let m = device.alloc(64).unwrap();
    s.launch(&Kernel::Fill {
        dst: m.slice(),
        value: 3.0,
    })
    .unwrap();
    let back = s.copy_d2h(m.slice()).unwrap().wait_f32().unwrap();
    assert_eq!(back, vec![3.0; 16]);
    let key = device.ipc_export(m.slice(), false).unwrap();
    device.ipc_close_export(&key).unwrap();
}

#[test]
fn planted_files_are_refused_typed_never_mapped() {
    let dir = shared_dir();
    let device = device(Duration::from_secs(5));
    let me = std::os::unix::process::parent_id();

    // Zero-length memory, event and shareable files.
    let empty = planted_key(1);
    std::fs::write(dir.join(&empty), b"").unwrap();
    let key: IpcMemKey = empty.parse().unwrap();
    let err = device.ipc_import(&key, 4).unwrap_err();
    assert_bad_file(err, &dir.join(&empty), "fewer than");
    let err = device.open_ipc_event(&handle_of(&empty)).unwrap_err();
    assert_bad_file(err, &dir.join(&empty), "fewer than");
    let shareable = (u64::from(me) << 32) | 4_000_001;
    let err = device.hal().import_physical(shareable).unwrap_err();
    assert!(
        matches!(&err, braid_stream_core::hal::HalError::Ipc(e) if matches!(**e, IpcError::BadFile { .. })),
        "{err:?}"
    );

    // A header claiming a MiB of memory in a file of the header alone.
    let lying = planted_key(2);
    std::fs::write(dir.join(&lying), header(1, 1 << 20, me)).unwrap();
    let err = device
        .ipc_import(&lying.parse().unwrap(), 1 << 20)
        .unwrap_err();
    assert_bad_file(err, &dir.join(&lying), "claims 1048576 bytes");

    // A header cut short: half of it.
    let cut = planted_key(3);
    std::fs::write(dir.join(&cut), &header(2, 0, me)[..HEADER / 2]).unwrap();
    let err = device.open_ipc_event(&handle_of(&cut)).unwrap_err();
    assert_bad_file(err, &dir.join(&cut), "fewer than");

    // A directory under a key's name, and a link to another file.
    let folder = planted_key(4);
    std::fs::create_dir(dir.join(&folder)).unwrap();
    assert!(device.ipc_import(&folder.parse().unwrap(), 4).is_err());
    let link = planted_key(5);
    std::os::unix::fs::symlink(dir.join(&lying), dir.join(&link)).unwrap();
    let err = device.ipc_import(&link.parse().unwrap(), 4).unwrap_err();
    assert_bad_file(err, &dir.join(&link), "symbolic link");

    still_works(&device);
    for key in [&empty, &lying, &cut, &link] {
        std::fs::remove_file(dir.join(key)).unwrap();
    }
    std::fs::remove_dir(dir.join(&folder)).unwrap();
}

#[test]
fn an_export_larger_than_the_room_left_is_refused_naming_the_directory() {
    if std::env::var(ROLE).is_ok() {
        let dir = PathBuf::from(std::env::var(DIR_ENV).unwrap());
        let device = device(Duration::from_secs(5));
        let big = device.alloc(4 << 20).unwrap();
        let s = device.create_stream(0).unwrap();
        s.launch(&Kernel::Fill {
            dst: big.slice(),
            value: 1.0,
        })
        .unwrap();
        s.synchronize().unwrap();
        let err = device.ipc_export(big.slice(), false).unwrap_err();
        match &err {
            StreamError::Ipc(IpcError::NoSpace {
                dir: d,
                variable,
                needed,
                free,
            }) => {
                assert_eq!(Path::new(d), dir);
                assert_eq!(*variable, DIR_ENV);
                assert!(*needed > 4 << 20 && free < needed, "{needed} {free}");
            }
            other => panic!("an export beyond the room left: {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains(&dir.display().to_string()) && text.contains(DIR_ENV),
            "{text}"
        );
        println!("{text}");
        // Nothing left behind, and a small export fits.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        still_works(&device);
        // Exports closed with no importer give their room back at once: eight of 320 KiB
        // (with their header) in turn, their memory kept, in a directory of 1 MiB.
        let kept: Vec<_> = (0..8)
            .map(|i| {
                let m = device.alloc(256 << 10).unwrap();
                let key = device
                    .ipc_export(m.slice(), false)
                    .unwrap_or_else(|e| panic!("export {i}: {e}"));
                device.ipc_close_export(&key).unwrap();
                m
            })
            .collect();
        drop(kept);
        println!("refused");
        return;
    }
    let dir = scratch("small");
    let test = "ipc_files::an_export_larger_than_the_room_left_is_refused_naming_the_directory";
    let env = [
        (ROLE, "exporter".to_string()),
        (DIR_ENV, dir.display().to_string()),
    ];
    let Some(out) = run_over_small_tmpfs(test, &dir, "1m", &env) else {
        eprintln!("note: no private mount namespace here (unshare -rm); the full directory is not checked");
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("refused"),
        "the exporter failed ({:?}): {stdout}\n{stderr}",
        out.status
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The exporting child of the ended-exporter test: exports memory and an event recorded
/// behind a long kernel, writes the key and handle to the file `OUT` names, says so, and on
/// "end" ends without closing anything (as a crash would).
fn ending_exporter() {
    let device = device(Duration::from_secs(5));
    let s = device.create_stream(0).unwrap();
    let memory = device.alloc(4096).unwrap();
    let key = device.ipc_export(memory.slice(), false).unwrap();
    let event = device.create_ipc_event().unwrap();
    s.launch(&Kernel::Busy {
        duration_ns: 1_000_000_000,
    })
    .unwrap();
    event.record(&s).unwrap();
    let out = std::env::var(OUT).unwrap();
    std::fs::write(out, format!("{key}\n{}\n", event.ipc_handle().unwrap())).unwrap();
    println!("exported");
    assert_eq!(
        next_line(&mut std::io::stdin().lock()).as_deref(),
        Some("end")
    );
    std::process::exit(0);
}

#[test]
fn an_ended_exporters_memory_and_events_are_refused_at_once() {
    if std::env::var(ROLE).is_ok() {
        ending_exporter();
        return;
    }
    let dir = scratch("ended");
    let out = dir.join("handles.txt");
    let env = [
        (ROLE, "exporter".to_string()),
        (OUT, out.display().to_string()),
    ];
    let test = "ipc_files::an_ended_exporters_memory_and_events_are_refused_at_once";
    let mut child = ChildTest::spawn(test, &env).unwrap();
    child.expect("exported").unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let key: IpcMemKey = lines.next().unwrap().parse().unwrap();
    let handle: IpcEventHandle = lines.next().unwrap().parse().unwrap();
    let pid = child.id();

    let device = device(Duration::from_secs(30));
    let opened = device.open_ipc_event(&handle).unwrap();
    assert!(!opened.query().unwrap(), "recorded behind a long kernel");
    child.send("end").unwrap();
    assert!(child.wait().unwrap().success());

    // The wait fails at once, naming the process, instead of blocking the host 30 s.
    let s = device.create_stream(0).unwrap();
    let started = Instant::now();
    let err = s.wait(&opened).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited {:?}",
        started.elapsed()
    );
    match &err {
        StreamError::Ipc(IpcError::ExporterEnded { pid: p, .. }) => assert_eq!(*p, pid),
        other => panic!("not the ended exporter: {other:?}"),
    }
    assert!(err.to_string().contains(&format!("process {pid}")), "{err}");
    assert!(matches!(
        opened.synchronize(),
        Err(StreamError::Ipc(IpcError::ExporterEnded { .. }))
    ));
    assert!(matches!(
        opened.query(),
        Err(StreamError::Ipc(IpcError::ExporterEnded { .. }))
    ));
    // Its memory is gone with it, as on a device.
    match device.ipc_import(&key, 4096) {
        Err(StreamError::Ipc(IpcError::ExporterEnded { pid: p, key: k })) => {
            assert_eq!((p, k.as_str()), (pid, key.as_str()));
        }
        other => panic!("an ended exporter's memory imported: {other:?}"),
    }
    drop(opened);
    still_works(&device);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_range_is_shared_again_once_its_earlier_export_is_closed_and_unimported() {
    let exporter = device(Duration::from_secs(5));
    // A device of its own plays the importing process (its engine shares nothing with the
    // exporter's but the files).
    let importer = device(Duration::from_secs(5));
    let (s, t) = (
        exporter.create_stream(0).unwrap(),
        importer.create_stream(0).unwrap(),
    );
    let memory = exporter.alloc(4096).unwrap();
    let key = exporter.hal().ipc_export(memory.slice(), false).unwrap();
    let half = DeviceSlice::new(memory.slice().ptr, 2048);
    let err = exporter.hal().ipc_export(half, false).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{key:?}, still open")),
        "{err}"
    );
    let (ptr, _) = importer.hal().ipc_import(&key).unwrap();
    // SAFETY: an export's memory stays the exporter's.
    unsafe { exporter.hal().ipc_close(&key) }.unwrap();
    let err = exporter
        .hal()
        .ipc_export(memory.slice(), false)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("{key:?}, closed but still imported by 1 process")),
        "{err}"
    );
    // The importer still shares the bytes.
    s.launch(&Kernel::Fill {
        dst: memory.slice(),
        value: 6.0,
    })
    .unwrap();
    s.synchronize().unwrap();
    let imported = DeviceSlice::new(ptr, 4096);
    let seen = t.copy_d2h(imported).unwrap().wait_f32().unwrap();
    assert_eq!(seen, vec![6.0; 1024]);
    // SAFETY: nothing uses the import any more (read back synchronously).
    unsafe { importer.hal().ipc_close(&key) }.unwrap();
    // Imported by no one: shared again, with its bytes.
    let again = exporter.hal().ipc_export(memory.slice(), false).unwrap();
    assert_ne!(again, key);
    let back = s.copy_d2h(memory.slice()).unwrap().wait_f32().unwrap();
    assert_eq!(back, vec![6.0; 1024]);
    // SAFETY: as above.
    unsafe { exporter.hal().ipc_close(&again) }.unwrap();
    still_works(&exporter);
}
