//! Dry-run fences. While a [`DryRunFence`] lives on a thread, that thread may use one device
//! only — the dry run's (a timing-only simulated device). While a [`DeviceFence`] lives, the
//! device it fences (the real device a dry run plans for) is refused to every thread, those
//! the dry run's closure spawns included. Work submitted to a fenced-off device's streams
//! (kernels, operators, copies, memsets, records, waits, graph launches), raw allocations on
//! it, and allocations of its caching allocator are refused before anything is enqueued or
//! allocated, with [`StreamError::DryRunTouchedDevice`] naming the call and both devices.
//! Each fence remembers the first refusal it made ([`DryRunFence::breach`],
//! [`DeviceFence::breach`]), so a dry run reports it even when the closure swallowed the
//! error, or the thread that made the call did.
//!
//! Other devices stay free for other threads (a serving process may go on serving on them
//! while it plans). Calls that enqueue nothing (synchronize, queries, creating streams and
//! events) are not refused. Thread fences nest: the innermost one is in force until it drops;
//! device fences add up.

use crate::error::{Result, StreamError};
use crate::sync::GlobalMutex;
use crate::types::DeviceId;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

thread_local! {
    /// Uid of the fenced thread's dry-run device, 0 when the thread is not fenced (device uids
    /// start at 1). Read on every submission: kept apart from the rest for a cheap check.
    static FENCE_UID: Cell<u64> = const { Cell::new(0) };
    /// The dry-run device of the fence in force.
    static FENCE_DEVICE: Cell<Option<DeviceId>> = const { Cell::new(None) };
    /// The first call the fence in force refused.
    static BREACH: Cell<Option<DryRunBreach>> = const { Cell::new(None) };
}

/// How many device fences live (read on every submission, before the list is looked at).
static DEVICE_FENCES_LIVE: AtomicUsize = AtomicUsize::new(0);
/// The live device fences.
static DEVICE_FENCES: GlobalMutex<Vec<FencedDevice>> = GlobalMutex::new(Vec::new());
/// The number of the last device fence made.
static LAST_DEVICE_FENCE: AtomicU64 = AtomicU64::new(0);

/// One live [`DeviceFence`].
struct FencedDevice {
    fence: u64,
    /// Uid of the fenced device.
    device: u64,
    /// The dry run's device.
    dry_run: DeviceId,
    /// The first call refused on the fenced device while the fence lived.
    breach: Option<DryRunBreach>,
}

/// A call a dry run's fence refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DryRunBreach {
    /// The call (`Stream::launch`, `CachingAllocator::alloc`, ...).
    pub call: &'static str,
    /// The device it was made on.
    pub device: DeviceId,
    /// The dry run's device.
    pub dry_run: DeviceId,
}

impl DryRunBreach {
    /// The breach as the front layer's error.
    pub fn to_error(self) -> StreamError {
        StreamError::DryRunTouchedDevice {
            call: self.call,
            device: self.device,
            dry_run: self.dry_run,
        }
    }
}

/// Fences the calling thread to `device` until dropped (see the module docs). Not `Send`: it
/// fences the thread that made it.
#[derive(Debug)]
pub struct DryRunFence {
    previous: (u64, Option<DeviceId>, Option<DryRunBreach>),
    _thread: PhantomData<*const ()>,
}

impl DryRunFence {
    /// Fences this thread to `device` (the dry run's) until the fence drops.
    pub fn enter(device: DeviceId) -> Self {
        let previous = (
            FENCE_UID.replace(device.uid),
            FENCE_DEVICE.replace(Some(device)),
            BREACH.take(),
        );
        tracing::debug!(%device, "dry-run fence entered");
        DryRunFence {
            previous,
            _thread: PhantomData,
        }
    }

    /// The first call this fence refused, if any.
    pub fn breach(&self) -> Option<DryRunBreach> {
        BREACH.get()
    }
}

impl Drop for DryRunFence {
    fn drop(&mut self) {
        let (uid, device, breach) = self.previous;
        FENCE_UID.set(uid);
        FENCE_DEVICE.set(device);
        BREACH.set(breach);
    }
}

/// Refuses `device` (the real device a dry run plans for) to every thread until dropped, for
/// the dry run on `dry_run` (see the module docs).
#[derive(Debug)]
pub struct DeviceFence {
    fence: u64,
}

impl DeviceFence {
    /// Fences `device` off for every thread, for the dry run on `dry_run`.
    pub fn enter(device: DeviceId, dry_run: DeviceId) -> Self {
        let fence = LAST_DEVICE_FENCE.fetch_add(1, Ordering::Relaxed) + 1;
        DEVICE_FENCES.lock().push(FencedDevice {
            fence,
            device: device.uid,
            dry_run,
            breach: None,
        });
        DEVICE_FENCES_LIVE.fetch_add(1, Ordering::SeqCst);
        tracing::debug!(%device, %dry_run, "device fenced for a dry run");
        DeviceFence { fence }
    }

    /// The first call refused on the fenced device while this fence lived, from any thread.
    pub fn breach(&self) -> Option<DryRunBreach> {
        DEVICE_FENCES
            .lock()
            .iter()
            .find(|f| f.fence == self.fence)
            .and_then(|f| f.breach)
    }
}

impl Drop for DeviceFence {
    fn drop(&mut self) {
        DEVICE_FENCES.lock().retain(|f| f.fence != self.fence);
        DEVICE_FENCES_LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a call on the device with uid `uid` may be refused by a fence (this thread fenced
/// to another device, or some device fenced): the check of a hot path, which calls [`check`]
/// when it says yes.
#[inline]
pub fn is_fenced_out(uid: u64) -> bool {
    let fenced = FENCE_UID.get();
    (fenced != 0 && fenced != uid) || DEVICE_FENCES_LIVE.load(Ordering::Relaxed) != 0
}

/// Refuses `call` on `device` when this thread is fenced to another device by a dry run, or
/// `device` is fenced off for a dry run ([`StreamError::DryRunTouchedDevice`]); remembers the
/// first refusal for the fence. A thread-local read and an atomic load when no fence is in
/// force.
#[inline]
pub fn check(device: DeviceId, call: &'static str) -> Result<()> {
    let fenced = FENCE_UID.get();
    if fenced != 0 && fenced != device.uid {
        return refuse(device, call);
    }
    if DEVICE_FENCES_LIVE.load(Ordering::Relaxed) != 0 {
        return check_device_fences(device, call);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn refuse(device: DeviceId, call: &'static str) -> Result<()> {
    let Some(dry_run) = FENCE_DEVICE.get() else {
        return Ok(());
    };
    let breach = DryRunBreach {
        call,
        device,
        dry_run,
    };
    if BREACH.get().is_none() {
        BREACH.set(Some(breach));
    }
    tracing::warn!(call, %device, %dry_run, "dry run touched another device: refused");
    Err(breach.to_error())
}

/// Refuses `call` on `device` while a device fence fences it; remembers the first refusal in
/// every such fence.
#[cold]
#[inline(never)]
fn check_device_fences(device: DeviceId, call: &'static str) -> Result<()> {
    let mut refusal = None;
    for fence in DEVICE_FENCES.lock().iter_mut() {
        if fence.device != device.uid {
            continue;
        }
        let breach = DryRunBreach {
            call,
            device,
            dry_run: fence.dry_run,
        };
        fence.breach.get_or_insert(breach);
        refusal.get_or_insert(breach);
    }
    match refusal {
        None => Ok(()),
        Some(breach) => {
            tracing::warn!(call, %device, dry_run = %breach.dry_run, "device fenced for a dry run: refused");
            Err(breach.to_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(uid: u64) -> DeviceId {
        DeviceId {
            backend: "test",
            ordinal: 0,
            uid,
        }
    }

    #[test]
    fn a_fence_refuses_other_devices_on_its_thread_only_and_nests() {
        check(id(7), "call").unwrap();
        let outer = DryRunFence::enter(id(1));
        check(id(1), "ok").unwrap();
        let err = check(id(7), "Stream::launch").unwrap_err();
        assert!(matches!(
            err,
            StreamError::DryRunTouchedDevice { call: "Stream::launch", device, dry_run }
                if device.uid == 7 && dry_run.uid == 1
        ));
        std::thread::spawn(|| check(id(7), "other thread").unwrap())
            .join()
            .unwrap();
        {
            let inner = DryRunFence::enter(id(7));
            check(id(7), "inner").unwrap();
            assert_eq!(inner.breach(), None);
            check(id(1), "inner refuses the outer's device").unwrap_err();
            assert_eq!(inner.breach().map(|b| b.device.uid), Some(1));
        }
        let breach = outer.breach().unwrap();
        assert_eq!((breach.call, breach.device.uid), ("Stream::launch", 7));
        drop(outer);
        check(id(7), "after").unwrap();
    }

    #[test]
    fn a_device_fence_refuses_its_device_on_every_thread_until_dropped() {
        // Device uids of their own: other tests of this process may fence devices too.
        let (real, dry, other) = (id(1_000_001), id(1_000_002), id(1_000_003));
        let fence = DeviceFence::enter(real, dry);
        assert!(is_fenced_out(real.uid));
        check(other, "another device").unwrap();
        let spawned = std::thread::spawn(move || check(real, "Stream::launch"))
            .join()
            .unwrap();
        assert!(matches!(
            spawned,
            Err(StreamError::DryRunTouchedDevice { call: "Stream::launch", device, dry_run })
                if device == real && dry_run == dry
        ));
        check(real, "a second call").unwrap_err();
        assert_eq!(
            fence.breach().map(|b| b.call),
            Some("Stream::launch"),
            "the first refusal"
        );
        drop(fence);
        check(real, "after").unwrap();
    }
}
