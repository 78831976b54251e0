//! Checkpoints of a private pool's state (PyTorch's `_cuda_getCheckpointState`,
//! `_cuda_setCheckpointPoolState` and `_cuda_checkPoolLiveAllocations`, used by cudagraph
//! trees): after replaying graphs, whose replays do not change the host-side allocator state,
//! the pool is put back to the layout it had right after a recording, so the next graph is
//! recorded against the memory the replays really left live.
//!
//! Where PyTorch hands back "stale storages" whose memory the restore re-carved, braid's
//! restore takes ownership of every live buffer of the pool instead, so no handle can point
//! into re-carved memory; the blocks live in the checkpoint come back as new buffers.
//!
//! `checkpoint_pool` takes the pool's layout (every segment and block, allocated or free; a
//! block still pending on other streams is an error). `restore_pool_checkpoint(&ckpt, stale)`
//! returns one new buffer per block live at the checkpoint, by address, holding the same
//! memory (and data); `stale` must be every live buffer of the pool. Everything is checked
//! first: a refusal ([`RestoreError`]: a live buffer missing, a buffer of another pool or
//! allocator, a checkpointed segment released, unsettled cross-stream uses) gives the buffers
//! back and changes nothing. Segments the pool took after the checkpoint are left whole, free
//! and cached (`MemPool::empty_cache` returns them). Statistics stay exact; the history shows
//! the frees and allocations a restore amounts to.

use crate::allocator::CachingAllocator;
use crate::buffer::DeviceBuffer;
use crate::error::AllocError;
use crate::snapshot::{BlockState, PoolId, SegmentSnapshot};
use braid_stream_core::hal::Backend;
use braid_stream_core::DevicePtr;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// The layout of a private pool at one point ([`CachingAllocator::checkpoint_pool`]): every
/// segment (address, size, stream, type, pool) with its blocks (address, size, requested size,
/// allocated or free). Opaque apart from read-only views; restored with
/// [`CachingAllocator::restore_pool_checkpoint`] on the allocator that took it.
#[derive(Clone, Debug)]
pub struct PoolCheckpoint {
    /// Identity of the allocator that took it (the address of its shared state).
    origin: usize,
    pool: PoolId,
    segments: Vec<SegmentSnapshot>,
}

impl PoolCheckpoint {
    /// The pool checkpointed.
    pub fn pool(&self) -> PoolId {
        self.pool
    }

    /// The pool's segments by address, with their blocks by address (each
    /// [`BlockState::ActiveAllocated`] or [`BlockState::Inactive`]).
    pub fn segments(&self) -> &[SegmentSnapshot] {
        &self.segments
    }

    /// Blocks allocated at the checkpoint: the buffers a restore hands back.
    pub fn live_blocks(&self) -> usize {
        self.segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .count()
    }
}

/// A refused [`CachingAllocator::restore_pool_checkpoint`]: why, and the stale buffers handed
/// over, untouched (none was freed, the pool did not change). Converts into the
/// [`AllocError`] (dropping, and so freeing, the buffers) for `?`.
pub struct RestoreError<B: Backend> {
    /// Why the restore was refused.
    pub error: AllocError,
    /// The stale buffers, given back as they were.
    pub stale: Vec<DeviceBuffer<B>>,
}

impl<B: Backend> fmt::Debug for RestoreError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestoreError")
            .field("error", &self.error)
            .field("stale", &self.stale)
            .finish()
    }
}

impl<B: Backend> fmt::Display for RestoreError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl<B: Backend> std::error::Error for RestoreError<B> {}

impl<B: Backend> From<RestoreError<B>> for AllocError {
    fn from(e: RestoreError<B>) -> Self {
        e.error
    }
}

impl<B: Backend> CachingAllocator<B> {
    fn origin(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// PyTorch's `_cuda_getCheckpointState`: the layout of private pool `pool` now.
    ///
    /// Pending cross-stream frees are settled first; a block of the pool still awaiting uses
    /// on other streams is [`AllocError::CheckpointPendingFrees`] (its final state is not
    /// known). The default pool or a pool that is gone is [`AllocError::CheckpointPool`].
    ///
    /// ```
    /// use braid_allocator::{AllocatorConfig, CachingAllocator, PoolOptions};
    /// use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
    /// use braid_stream_core::Device;
    ///
    /// let device = Device::<SimBackend>::new(SimDevice::new(SimConfig::new().capacity(64 << 20))).unwrap();
    /// let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    /// let s = device.create_stream(0).unwrap();
    /// let pool = alloc.create_pool(PoolOptions::new());
    /// let diversion = pool.use_on(&s).unwrap(); // as a graph capture would
    /// let (a, b) = (alloc.alloc(4096, &s).unwrap(), alloc.alloc(4096, &s).unwrap());
    /// let checkpoint = alloc.checkpoint_pool(pool.id()).unwrap();
    /// let before = pool.snapshot().segments;
    /// assert_eq!(checkpoint.live_blocks(), 2);
    ///
    /// // Later (graph replays): `a` died, another allocation took its place.
    /// drop(a);
    /// let c = alloc.alloc(8192, &s).unwrap();
    /// assert!(!alloc.check_pool_live_allocations(pool.id(), &[b.ptr()]).unwrap());
    ///
    /// // Back to the checkpoint: every live buffer of the pool is handed over.
    /// let b_ptr = b.ptr();
    /// let outputs = alloc.restore_pool_checkpoint(&checkpoint, vec![b, c]).unwrap();
    /// assert_eq!(pool.snapshot().segments, before);
    /// assert_eq!(outputs[1].ptr(), b_ptr);
    /// assert_eq!(pool.stats().allocated_blocks, 2);
    /// drop(outputs);
    /// assert!(alloc.check_pool_live_allocations(pool.id(), &[]).unwrap());
    /// # drop(diversion);
    /// ```
    pub fn checkpoint_pool(&self, pool: PoolId) -> Result<PoolCheckpoint, AllocError> {
        let segments = self
            .inner
            .lock()
            .checkpoint_pool(&self.inner.device, pool)?;
        tracing::debug!(
            pool = pool.0,
            segments = segments.len(),
            "private pool checkpointed"
        );
        Ok(PoolCheckpoint {
            origin: self.origin(),
            pool,
            segments,
        })
    }

    /// PyTorch's `_cuda_setCheckpointPoolState`: puts the checkpoint's pool back to the
    /// checkpoint's layout and returns one new buffer per block allocated in the checkpoint,
    /// by address, with the checkpoint's size, requested size and stream (the memory, and so
    /// the data, is the block's: nothing moves). The caller owns them; dropping one frees it
    /// as usual.
    ///
    /// `stale` must hold every live buffer of the pool (empty buffers of this allocator hold no
    /// memory and are just dropped): they are
    /// consumed (their blocks freed without their drop running) so that no handle points into
    /// memory the restore re-carves. Segments of the pool that the checkpoint does not know
    /// (allocated after it) are left whole, free and cached in the pool
    /// ([`crate::MemPool::empty_cache`] returns them to the device).
    ///
    /// Everything is checked before anything changes; when the restore is refused, the
    /// [`RestoreError`] gives `stale` back untouched and the allocator is as it was:
    /// a checkpoint of another allocator or of a pool that is gone
    /// ([`AllocError::CheckpointPool`]); a stale buffer of another allocator or pool, or not
    /// live ([`AllocError::CheckpointForeignBuffer`]); a live buffer of the pool missing from
    /// `stale` ([`AllocError::CheckpointLiveBuffer`]); a block of the pool pending on other
    /// streams, or a stale buffer whose uses on other streams are not ordered before its
    /// stream's next work ([`AllocError::CheckpointPendingFrees`]); a checkpointed segment no
    /// longer held by the pool ([`AllocError::CheckpointSegmentMissing`]).
    pub fn restore_pool_checkpoint(
        &self,
        checkpoint: &PoolCheckpoint,
        mut stale: Vec<DeviceBuffer<B>>,
    ) -> Result<Vec<DeviceBuffer<B>>, RestoreError<B>> {
        let pool = checkpoint.pool;
        if checkpoint.origin != self.origin() {
            let error = AllocError::CheckpointPool {
                pool: pool.0,
                reason: "the checkpoint was taken by another allocator".to_string(),
            };
            return Err(RestoreError { error, stale });
        }
        let mut blocks = Vec::with_capacity(stale.len());
        for buf in &stale {
            if !std::ptr::eq(buf.inner(), Arc::as_ptr(&self.inner)) {
                let error = AllocError::CheckpointForeignBuffer {
                    expected: pool.0,
                    addr: buf.ptr().0,
                    pool: buf.pool().0,
                    foreign: true,
                };
                return Err(RestoreError { error, stale });
            }
            blocks.extend(buf.block());
        }
        let result = {
            let mut st = self.inner.lock();
            let result =
                st.restore_checkpoint(&self.inner.device, pool, &checkpoint.segments, &blocks);
            if let Ok(restored) = &result {
                for _ in restored {
                    st.keepalive.buffer_created(&self.inner);
                }
            }
            result
        };
        let restored = match result {
            Ok(restored) => restored,
            Err(error) => return Err(RestoreError { error, stale }),
        };
        // The restore freed their blocks: dropping the buffers must not free them again.
        for buf in &mut stale {
            buf.take_block();
        }
        drop(stale);
        Ok(restored
            .into_iter()
            .map(|r| DeviceBuffer::new(&self.inner, r.granted, r.requested, r.stream))
            .collect())
    }

    /// PyTorch's `_cuda_checkPoolLiveAllocations`: whether the allocated blocks of private
    /// pool `pool` are exactly the ones starting at `ptrs` (duplicates count once; a pointer
    /// that is no block start of the pool makes it false). A pool that is gone is
    /// [`AllocError::CheckpointPool`].
    pub fn check_pool_live_allocations(
        &self,
        pool: PoolId,
        ptrs: &[DevicePtr],
    ) -> Result<bool, AllocError> {
        let ptrs: BTreeSet<u64> = ptrs.iter().map(|p| p.0).collect();
        self.inner.lock().check_pool_live_allocations(pool, &ptrs)
    }
}
