//! [`SimDevice`]: the hal device, and the simulator's observability API.

use crate::config::SimConfig;
use crate::engine::Engine;
use crate::event::SimEvent;
use crate::profile::DeviceProfile;
use crate::stream::SimStream;
use crate::timeline::{OpRecord, SimStats};
use crate::SimBackend;
use braid_stream_core::hal::{self, HalError};
use braid_stream_core::types::{DevicePtr, EventFlags, MemInfo, Priority};
use std::sync::{Arc, Mutex, MutexGuard};

/// The state of one device, shared by all its handles.
pub(crate) type Shared = Arc<Mutex<Engine>>;

/// Locks the engine. The engine never panics while locked, but if a caller's panic poisoned the
/// lock the state is still consistent (every engine call leaves it so), so the guard is
/// recovered.
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Engine> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether two handles belong to the same simulated device.
pub(crate) fn same_device(a: &Shared, b: &Shared) -> Result<(), HalError> {
    if Arc::ptr_eq(a, b) {
        Ok(())
    } else {
        Err(HalError::InvalidArgument(
            "the objects belong to different simulated devices".to_string(),
        ))
    }
}

/// A simulated accelerator. Cloning gives another handle to the same device.
///
/// All handles (device, streams, events, graphs) share one engine behind a mutex, so any number
/// of host threads may drive the device at once.
#[derive(Clone, Debug)]
pub struct SimDevice {
    pub(crate) shared: Shared,
    ordinal: u32,
}

impl SimDevice {
    /// A fresh device: host time 0, nothing allocated, only the default stream.
    pub fn new(config: SimConfig) -> SimDevice {
        let ordinal = config.ordinal;
        SimDevice {
            shared: Arc::new(Mutex::new(Engine::new(config))),
            ordinal,
        }
    }

    /// Current virtual host time in nanoseconds.
    pub fn host_time_ns(&self) -> u64 {
        lock(&self.shared).host_ns()
    }

    /// Every executed op in submission order (empty when the configuration turned the timeline
    /// off).
    pub fn timeline(&self) -> Vec<OpRecord> {
        lock(&self.shared).timeline().to_vec()
    }

    /// Latest end time of any op submitted so far, in nanoseconds.
    pub fn makespan_ns(&self) -> u64 {
        lock(&self.shared).makespan()
    }

    /// Counters: ops executed, graph launches, memory, invalid accesses.
    pub fn stats(&self) -> SimStats {
        lock(&self.shared).stats()
    }

    /// The device profile the cost model uses.
    pub fn profile(&self) -> DeviceProfile {
        lock(&self.shared).config().profile.clone()
    }

    /// The configuration the device was created with.
    pub fn config(&self) -> SimConfig {
        lock(&self.shared).config().clone()
    }
}

impl Default for SimDevice {
    /// A device with [`SimConfig::default`].
    fn default() -> Self {
        SimDevice::new(SimConfig::default())
    }
}

impl hal::Device for SimDevice {
    type B = SimBackend;

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn default_stream(&self) -> Result<SimStream, HalError> {
        lock(&self.shared).host_call();
        Ok(SimStream::new(self.shared.clone(), 0))
    }

    fn create_stream(&self, priority: Priority) -> Result<SimStream, HalError> {
        let index = lock(&self.shared).create_stream(priority)?;
        Ok(SimStream::new(self.shared.clone(), index))
    }

    fn create_event(&self, flags: EventFlags) -> Result<SimEvent, HalError> {
        let index = lock(&self.shared).create_event(flags);
        Ok(SimEvent::new(self.shared.clone(), index))
    }

    fn alloc(&self, size: u64) -> Result<DevicePtr, HalError> {
        lock(&self.shared).alloc(size)
    }

    unsafe fn free(&self, ptr: DevicePtr) -> Result<(), HalError> {
        lock(&self.shared).free(ptr)
    }

    fn mem_info(&self) -> Result<MemInfo, HalError> {
        Ok(lock(&self.shared).mem_info())
    }

    fn synchronize(&self) -> Result<(), HalError> {
        lock(&self.shared).sync_device();
        Ok(())
    }
}
