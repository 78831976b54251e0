//! Sleep mode (vLLM's `sleep` / `wake_up`, vllm-ascend's camem allocator): the memory of
//! sleepable pools is offloaded to pinned host memory or discarded, its physical pages are
//! released and its addresses kept; a wake maps new pages at the same addresses and restores
//! what was offloaded. Buffers and captured graphs that point into the pools stay valid
//! across a sleep: after the wake they see the same addresses, and offloaded buffers hold
//! the same bytes.
//!
//! Allocations made under a tag are those diverted into a pool made by
//! [`CachingAllocator::create_sleepable_pool`] (with any [`crate::PoolFilter`]; usually
//! [`MemPool::use_on_current_thread`], PyTorch's `use_mem_pool`). Each segment of such a
//! pool is an address reservation with one physical mapping over all of it (the hal's
//! virtual memory: `aclrtReserveMemAddress` + `aclrtMallocPhysical` + `aclrtMapMem` on
//! Ascend), rounded up to the backend's page size; otherwise the pool behaves like any
//! private pool. Several pools may share a tag: `sleep` and `wake` act on all of them.
//!
//! - [`CachingAllocator::sleep`]`(tag, mode)` refuses allocations from the pools, synchronizes
//!   the device (work using the memory is done), copies every allocated block to pinned host
//!   memory ([`SleepMode::Offload`]) or not ([`SleepMode::Discard`]), and releases the
//!   mappings: the device's free memory grows by the pools' bytes and `memory_reserved()`
//!   drops by as much. Free cached blocks of the pools hold nothing worth keeping and are not
//!   copied.
//! - [`CachingAllocator::wake`]`(tag)` maps new physical memory at every sleeping segment's
//!   addresses (releasing cached segments of other pools once if the device is out of memory),
//!   copies the offloaded bytes back into the blocks still allocated, waits for the copies, and
//!   lets the pools allocate again. Discarded memory comes back with undefined contents.
//!
//! While the pools sleep, nothing may use their memory: a kernel or copy naming a sleeping
//! buffer is refused by the front layer where the backend can tell that the range is not
//! mapped (the simulator), and faults on the device otherwise; the launch of a graph captured
//! over it is refused by graph capture ([`CachingAllocator::check_awake`],
//! [`AllocError::MemoryAsleep`]) until the wake. Sleep and wake are refused while a graph is being
//! captured on the device ([`AllocError::SleepDuringCapture`]); a wake without a sleep is
//! [`AllocError::NotAsleep`]; a wake the device has no room for is
//! [`AllocError::WakeOutOfMemory`] and leaves the pools asleep with their offloaded data, to be
//! woken later. Sleep needs a backend with virtual memory ([`AllocError::SleepUnsupported`]).
//!
//! ```
//! use braid_allocator::{AllocatorConfig, CachingAllocator, PoolOptions, SleepMode};
//! use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
//! use braid_stream_core::{Device, Kernel};
//!
//! let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new())).unwrap();
//! let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
//! let s = device.create_stream(0).unwrap();
//! let weights_pool = alloc.create_sleepable_pool("weights", PoolOptions::new()).unwrap();
//! let weights = {
//!     let _under_tag = weights_pool.use_on_current_thread().unwrap();
//!     alloc.alloc(1 << 20, &s).unwrap()
//! };
//! s.launch(&Kernel::Fill { dst: weights.slice(), value: 3.0 }).unwrap();
//! let awake = alloc.memory_reserved();
//! let report = alloc.sleep("weights", SleepMode::Offload).unwrap();
//! assert_eq!(alloc.memory_reserved(), awake - report.released_bytes);
//! alloc.wake("weights").unwrap();
//! let back = s.copy_d2h(weights.slice()).unwrap().wait_f32().unwrap();
//! assert!(back.iter().all(|&v| v == 3.0)); // same address, same bytes
//! ```

use crate::allocator::CachingAllocator;
use crate::error::AllocError;
use crate::host::{PinnedBuffer, PinnedHostAllocator};
use crate::mempool::MemPool;
use crate::private_pool::PoolOptions;
use braid_stream_core::hal::Backend;
use braid_stream_core::{DevicePtr, DeviceSlice};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a sleep does with the data of the pools' allocated blocks.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SleepMode {
    /// Copy it to pinned host memory; the wake copies it back (vLLM's `offload_tags`, for
    /// weights).
    Offload,
    /// Drop it; after the wake the blocks' contents are undefined (vLLM's default, for the
    /// KV cache).
    Discard,
}

/// What [`CachingAllocator::sleep`] did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SleepReport {
    /// The tag.
    pub tag: String,
    /// Pools put to sleep.
    pub pools: usize,
    /// Bytes of physical memory released (no longer reserved).
    pub released_bytes: u64,
    /// Bytes copied to pinned host memory.
    pub offloaded_bytes: u64,
    /// Bytes whose pages the device refused to release: they stay mapped, with their data
    /// (0 unless the backend failed).
    pub kept_bytes: u64,
}

/// What [`CachingAllocator::wake`] did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WakeReport {
    /// The tag.
    pub tag: String,
    /// Bytes of physical memory mapped again.
    pub mapped_bytes: u64,
    /// Bytes copied back from pinned host memory.
    pub restored_bytes: u64,
}

/// Data offloaded from one block.
struct Offloaded<B: Backend> {
    addr: u64,
    host: PinnedBuffer<B>,
}

/// The allocator's sleep bookkeeping; its lock also makes sleeps and wakes take turns.
pub(crate) struct Sleepers<B: Backend> {
    /// Pinned host memory for offloaded data, made at the first offload.
    pinned: Option<PinnedHostAllocator<B>>,
    /// Offloaded data by tag, until the wake restores it.
    offloaded: BTreeMap<String, Vec<Offloaded<B>>>,
}

impl<B: Backend> Default for Sleepers<B> {
    fn default() -> Self {
        Sleepers {
            pinned: None,
            offloaded: BTreeMap::new(),
        }
    }
}

impl<B: Backend> CachingAllocator<B> {
    /// Creates a private pool whose memory can sleep under `tag` ([`CachingAllocator::sleep`];
    /// the module docs of `sleep` describe the rules). The returned handle is its first user;
    /// divert allocations into it as into any pool
    /// ([`MemPool::use_on_current_thread`], [`MemPool::allocate_to`]). Refused with
    /// [`AllocError::SleepUnsupported`] when the backend has no virtual memory.
    pub fn create_sleepable_pool(
        &self,
        tag: &str,
        options: PoolOptions,
    ) -> Result<MemPool<B>, AllocError> {
        let device = self.device();
        if braid_stream_core::hal::Device::vmm_granularity(device.hal()).is_none() {
            return Err(AllocError::SleepUnsupported { backend: B::NAME });
        }
        let id = self
            .inner
            .lock()
            .pools
            .create_sleepable(options, Arc::from(tag));
        tracing::debug!(pool = id.0, tag, "sleepable pool created");
        Ok(MemPool::adopt(self.clone(), id))
    }

    /// Puts the sleepable pools tagged `tag` to sleep: their allocated blocks' data is
    /// offloaded to pinned host memory or discarded (`mode`), their physical memory released
    /// and their addresses kept (see the `sleep` module docs). Allocations from them are
    /// refused ([`AllocError::PoolAsleep`]) until [`CachingAllocator::wake`].
    ///
    /// Synchronizes the device first. Refused during a capture, for an unknown tag and for
    /// pools already asleep; when an offload copy fails, the pools stay awake and untouched.
    pub fn sleep(&self, tag: &str, mode: SleepMode) -> Result<SleepReport, AllocError> {
        let span = tracing::info_span!("sleep", tag, ?mode);
        let _span = span.enter();
        let mut sleepers = self.inner.sleepers.lock();
        let dev = self.device();
        if dev.is_capturing() {
            return Err(AllocError::SleepDuringCapture { call: "sleep" });
        }
        let pools = self.inner.lock().begin_sleep(tag)?;
        let offloaded = match self.offload(&mut sleepers, &pools, mode) {
            Ok(offloaded) => offloaded,
            Err(err) => {
                self.inner.lock().set_asleep(&pools, false);
                return Err(err);
            }
        };
        let released = {
            let mut st = self.inner.lock();
            // Frees awaiting uses on other streams are settled: the device is synchronized.
            st.process_pending(dev, true);
            st.unmap_pools(dev, &pools)
        };
        let offloaded_bytes = offloaded.iter().map(|o| o.host.len() as u64).sum();
        if !offloaded.is_empty() {
            sleepers.offloaded.insert(tag.to_string(), offloaded);
        }
        let report = SleepReport {
            tag: tag.to_string(),
            pools: pools.len(),
            released_bytes: released.released,
            offloaded_bytes,
            kept_bytes: released.kept,
        };
        tracing::info!(
            released = report.released_bytes,
            offloaded = report.offloaded_bytes,
            "pools asleep"
        );
        Ok(report)
    }

    /// Synchronizes the device and, for [`SleepMode::Offload`], copies every allocated block
    /// of `pools` to pinned host memory.
    fn offload(
        &self,
        sleepers: &mut Sleepers<B>,
        pools: &[crate::snapshot::PoolId],
        mode: SleepMode,
    ) -> Result<Vec<Offloaded<B>>, AllocError> {
        let dev = self.device();
        dev.synchronize()?;
        if mode == SleepMode::Discard {
            return Ok(Vec::new());
        }
        let ranges = self.inner.lock().allocated_ranges(pools);
        let pinned = sleepers
            .pinned
            .get_or_insert_with(|| PinnedHostAllocator::new(dev.clone()));
        let stream = dev.default_stream();
        let mut out = Vec::with_capacity(ranges.len());
        for (addr, len) in ranges {
            let mut host = pinned.alloc(len)?;
            host.copy_from_device(&stream, DeviceSlice::new(DevicePtr(addr), len))?;
            out.push(Offloaded { addr, host });
        }
        stream.synchronize()?;
        Ok(out)
    }

    /// Wakes the sleepable pools tagged `tag`: maps new physical memory at their addresses,
    /// restores the data a [`SleepMode::Offload`] sleep copied out (into the blocks still
    /// allocated), waits for the copies, and lets the pools allocate again.
    ///
    /// Refused during a capture, for an unknown tag, and for pools that are awake
    /// ([`AllocError::NotAsleep`]: a wake without a sleep). Out of memory is
    /// [`AllocError::WakeOutOfMemory`]: the pools stay asleep with their data, and a later wake
    /// may succeed; a failed restore copy leaves the data offloaded for the next wake.
    pub fn wake(&self, tag: &str) -> Result<WakeReport, AllocError> {
        let span = tracing::info_span!("wake", tag);
        let _span = span.enter();
        let mut sleepers = self.inner.sleepers.lock();
        let dev = self.device();
        if dev.is_capturing() {
            return Err(AllocError::SleepDuringCapture { call: "wake" });
        }
        let pools = self.inner.lock().begin_wake(tag)?;
        let mapped_bytes = self.inner.lock().map_pools(dev, &pools, tag)?;
        let offloaded = sleepers.offloaded.remove(tag).unwrap_or_default();
        let (restore, stale): (Vec<_>, Vec<_>) = {
            let st = self.inner.lock();
            offloaded
                .into_iter()
                .partition(|o| st.is_allocated_at(o.addr, o.host.len() as u64))
        };
        drop(stale);
        let stream = dev.default_stream();
        let copied = restore
            .iter()
            .try_for_each(|o| {
                let len = o.host.len() as u64;
                o.host
                    .copy_to_device(&stream, DeviceSlice::new(DevicePtr(o.addr), len))
                    .map(|_| ())
            })
            .and_then(|()| Ok(stream.synchronize()?));
        if let Err(err) = copied {
            sleepers.offloaded.insert(tag.to_string(), restore);
            return Err(err);
        }
        let restored_bytes = restore.iter().map(|o| o.host.len() as u64).sum();
        drop(restore);
        if let Some(pinned) = &sleepers.pinned {
            if sleepers.offloaded.is_empty() {
                // Nothing else is offloaded: give the pinned memory back to the host.
                if let Err(err) = pinned.empty_cache() {
                    tracing::warn!(%err, "returning pinned host memory after a wake failed");
                }
            }
        }
        self.inner.lock().set_asleep(&pools, false);
        let report = WakeReport {
            tag: tag.to_string(),
            mapped_bytes,
            restored_bytes,
        };
        tracing::info!(
            mapped = report.mapped_bytes,
            restored = report.restored_bytes,
            "pools awake"
        );
        Ok(report)
    }

    /// Refuses ranges (`(start, end)` byte pairs) of which some part lies in the memory of a
    /// sleeping pool ([`AllocError::MemoryAsleep`], naming the bytes and the tag): what a
    /// graph's launch asks before it replays work that reads or writes them. Ranges outside
    /// this allocator's memory pass.
    pub fn check_awake(
        &self,
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<(), AllocError> {
        match self.inner.lock().first_asleep(ranges) {
            None => Ok(()),
            Some((addr, len, tag)) => Err(AllocError::MemoryAsleep { addr, len, tag }),
        }
    }

    /// Whether the sleepable pools tagged `tag` are asleep (`false` for an unknown tag).
    pub fn is_asleep(&self, tag: &str) -> bool {
        let st = self.inner.lock();
        st.pools
            .tagged(tag)
            .into_iter()
            .any(|id| st.pools.is_asleep(id))
    }
}

impl<B: Backend> MemPool<B> {
    /// The tag of a sleepable pool ([`CachingAllocator::create_sleepable_pool`]); `None` for
    /// other pools.
    pub fn sleep_tag(&self) -> Option<String> {
        self.allocator()
            .inner
            .lock()
            .pools
            .tag(self.id())
            .map(|t| t.to_string())
    }
}
