//! `Device<B>`: one accelerator, its streams and the ordering model over them.

use crate::context::{self, StreamGuard};
use crate::error::{Result, StreamError, WrongDevice};
use crate::event::{Event, EventInner};
use crate::graph_hold::GraphHold;
use crate::hal::{self, Backend, Device as _};
use crate::memory::DeviceMemory;
use crate::ordering::StreamPosition;
use crate::state::{BlockingTarget, DeviceState};
use crate::stream::{Stream, StreamInner};
use crate::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::task_group::UpdateUse;
use crate::types::{DeviceId, DeviceSlice};
use crate::types::{EventFlags, MemInfo, Priority, StreamId};
use crate::uses::{Access, UseObserver};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Weak};

static NEXT_DEVICE_UID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct DeviceInner<B: Backend> {
    pub(crate) uid: u64,
    pub(crate) ordinal: u32,
    pub(crate) hal: B::Device,
    pub(crate) default_stream: Arc<StreamInner<B>>,
    /// Shared by every call that reaches a stream or blocks; exclusive for capture begin and
    /// end (see [`crate::sync`] for the lock order).
    capture_gate: RwLock<()>,
    state: Mutex<DeviceState<B>>,
    observers: RwLock<Vec<Weak<dyn UseObserver>>>,
    /// Observers of the ranges captured work uses only ([`Device::add_capture_use_observer`]).
    capture_observers: RwLock<Vec<Weak<dyn UseObserver>>>,
    pub(crate) workspaces: crate::workspace::Workspaces<B>,
    /// Reusable streams for captures and tags ([`crate::stream_pool`]).
    pub(crate) stream_pool: crate::stream_pool::StreamPool<B>,
}

impl<B: Backend> DeviceInner<B> {
    /// The device's ordering state: hold it briefly, never across a backend call.
    pub(crate) fn lock(&self) -> MutexGuard<'_, DeviceState<B>> {
        self.state.lock()
    }

    /// The capture gate, shared: no capture begins or ends while the guard lives.
    pub(crate) fn gate_shared(&self) -> RwLockReadGuard<'_, ()> {
        self.capture_gate.read()
    }

    /// The capture gate, exclusive: no other call is inside the device while the guard lives.
    pub(crate) fn gate_exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.capture_gate.write()
    }

    /// This device's identity.
    pub(crate) fn id(&self) -> DeviceId {
        DeviceId {
            backend: B::NAME,
            ordinal: self.ordinal,
            uid: self.uid,
        }
    }

    /// Refuses work on `stream` that an active capture forbids (see
    /// [`DeviceState::check_submit`]); only the default stream can be refused, so other streams
    /// skip the ordering state. Call it with the capture gate held, so the answer holds until
    /// the work reaches the backend.
    pub(crate) fn check_submit(&self, call: &'static str, stream: StreamId) -> Result<()> {
        crate::dry_run::check(self.id(), call)?;
        if stream == StreamId::DEFAULT {
            self.lock().check_submit(call, stream)
        } else {
            Ok(())
        }
    }
}

impl<B: Backend> Drop for DeviceInner<B> {
    fn drop(&mut self) {
        // Host buffers kept alive for pending copies are dropped with the state: let the device
        // finish first so no copy writes into freed host memory.
        if let Err(err) = self.hal.synchronize() {
            tracing::warn!(%err, "device synchronize failed while dropping the device");
        }
        self.workspaces.free_all(&self.hal);
        // All its work is done: positions on it now read as complete on other devices.
        crate::registry::gone(self.uid);
    }
}

/// One accelerator as the front layer sees it. Cheap to clone (a shared handle).
///
/// All streams, events, graphs and memory of all devices of the process share one
/// happens-before model; the device answers the question the allocator and graph capture ask:
/// [`Device::is_ordered_before`], also for work and streams of different devices. Devices
/// are `Send + Sync`; each has a process-unique identity ([`Device::id`]).
pub struct Device<B: Backend> {
    pub(crate) inner: Arc<DeviceInner<B>>,
}

impl<B: Backend> Clone for Device<B> {
    fn clone(&self) -> Self {
        Device {
            inner: self.inner.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for Device<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device<{}>({})", B::NAME, self.id())
    }
}

impl<B: Backend> Device<B> {
    /// Wraps a backend device.
    pub fn new(hal: B::Device) -> Result<Self> {
        let default = hal.default_stream()?;
        let uid = NEXT_DEVICE_UID.fetch_add(1, AtomicOrdering::Relaxed);
        let inner = DeviceInner {
            uid,
            ordinal: hal.ordinal(),
            default_stream: Arc::new(StreamInner::new(StreamId::DEFAULT, 0, None, default)),
            hal,
            capture_gate: RwLock::new(()),
            state: Mutex::new(DeviceState::new(uid)),
            observers: RwLock::new(Vec::new()),
            capture_observers: RwLock::new(Vec::new()),
            workspaces: crate::workspace::Workspaces::new(),
            stream_pool: crate::stream_pool::StreamPool::new(),
        };
        tracing::debug!(
            backend = B::NAME,
            ordinal = inner.ordinal,
            uid,
            "device opened"
        );
        let inner = Arc::new(inner);
        let weak: Weak<DeviceInner<B>> = Arc::downgrade(&inner);
        crate::registry::register(uid, weak);
        Ok(Device { inner })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> u32 {
        self.inner.ordinal
    }

    /// The device's identity: backend, ordinal and a number unique in the process.
    pub fn id(&self) -> DeviceId {
        self.inner.id()
    }

    /// The backend device, for backend-specific calls (for example the simulator's timeline).
    pub fn hal(&self) -> &B::Device {
        &self.inner.hal
    }

    /// The default stream (id 0).
    pub fn default_stream(&self) -> Stream<B> {
        Stream::from_parts(self.clone(), self.inner.default_stream.clone())
    }

    /// Creates a stream with `priority` (smaller is higher; 0 is normal).
    pub fn create_stream(&self, priority: Priority) -> Result<Stream<B>> {
        let hal = self
            .inner
            .hal
            .create_stream(priority)
            .map_err(|e| self.stream_error("Device::create_stream", 1, e))?;
        Ok(self.register_stream(hal, priority, "stream created"))
    }

    /// The live stream with id `id` (the default stream for `StreamId(0)`); `None` once every
    /// handle to it is gone. Lets observers that only see a `StreamPosition` act on its stream.
    pub fn stream(&self, id: StreamId) -> Option<Stream<B>> {
        if id == StreamId::DEFAULT {
            return Some(self.default_stream());
        }
        let inner = self.inner.lock().streams.get(&id)?.upgrade()?;
        Some(Stream::from_parts(self.clone(), inner))
    }

    /// Whether `other` is a handle to this same device.
    pub fn same_as(&self, other: &Device<B>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Creates an event.
    pub fn create_event(&self, flags: EventFlags) -> Result<Event<B>> {
        let hal = self.inner.hal.create_event(flags)?;
        Ok(Event::from_parts(
            self.clone(),
            Arc::new(EventInner::new(hal, flags, None)),
        ))
    }

    /// Gives braid a backend stream created by other code (on ACL,
    /// `AclDevice::wrap_stream` of torch_npu's current stream, say): it becomes a stream of
    /// this device with its own id, in the ordering model like any other.
    ///
    /// Ordering contract: braid knows only the work submitted through it. Work other code
    /// enqueues on the same native stream runs in stream order with braid's, but the model
    /// (and so the allocator's reuse decisions) does not see it until
    /// [`Stream::note_foreign_work`] gives it a position and its ranges. Record braid events
    /// after such work, or note it, before freeing memory it uses.
    pub fn adopt_stream(&self, hal: B::Stream, priority: Priority) -> Stream<B> {
        self.register_stream(hal, priority, "foreign stream adopted")
    }

    /// Gives a backend stream the next id and registers it.
    fn register_stream(&self, hal: B::Stream, priority: Priority, what: &str) -> Stream<B> {
        let mut st = self.inner.lock();
        let id = StreamId(st.next_stream_id);
        st.next_stream_id += 1;
        let inner = Arc::new(StreamInner::new(id, priority, None, hal));
        st.streams.retain(|_, weak| weak.strong_count() > 0);
        st.streams.insert(id, Arc::downgrade(&inner));
        drop(st);
        tracing::debug!(stream = id.0, priority, "{what}");
        Stream::from_parts(self.clone(), inner)
    }

    /// Gives braid a backend event created by other code (on ACL, `AclDevice::wrap_event`).
    /// Records made through braid carry the ordering model as for any event; a record other
    /// code made is outside it, so a stream waiting on the event before braid recorded it
    /// waits in the backend but learns nothing in the model.
    pub fn adopt_event(&self, hal: B::Event, flags: EventFlags) -> Event<B> {
        let mut inner = EventInner::new(hal, flags, None);
        inner.foreign = true;
        Event::from_parts(self.clone(), Arc::new(inner))
    }

    /// Blocks until all work on all streams is done. Refused while a capture forbids it.
    pub fn synchronize(&self) -> Result<()> {
        let _gate = self.inner.gate_shared();
        self.synchronize_gated()
    }

    /// [`Device::synchronize`] for a caller holding the capture gate shared.
    pub(crate) fn synchronize_gated(&self) -> Result<()> {
        // What the model knows was submitted before the backend call: all of it reached the
        // backend before the synchronize began (positions are given after the backend call),
        // so all of it is done when it returns. Work other threads submit meanwhile is not.
        let (submitted, learnt) = {
            let st = self.inner.lock();
            st.check_blocking("Device::synchronize", BlockingTarget::Device)?;
            (st.ordering.eager_clock(), st.ordering.eager_remote())
        };
        hal::Device::synchronize(&self.inner.hal)?;
        self.observe_host(&submitted, &learnt);
        Ok(())
    }

    /// Free and total device memory.
    pub fn mem_info(&self) -> Result<MemInfo> {
        Ok(self.inner.hal.mem_info()?)
    }

    /// Allocates a raw segment of device memory, freed when dropped. The caching allocator
    /// (`braid-allocator`) is what applications use; raw segments serve tests and tools.
    pub fn alloc(&self, size: u64) -> Result<DeviceMemory<B>> {
        crate::dry_run::check(self.id(), "Device::alloc")?;
        DeviceMemory::new(self.clone(), size)
    }

    /// The stream work goes to on this thread: the innermost [`StreamGuard`] for this device,
    /// or the default stream.
    pub fn current_stream(&self) -> Stream<B> {
        match context::current::<B>(self.inner.uid) {
            Some(inner) => Stream::from_parts(self.clone(), inner),
            None => self.default_stream(),
        }
    }

    /// Makes `stream` the current stream of this thread until the guard drops (PyTorch's
    /// `torch.npu.stream(s)`, MindSpore's `StreamCtx`). Guards nest and restore the previous
    /// stream when dropped, also while unwinding.
    pub fn use_stream(&self, stream: &Stream<B>) -> Result<StreamGuard> {
        self.check_same_device("Device::use_stream", "stream", stream.device())?;
        Ok(context::push(self.inner.uid, stream.inner.clone()))
    }

    /// The stream registered under `tag`, taken from the stream pool (or created) on first
    /// use with `priority` ([`crate::stream_pool`]). The same tag always gives the same stream
    /// (TorchAir's tagged streams).
    pub fn tagged_stream(&self, tag: &str, priority: Priority) -> Result<Stream<B>> {
        if let Some(existing) = self.inner.lock().tagged_streams.get(tag).cloned() {
            if existing.priority != priority {
                return Err(StreamError::TagPriorityMismatch {
                    tag: tag.to_string(),
                    existing: existing.priority,
                    requested: priority,
                });
            }
            return Ok(Stream::from_parts(self.clone(), existing));
        }
        let created = self.pooled_or_new(priority)?;
        let mut st = self.inner.lock();
        // Another thread may have registered the tag meanwhile: the first registration wins
        // (the loser's stream is simply dropped).
        let inner = st
            .tagged_streams
            .entry(tag.to_string())
            .or_insert_with(|| {
                let inner = created.inner.clone();
                inner.set_tag(tag);
                hal::Stream::set_tag(&inner.hal, tag);
                inner
            })
            .clone();
        Ok(Stream::from_parts(self.clone(), inner))
    }

    /// Switches the current stream to the tagged stream `tag` until the guard drops
    /// (TorchAir's `npu_stream_switch(tag, priority)`).
    pub fn stream_switch(&self, tag: &str, priority: Priority) -> Result<StreamGuard> {
        let stream = self.tagged_stream(tag, priority)?;
        self.use_stream(&stream)
    }

    /// Creates an event registered under `tag` (TorchAir's `npu_create_tagged_event`). A tag can
    /// be taken once per device.
    pub fn create_tagged_event(&self, tag: &str) -> Result<Event<B>> {
        if self.inner.lock().tagged_events.contains_key(tag) {
            return Err(StreamError::TagInUse(tag.to_string()));
        }
        let hal = self.inner.hal.create_event(EventFlags::ORDERING)?;
        let inner = Arc::new(EventInner::new(
            hal,
            EventFlags::ORDERING,
            Some(tag.to_string()),
        ));
        let mut st = self.inner.lock();
        if st.tagged_events.contains_key(tag) {
            return Err(StreamError::TagInUse(tag.to_string()));
        }
        st.tagged_events.insert(tag.to_string(), inner.clone());
        Ok(Event::from_parts(self.clone(), inner))
    }

    /// The event registered under `tag`.
    pub fn tagged_event(&self, tag: &str) -> Result<Event<B>> {
        let inner = self.inner.lock().tagged_events.get(tag).cloned();
        inner
            .map(|inner| Event::from_parts(self.clone(), inner))
            .ok_or_else(|| StreamError::UnknownTag(tag.to_string()))
    }

    /// Is the work at `u` ordered before the next work submitted to `next_on`?
    ///
    /// True when `u` is on `next_on` itself, when `next_on` waited (directly or transitively,
    /// through streams of any device) on an event recorded after `u`, or when the host
    /// observed `u` complete. `u` and `next_on` may belong to different devices (the answer
    /// does not depend on which device is asked). Work inside a capture is only ordered with
    /// work of the same capture.
    pub fn is_ordered_before(&self, u: StreamPosition, next_on: &Stream<B>) -> bool {
        let on = &next_on.device().inner;
        if u.device == on.uid {
            return on.lock().ordering.ordered_before(u, next_on.id());
        }
        // Across devices: what `next_on` knows, else what `u`'s device's host knows (one
        // device's state at a time; knowledge only grows, so a `true` stays true).
        on.lock().ordering.ordered_before(u, next_on.id()) || self.is_complete(u)
    }

    /// Whether any capture is active on the device (host-blocking calls may then be refused,
    /// and event polling must wait).
    pub fn is_capturing(&self) -> bool {
        self.inner.lock().ordering.captures().next().is_some()
    }

    /// Has the host observed the work at `u` complete (by a synchronize or a query)? `u` may
    /// be on another device: its device answers (a host observation on a third device counts
    /// when the observed work was ordered after `u`). Work of a device that has been dropped
    /// is complete (dropping synchronized it).
    pub fn is_complete(&self, u: StreamPosition) -> bool {
        if u.device == self.inner.uid {
            return self.inner.lock().ordering.ordered_before_host(u);
        }
        match crate::registry::find::<DeviceInner<B>>(u.device) {
            crate::registry::Lookup::Live(owner) => owner.lock().ordering.ordered_before_host(u),
            crate::registry::Lookup::Gone => true,
            crate::registry::Lookup::Unknown => u.seq == 0,
        }
    }

    /// Registers `observer` to receive every range used by work submitted from now on (see
    /// [`UseObserver`]). The device holds it weakly: dropping the observer unregisters it.
    pub fn add_use_observer(&self, observer: &Arc<dyn UseObserver>) {
        register(&self.inner.observers, observer);
    }

    /// Registers `observer` to receive the ranges of this device's memory used by captured
    /// work only (work submitted into a capture; its positions are in the capture's domain),
    /// from now on: what a graph will touch at every replay, for an owner of memory that must
    /// outlive the graph (braid's caching allocator keeps such memory allocated while the
    /// graph lives, see [`Device::attach_to_capture`]). That includes work captured on another
    /// device's stream that uses this device's memory through peer access (a peer copy, a
    /// kernel on peer memory): its position names the capturing device. Eager work costs such
    /// an observer nothing. Held weakly, as [`Device::add_use_observer`].
    pub fn add_capture_use_observer(&self, observer: &Arc<dyn UseObserver>) {
        register(&self.inner.capture_observers, observer);
    }

    /// Hands `hold` to the graph the capture of `position` becomes: it lives as long as the
    /// [`crate::Graph`] does and, when the graph is dropped, until the host has observed its
    /// launches complete; it is dropped at once if the capture is discarded. The graph asks it
    /// before every launch ([`GraphHold::check_launch`]). `position` is
    /// captured work of this device or of another live device of the same backend (a peer's
    /// capture using this device's memory, as a capture-use observer of this device sees it,
    /// [`Device::add_capture_use_observer`]): the item goes to that device's capture. Returns
    /// `false`, dropping `item`, when `position` is not captured work, its device is gone, or
    /// its capture is no longer active. Use it to keep what a graph's replays touch alive
    /// (memory, or a hold on memory) without the graph knowing its owner
    /// ([`crate::graph_hold`]).
    ///
    /// Takes only the capturing device's ordering state (briefly, never with another device's),
    /// and drops a refused `hold` after releasing it: a use observer may call it.
    pub fn attach_to_capture(&self, position: StreamPosition, hold: impl GraphHold) -> bool {
        let crate::ordering::Domain::Capture(capture) = position.domain else {
            return false;
        };
        let other;
        let capturing = if position.device == self.inner.uid {
            &self.inner
        } else {
            match crate::registry::find::<DeviceInner<B>>(position.device) {
                crate::registry::Lookup::Live(found) => {
                    other = found;
                    &other
                }
                crate::registry::Lookup::Gone | crate::registry::Lookup::Unknown => return false,
            }
        };
        let hold: Arc<dyn GraphHold> = Arc::new(hold);
        let refused = {
            let mut st = capturing.lock();
            if st.ordering.captures().any(|c| c.id == capture) {
                st.capture_holds.entry(capture).or_default().push(hold);
                None
            } else {
                Some(hold)
            }
        };
        // Dropped after the lock: an item's drop may do anything but take a device lock.
        refused.is_none()
    }

    /// The holds the owners of the memory an update's operators use give the graph
    /// ([`UseObserver::note_graph_update`] of each owning device's capture use observers).
    pub(crate) fn update_holds(&self, uses: &[UpdateUse]) -> Vec<Arc<dyn GraphHold>> {
        let mut owners: Vec<u64> = uses.iter().map(|(owner, _, _)| *owner).collect();
        owners.sort_unstable();
        owners.dedup();
        let mut holds = Vec::new();
        for uid in owners {
            let found;
            let owner = if uid == self.inner.uid {
                &self.inner
            } else {
                match crate::registry::find::<DeviceInner<B>>(uid) {
                    crate::registry::Lookup::Live(inner) => {
                        found = inner;
                        &found
                    }
                    crate::registry::Lookup::Gone | crate::registry::Lookup::Unknown => continue,
                }
            };
            let ranges: Vec<(DeviceSlice, Access)> = uses
                .iter()
                .filter(|(o, _, _)| *o == uid)
                .map(|(_, range, access)| (*range, *access))
                .collect();
            for observer in upgrade(&owner.capture_observers) {
                holds.extend(observer.note_graph_update(&ranges));
            }
        }
        holds
    }

    /// Tells the observers that the work at `position` accesses `ranges` (the capture
    /// observers too, for captured work).
    pub(crate) fn notify_uses(
        &self,
        position: StreamPosition,
        ranges: impl IntoIterator<Item = (DeviceSlice, Access)>,
    ) {
        let mut live = upgrade(&self.inner.observers);
        if matches!(position.domain, crate::ordering::Domain::Capture(_)) {
            live.extend(upgrade(&self.inner.capture_observers));
        }
        if live.is_empty() {
            return;
        }
        for (range, access) in ranges {
            for observer in &live {
                observer.note_use(position, range, access);
            }
        }
    }

    pub(crate) fn check_same_device(
        &self,
        call: &'static str,
        what: &'static str,
        other: &Device<B>,
    ) -> Result<()> {
        if self.same_as(other) {
            Ok(())
        } else {
            Err(StreamError::WrongDevice(Box::new(WrongDevice {
                call: call.into(),
                what,
                expected: self.id(),
                found: other.id(),
            })))
        }
    }

    /// Frees raw segments whose drop was deferred by a capture, once no capture is active.
    pub(crate) fn free_deferred(&self) {
        let _gate = self.inner.gate_shared();
        let pending = {
            let mut st = self.inner.lock();
            if st.ordering.captures().next().is_some() || st.deferred_frees.is_empty() {
                return;
            }
            std::mem::take(&mut st.deferred_frees)
        };
        crate::memory::free_segments_gated(self, pending);
    }
}

/// Adds `observer` to `list`, forgetting the observers that are gone.
fn register(list: &RwLock<Vec<Weak<dyn UseObserver>>>, observer: &Arc<dyn UseObserver>) {
    let mut observers = list.write();
    observers.retain(|o| o.strong_count() > 0);
    observers.push(Arc::downgrade(observer));
}

/// The observers of `list` still alive (no allocation when there are none).
fn upgrade(list: &RwLock<Vec<Weak<dyn UseObserver>>>) -> Vec<Arc<dyn UseObserver>> {
    let observers = list.read();
    if observers.is_empty() {
        return Vec::new();
    }
    observers.iter().filter_map(Weak::upgrade).collect()
}
