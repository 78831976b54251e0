//! Memory and events shared between two processes on `braid-acl-sim`, as torch_npu shares
//! them over ACL's IPC API: this test binary re-runs itself as the importing process.
//!
//! The exporter shares a caching-allocator buffer (`DeviceBuffer::export_ipc`) and an IPC
//! event, lets the child's process id import, and writes the buffer behind a long kernel and
//! records the event; the child imports both, waits on the event from a stream and reads the
//! exporter's data (the wait blocks until the exporter's record is done: without it the child
//! would read zeros), then doubles the data in place. The exporter drops its shared buffer
//! while the child still imports it (the block is kept), and reads the child's result once
//! the child is gone. Physical memory of the virtual-memory API travels by shareable handle
//! in the same run.

use crate::common;

use braid_allocator::ipc::{buffers_kept_for_importers, release_unimported};
use braid_allocator::{import_ipc, AllocatorConfig, CachingAllocator, IpcBufferHandle};
use braid_backend_acl::AclBackend;
use braid_conformance::child_process::{next_line, ChildTest};
use braid_stream_core::hal::{Device as _, HalError};
use braid_stream_core::{
    f32_bytes, Device, DeviceSlice, IpcError, IpcEventHandle, IpcMemKey, Kernel, StreamError,
};
use std::time::{Duration, Instant};

const ROLE: &str = "BRAID_IPC_CHILD";
const BUFFER: &str = "BRAID_IPC_BUFFER";
const EVENT: &str = "BRAID_IPC_EVENT";
const SHAREABLE: &str = "BRAID_IPC_SHAREABLE";
const CLOSED: &str = "BRAID_IPC_CLOSED";
const ELEMENTS: u64 = 1024;
/// Long enough that the child waits on a record that is not done yet.
const PARENT_PAUSE: Duration = Duration::from_millis(300);
const PAGE: u64 = 2 << 20;

fn read_f32(device: &Device<AclBackend>, slice: DeviceSlice) -> Vec<f32> {
    let s = device.create_stream(0).unwrap();
    s.copy_d2h(slice).unwrap().wait_f32().unwrap()
}

fn line(input: &mut impl std::io::BufRead) -> String {
    next_line(input).unwrap_or_default()
}

/// The importing process.
fn child() {
    let device = common::device(0).unwrap();
    let mut stdin = std::io::stdin().lock();
    let handle: IpcBufferHandle = std::env::var(BUFFER).unwrap().parse().unwrap();
    let event: IpcEventHandle = std::env::var(EVENT).unwrap().parse().unwrap();
    let shareable: u64 = std::env::var(SHAREABLE).unwrap().parse().unwrap();
    let closed: IpcMemKey = std::env::var(CLOSED).unwrap().parse().unwrap();
    // Bad input first: each is typed, names the fix, and leaves the device working.
    let unknown: IpcMemKey = "braid-sim-ipc-1-4000000000".parse().unwrap();
    match device.ipc_import(&unknown, 4) {
        Err(StreamError::Ipc(IpcError::ImportRefused {
            key,
            cause: HalError::Native { code, message, .. },
        })) => {
            assert_eq!(key, unknown.to_string());
            assert_eq!(code, 107_000);
            assert!(message.contains("no export has key"), "{message}");
        }
        other => panic!("a foreign key imported: {other:?}"),
    }
    // The exporter closed this key before it started this process.
    let err = device.ipc_import(&closed, 4).unwrap_err();
    assert!(
        matches!(&err, StreamError::Ipc(IpcError::ImportRefused { key, .. }) if *key == closed.to_string()),
        "{err:?}"
    );
    assert!(err.to_string().contains("closed it"), "{err}");
    // Another process's key is not this process's to close.
    assert_eq!(
        device.ipc_close_export(&handle.key).unwrap_err(),
        StreamError::Ipc(IpcError::NotExported {
            key: handle.key.to_string()
        })
    );
    assert!(matches!(
        device.ipc_import(&handle.key, 0),
        Err(StreamError::Ipc(IpcError::Empty { .. }))
    ));
    // Not on the allow-list yet.
    match import_ipc(&device, &handle) {
        Err(braid_allocator::AllocError::Stream(StreamError::Ipc(IpcError::ImportRefused {
            cause: HalError::Native { message, .. },
            ..
        }))) => assert!(message.contains("allow-list"), "{message}"),
        other => panic!("imported before being allowed: {other:?}"),
    }
    println!("ready");
    assert_eq!(line(&mut stdin), "go");

    let imported = import_ipc(&device, &handle).unwrap();
    let opened = device.open_ipc_event(&event).unwrap();
    let s = device.create_stream(0).unwrap();
    let started = Instant::now();
    s.wait(&opened).unwrap();
    let waited = started.elapsed();
    let data = s.copy_d2h(imported.slice()).unwrap().wait_f32().unwrap();
    assert_eq!(data, vec![42.0; ELEMENTS as usize], "the exporter's data");
    assert!(
        opened.query().unwrap(),
        "the opened event is complete after the wait"
    );
    assert!(
        waited >= PARENT_PAUSE / 2,
        "the wait returned after {waited:?}, before the exporter's record was done"
    );
    // Only the exporter records its event.
    assert!(opened.record(&s).is_err());
    s.launch(&Kernel::Scale {
        src: imported.slice(),
        dst: imported.slice(),
        factor: 2.0,
    })
    .unwrap();
    s.synchronize().unwrap();

    // Physical memory by shareable handle, mapped into this process's reserved range.
    let at = device.hal().reserve_address(PAGE).unwrap();
    device.hal().map_shareable(shareable, at, PAGE).unwrap();
    let phys = read_f32(&device, DeviceSlice::new(at, 16));
    assert_eq!(phys, vec![5.0; 4], "the exporter's physical memory");
    // SAFETY: nothing uses the mapping any more (read back above, synchronously).
    unsafe { device.hal().unmap_physical(at, PAGE) }.unwrap();
    // SAFETY: nothing is mapped in the range any more.
    unsafe { device.hal().release_address(at) }.unwrap();

    println!("wrote");
    assert_eq!(line(&mut stdin), "done");
    drop(imported);
    println!("closed");
}

#[test]
fn memory_and_an_event_shared_between_two_processes() {
    if std::env::var(ROLE).is_ok() {
        child();
        return;
    }
    let device = common::device(0).unwrap();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let s = device.create_stream(0).unwrap();
    let buf = alloc.alloc(ELEMENTS * 4, &s).unwrap();
    s.memset(buf.slice(), 0).unwrap();
    s.synchronize().unwrap();
    let shared = buf.export_ipc(true).unwrap();
    let slice = shared.slice();
    // A process cannot import its own export.
    assert_eq!(
        device.ipc_import(&shared.handle().key, 4).unwrap_err(),
        StreamError::Ipc(IpcError::OwnExport {
            key: shared.handle().key.to_string()
        })
    );
    // An export closed at once: closing it again is refused here, importing it in the child.
    let closed_buf = alloc.alloc(4096, &s).unwrap();
    let closed = device.ipc_export(closed_buf.slice(), false).unwrap();
    device.ipc_close_export(&closed).unwrap();
    assert_eq!(
        device.ipc_close_export(&closed).unwrap_err(),
        StreamError::Ipc(IpcError::AlreadyClosed {
            key: closed.to_string()
        })
    );
    assert!(matches!(
        shared.allow_pids(&[]),
        Err(braid_allocator::AllocError::Stream(StreamError::Ipc(
            IpcError::BadPids { .. }
        )))
    ));
    let event = device.create_ipc_event().unwrap();

    // Physical memory of the virtual-memory API, written before it is shared.
    let at = device.hal().reserve_address(PAGE).unwrap();
    device.hal().map_physical(at, PAGE).unwrap();
    s.copy_h2d(DeviceSlice::new(at, 16), f32_bytes(&[5.0; 4]))
        .unwrap();
    s.synchronize().unwrap();
    let shareable = device.hal().export_mapping(at, false).unwrap();
    assert!(
        device.hal().export_mapping(at, false).is_err(),
        "one shareable handle per physical handle"
    );

    let env = [
        (ROLE, "importer".to_string()),
        (BUFFER, shared.handle().to_string()),
        (EVENT, event.ipc_handle().unwrap().to_string()),
        (SHAREABLE, shareable.to_string()),
        (CLOSED, closed.to_string()),
    ];
    let mut child = ChildTest::spawn(
        "ipc_processes::memory_and_an_event_shared_between_two_processes",
        &env,
    )
    .unwrap();
    child.expect("ready").unwrap();

    // The data, behind a long kernel; the record is done only when both are.
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
    shared
        .allow_pids(&[i32::try_from(child.id()).unwrap()])
        .unwrap();
    child.send("go").unwrap();
    // The child waits on the record meanwhile.
    std::thread::sleep(PARENT_PAUSE);
    event.synchronize().unwrap();

    child.expect("wrote").unwrap();
    assert_eq!(shared.importers(), 1);
    // Let go while the child still imports: the block is kept for it.
    drop(shared);
    assert_eq!(buffers_kept_for_importers(), 1);
    assert_eq!(release_unimported(), 0);
    child.send("done").unwrap();
    child.expect("closed").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the child failed");

    // The child doubled the data in place.
    assert_eq!(read_f32(&device, slice), vec![84.0; ELEMENTS as usize]);
    assert_eq!(release_unimported(), 1, "freed once the importer is gone");
    assert_eq!(buffers_kept_for_importers(), 0);
    // SAFETY: nothing uses the mapping (synchronized).
    unsafe { device.hal().unmap_physical(at, PAGE) }.unwrap();
    // SAFETY: nothing is mapped in it any more.
    unsafe { device.hal().release_address(at) }.unwrap();
}
