//! Several devices, one ordering model: cross-device waits, host knowledge handed across
//! devices, peer access and memory of one device used on another device's stream.
//!
//! These run on the devices of a simulated node (`SimNode`): one virtual time axis, real
//! cross-device waits, peer access within a server, distinct address ranges per device.

use braid_backend_sim::{NodeConfig, SimBackend, SimNode, Topology};
use braid_stream_core::{
    Access, CaptureMode, Device, DeviceSlice, Kernel, StreamError, StreamPosition, UseObserver,
};
use std::sync::{Arc, Mutex};

type Dev = Device<SimBackend>;

/// The devices of a fresh node of `n` devices in one server.
fn node(n: u32) -> Vec<Dev> {
    node_with(NodeConfig::new(n))
}

fn node_with(config: NodeConfig) -> Vec<Dev> {
    SimNode::new(config)
        .devices()
        .into_iter()
        .map(|d| Device::new(d).unwrap())
        .collect()
}

/// Two devices of one node.
fn pair() -> (Dev, Dev) {
    let mut devices = node(2);
    let b = devices.pop().unwrap();
    (devices.pop().unwrap(), b)
}

const BUSY: Kernel = Kernel::Busy {
    duration_ns: 1_000_000,
};

#[derive(Default)]
struct Uses(Mutex<Vec<(StreamPosition, DeviceSlice, Access)>>);

impl UseObserver for Uses {
    fn note_use(&self, position: StreamPosition, range: DeviceSlice, access: Access) {
        self.0.lock().unwrap().push((position, range, access));
    }
}

/// An observer registered on `device`; the second handle keeps it registered (the device
/// holds observers weakly).
fn observe(device: &Dev) -> (Arc<Uses>, Arc<dyn UseObserver>) {
    let uses = Arc::new(Uses::default());
    let registered: Arc<dyn UseObserver> = uses.clone();
    device.add_use_observer(&registered);
    (uses, registered)
}

#[test]
fn devices_with_one_ordinal_have_distinct_identities_in_errors() {
    // Device 0 of two nodes.
    let (a, b) = (node(1).remove(0), node(1).remove(0));
    assert_ne!(a.id(), b.id());
    assert_ne!(a.id().to_string(), b.id().to_string());
    let err = a.use_stream(&b.default_stream()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&a.id().to_string()) && text.contains(&b.id().to_string()),
        "{text}"
    );
    // A range no device owns names the stream's device by its identity.
    let gone = {
        let mem = b.alloc(4096).unwrap();
        mem.slice()
    };
    let bogus = DeviceSlice::new(braid_stream_core::DevicePtr(gone.ptr.0 + (1 << 40)), 64);
    match b.default_stream().memset(bogus, 0) {
        Err(StreamError::RangeNotLive { device, .. }) => assert_eq!(device, b.id()),
        other => panic!("expected RangeNotLive, got {other:?}"),
    }
}

#[test]
fn an_event_of_one_device_orders_a_stream_of_another() {
    let (a, b) = pair();
    let (sa, sb, other_b) = (
        a.create_stream(0).unwrap(),
        b.create_stream(0).unwrap(),
        b.create_stream(0).unwrap(),
    );
    let u = sa.launch(&BUSY).unwrap();
    assert_eq!(u.device, a.id().uid);
    assert!(!b.is_ordered_before(u, &sb));
    let event = sa.record_event().unwrap();
    let later = sa.launch(&BUSY).unwrap();
    sb.wait(&event).unwrap();
    // The answer does not depend on the device asked.
    assert!(b.is_ordered_before(u, &sb) && a.is_ordered_before(u, &sb));
    assert!(!b.is_ordered_before(u, &other_b));
    assert!(!b.is_ordered_before(later, &sb));
    // Transitive back to A: a stream of A waiting on B's stream is ordered after u, and B's
    // work.
    let w = sb.launch(&BUSY).unwrap();
    let side_a = a.create_stream(0).unwrap();
    side_a.wait_stream(&sb).unwrap();
    assert!(a.is_ordered_before(u, &side_a) && a.is_ordered_before(w, &side_a));
    // Not complete for anyone's host yet.
    assert!(!a.is_complete(u) && !b.is_complete(u));
}

#[test]
fn host_synchronization_of_one_device_orders_only_that_devices_work() {
    let (a, b) = pair();
    let (sa, other_a, sb) = (
        a.create_stream(0).unwrap(),
        a.create_stream(0).unwrap(),
        b.create_stream(0).unwrap(),
    );
    let u = sa.launch(&BUSY).unwrap();
    let unrelated = other_a.launch(&BUSY).unwrap();
    let wb = sb.launch(&BUSY).unwrap();
    b.synchronize().unwrap();
    assert!(b.is_complete(wb));
    assert!(
        !a.is_complete(u) && !b.is_complete(u),
        "B's synchronize knows nothing of A"
    );
    // B waits on A's work; an event on B after it, once complete, completes that A work.
    sb.wait(&sa.record_event().unwrap()).unwrap();
    let eb = sb.record_event().unwrap();
    eb.synchronize().unwrap();
    assert!(a.is_complete(u) && b.is_complete(u));
    assert!(
        a.is_ordered_before(u, &other_a),
        "complete work precedes everything"
    );
    assert!(!a.is_complete(unrelated));
    // A stream synchronize and a true query hand on the same knowledge.
    let v = sa.launch(&BUSY).unwrap();
    sb.wait(&sa.record_event().unwrap()).unwrap();
    sb.synchronize().unwrap();
    assert!(a.is_complete(v));
    let x = sa.launch(&BUSY).unwrap();
    sb.wait(&sa.record_event().unwrap()).unwrap();
    b.synchronize().unwrap();
    assert!(a.is_complete(x));
    assert!(!a.is_complete(unrelated));
}

#[test]
fn work_of_a_dropped_device_is_complete() {
    let (a, b) = pair();
    let u = {
        let a = a;
        a.default_stream().launch(&BUSY).unwrap()
    };
    assert!(b.is_complete(u));
    assert!(Dev::by_uid(u.device).is_none());
}

#[test]
fn devices_are_found_by_uid() {
    let a = node(4).pop().unwrap();
    assert_eq!(a.ordinal(), 3);
    let found = Dev::by_uid(a.id().uid).expect("live device");
    assert!(found.same_as(&a));
    assert!(Dev::by_uid(u64::MAX).is_none());
}

#[test]
fn captures_stay_per_device() {
    let (a, b) = pair();
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    sa.launch(&BUSY).unwrap();
    let eager_a = sa.record_event().unwrap();
    // A capturing stream of B waits on no eager work of A.
    sb.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(matches!(
        sb.wait(&eager_a),
        Err(StreamError::CaptureIsolation { .. })
    ));
    sb.launch(&BUSY).unwrap();
    sb.end_capture().unwrap();
    // An eager stream of B does not join A's capture.
    sa.begin_capture(CaptureMode::Relaxed).unwrap();
    sa.launch(&BUSY).unwrap();
    let captured = sa.record_event().unwrap();
    assert!(matches!(
        sb.wait(&captured),
        Err(StreamError::CaptureIsolation { .. })
    ));
    assert!(!sb.is_capturing());
    sa.end_capture().unwrap();
    // Both devices still work.
    sb.wait(&eager_a).unwrap();
    b.synchronize().unwrap();
}

#[test]
fn peer_access_is_enabled_once_per_direction_and_refused_with_both_devices_named() {
    let (a, b) = pair();
    assert!(a.can_access_peer(&b).unwrap());
    assert!(a.can_access_peer(&a).unwrap() && a.has_peer_access(&a));
    assert!(!a.has_peer_access(&b));
    // The backend's call costs host time; the second enable does not reach it.
    let before = a.hal().host_time_ns();
    a.enable_peer_access(&b).unwrap();
    let once = a.hal().host_time_ns();
    assert!(once > before);
    a.enable_peer_access(&b).unwrap();
    assert_eq!(a.hal().host_time_ns(), once);
    assert!(a.has_peer_access(&b));
    assert!(!b.has_peer_access(&a), "one direction only");
    // A device of another node, and one of another server of the same node: no path, and
    // asking is not an error (the front layer asks while looking for memory's owner).
    let other_node = node(1).remove(0);
    let servers = node_with(NodeConfig::new(2).topology(Topology::two_servers(1)));
    for (from, to) in [(&a, &other_node), (&servers[0], &servers[1])] {
        assert!(!from.can_access_peer(to).unwrap());
        match from.enable_peer_access(to) {
            Err(StreamError::PeerAccessUnavailable { from: f, to: t, .. }) => {
                assert_eq!((f, t), (from.id(), to.id()))
            }
            other => panic!("expected PeerAccessUnavailable, got {other:?}"),
        }
        assert!(!from.has_peer_access(to));
    }
}

#[test]
fn memory_of_another_device_needs_peer_access() {
    let (a, b) = pair();
    let on_a = a.alloc(4096).unwrap();
    let on_b = b.alloc(4096).unwrap();
    let sb = b.create_stream(0).unwrap();
    let fill = Kernel::Fill {
        dst: on_a.slice(),
        value: 1.0,
    };
    let refused = sb.launch(&fill).unwrap_err();
    match &refused {
        StreamError::ForeignMemory(foreign) => {
            assert_eq!(
                (foreign.stream_device, foreign.memory_device),
                (b.id(), a.id())
            );
            assert_eq!(foreign.range, on_a.slice());
            assert_eq!(foreign.work, "fill");
        }
        other => panic!("expected ForeignMemory, got {other:?}"),
    }
    let text = refused.to_string();
    assert!(text.contains(&a.id().to_string()) && text.contains(&b.id().to_string()));
    assert!(matches!(
        sb.memset(on_a.slice(), 0),
        Err(StreamError::ForeignMemory(_))
    ));
    assert!(matches!(
        sb.copy_d2d(on_a.slice(), on_b.slice()),
        Err(StreamError::ForeignMemory(_))
    ));
    assert_eq!(sb.position().seq, 0, "nothing refused reached the stream");
    // With peer access from B to A: accepted, and A's observers see B's use.
    let ((uses_a, _keep_a), (uses_b, _keep_b)) = (observe(&a), observe(&b));
    b.enable_peer_access(&a).unwrap();
    let pos = sb.copy_d2d(on_a.slice(), on_b.slice()).unwrap();
    assert_eq!(pos.device, b.id().uid);
    assert_eq!(
        *uses_a.0.lock().unwrap(),
        vec![(pos, on_a.slice(), Access::Read)]
    );
    assert_eq!(
        *uses_b.0.lock().unwrap(),
        vec![(pos, on_b.slice(), Access::Write)]
    );
    sb.launch(&fill).unwrap();
    assert_eq!(uses_a.0.lock().unwrap().len(), 2);
    assert_eq!(uses_b.0.lock().unwrap().len(), 1);
    b.synchronize().unwrap();
}

#[test]
fn foreign_work_on_peer_memory_is_checked_and_reported_to_the_owner() {
    let (a, b) = pair();
    let on_a = a.alloc(4096).unwrap();
    let on_b = b.alloc(4096).unwrap();
    let sb = b.create_stream(0).unwrap();
    let uses = [(on_a.slice(), Access::Read), (on_b.slice(), Access::Write)];
    assert!(matches!(
        sb.note_foreign_work(&uses),
        Err(StreamError::ForeignMemory(_))
    ));
    assert_eq!(sb.position().seq, 0, "a refused note takes no position");
    let ((uses_a, _keep_a), (uses_b, _keep_b)) = (observe(&a), observe(&b));
    b.enable_peer_access(&a).unwrap();
    let pos = sb.note_foreign_work(&uses).unwrap();
    assert_eq!(
        *uses_a.0.lock().unwrap(),
        vec![(pos, on_a.slice(), Access::Read)],
        "the owner's observers see the use of its memory"
    );
    assert_eq!(
        *uses_b.0.lock().unwrap(),
        vec![(pos, on_b.slice(), Access::Write)]
    );
    let gone = a.alloc(4096).unwrap().slice();
    assert!(matches!(
        sb.note_foreign_work(&[(gone, Access::Read)]),
        Err(StreamError::RangeNotLive { .. })
    ));
    b.synchronize().unwrap();
}

#[test]
fn peer_copies_name_both_devices_and_note_both_uses() {
    let devices = node(3);
    let (a, b, c) = (devices[0].clone(), devices[1].clone(), devices[2].clone());
    let (src, dst) = (a.alloc(4096).unwrap(), b.alloc(4096).unwrap());
    let sb = b.create_stream(0).unwrap();
    match sb.copy_peer(src.slice(), &a, dst.slice(), &b) {
        Err(StreamError::PeerAccessUnavailable { from, to, .. }) => {
            assert_eq!((from, to), (b.id(), a.id()))
        }
        other => panic!("expected PeerAccessUnavailable, got {other:?}"),
    }
    let sc = c.default_stream();
    assert!(matches!(
        sc.copy_peer(src.slice(), &a, dst.slice(), &b),
        Err(StreamError::WrongDevice { .. })
    ));
    b.enable_peer_access(&a).unwrap();
    let short = dst.range(0, 64).unwrap();
    assert!(matches!(
        sb.copy_peer(src.slice(), &a, short, &b),
        Err(StreamError::OutOfBounds { .. })
    ));
    // The source is written on A's stream; B's stream waits for it, then copies.
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let sa = a.default_stream();
    sa.copy_h2d(src.slice(), pattern.clone().into()).unwrap();
    sb.wait(&sa.record_event().unwrap()).unwrap();
    let ((uses_a, _keep_a), (uses_b, _keep_b)) = (observe(&a), observe(&b));
    let pos = sb.copy_peer(src.slice(), &a, dst.slice(), &b).unwrap();
    assert_eq!(
        *uses_a.0.lock().unwrap(),
        vec![(pos, src.slice(), Access::Read)]
    );
    assert_eq!(
        *uses_b.0.lock().unwrap(),
        vec![(pos, dst.slice(), Access::Write)]
    );
    assert_eq!(
        &sb.copy_d2h(dst.slice()).unwrap().wait().unwrap()[..],
        &pattern[..]
    );
    // The other direction on A's stream needs A's own peer access to B.
    assert!(matches!(
        sa.copy_peer(src.slice(), &a, dst.slice(), &b),
        Err(StreamError::PeerAccessUnavailable { .. })
    ));
    b.synchronize().unwrap();
}

/// Sets its flag when dropped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl braid_stream_core::GraphHold for DropFlag {}

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn drop_flag() -> (DropFlag, Arc<std::sync::atomic::AtomicBool>) {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    (DropFlag(flag.clone()), flag)
}

#[test]
fn captured_uses_of_peer_memory_reach_the_owners_capture_observers_and_attach_to_the_peers_capture()
{
    use std::sync::atomic::Ordering::SeqCst;
    let (a, b) = pair();
    b.enable_peer_access(&a).unwrap();
    let (on_a, on_b) = (a.alloc(4096).unwrap(), b.alloc(4096).unwrap());
    let captured = |device: &Dev| {
        let uses = Arc::new(Uses::default());
        let registered: Arc<dyn UseObserver> = uses.clone();
        device.add_capture_use_observer(&registered);
        (uses, registered)
    };
    let ((uses_a, _keep_a), (uses_b, _keep_b)) = (captured(&a), captured(&b));
    let sb = b.create_stream(0).unwrap();
    sb.begin_capture(CaptureMode::Global).unwrap();
    let copy = sb.copy_peer(on_a.slice(), &a, on_b.slice(), &b).unwrap();
    let fill = sb
        .launch(&Kernel::Fill {
            dst: on_a.slice(),
            value: 1.0,
        })
        .unwrap();
    assert_eq!((copy.device, fill.device), (b.id().uid, b.id().uid));
    assert!(matches!(copy.domain, braid_stream_core::Domain::Capture(_)));
    assert_eq!(
        *uses_a.0.lock().unwrap(),
        vec![
            (copy, on_a.slice(), Access::Read),
            (fill, on_a.slice(), Access::Write)
        ],
        "A's capture observers see B's captured uses of A's memory, at B's positions"
    );
    assert_eq!(
        *uses_b.0.lock().unwrap(),
        vec![(copy, on_b.slice(), Access::Write)]
    );
    // A hands an item to B's capture through B's position.
    let (item, kept) = drop_flag();
    assert!(a.attach_to_capture(copy, item), "attached to B's capture");
    let unknown = StreamPosition {
        device: u64::MAX,
        ..copy
    };
    let (item, refused) = drop_flag();
    assert!(!a.attach_to_capture(unknown, item));
    assert!(refused.load(SeqCst), "a refused item is dropped at once");
    let graph = sb.end_capture().unwrap();
    let (item, late) = drop_flag();
    assert!(
        !a.attach_to_capture(copy, item),
        "the capture has ended: refused"
    );
    assert!(late.load(SeqCst));
    assert!(!kept.load(SeqCst), "the item lives with B's graph");
    graph.launch(&sb).unwrap();
    drop(graph);
    assert!(
        !kept.load(SeqCst),
        "the item outlives the graph until its launch is observed complete"
    );
    b.synchronize().unwrap();
    assert!(
        kept.load(SeqCst),
        "released once B's host saw the launch complete"
    );
}
