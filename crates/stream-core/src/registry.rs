//! The process's registry of devices by uid, so knowledge can cross devices: a host
//! observation on one device that covers another device's work is handed to that device, and
//! memory used on a stream is looked up among the other devices.
//!
//! Devices are held weakly (the registry keeps none alive). A device that finished dropping
//! (its drop synchronized it) stays listed as gone, so positions on it read as complete. The
//! registry's lock is a leaf: taken only to read or update the map, never while another
//! front-layer lock is waited for, and released before any device found is used or dropped.

use crate::sync::{GlobalMutex, GlobalMutexGuard};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

type AnyDevice = dyn Any + Send + Sync;

enum Entry {
    Live(Weak<AnyDevice>),
    /// Dropped: its drop synchronized the device, so all its work is complete.
    Gone,
}

static DEVICES: GlobalMutex<BTreeMap<u64, Entry>> = GlobalMutex::new(BTreeMap::new());

fn devices() -> GlobalMutexGuard<'static, BTreeMap<u64, Entry>> {
    DEVICES.lock()
}

/// What the registry knows of a uid.
pub(crate) enum Lookup<T> {
    /// A live device.
    Live(Arc<T>),
    /// A device that was dropped (after synchronizing).
    Gone,
    /// Never registered, of another backend, or dropping right now.
    Unknown,
}

/// Lists a new device.
pub(crate) fn register(uid: u64, device: Weak<AnyDevice>) {
    devices().insert(uid, Entry::Live(device));
}

/// Marks a device gone, once its drop synchronized it.
pub(crate) fn gone(uid: u64) {
    devices().insert(uid, Entry::Gone);
}

/// The device with `uid`, if it is a live `T`.
pub(crate) fn find<T: Any + Send + Sync>(uid: u64) -> Lookup<T> {
    let found = match devices().get(&uid) {
        None => return Lookup::Unknown,
        Some(Entry::Gone) => return Lookup::Gone,
        Some(Entry::Live(weak)) => weak.upgrade(),
    };
    // The lock is released: dropping `found` may drop the device, which takes it again.
    match found.map(|d| d.downcast::<T>()) {
        Some(Ok(device)) => Lookup::Live(device),
        _ => Lookup::Unknown,
    }
}

/// Every live device that is a `T`, by uid.
pub(crate) fn live<T: Any + Send + Sync>() -> Vec<Arc<T>> {
    let all: Vec<Arc<AnyDevice>> = devices()
        .values()
        .filter_map(|entry| match entry {
            Entry::Live(weak) => weak.upgrade(),
            Entry::Gone => None,
        })
        .collect();
    all.into_iter()
        .filter_map(|d| d.downcast::<T>().ok())
        .collect()
}
