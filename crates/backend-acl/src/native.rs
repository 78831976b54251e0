//! Native handles both ways: user operators handed the `aclrtStream` ([`native_op`]), and
//! streams and events created by another library wrapped as braid's
//! ([`AclDevice::wrap_stream`](crate::AclDevice::wrap_stream),
//! [`AclDevice::wrap_event`](crate::AclDevice::wrap_event)).
//!
//! The handles out of braid's objects are [`AclStream::as_raw`](crate::AclStream::as_raw),
//! [`AclEvent::as_raw`](crate::AclEvent::as_raw) and the device pointers of braid's buffers.

use crate::ffi::aclrtStream;
use braid_stream_core::hal::HalError;
use std::sync::Arc;

/// The body of a user-defined operator on ACL: called with the native `aclrtStream` of the
/// stream it is launched on, under braid's submission order, it enqueues the operator's work
/// there (an aclnn call, a custom kernel, a library call) and returns without waiting for it.
pub type NativeOpFn = dyn Fn(aclrtStream) -> Result<(), HalError> + Send + Sync;

/// Makes an ACL body for [`CustomOp::body`](braid_stream_core::CustomOp::body) from a closure
/// handed the native `aclrtStream`.
///
/// # Safety
/// Whenever braid calls it, the closure:
/// - enqueues work only on the stream it is handed, and that work reads and writes only the
///   operator's declared ranges (braid orders, frees, captures and checks memory by those
///   declarations alone; undeclared accesses can race or touch freed memory);
/// - does not synchronize the stream or the device, create or destroy streams, or switch the
///   current device (it runs inside braid's submission, possibly inside a capture, where ACL
///   forbids synchronizing);
/// - takes any workspace it needs stream-ordered on that stream (for example from braid's
///   caching allocator, allocated on the same stream before the launch and freed after it),
///   never with a blocking `aclrtMalloc` inside a capture;
/// - returns an error instead of enqueuing anything when it fails.
pub unsafe fn native_op(
    f: impl Fn(aclrtStream) -> Result<(), HalError> + Send + Sync + 'static,
) -> Arc<NativeOpFn> {
    Arc::new(f)
}

/// Who destroys a wrapped native stream or event.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ownership {
    /// braid never destroys it: the library that created it does, after braid's last use.
    Borrowed,
    /// braid destroys it when the wrapping object drops.
    Owned,
}
