//! Graph memory known before capture: a dry run of a capture closure on a timing-only
//! simulated device predicts the bytes a graph pool will reserve — for one graph, or for a
//! ladder of capture sizes sharing one pool — before anything is captured on the real device.
//!
//! The caching allocator's decisions depend only on the sequence of requests and its
//! configuration, not on the device: so the same closure, run against a simulated device with
//! the real allocator's configuration, the real device's capacity and the workspace the real
//! backend's kernels ask for ([`DryRun::like`]: on ACL, aclnn's `GetWorkspaceSize`, which
//! answers without launching), makes the same requests in the same order and reserves the same
//! segments. Nothing is stored or computed (the device is timing-only), so a model-sized
//! ladder plans in milliseconds; the real device is not touched, and a closure that tries
//! (it captured a real stream, buffer or allocator) is refused before anything is enqueued
//! ([`DryRunError::TouchedDevice`], see [`braid_stream_core::dry_run`]). The dry run's thread
//! may use no device but the dry run's; a dry run made [`DryRun::like`] an allocator also
//! fences that allocator's device for its duration, for every thread (a thread the closure
//! spawns included): plan before serving on that device, or serve on other devices meanwhile
//! (their work from other threads goes on).
//!
//! Write the capture closure once, generic over the backend, and hand it to both:
//!
//! ```
//! use braid::allocator::{AllocatorConfig, CachingAllocator};
//! use braid::graph_capture::{graph_pool_handle, CaptureSession, RunContext};
//! use braid::graph_memory::DryRun;
//! use braid::hal::Backend;
//! use braid::allocator::DeviceBuffer;
//! use braid::{sim::SimConfig, Kernel};
//!
//! // One decode step for `batch` rows: what each capture size runs.
//! fn step<B: Backend>(ctx: &RunContext<'_, B>, batch: u64) -> braid::graph_capture::Result<DeviceBuffer<B>> {
//!     let hidden = ctx.alloc(batch * 4096 * 2)?;
//!     ctx.stream().launch(&Kernel::Fill { dst: hidden.slice(), value: 1.0 })?;
//!     let out = ctx.alloc(batch * 4096 * 2)?;
//!     ctx.stream().launch(&Kernel::Scale { src: hidden.slice(), dst: out.slice(), factor: 2.0 })?;
//!     Ok(out) // the graph's output lives on in the pool; `hidden` is freed inside the capture
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = braid::sim_device(SimConfig::new())?;
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new())?;
//! let stream = device.create_stream(0)?;
//! let ladder = [64u64, 32, 16, 8, 4, 2, 1]; // largest first, as vLLM captures
//!
//! let predicted = DryRun::like(&alloc, &stream)?.predict_ladder(&ladder, |ctx, &b| step(ctx, b))?;
//!
//! let pool = graph_pool_handle(&alloc);
//! let mut graphs = Vec::new();
//! for &b in &ladder {
//!     graphs.push(CaptureSession::new(&alloc, &stream).pool(&pool).run(|ctx| step(ctx, b))?);
//! }
//! assert_eq!(predicted.reserved_bytes, pool.reserved_bytes());
//! # Ok(()) }
//! ```
//!
//! # When prediction and reality differ
//!
//! On the simulator and through `braid-acl-sim` the prediction equals what the capture
//! reserves (tests check both). Elsewhere it equals it as long as the closure makes the same
//! requests in the same order and the allocator makes the same choices, which can fail when:
//!
//! - **sizes depend on data**: nothing is computed on the timing-only device, so a closure
//!   whose allocation sizes depend on values read from the device, on host state that changes
//!   between the runs, or on the time things take, requests other sizes (captures cannot read
//!   the device back anyway; host-side decisions are the user's to keep the same);
//! - **workspace depends on the device**: the dry run asks the real backend for each kernel's
//!   workspace ([`DryRun::like`]); a workspace the backend sizes differently at launch than at
//!   planning (or kernels launched outside `Stream::launch`, through user operators that take
//!   workspace themselves) is not seen;
//! - **addresses break ties**: best fit picks the smallest free block, then the lowest
//!   address; a real device that hands out segments in another address order than the
//!   simulator (which grows upwards) can break a tie between equal-sized free blocks
//!   differently and split another block;
//! - **the real device runs out of memory**: the out-of-memory ladder releases cached segments
//!   and may fail the capture; the dry run has the real device's capacity but none of its other
//!   allocations, and a configured limit (`per_process_memory_fraction`, `limit_mb`) caps all
//!   the real allocator reserves but only the pool in the dry run;
//! - **outputs live differently**: the dry run keeps what each capture returns (its outputs)
//!   and every graph until the whole ladder is captured, as a serving process does; a real run
//!   that drops outputs between captures frees their blocks for the next capture.

use crate::allocator::{AllocError, AllocatorConfig, CachingAllocator};
use crate::core::dry_run::{DeviceFence, DryRunBreach, DryRunFence};
use crate::graph_capture::{graph_pool_handle, CaptureSession, GraphError, RunContext};
use crate::hal::{Backend, PreparedLaunch};
use crate::sim::{SanitizerMode, SimBackend, SimConfig, SimDevice, SimMode, WorkspaceSizes};
use crate::{Device, DeviceId, Stream};

/// What a dry run predicts for one graph pool.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PoolForecast {
    /// Bytes the pool reserves after each capture, in capture order.
    pub after_each: Vec<u64>,
    /// Bytes the pool reserves once every graph is captured (the last of `after_each`).
    pub reserved_bytes: u64,
    /// Segments the pool holds then.
    pub segments: u64,
    /// Bytes allocated in the pool then (the outputs the captures returned).
    pub allocated_bytes: u64,
}

/// Why a dry run failed.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    /// The closure used a device other than the dry run's (a real device's stream, buffer or
    /// allocator it captured), or a thread used the real device of a dry run made
    /// [`DryRun::like`] it while it ran (a thread the closure spawned, say); the call was
    /// refused before anything was enqueued or allocated, and the real device is as it was.
    #[error("the dry run's closure (or a thread running meanwhile) called {call} on {device}, but a dry run may only use its own simulated device ({dry_run}): issue its work through its context (ctx.stream(), ctx.alloc(), ctx.device()) and hand the real device's buffers and streams only to the real capture")]
    TouchedDevice {
        /// The call refused.
        call: &'static str,
        /// The device it was made on.
        device: DeviceId,
        /// The dry run's simulated device.
        dry_run: DeviceId,
    },
    /// A capture of the dry run failed (the closure's error, or a capture rule it broke, as
    /// the real capture would).
    #[error("dry-run capture {index} failed: {source}")]
    Capture {
        /// The capture's place in the ladder, from 0.
        index: usize,
        /// What failed.
        #[source]
        source: GraphError,
    },
    /// The user's setup (`DryRun::predict_ladder_with`) failed on the dry run's device.
    #[error("dry-run setup failed: {0}")]
    Setup(#[source] GraphError),
    /// The dry run's device or allocator could not be made, or the real backend could not
    /// say how much workspace a kernel asks for.
    #[error("dry run: {0}")]
    Device(#[from] AllocError),
}

impl From<crate::StreamError> for DryRunError {
    fn from(e: crate::StreamError) -> Self {
        DryRunError::Device(AllocError::Stream(e))
    }
}

impl From<DryRunBreach> for DryRunError {
    fn from(b: DryRunBreach) -> Self {
        DryRunError::TouchedDevice {
            call: b.call,
            device: b.device,
            dry_run: b.dry_run,
        }
    }
}

/// A dry run's settings: the allocator configuration, the device capacity and the workspace
/// kernels ask for (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct DryRun {
    config: AllocatorConfig,
    capacity: u64,
    workspace: Option<WorkspaceSizes>,
    /// The real device ([`DryRun::like`]), fenced off for every thread while a dry run runs.
    real: Option<DeviceId>,
}

impl DryRun {
    /// A dry run with the allocator configuration `config` on a device of `capacity` bytes
    /// whose kernels ask for no workspace (the simulator's).
    pub fn new(config: AllocatorConfig, capacity: u64) -> Self {
        DryRun {
            config,
            capacity,
            workspace: None,
            real: None,
        }
    }

    /// A dry run matching `allocator`: its configuration, its device's capacity, and the
    /// workspace its backend's kernels ask for, asked of `stream`'s backend at each launch of
    /// the dry run without launching anything (`hal::Stream::prepare`: aclnn's
    /// `GetWorkspaceSize` on ACL, none on the simulator). While it runs, the allocator's
    /// device is refused to every thread ([`braid_stream_core::dry_run::DeviceFence`]).
    pub fn like<B: Backend>(
        allocator: &CachingAllocator<B>,
        stream: &Stream<B>,
    ) -> Result<Self, DryRunError> {
        if !stream.device().same_as(allocator.device()) {
            return Err(DryRunError::Device(AllocError::InvalidArgument(
                "DryRun::like: the stream belongs to another device than the allocator".to_string(),
            )));
        }
        let capacity = allocator.device().mem_info()?.total;
        let stream = stream.clone();
        let sizes = WorkspaceSizes::new(move |kernel| {
            Ok(crate::hal::Stream::prepare(stream.hal(), kernel)?.workspace_size())
        });
        Ok(DryRun {
            config: allocator.config(),
            capacity,
            workspace: Some(sizes),
            real: Some(allocator.device().id()),
        })
    }

    /// Sets the workspace each kernel launch asks for.
    pub fn workspace_sizes(mut self, sizes: WorkspaceSizes) -> Self {
        self.workspace = Some(sizes);
        self
    }

    /// The timing-only simulated device the dry run captures on.
    fn device(&self) -> Result<Device<SimBackend>, DryRunError> {
        let mut config = SimConfig::new()
            .capacity(self.capacity)
            .mode(SimMode::TimingOnly)
            .sanitizer(SanitizerMode::Off)
            .record_timeline(false);
        if let Some(sizes) = &self.workspace {
            config = config.workspace_sizes(sizes.clone());
        }
        Ok(Device::new(SimDevice::new(config))?)
    }

    /// Predicts the bytes a new graph pool reserves for one capture of `f`.
    pub fn predict_pool_bytes<T>(
        &self,
        f: impl FnOnce(&RunContext<'_, SimBackend>) -> crate::graph_capture::Result<T>,
    ) -> Result<PoolForecast, DryRunError> {
        let mut f = Some(f);
        self.predict_ladder(&[()], |ctx, ()| match f.take() {
            Some(f) => f(ctx),
            None => unreachable!("a ladder of one runs its closure once"),
        })
    }

    /// Predicts the bytes one graph pool reserves for a ladder of captures sharing it, one per
    /// key, in order (`f(ctx, key)` runs inside each capture). What each capture returns and
    /// every graph are kept until the whole ladder is captured.
    pub fn predict_ladder<K, T>(
        &self,
        keys: &[K],
        mut f: impl FnMut(&RunContext<'_, SimBackend>, &K) -> crate::graph_capture::Result<T>,
    ) -> Result<PoolForecast, DryRunError> {
        self.predict_ladder_with(|_, _| Ok(()), keys, |ctx, (), key| f(ctx, key))
    }

    /// [`DryRun::predict_ladder`] with a setup: `setup` runs first, eagerly, on the dry run's
    /// allocator and a stream of its device, and makes what the captures read but do not
    /// allocate (weights, static inputs, KV caches: they live in the default pool, as on the
    /// real device, and do not count in the graph pool); `f(ctx, &state, key)` then runs inside
    /// each capture. Write the setup generic over the backend too, and run it on the real
    /// device before the real captures.
    pub fn predict_ladder_with<S, K, T>(
        &self,
        setup: impl FnOnce(
            &CachingAllocator<SimBackend>,
            &Stream<SimBackend>,
        ) -> crate::graph_capture::Result<S>,
        keys: &[K],
        mut f: impl FnMut(&RunContext<'_, SimBackend>, &S, &K) -> crate::graph_capture::Result<T>,
    ) -> Result<PoolForecast, DryRunError> {
        let span = tracing::info_span!("dry_run", captures = keys.len(), capacity = self.capacity);
        let _span = span.enter();
        let device = self.device()?;
        let alloc = CachingAllocator::new(device.clone(), self.config.clone())?;
        let stream = device.create_stream(0)?;
        let fence = DryRunFence::enter(device.id());
        let device_fence = self.real.map(|real| DeviceFence::enter(real, device.id()));
        let breach = || {
            fence
                .breach()
                .or_else(|| device_fence.as_ref().and_then(DeviceFence::breach))
        };
        let state = setup(&alloc, &stream);
        if let Some(breach) = breach() {
            return Err(breach.into());
        }
        let state = state.map_err(DryRunError::Setup)?;
        let pool = graph_pool_handle(&alloc);
        let mut kept = Vec::with_capacity(keys.len());
        let mut after_each = Vec::with_capacity(keys.len());
        for (index, key) in keys.iter().enumerate() {
            let captured = CaptureSession::new(&alloc, &stream)
                .pool(&pool)
                .run(|ctx| f(ctx, &state, key));
            if let Some(breach) = breach() {
                return Err(breach.into());
            }
            kept.push(captured.map_err(|source| DryRunError::Capture { index, source })?);
            after_each.push(pool.reserved_bytes());
        }
        drop((device_fence, fence));
        let stats = pool.stats();
        let forecast = PoolForecast {
            reserved_bytes: stats.reserved_bytes,
            segments: stats.segments,
            allocated_bytes: stats.allocated_bytes,
            after_each,
        };
        tracing::info!(
            reserved = forecast.reserved_bytes,
            segments = forecast.segments,
            "dry run predicted the pool"
        );
        Ok(forecast)
    }
}
