//! Several devices, one ordering model: cross-device waits, host knowledge handed across
//! devices, peer access and memory of one device used on another device's stream.
//!
//! These run on `common::peer_sim`, a wrapper of the simulator that makes cross-device waits
//! host-blocking, because each `SimDevice::new` is its own simulator today. Once the simulator
//! is a node of devices (`SimNode`), the same tests can run on its devices directly.

#[path = "common/peer_sim.rs"]
mod peer_sim;

use braid_stream_core::{
    Access, CaptureMode, Device, DeviceMemory, DeviceSlice, Error, Kernel, StreamPosition,
    UseObserver,
};
use peer_sim::{PeerDevice, PeerSim};
use std::sync::{Arc, Mutex};

type Dev = Device<PeerSim>;

fn device(ordinal: u32) -> Dev {
    Device::new(PeerDevice::new(ordinal)).unwrap()
}

const BUSY: Kernel = Kernel::Busy {
    duration_ns: 1_000_000,
};

/// Raw memory of `device` placed after a pad, so no other test device (each a simulator
/// handing out addresses from the same base) has it live.
fn padded(device: &Dev, len: u64) -> (DeviceMemory<PeerSim>, DeviceMemory<PeerSim>) {
    let pad = device.alloc(8 << 20).unwrap();
    (pad, device.alloc(len).unwrap())
}

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
    let (a, b) = (device(0), device(0));
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
        Err(Error::RangeNotLive { device, .. }) => assert_eq!(device, b.id()),
        other => panic!("expected RangeNotLive, got {other:?}"),
    }
}

#[test]
fn an_event_of_one_device_orders_a_stream_of_another() {
    let (a, b) = (device(0), device(1));
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
    let (a, b) = (device(0), device(1));
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
    let b = device(1);
    let u = {
        let a = device(0);
        a.default_stream().launch(&BUSY).unwrap()
    };
    assert!(b.is_complete(u));
    assert!(Dev::by_uid(u.device).is_none());
}

#[test]
fn devices_are_found_by_uid() {
    let a = device(3);
    let found = Dev::by_uid(a.id().uid).expect("live device");
    assert!(found.same_as(&a));
    assert!(Dev::by_uid(u64::MAX).is_none());
}

#[test]
fn captures_stay_per_device() {
    let (a, b) = (device(0), device(1));
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    sa.launch(&BUSY).unwrap();
    let eager_a = sa.record_event().unwrap();
    // A capturing stream of B waits on no eager work of A.
    sb.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(matches!(
        sb.wait(&eager_a),
        Err(Error::CaptureIsolation { .. })
    ));
    sb.launch(&BUSY).unwrap();
    sb.end_capture().unwrap();
    // An eager stream of B does not join A's capture.
    sa.begin_capture(CaptureMode::Relaxed).unwrap();
    sa.launch(&BUSY).unwrap();
    let captured = sa.record_event().unwrap();
    assert!(matches!(
        sb.wait(&captured),
        Err(Error::CaptureIsolation { .. })
    ));
    assert!(!sb.is_capturing());
    sa.end_capture().unwrap();
    // Both devices still work.
    sb.wait(&eager_a).unwrap();
    b.synchronize().unwrap();
}

#[test]
fn peer_access_is_enabled_once_per_direction_and_refused_with_both_devices_named() {
    let (a, b) = (device(0), device(1));
    let isolated = Device::new(PeerDevice::isolated(2)).unwrap();
    assert!(a.can_access_peer(&b).unwrap());
    assert!(a.can_access_peer(&a).unwrap() && a.has_peer_access(&a));
    assert!(!a.has_peer_access(&b));
    let enables = a.hal().enables.clone();
    a.enable_peer_access(&b).unwrap();
    a.enable_peer_access(&b).unwrap();
    assert_eq!(enables.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(a.has_peer_access(&b));
    assert!(!b.has_peer_access(&a), "one direction only");
    assert!(!a.can_access_peer(&isolated).unwrap());
    match a.enable_peer_access(&isolated) {
        Err(Error::PeerAccessUnavailable { from, to, .. }) => {
            assert_eq!((from, to), (a.id(), isolated.id()))
        }
        other => panic!("expected PeerAccessUnavailable, got {other:?}"),
    }
    assert!(!a.has_peer_access(&isolated));
}

#[test]
fn memory_of_another_device_needs_peer_access() {
    let (a, b) = (device(0), device(0));
    let (_pad, on_a) = padded(&a, 4096);
    let on_b = b.alloc(4096).unwrap();
    let sb = b.create_stream(0).unwrap();
    let fill = Kernel::Fill {
        dst: on_a.slice(),
        value: 1.0,
    };
    let refused = sb.launch(&fill).unwrap_err();
    match &refused {
        Error::ForeignMemory(foreign) => {
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
        Err(Error::ForeignMemory(_))
    ));
    assert!(matches!(
        sb.copy_d2d(on_a.slice(), on_b.slice()),
        Err(Error::ForeignMemory(_))
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
fn peer_copies_name_both_devices_and_note_both_uses() {
    let (a, b, c) = (device(0), device(1), device(2));
    let (src, dst) = (a.alloc(4096).unwrap(), b.alloc(4096).unwrap());
    let sb = b.create_stream(0).unwrap();
    match sb.copy_peer(src.slice(), &a, dst.slice(), &b) {
        Err(Error::PeerAccessUnavailable { from, to, .. }) => {
            assert_eq!((from, to), (b.id(), a.id()))
        }
        other => panic!("expected PeerAccessUnavailable, got {other:?}"),
    }
    let sc = c.default_stream();
    assert!(matches!(
        sc.copy_peer(src.slice(), &a, dst.slice(), &b),
        Err(Error::WrongDevice { .. })
    ));
    b.enable_peer_access(&a).unwrap();
    let short = dst.range(0, 64).unwrap();
    assert!(matches!(
        sb.copy_peer(src.slice(), &a, short, &b),
        Err(Error::OutOfBounds { .. })
    ));
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
    // The other direction on A's stream needs A's own peer access to B.
    let sa = a.default_stream();
    assert!(matches!(
        sa.copy_peer(src.slice(), &a, dst.slice(), &b),
        Err(Error::PeerAccessUnavailable { .. })
    ));
    b.synchronize().unwrap();
}
