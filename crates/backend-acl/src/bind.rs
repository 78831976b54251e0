//! Per-thread device binding.
//!
//! ACL's current device is a property of the calling thread (`aclrtSetDevice`), as CUDA's
//! current context is. Like cudarc's `bind_to_thread`, every hal call first makes sure its
//! device is the one bound on this thread, calling `aclrtSetDevice` only when it is not.

use std::cell::Cell;

// `stream_core::sync`'s: `std`'s, or the model checker's, whose threads share one operating
// system thread (each must bind for itself there too).
braid_stream_core::sync::thread::thread_local! {
    /// Unique id of the device object last bound on this thread (0: none).
    static BOUND: Cell<u64> = const { Cell::new(0) };
}

/// Whether the device with unique id `uid` is the one bound on this thread.
pub(crate) fn is_bound(uid: u64) -> bool {
    BOUND.with(|b| b.get() == uid)
}

/// Notes that the device `uid` is now bound on this thread.
pub(crate) fn set_bound(uid: u64) {
    BOUND.with(|b| b.set(uid));
}

/// Forgets the binding of `uid` on this thread (its device is being released).
pub(crate) fn forget(uid: u64) {
    BOUND.with(|b| {
        if b.get() == uid {
            b.set(0);
        }
    });
}

/// Forgets whichever device is bound on this thread (a library call changed the thread's
/// current device behind braid's back): the next call binds its own again.
pub(crate) fn forget_current() {
    BOUND.with(|b| b.set(0));
}
