//! A buffer of one device used by another device's stream (a peer copy, a collective) is
//! like any cross-stream use: `record_stream` with a peer's stream, and automatic mode seeing
//! the uses other devices' streams make, keep the memory from being handed out again until
//! those uses are ordered before the allocation stream's next work.
//!
//! `record_stream` with a peer's stream, refused and then allowed, is the conformance case
//! `cross_device::record_stream_across_devices`. Runs on two devices of a simulated node
//! (`SimNode`).

use braid_allocator::{AllocatorConfig, CachingAllocator, CrossStreamMode};
use braid_backend_sim::{NodeConfig, SimBackend, SimNode};
use braid_stream_core::{Device, Kernel, Stream};

type Dev = Device<SimBackend>;

const BUSY: Kernel = Kernel::Busy {
    duration_ns: 5_000_000,
};

/// Two devices of a fresh node.
fn pair() -> (Dev, Dev) {
    let node = SimNode::new(NodeConfig::new(2));
    let device = |i| Device::new(node.device(i).unwrap()).unwrap();
    (device(0), device(1))
}

fn allocator(device: &Dev, mode: CrossStreamMode) -> CachingAllocator<SimBackend> {
    CachingAllocator::new(device.clone(), AllocatorConfig::new().cross_stream(mode)).unwrap()
}

/// Copies `buf` (on `a`) into fresh memory of `b` on `sb`, after long work there: the copy
/// is still running when it returns.
fn peer_copy_after_work(
    a: &Dev,
    b: &Dev,
    sb: &Stream<SimBackend>,
    buf: &braid_allocator::DeviceBuffer<SimBackend>,
) -> braid_stream_core::DeviceMemory<SimBackend> {
    let dst = b.alloc(buf.size()).unwrap();
    sb.launch(&BUSY).unwrap();
    sb.copy_peer(buf.slice(), a, dst.slice(), b).unwrap();
    dst
}

#[test]
fn erase_stream_forgets_a_peers_use() {
    let (a, b) = pair();
    let alloc = allocator(&a, CrossStreamMode::Manual);
    let (sa, sb) = (a.default_stream(), b.create_stream(0).unwrap());
    b.enable_peer_access(&a).unwrap();
    let buf = alloc.alloc(4096, &sa).unwrap();
    let _dst = peer_copy_after_work(&a, &b, &sb, &buf);
    buf.record_stream(&sb).unwrap();
    buf.erase_stream(&sb).unwrap();
    let first = buf.ptr();
    drop(buf);
    assert_eq!(alloc.pending_free_bytes(), 0);
    assert_eq!(alloc.alloc(4096, &sa).unwrap().ptr(), first);
}

#[test]
fn automatic_mode_sees_a_peer_copy_and_waits_for_it_to_be_ordered() {
    let (a, b) = pair();
    let alloc = allocator(&a, CrossStreamMode::Automatic);
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    b.enable_peer_access(&a).unwrap();
    let buf = alloc.alloc(4096, &sa).unwrap();
    let _dst = peer_copy_after_work(&a, &b, &sb, &buf);
    let first = buf.ptr();
    drop(buf);
    assert_eq!(alloc.pending_free_bytes(), 4096, "B's copy holds the block");
    assert_ne!(alloc.alloc(4096, &sa).unwrap().ptr(), first);
    // An event from B waited on by the allocation stream orders B's use before A's next
    // work: reused with no host synchronization at all.
    sa.wait(&sb.record_event().unwrap()).unwrap();
    assert_eq!(alloc.alloc(4096, &sa).unwrap().ptr(), first);
    assert_eq!(alloc.pending_free_bytes(), 0);
    alloc.check_invariants().unwrap();
}

#[test]
fn a_peer_use_is_settled_by_its_event_and_by_synchronizing_the_pending_frees() {
    let (a, b) = pair();
    let alloc = allocator(&a, CrossStreamMode::Automatic);
    let sa = a.default_stream();
    let sb = b.create_stream(0).unwrap();
    b.enable_peer_access(&a).unwrap();
    let buf = alloc.alloc(4096, &sa).unwrap();
    let _dst = peer_copy_after_work(&a, &b, &sb, &buf);
    drop(buf);
    assert_eq!(alloc.pending_free_bytes(), 4096);
    // A's device synchronize says nothing of B's work.
    a.synchronize().unwrap();
    alloc.process_pending();
    assert_eq!(alloc.pending_free_bytes(), 4096);
    // The allocator recorded its event on B's stream: emptying the cache synchronizes it.
    alloc.empty_cache();
    assert_eq!(alloc.pending_free_bytes(), 0);
    assert_eq!(alloc.memory_stats().num_events_recorded, 1);
    assert!(
        b.is_complete(sb.position()),
        "the event synchronized B's stream"
    );
    alloc.check_invariants().unwrap();
}
