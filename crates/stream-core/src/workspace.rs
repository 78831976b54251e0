//! Workspace: device scratch memory an operator needs while it runs (aclnn's
//! `GetWorkspaceSize`), taken in stream order.
//!
//! - With a [`WorkspaceProvider`] registered on the device ([`Device::set_workspace_provider`];
//!   braid's caching allocator registers itself), workspace is a block of the provider taken on
//!   the launching stream and given back right after the launch is submitted: the stream's
//!   later work reuses it in stream order, no device allocation or synchronization per launch.
//!   Inside a capture the caching allocator routes a capturing stream's allocations to the
//!   capture's private pool, so the workspace lives as long as the graph.
//! - Without one, the front layer keeps the workspace itself (a device allocation, never a
//!   per-launch one in eager work): each stream has a fallback segment, grown (never shrunk)
//!   when a launch needs more, reused by that stream's launches in stream order; an outgrown
//!   segment is kept until the device drops. Inside a capture each launch that needs
//!   workspace gets a segment of its own, kept until the device drops, so the graph's
//!   replays never share it with eager work. Register a provider to avoid both costs.
//!
//! [`Stream::workspace`] gives a user's own operator workspace the same way: take it before
//! [`Stream::launch_op`](crate::Stream::launch_op), hand its address to the operator's body,
//! and drop it after the launch.

use crate::device::Device;
use crate::error::Result;
use crate::hal::{Backend, Device as _};
use crate::stream::Stream;
use crate::types::{DevicePtr, DeviceSlice, StreamId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, RwLock, Weak};

/// Provides workspace in stream order (braid's caching allocator is one).
pub trait WorkspaceProvider<B: Backend>: Send + Sync {
    /// `bytes` (more than 0) of device memory for work on `stream`, reserved until the
    /// returned [`Workspace`] drops and, after that, free for `stream`'s later work only
    /// (stream-ordered reuse). Inside a capture, memory that lives as long as the graph.
    fn workspace(&self, stream: &Stream<B>, bytes: u64) -> Result<Workspace>;
}

/// Device workspace for one launch. Drop it after the launch that uses it is submitted, on the
/// stream it was taken on: the memory then goes back in that stream's order.
pub struct Workspace {
    slice: DeviceSlice,
    _hold: Option<Box<dyn Send + Sync>>,
}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Workspace({})", self.slice)
    }
}

impl Workspace {
    /// Workspace at `slice`, reserved as long as `hold` lives (a provider's block, whose drop
    /// gives it back in stream order).
    pub fn new(slice: DeviceSlice, hold: impl Send + Sync + 'static) -> Self {
        Workspace {
            slice,
            _hold: Some(Box::new(hold)),
        }
    }

    /// Workspace at `slice` that the front layer keeps (the fallback segment).
    fn kept(slice: DeviceSlice) -> Self {
        Workspace { slice, _hold: None }
    }

    /// The memory.
    pub fn slice(&self) -> DeviceSlice {
        self.slice
    }

    /// Its first byte.
    pub fn ptr(&self) -> DevicePtr {
        self.slice.ptr
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.slice.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.slice.len == 0
    }
}

/// Per device: the registered provider and the fallback segments.
pub(crate) struct Workspaces<B: Backend> {
    provider: RwLock<Option<Weak<dyn WorkspaceProvider<B>>>>,
    /// Per stream, its fallback segment (address, size).
    segments: Mutex<HashMap<StreamId, (DevicePtr, u64)>>,
    /// Outgrown fallback segments and captured launches' segments, freed when the device drops.
    retired: Mutex<Vec<DevicePtr>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<B: Backend> Workspaces<B> {
    pub(crate) fn new() -> Self {
        Workspaces {
            provider: RwLock::new(None),
            segments: Mutex::new(HashMap::new()),
            retired: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn set_provider(&self, provider: Option<Weak<dyn WorkspaceProvider<B>>>) {
        *self.provider.write().unwrap_or_else(|p| p.into_inner()) = provider;
    }

    fn provider(&self) -> Option<std::sync::Arc<dyn WorkspaceProvider<B>>> {
        self.provider
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(Weak::upgrade)
    }

    /// Frees every fallback segment (the device is dropping, its work finished).
    pub(crate) fn free_all(&mut self, hal: &B::Device) {
        let segments = std::mem::take(&mut *lock(&self.segments));
        let retired = std::mem::take(&mut *lock(&self.retired));
        for ptr in segments.into_values().map(|(p, _)| p).chain(retired) {
            // SAFETY: each segment came from `alloc` on this device and is freed once (taken
            // out of the lists here); the device synchronized before dropping, and no graph
            // outlives its device.
            if let Err(err) = unsafe { hal.free(ptr) } {
                tracing::warn!(%err, %ptr, "freeing a workspace segment failed");
            }
        }
    }
}

impl<B: Backend> Device<B> {
    /// Registers `provider` to give workspace to every launch on this device from now on (see
    /// [`WorkspaceProvider`]); it replaces the previous one. The device holds it weakly:
    /// dropping the provider unregisters it.
    pub fn set_workspace_provider(&self, provider: &std::sync::Arc<dyn WorkspaceProvider<B>>) {
        self.inner
            .workspaces
            .set_provider(Some(std::sync::Arc::downgrade(provider)));
    }

    /// Unregisters the workspace provider: launches use the fallback segments.
    pub fn clear_workspace_provider(&self) {
        self.inner.workspaces.set_provider(None);
    }

    /// Whether a live workspace provider is registered.
    pub fn has_workspace_provider(&self) -> bool {
        self.inner.workspaces.provider().is_some()
    }
}

impl<B: Backend> Stream<B> {
    /// `bytes` of device workspace for work on this stream, in stream order: from the
    /// registered [`WorkspaceProvider`], else from this stream's fallback segment.
    /// Take it before launching the work that uses it, drop it after. 0 bytes is an empty
    /// workspace at [`DevicePtr::NULL`].
    pub fn workspace(&self, bytes: u64) -> Result<Workspace> {
        if bytes == 0 {
            return Ok(Workspace::kept(DeviceSlice::new(DevicePtr::NULL, 0)));
        }
        crate::dry_run::check(self.device().id(), "Stream::workspace")?;
        let workspaces = &self.device().inner.workspaces;
        if let Some(provider) = workspaces.provider() {
            return provider.workspace(self, bytes);
        }
        if self.is_capturing() {
            let ptr = self.device().hal().alloc(bytes)?;
            lock(&workspaces.retired).push(ptr);
            return Ok(Workspace::kept(DeviceSlice::new(ptr, bytes)));
        }
        let mut segments = lock(&workspaces.segments);
        if let Some(&(ptr, size)) = segments.get(&self.id()) {
            if size >= bytes {
                return Ok(Workspace::kept(DeviceSlice::new(ptr, bytes)));
            }
        }
        let size = bytes.max(
            segments
                .get(&self.id())
                .map_or(0, |s| s.1.saturating_mul(2)),
        );
        let ptr = self.device().hal().alloc(size)?;
        if let Some((old, _)) = segments.insert(self.id(), (ptr, size)) {
            lock(&workspaces.retired).push(old);
        }
        Ok(Workspace::kept(DeviceSlice::new(ptr, bytes)))
    }
}
