//! A test backend for front-layer tests across devices until the simulator is a node of
//! devices: each device is its own simulator (`SimDevice::new`), which refuses waits on
//! another device's events, so this wrapper makes such a wait block the host until the event
//! completes (a correct, if blocking, cross-device wait), and answers peer access itself.
//! Peer copies reach the simulator of the stream's device with the other device's address,
//! which it cannot read: use timing-only work and check ordering, not data.
//!
//! Shared by the integration tests of braid-stream-core and braid-allocator (`#[path]`).
//! Once `SimNode` lands, tests move to a node of simulated devices and this file goes.

#![allow(dead_code)] // each test crate uses a part

use braid_backend_sim::{SimConfig, SimDevice, SimEvent, SimGraph, SimStream};
use braid_stream_core::hal::{self, Event as _, HalError};
use braid_stream_core::{
    CaptureMode, CaptureStatus, CustomOp, DevicePtr, DeviceSlice, EventFlags, MemInfo, Priority,
    TypedKernel,
};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The wrapper backend.
pub struct PeerSim;

impl hal::Backend for PeerSim {
    type Device = PeerDevice;
    type Stream = PeerStream;
    type Event = PeerEvent;
    type Graph = PeerGraph;
    type Prepared = TypedKernel;
    type OpBody = ();
    const NAME: &'static str = "peersim";
}

static NEXT_ENGINE: AtomicU64 = AtomicU64::new(1);

/// A simulated device; `peerable` says whether other devices can access its memory.
pub struct PeerDevice {
    sim: SimDevice,
    engine: u64,
    peerable: bool,
    /// Calls to `enable_peer_access` that reached the backend.
    pub enables: Arc<AtomicUsize>,
}

impl PeerDevice {
    /// A device other devices can reach.
    pub fn new(ordinal: u32) -> Self {
        Self::with(ordinal, true)
    }

    /// A device whose memory no other device can access.
    pub fn isolated(ordinal: u32) -> Self {
        Self::with(ordinal, false)
    }

    fn with(ordinal: u32, peerable: bool) -> Self {
        PeerDevice {
            sim: SimDevice::new(SimConfig::new().ordinal(ordinal).capacity(64 << 20)),
            engine: NEXT_ENGINE.fetch_add(1, Ordering::Relaxed),
            peerable,
            enables: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The simulator underneath.
    pub fn sim(&self) -> &SimDevice {
        &self.sim
    }
}

pub struct PeerStream {
    sim: SimStream,
    engine: u64,
}

pub struct PeerEvent {
    sim: SimEvent,
    engine: u64,
}

pub struct PeerGraph(SimGraph);

impl hal::Device for PeerDevice {
    type B = PeerSim;

    fn ordinal(&self) -> u32 {
        self.sim.ordinal()
    }
    fn default_stream(&self) -> Result<PeerStream, HalError> {
        Ok(PeerStream {
            sim: self.sim.default_stream()?,
            engine: self.engine,
        })
    }
    fn create_stream(&self, priority: Priority) -> Result<PeerStream, HalError> {
        Ok(PeerStream {
            sim: self.sim.create_stream(priority)?,
            engine: self.engine,
        })
    }
    fn create_event(&self, flags: EventFlags) -> Result<PeerEvent, HalError> {
        Ok(PeerEvent {
            sim: self.sim.create_event(flags)?,
            engine: self.engine,
        })
    }
    fn alloc(&self, size: u64) -> Result<DevicePtr, HalError> {
        self.sim.alloc(size)
    }
    unsafe fn free(&self, ptr: DevicePtr) -> Result<(), HalError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.sim.free(ptr) }
    }
    fn mem_info(&self) -> Result<MemInfo, HalError> {
        self.sim.mem_info()
    }
    fn is_live(&self, range: DeviceSlice) -> Option<bool> {
        self.sim.is_live(range)
    }
    fn can_access_peer(&self, peer: &Self) -> Result<bool, HalError> {
        Ok(peer.peerable && peer.engine != self.engine)
    }
    fn enable_peer_access(&self, peer: &Self) -> Result<(), HalError> {
        if !peer.peerable {
            return Err(HalError::Unsupported("peer access to an isolated device"));
        }
        self.enables.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn synchronize(&self) -> Result<(), HalError> {
        hal::Device::synchronize(&self.sim)
    }
}

impl hal::Stream for PeerStream {
    type B = PeerSim;

    fn prepare(&self, kernel: &TypedKernel) -> Result<TypedKernel, HalError> {
        self.sim.prepare(kernel)
    }
    fn launch_prepared(
        &self,
        prepared: TypedKernel,
        workspace: Option<DeviceSlice>,
        label: &str,
    ) -> Result<(), HalError> {
        self.sim.launch_prepared(prepared, workspace, label)
    }
    fn launch_custom(&self, _op: &CustomOp<PeerSim>) -> Result<(), HalError> {
        Err(HalError::Unsupported("operators on the peer test backend"))
    }
    unsafe fn memcpy_h2d(&self, dst: DevicePtr, src: *const u8, len: u64) -> Result<(), HalError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.sim.memcpy_h2d(dst, src, len) }
    }
    unsafe fn memcpy_d2h(&self, dst: *mut u8, src: DevicePtr, len: u64) -> Result<(), HalError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.sim.memcpy_d2h(dst, src, len) }
    }
    fn memcpy_d2d(&self, dst: DevicePtr, src: DevicePtr, len: u64) -> Result<(), HalError> {
        self.sim.memcpy_d2d(dst, src, len)
    }
    fn memset(&self, dst: DevicePtr, value: u8, len: u64) -> Result<(), HalError> {
        self.sim.memset(dst, value, len)
    }
    fn record(&self, event: &PeerEvent) -> Result<(), HalError> {
        self.sim.record(&event.sim)
    }
    fn wait(&self, event: &PeerEvent) -> Result<(), HalError> {
        if event.engine == self.engine {
            self.sim.wait(&event.sim)
        } else {
            // Another simulator: later work on this stream is enqueued after the event is done.
            event.sim.synchronize()
        }
    }
    fn synchronize(&self) -> Result<(), HalError> {
        self.sim.synchronize()
    }
    fn query(&self) -> Result<bool, HalError> {
        self.sim.query()
    }
    fn begin_capture(&self, mode: CaptureMode) -> Result<(), HalError> {
        self.sim.begin_capture(mode)
    }
    fn end_capture(&self) -> Result<PeerGraph, HalError> {
        self.sim.end_capture().map(PeerGraph)
    }
    fn capture_status(&self) -> Result<CaptureStatus, HalError> {
        self.sim.capture_status()
    }
}

impl hal::Event for PeerEvent {
    type B = PeerSim;

    fn query(&self) -> Result<bool, HalError> {
        self.sim.query()
    }
    fn synchronize(&self) -> Result<(), HalError> {
        self.sim.synchronize()
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32, HalError> {
        self.sim.elapsed_ms(&end.sim)
    }
}

impl hal::Graph for PeerGraph {
    type B = PeerSim;

    fn launch(&self, stream: &PeerStream) -> Result<(), HalError> {
        self.0.launch(&stream.sim)
    }
    fn node_count(&self) -> usize {
        self.0.node_count()
    }
}
