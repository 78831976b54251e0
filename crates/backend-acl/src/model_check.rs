//! The ACL backend's locks under the model checker (feature `model-check`): small programs
//! of host threads drive devices over a mocked ACL (`MockAclCalls` answering as a runtime
//! that accepts everything, [`FakeAcl`]), through the front layer and the caching allocator,
//! in every schedule with at most [`PREEMPTIONS`] preemptions
//! (`braid_stream_core::sync::explore`). The locks explored are the front layer's, the
//! allocator's and this crate's: a device's error slot (taken by every call's thread
//! binding), its capture node counts, its enabled peers, a stream's capture model. Each
//! program checks that no schedule deadlocks and that its outcome is exact in each.
//!
//! `.ci/run` runs it as `cargo test -p braid-backend-acl --features model-check --lib
//! model_check`.

use crate::calls::{Handle, MockAclCalls};
use crate::device::{AclConfig, AclDevice};
use crate::ffi::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_NONE, ACL_STREAM_STATUS_COMPLETE,
};
use crate::AclBackend;
use braid_allocator::{AllocatorConfig, CachingAllocator, CrossStreamMode};
use braid_stream_core::sync::explore::{explore, explore_reaching};
use braid_stream_core::{CaptureMode, Device, Domain};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How many times a schedule may switch away from a thread that could have gone on (the
/// conformance suite's small programs use the same bound).
const PREEMPTIONS: usize = 3;
/// For the allocator program, whose schedules with three preemptions take minutes.
const PREEMPTIONS_LARGE: usize = 2;

/// What the mocked runtime knows: the handles it gave, the memory it lent, the streams being
/// captured and the work captured, the peer access enabled. Its own locks are `std`'s, held
/// only inside one mocked call (the model checker does not see them, and never switches
/// threads while one is held).
#[derive(Default)]
struct FakeAcl {
    next_handle: AtomicUsize,
    /// Live device allocations: address → size.
    memory: Mutex<HashMap<u64, usize>>,
    /// Streams in a capture → the capture's model.
    capturing: Mutex<HashMap<Handle, Handle>>,
    /// Memsets the runtime captured into a model rather than ran.
    captured_memsets: AtomicUsize,
    /// `aclrtDeviceEnablePeerAccess` calls.
    peer_enables: AtomicUsize,
}

impl FakeAcl {
    fn handle(&self) -> Handle {
        0x1000 + 0x10 * self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// A mock of `devices` devices answering every call the programs make as a runtime
    /// that accepts everything.
    fn calls(self: &Arc<Self>, devices: u32) -> MockAclCalls {
        let mut m = MockAclCalls::new();
        m.expect_init().return_const(0);
        m.expect_device_count().returning(move || Ok(devices));
        m.expect_set_device().returning(|_| 0);
        m.expect_reset_device().returning(|_| 0);
        m.expect_recent_error_message().returning(String::new);
        m.expect_acl_api().returning(|| None);
        m.expect_mem_info().returning(|_| Ok((1 << 30, 1 << 30)));
        m.expect_vmm_granularity().returning(|_| None);
        m.expect_sanitizer_report_count().returning(|_| None);
        let fake = self.clone();
        m.expect_create_stream_with_config()
            .returning(move |_, _| Some(Ok(fake.handle())));
        m.expect_destroy_stream().returning(|_| 0);
        m.expect_synchronize_stream().returning(|_| 0);
        m.expect_stream_query()
            .returning(|_| Some(Ok(ACL_STREAM_STATUS_COMPLETE)));
        m.expect_stream_wait_event().returning(|_, _| 0);
        let fake = self.clone();
        m.expect_create_event_ex_with_flag()
            .returning(move |_| Some(Ok(fake.handle())));
        m.expect_destroy_event().returning(|_| 0);
        m.expect_record_event().returning(|_, _| 0);
        m.expect_query_event_status()
            .returning(|_| Ok(ACL_EVENT_RECORDED_STATUS_COMPLETE));
        m.expect_synchronize_event().returning(|_| 0);
        m.expect_synchronize_device().returning(|| 0);
        let fake = self.clone();
        m.expect_malloc().returning(move |size, _| {
            let addr = 0x1_0000_0000
                + 0x100_0000 * fake.next_handle.fetch_add(1, Ordering::Relaxed) as u64;
            fake.memory.lock().unwrap().insert(addr, size);
            Ok(addr)
        });
        let fake = self.clone();
        m.expect_free().returning(move |addr| {
            let lent = fake.memory.lock().unwrap().remove(&addr);
            assert!(lent.is_some(), "aclrtFree of {addr:#x}, which was not lent");
            0
        });
        let fake = self.clone();
        m.expect_memset_async()
            .returning(move |_, _, _, _, stream| {
                if fake.capturing.lock().unwrap().contains_key(&stream) {
                    fake.captured_memsets.fetch_add(1, Ordering::Relaxed);
                }
                0
            });
        let fake = self.clone();
        m.expect_capture_begin().returning(move |stream, _| {
            let model = fake.handle();
            fake.capturing.lock().unwrap().insert(stream, model);
            Some(0)
        });
        let fake = self.clone();
        m.expect_capture_get_info().returning(move |stream| {
            Some(Ok(match fake.capturing.lock().unwrap().get(&stream) {
                Some(&model) => (ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, model),
                None => (ACL_MODEL_RI_CAPTURE_STATUS_NONE, 0),
            }))
        });
        let fake = self.clone();
        m.expect_capture_end().returning(move |stream| {
            let model = fake.capturing.lock().unwrap().remove(&stream);
            Some(Ok(
                model.expect("aclmdlRICaptureEnd on a stream not capturing")
            ))
        });
        m.expect_model_destroy().returning(|_| Some(0));
        m.expect_capture_thread_exchange_mode()
            .returning(|_| Some(Ok(0)));
        m.expect_can_access_peer().returning(|_, _| Some(Ok(1)));
        let fake = self.clone();
        m.expect_enable_peer_access().returning(move |_, _| {
            fake.peer_enables.fetch_add(1, Ordering::Relaxed);
            Some(0)
        });
        m
    }
}

/// A front-layer device `ordinal` over `calls`.
fn device(calls: &Arc<MockAclCalls>, ordinal: u32) -> Device<AclBackend> {
    let hal = AclDevice::with_calls(calls.clone(), ordinal, AclConfig::default()).unwrap();
    Device::new(hal).unwrap()
}

/// Thread A captures stream 1 (begin, end); thread B memsets on stream 1 meanwhile. The
/// memset lands wholly before, inside or after the capture: the position the model gives it
/// is in the capture's domain exactly when the runtime captured it, and the graph counts it
/// (the device's node counts, updated by thread B under its lock while thread A's capture
/// begins and ends) exactly then.
static MEMSET_CAPTURED: AtomicUsize = AtomicUsize::new(0);
static MEMSET_EAGER: AtomicUsize = AtomicUsize::new(0);

fn memset_racing_a_capture() {
    let fake = Arc::new(FakeAcl::default());
    let device = device(&Arc::new(fake.calls(1)), 0);
    let s1 = device.create_stream(0).unwrap();
    let buffer = device.alloc(256).unwrap();
    let slice = buffer.slice();
    let capturer = {
        let s1 = s1.clone();
        shuttle::thread::spawn(move || {
            s1.begin_capture(CaptureMode::Relaxed).unwrap();
            s1.end_capture().unwrap()
        })
    };
    let launcher = shuttle::thread::spawn(move || s1.memset(slice, 1).unwrap());
    let graph = capturer.join().unwrap();
    let position = launcher.join().unwrap();
    let captured = matches!(position.domain, Domain::Capture(_));
    let runtime_captured = fake.captured_memsets.load(Ordering::Relaxed) == 1;
    assert_eq!(
        captured, runtime_captured,
        "model domain {:?}, the runtime captured the memset: {runtime_captured}",
        position.domain
    );
    assert_eq!(
        graph.node_count(),
        usize::from(captured),
        "the graph's node count"
    );
    let outcome = if captured {
        &MEMSET_CAPTURED
    } else {
        &MEMSET_EAGER
    };
    outcome.fetch_add(1, Ordering::Relaxed);
    drop(graph);
    drop(buffer);
}

#[test]
fn a_memset_racing_a_capture_is_counted_where_the_runtime_put_it_in_every_interleaving() {
    explore_reaching(
        "ACL memset/capture",
        memset_racing_a_capture,
        PREEMPTIONS,
        &[("captured", &MEMSET_CAPTURED), ("eager", &MEMSET_EAGER)],
    );
}

/// One caching allocator over an ACL device, shared by two threads. Thread A makes stream 2
/// wait for stream 1, memsets a buffer of stream 1 there, records the use and frees the
/// buffer; thread B allocates, memsets and frees buffers of the same size on stream 1. In
/// every interleaving: no deadlock, the allocator's invariants hold, every byte comes back,
/// and once the allocator is gone the runtime has every segment back.
fn cross_stream_free_racing_allocations() {
    let fake = Arc::new(FakeAcl::default());
    let device = device(&Arc::new(fake.calls(1)), 0);
    let alloc = CachingAllocator::new(
        device.clone(),
        AllocatorConfig::new().cross_stream(CrossStreamMode::Manual),
    )
    .unwrap();
    let (s1, s2) = (
        device.create_stream(0).unwrap(),
        device.create_stream(0).unwrap(),
    );
    let buffer = alloc.alloc(512, &s1).unwrap();
    s1.memset(buffer.slice(), 1).unwrap();
    let reader = {
        let (s1, s2) = (s1.clone(), s2.clone());
        shuttle::thread::spawn(move || {
            s2.wait_stream(&s1).unwrap();
            s2.memset(buffer.slice().sub(0, 256).unwrap(), 2).unwrap();
            buffer.record_stream(&s2).unwrap();
            drop(buffer);
        })
    };
    let writer = {
        let (alloc, s1) = (alloc.clone(), s1.clone());
        shuttle::thread::spawn(move || {
            for _ in 0..2 {
                let other = alloc.alloc(512, &s1).unwrap();
                s1.memset(other.slice(), 3).unwrap();
            }
        })
    };
    reader.join().unwrap();
    writer.join().unwrap();
    let last = alloc.alloc(512, &s1).unwrap();
    drop(last);
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
    drop((alloc, s1, s2, device));
    let lent = fake.memory.lock().unwrap().len();
    assert_eq!(lent, 0, "segments still lent by the runtime");
}

#[test]
fn a_cross_stream_free_racing_allocations_on_acl_is_exact_in_every_interleaving() {
    let runs = explore(cross_stream_free_racing_allocations, PREEMPTIONS_LARGE);
    assert!(runs > 1, "{runs} interleavings explored");
    eprintln!("ACL allocator cross-stream free: {runs} interleavings explored");
}

/// Two threads enable device 0's access to device 1 at once: ACL is asked once (the
/// backend's promise: later calls succeed without a runtime call), both succeed, and device
/// 0 then has access.
fn peer_access_enabled_from_two_threads() {
    let fake = Arc::new(FakeAcl::default());
    let calls = Arc::new(fake.calls(2));
    let (d0, d1) = (device(&calls, 0), device(&calls, 1));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (d0, d1) = (d0.clone(), d1.clone());
            shuttle::thread::spawn(move || d0.enable_peer_access(&d1).unwrap())
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(d0.has_peer_access(&d1));
    let enables = fake.peer_enables.load(Ordering::Relaxed);
    assert_eq!(enables, 1, "aclrtDeviceEnablePeerAccess calls");
}

#[test]
fn peer_access_enabled_from_two_threads_asks_acl_once_in_every_interleaving() {
    let runs = explore(peer_access_enabled_from_two_threads, PREEMPTIONS);
    assert!(runs > 1, "{runs} interleavings explored");
    eprintln!("ACL peer access: {runs} interleavings explored");
}
