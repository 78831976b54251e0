//! Memory and an event shared between two processes on the simulator, through braid's front
//! layer (`Device::ipc_export` / `ipc_import`, `create_ipc_event` / `open_ipc_event`): this
//! test binary re-runs itself as the importing process.
//!
//! The two processes' simulated devices share files (`crate::ipc`), not a clock: the exporter
//! writes its memory behind a long kernel and records the event; the importer waits on the
//! event from a stream (blocking until the exporter's host passes the record), reads the
//! exporter's bytes and doubles them in place; the exporter reads the doubled bytes. Bad input
//! on both sides (a foreign key, a closed key, a close of another process's key, a second
//! close, an import of one's own export, a garbled event handle) is typed and leaves both
//! devices working.

use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_conformance::child_process::{next_line, ChildTest};
use braid_stream_core::{
    Device, DeviceSlice, IpcError, IpcEventHandle, IpcMemKey, Kernel, StreamError,
};
use std::time::{Duration, Instant};

const ROLE: &str = "BRAID_SIM_IPC_CHILD";
const KEY: &str = "BRAID_SIM_IPC_KEY";
const EVENT: &str = "BRAID_SIM_IPC_EVENT";
const CLOSED: &str = "BRAID_SIM_IPC_CLOSED";
const ELEMENTS: u64 = 256;
/// Long enough that the child waits on a record that is not done yet.
const PARENT_PAUSE: Duration = Duration::from_millis(300);

fn device() -> Device<SimBackend> {
    Device::new(SimDevice::new(SimConfig::new().capacity(1 << 30))).unwrap()
}

fn read_f32(device: &Device<SimBackend>, slice: DeviceSlice) -> Vec<f32> {
    let s = device.create_stream(0).unwrap();
    s.copy_d2h(slice).unwrap().wait_f32().unwrap()
}

/// The importing process.
fn child() {
    let device = device();
    let mut stdin = std::io::stdin().lock();
    let key: IpcMemKey = std::env::var(KEY).unwrap().parse().unwrap();
    let closed: IpcMemKey = std::env::var(CLOSED).unwrap().parse().unwrap();
    let event: IpcEventHandle = std::env::var(EVENT).unwrap().parse().unwrap();

    // Bad input: typed, naming the fix, nothing changed.
    let foreign: IpcMemKey = "braid-sim-ipc-1-4000000000".parse().unwrap();
    assert!(matches!(
        device.ipc_import(&foreign, 4),
        Err(StreamError::Ipc(IpcError::ImportRefused { .. }))
    ));
    let err = device.ipc_import(&closed, 4).unwrap_err();
    assert!(
        matches!(&err, StreamError::Ipc(IpcError::ImportRefused { key, .. }) if *key == closed.to_string()),
        "{err:?}"
    );
    assert_eq!(
        device.ipc_close_export(&key).unwrap_err(),
        StreamError::Ipc(IpcError::NotExported {
            key: key.to_string()
        })
    );
    assert!(matches!(
        device.open_ipc_event(&IpcEventHandle([7; 64])),
        Err(StreamError::Ipc(IpcError::EventOpenRefused { .. }))
    ));
    println!("ready");
    assert_eq!(next_line(&mut stdin).as_deref(), Some("go"));

    let imported = device.ipc_import(&key, ELEMENTS * 4).unwrap();
    let opened = device.open_ipc_event(&event).unwrap();
    let s = device.create_stream(0).unwrap();
    let started = Instant::now();
    s.wait(&opened).unwrap();
    let data = s.copy_d2h(imported.slice()).unwrap().wait_f32().unwrap();
    let waited = started.elapsed();
    assert_eq!(data, vec![42.0; ELEMENTS as usize], "the exporter's data");
    assert!(
        waited >= PARENT_PAUSE / 2,
        "the wait returned after {waited:?}, before the exporter's record was done"
    );
    s.launch(&Kernel::Scale {
        src: imported.slice(),
        dst: imported.slice(),
        factor: 2.0,
    })
    .unwrap();
    s.synchronize().unwrap();
    drop(imported);
    println!("wrote");
}

#[test]
fn memory_and_an_event_shared_between_two_processes() {
    if std::env::var(ROLE).is_ok() {
        child();
        return;
    }
    let device = device();
    let s = device.create_stream(0).unwrap();
    let memory = device.alloc(ELEMENTS * 4).unwrap();
    let slice = memory.slice();
    s.memset(slice, 0).unwrap();
    s.synchronize().unwrap();
    let key = device.ipc_export(slice, false).unwrap();
    assert_eq!(
        device.ipc_import(&key, 4).unwrap_err(),
        StreamError::Ipc(IpcError::OwnExport {
            key: key.to_string()
        })
    );
    // An export closed at once: a second close is refused here, an import in the child.
    let other = device.alloc(4096).unwrap();
    let closed = device.ipc_export(other.slice(), false).unwrap();
    device.ipc_close_export(&closed).unwrap();
    assert_eq!(
        device.ipc_close_export(&closed).unwrap_err(),
        StreamError::Ipc(IpcError::AlreadyClosed {
            key: closed.to_string()
        })
    );
    let event = device.create_ipc_event().unwrap();

    let env = [
        (ROLE, "importer".to_string()),
        (KEY, key.to_string()),
        (CLOSED, closed.to_string()),
        (EVENT, event.ipc_handle().unwrap().to_string()),
    ];
    let mut child = ChildTest::spawn(
        "ipc_processes::memory_and_an_event_shared_between_two_processes",
        &env,
    )
    .unwrap();
    child.expect("ready").unwrap();

    s.launch(&Kernel::Busy {
        duration_ns: 50_000_000,
    })
    .unwrap();
    s.launch(&Kernel::Fill {
        dst: slice,
        value: 42.0,
    })
    .unwrap();
    event.record(&s).unwrap();
    child.send("go").unwrap();
    // The child waits on the record meanwhile; this host passes it only now.
    std::thread::sleep(PARENT_PAUSE);
    event.synchronize().unwrap();
    child.expect("wrote").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the child failed");

    assert_eq!(read_f32(&device, slice), vec![84.0; ELEMENTS as usize]);
    device.ipc_close_export(&key).unwrap();
    // The device still works after every refusal.
    let after = device.alloc(64).unwrap();
    s.launch(&Kernel::Fill {
        dst: after.slice(),
        value: 1.0,
    })
    .unwrap();
    assert_eq!(read_f32(&device, after.slice()), vec![1.0; 16]);
}
