//! Dry-run fences: while a [`DryRunFence`] lives on a thread, that thread may use one device
//! only — the dry run's (a timing-only simulated device). Work submitted from the thread to
//! any other device's streams (kernels, operators, copies, memsets, records, waits, graph
//! launches), raw allocations on it, and allocations of its caching allocator are refused
//! before anything is enqueued or allocated, with [`Error::DryRunTouchedDevice`] naming the
//! call and both devices. The fence remembers the first refusal ([`DryRunFence::breach`]),
//! so a dry run reports it even when the closure swallowed the error.
//!
//! Only the fencing thread is fenced: other threads keep using every device (a serving
//! process goes on while it plans), and threads the closure spawns are not checked. Calls
//! that enqueue nothing (synchronize, queries, creating streams and events) are not refused.
//! Fences nest: the innermost one is in force until it drops.

use crate::error::{Error, Result};
use crate::types::DeviceId;
use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// Uid of the fenced thread's dry-run device, 0 when the thread is not fenced (device uids
    /// start at 1). Read on every submission: kept apart from the rest for a cheap check.
    static FENCE_UID: Cell<u64> = const { Cell::new(0) };
    /// The dry-run device of the fence in force.
    static FENCE_DEVICE: Cell<Option<DeviceId>> = const { Cell::new(None) };
    /// The first call the fence in force refused.
    static BREACH: Cell<Option<DryRunBreach>> = const { Cell::new(None) };
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
    pub fn to_error(self) -> Error {
        Error::DryRunTouchedDevice {
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

/// Whether this thread is fenced to a device other than the one with uid `uid`: the check
/// of a hot path, which calls [`check`] when it says yes.
#[inline]
pub fn is_fenced_out(uid: u64) -> bool {
    let fenced = FENCE_UID.get();
    fenced != 0 && fenced != uid
}

/// Refuses `call` on `device` when this thread is fenced to another device by a dry run
/// ([`Error::DryRunTouchedDevice`]); remembers the first refusal for the fence. One
/// thread-local read when no fence is in force.
#[inline]
pub fn check(device: DeviceId, call: &'static str) -> Result<()> {
    let fenced = FENCE_UID.get();
    if fenced == 0 || fenced == device.uid {
        return Ok(());
    }
    refuse(device, call)
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
            Error::DryRunTouchedDevice { call: "Stream::launch", device, dry_run }
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
}
