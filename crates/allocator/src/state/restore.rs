//! The state-machine side of pool checkpoints ([`crate::PoolCheckpoint`]): describing a private
//! pool's segments, checking its live blocks, and re-carving its segments to a checkpoint's
//! layout. The arena finds and re-carves the segments (`arena/restore`); this side validates,
//! frees and grants through the state's own paths, so the statistics are the usual ones.

use super::{Granted, Request, State};
use crate::block::{BlockId, Status, UseRec};
use crate::error::AllocError;
use crate::reclaim::use_done;
use crate::size::SizeClass;
use crate::snapshot::{BlockState, PoolId, SegmentSnapshot};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Domain, StreamId};
use std::collections::BTreeSet;

/// A block a restore handed out again: what the caller wraps into a new buffer.
pub(crate) struct Restored {
    pub granted: Granted,
    pub requested: u64,
    pub stream: StreamId,
}

impl<B: Backend> State<B> {
    /// Fails unless `pool` is a live private pool.
    fn require_private_pool(&self, pool: PoolId) -> Result<(), AllocError> {
        if self.pools.get(pool).is_some() {
            return Ok(());
        }
        let reason = if pool == PoolId::DEFAULT {
            "the default pool cannot be checkpointed, only private pools"
        } else {
            "no such private pool (it is gone or was never created)"
        };
        Err(AllocError::CheckpointPool {
            pool: pool.0,
            reason: reason.to_string(),
        })
    }

    /// Settles the pending frees whose uses are now ordered, then fails if a block of `pool`
    /// is still pending: its final state is not known yet.
    fn settle_pending(&mut self, dev: &Device<B>, pool: PoolId) -> Result<(), AllocError> {
        self.process_pending(dev, true);
        if self.pins.posted() {
            self.release_pins(dev);
        }
        // Blocks freed while a live graph uses them are pending too.
        let pending = self
            .pending
            .blocks
            .iter()
            .chain(self.pins.freed())
            .find(|&&b| {
                let blk = self.arena.blocks.get(b);
                blk.pool == pool && blk.status == Status::Pending
            });
        match pending {
            Some(&b) => Err(AllocError::CheckpointPendingFrees {
                pool: pool.0,
                addr: self.arena.blocks.get(b).addr,
            }),
            None => Ok(()),
        }
    }

    /// The segments of private pool `pool` and their blocks (each allocated or free), by
    /// address. Pending frees are settled first; one still pending is an error.
    pub(crate) fn checkpoint_pool(
        &mut self,
        dev: &Device<B>,
        pool: PoolId,
    ) -> Result<Vec<SegmentSnapshot>, AllocError> {
        self.require_private_pool(pool)?;
        self.settle_pending(dev, pool)?;
        let mut segments = self.snapshot().segments;
        segments.retain(|s| s.pool_id == pool);
        Ok(segments)
    }

    /// PyTorch's `checkPoolLiveAllocations`: whether the allocated blocks of `pool` are exactly
    /// the blocks starting at `ptrs` (duplicates count once).
    pub(crate) fn check_pool_live_allocations(
        &self,
        pool: PoolId,
        ptrs: &BTreeSet<u64>,
    ) -> Result<bool, AllocError> {
        self.require_private_pool(pool)?;
        let mut live = 0usize;
        for b in self.arena.pool_blocks(pool) {
            let blk = self.arena.blocks.get(b);
            if blk.status == Status::Allocated {
                if !ptrs.contains(&blk.addr) {
                    return Ok(false);
                }
                live += 1;
            }
        }
        Ok(live == ptrs.len())
    }

    /// Whether every use of allocated block `b` would be dropped if it were freed now (so the
    /// free caches it instead of leaving it pending). Reads only: a restore that fails keeps
    /// the uses exactly as they were.
    fn uses_settled(&mut self, dev: &Device<B>, b: BlockId) -> bool {
        let blk = self.arena.blocks.get(b);
        if blk.uses.is_empty() {
            return true;
        }
        let (owner, capture, uses) = (blk.stream, blk.capture, blk.uses.clone());
        let own = self.pending.device();
        let Some(owner) = self.pending.stream(dev, owner) else {
            return false;
        };
        uses.iter().all(|u| {
            // As `fill_positions` would at the free: a use up to the free is the using
            // stream's position now.
            let pos = u.pos.or_else(|| {
                let pos = self.pending.stream_of(dev, u.device, u.stream)?.position();
                match pos.domain {
                    Domain::Eager => Some(pos),
                    Domain::Capture(c) => (u.device == own && capture == Some(c)).then_some(pos),
                }
            });
            use_done(dev, &UseRec { pos, ..*u }, &owner)
        })
    }

    /// Checks everything a restore needs before anything changes: the pool exists, `stale`
    /// holds exactly its allocated blocks (all freeable at once), nothing of it is pending, and
    /// every checkpointed segment is still held by the pool.
    fn validate_restore(
        &mut self,
        dev: &Device<B>,
        pool: PoolId,
        segments: &[SegmentSnapshot],
        stale: &[BlockId],
    ) -> Result<(), AllocError> {
        self.require_private_pool(pool)?;
        self.settle_pending(dev, pool)?;
        for &b in stale {
            let blk = self.arena.blocks.get(b);
            if blk.pool != pool || blk.status != Status::Allocated {
                return Err(AllocError::CheckpointForeignBuffer {
                    expected: pool.0,
                    addr: blk.addr,
                    pool: blk.pool.0,
                    foreign: false,
                });
            }
            if !self.uses_settled(dev, b) {
                return Err(AllocError::CheckpointPendingFrees {
                    pool: pool.0,
                    addr: self.arena.blocks.get(b).addr,
                });
            }
        }
        let stale_set: BTreeSet<BlockId> = stale.iter().copied().collect();
        for b in self.arena.pool_blocks(pool) {
            let blk = self.arena.blocks.get(b);
            if blk.status == Status::Allocated && !stale_set.contains(&b) {
                return Err(AllocError::CheckpointLiveBuffer {
                    pool: pool.0,
                    addr: blk.addr,
                    size: blk.size,
                });
            }
        }
        for s in segments {
            if self.arena.segment_of(s, pool).is_none() {
                return Err(AllocError::CheckpointSegmentMissing {
                    pool: pool.0,
                    addr: s.address,
                    size: s.total_size,
                });
            }
        }
        Ok(())
    }

    /// PyTorch's `setCheckpointPoolState`: frees the `stale` blocks (every allocated block of
    /// `pool`), then carves each checkpointed segment into the checkpoint's blocks, handing the
    /// allocated ones out again (by address). Segments of the pool the checkpoint does not
    /// know are left free and cached. Validates first: on error nothing changed.
    pub(crate) fn restore_checkpoint(
        &mut self,
        dev: &Device<B>,
        pool: PoolId,
        segments: &[SegmentSnapshot],
        stale: &[BlockId],
    ) -> Result<Vec<Restored>, AllocError> {
        self.validate_restore(dev, pool, segments, stale)?;
        for &b in stale {
            // Validation showed every use is settled: the free caches the block at once.
            self.arena.blocks.get_mut(b).uses.clear();
            self.free(dev, b);
        }
        let mut restored = Vec::new();
        for s in segments {
            self.carve_segment(dev, s, &mut restored);
        }
        tracing::info!(
            pool = pool.0,
            segments = segments.len(),
            freed = stale.len(),
            live = restored.len(),
            "private pool restored to a checkpoint"
        );
        Ok(restored)
    }

    /// Re-carves a checkpointed segment ([`Arena::carve`]), then grants its allocated blocks
    /// from their free-list places, so the statistics are those of the allocator's own grants.
    ///
    /// [`Arena::carve`]: crate::arena::Arena::carve
    fn carve_segment(&mut self, dev: &Device<B>, s: &SegmentSnapshot, out: &mut Vec<Restored>) {
        let Some((carved, split)) = self.arena.carve(s) else {
            return;
        };
        let Some(&first) = carved.first() else {
            return;
        };
        let (stream, pool, small) = {
            let blk = self.arena.blocks.get(first);
            (blk.stream, blk.pool, blk.small)
        };
        self.stats.note_split_change(small, split);
        for (&b, cb) in carved.iter().zip(&s.blocks) {
            if cb.state != BlockState::ActiveAllocated {
                continue;
            }
            let slot = self.arena.slot_of(b);
            let req = Request {
                stream,
                pool,
                class: if small {
                    SizeClass::Small
                } else {
                    SizeClass::Large
                },
                size: cb.requested_size,
                rounded: cb.size,
            };
            let granted = self.grant(b, slot, req);
            self.note_lifetime(dev, b, true);
            out.push(Restored {
                granted,
                requested: cb.requested_size,
                stream,
            });
        }
    }
}
