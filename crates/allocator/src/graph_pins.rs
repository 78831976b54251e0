//! Buffers a graph uses stay allocated while the graph lives.
//!
//! A graph replays its work at the addresses it captured. Memory allocated for the capture (a
//! capture session's private pool) lives as long as the graph already; memory allocated
//! outside it — an input, weights, an output buffer made before `Stream::begin_capture` — is
//! *held* by the capture: the allocator watches captured work
//! (`Device::add_capture_use_observer`), and every block of its own that captured work reads
//! or writes is held until the graph the capture becomes is gone (a [`GraphPin`], handed to
//! the capture with `Device::attach_to_capture`, which moves it into the graph; a discarded
//! capture drops it at once). Dropping such a buffer while the graph lives frees its block
//! only once the graph is dropped and the launches it still had running have completed:
//! until then the block is pending (counted in `pending_free_bytes`) and is handed to no other
//! buffer, so a replay can never overwrite memory that now belongs to someone else.
//!
//! A task update (`Graph::update`) holds the blocks its operators use the same way, with a
//! pin of its own the graph keeps for the group (`UseObserver::note_graph_update`), until the
//! graph is gone or a later update of the group replaces it. A launch while a block an update
//! names was dropped by its buffer is refused, naming the block
//! (`StreamError::GraphUsesDroppedBuffer`): the replay would compute into, or from, memory no
//! one owns any more. Every pin refuses a launch while one of its blocks sleeps
//! (`StreamError::GraphMemoryAsleep`, naming the pool's tag; `crate::sleep`). A captured block
//! dropped by its buffer does not refuse a launch: the graph keeps the memory for its
//! replays, as it always has; an update names buffers the caller passes for later replays, so
//! one dropped while named means the replay would serve no one.
//!
//! The capture may be another device's: work captured on a peer's stream that reads or
//! writes this device's memory (a peer copy, a kernel on peer memory, foreign work noted
//! with `Stream::note_foreign_work`) is told to this device's capture observers with the
//! peer's position, and the pin goes to the peer's capture (`Device::attach_to_capture`
//! reaches it by uid). Captures are numbered per device, so a
//! hold is keyed by device and capture ([`CaptureKey`]). Blocks allocated for a capture (its
//! private pool) are not held, whichever device captures: the pool keeps them for its graphs.
//!
//! A pin may be dropped anywhere — with a device lock held, inside a call of this very
//! allocator — so its drop takes no lock of the allocator: it posts its key to a board
//! (a leaf lock), and the allocator releases the key's blocks at its next allocation,
//! free, cache release or drop.

use crate::allocator::Inner;
use crate::block::BlockId;
use braid_stream_core::hal::Backend;
use braid_stream_core::sync::Mutex;
use braid_stream_core::{CaptureId, GraphHold};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// A capture of some device: captures are numbered per device, and a block of this
/// allocator's device may be used by captures of other devices too (peer copies).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct CaptureKey {
    /// The capturing device's uid.
    pub(crate) device: u64,
    /// The capture, numbered on that device.
    pub(crate) capture: CaptureId,
}

/// What one pin holds for: a capture (then the graph it became), or one applied task
/// update of a graph, numbered by this allocator.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum HoldKey {
    /// The blocks a capture's work uses.
    Capture(CaptureKey),
    /// The blocks a task update's operators use.
    Update(u64),
}

/// Where dropped pins post their key.
#[derive(Debug, Default)]
pub(crate) struct PinBoard {
    released: Mutex<Vec<HoldKey>>,
    /// Whether `released` may be non-empty (read without the lock on the allocator's paths).
    posted: AtomicBool,
}

impl PinBoard {
    fn post(&self, key: HoldKey) {
        self.released.lock().push(key);
        self.posted.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<HoldKey> {
        self.posted.store(false, Ordering::Relaxed);
        std::mem::take(&mut *self.released.lock())
    }
}

/// The hold of one capture (then of the graph it became), or of one task update, on the
/// blocks its work uses. Lives in the graph (`Device::attach_to_capture`,
/// `UseObserver::note_graph_update`); asked before each launch; its drop releases them.
pub(crate) struct GraphPin<B: Backend> {
    board: Arc<PinBoard>,
    key: HoldKey,
    allocator: Weak<Inner<B>>,
}

impl<B: Backend> GraphPin<B> {
    /// The pin of `key`, whose blocks `allocator`'s state holds.
    pub(crate) fn new(allocator: &Arc<Inner<B>>, board: Arc<PinBoard>, key: HoldKey) -> Self {
        GraphPin {
            board,
            key,
            allocator: Arc::downgrade(allocator),
        }
    }
}

impl<B: Backend> GraphHold for GraphPin<B> {
    fn check_launch(&self) -> braid_stream_core::Result<()> {
        match self.allocator.upgrade() {
            Some(inner) => inner.lock().check_hold(self.key),
            // No allocator, no block of it to refuse.
            None => Ok(()),
        }
    }
}

impl<B: Backend> Drop for GraphPin<B> {
    fn drop(&mut self) {
        self.board.post(self.key);
    }
}

/// The blocks live captures, graphs and updates hold, in the allocator's locked state.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    board: Arc<PinBoard>,
    /// The blocks each pin holds.
    by_key: HashMap<HoldKey, Vec<BlockId>>,
    /// How many pins hold each held block.
    holds: HashMap<BlockId, u32>,
    /// Held blocks their buffer freed: freed for real when their last hold goes.
    freed: Vec<BlockId>,
    /// The number of the last update key handed out.
    last_update: u64,
}

impl Pins {
    /// Whether some capture holds block `b`.
    #[inline(always)]
    pub(crate) fn is_held(&self, b: BlockId) -> bool {
        !self.holds.is_empty() && self.holds.contains_key(&b)
    }

    /// Whether a pin was dropped since the last [`Pins::release_posted`].
    #[inline(always)]
    pub(crate) fn posted(&self) -> bool {
        !self.by_key.is_empty() && self.board.posted.load(Ordering::Acquire)
    }

    /// The board the pins post to when dropped.
    pub(crate) fn board(&self) -> Arc<PinBoard> {
        self.board.clone()
    }

    /// A key for the blocks of a new task update.
    pub(crate) fn update_key(&mut self) -> HoldKey {
        self.last_update += 1;
        HoldKey::Update(self.last_update)
    }

    /// `key`'s work uses block `b`. Returns `true` when `key` held nothing before (the caller
    /// makes its pin and hands it to the graph).
    pub(crate) fn hold(&mut self, key: HoldKey, b: BlockId) -> bool {
        let (blocks, new) = match self.by_key.get_mut(&key) {
            Some(blocks) => (blocks, false),
            None => (self.by_key.entry(key).or_default(), true),
        };
        if !blocks.contains(&b) {
            blocks.push(b);
            *self.holds.entry(b).or_insert(0) += 1;
        }
        new
    }

    /// The blocks `key` holds.
    pub(crate) fn blocks_of(&self, key: HoldKey) -> &[BlockId] {
        self.by_key.get(&key).map_or(&[], Vec::as_slice)
    }

    /// Held block `b` was freed by its buffer.
    pub(crate) fn note_freed(&mut self, b: BlockId) {
        self.freed.push(b);
    }

    /// The held blocks their buffers freed.
    pub(crate) fn freed(&self) -> &[BlockId] {
        &self.freed
    }

    /// Releases the holds of the pins that were dropped; returns the freed blocks no pin holds
    /// any more (to be freed for real).
    pub(crate) fn release_posted(&mut self) -> Vec<BlockId> {
        for key in self.board.take() {
            for b in self.by_key.remove(&key).unwrap_or_default() {
                if let Some(n) = self.holds.get_mut(&b) {
                    *n -= 1;
                    if *n == 0 {
                        self.holds.remove(&b);
                    }
                }
            }
        }
        let holds = &self.holds;
        let (released, kept): (Vec<BlockId>, Vec<BlockId>) =
            self.freed.iter().partition(|b| !holds.contains_key(b));
        self.freed = kept;
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(device: u64, capture: u64) -> HoldKey {
        HoldKey::Capture(CaptureKey {
            device,
            capture: CaptureId(capture),
        })
    }

    /// Posts `key` to `pins`' board, as its pin's drop does.
    fn unpin(pins: &Pins, key: HoldKey) {
        pins.board.post(key);
    }

    #[test]
    fn a_block_is_released_when_the_last_pin_holding_it_is_gone() {
        let mut pins = Pins::default();
        let (a, b) = (key(1, 1), key(1, 2));
        assert!(pins.hold(a, 7), "a's first block makes its pin");
        assert!(!pins.hold(a, 7) && !pins.hold(a, 8));
        assert!(pins.hold(b, 7), "b's pin");
        assert!(pins.is_held(7) && pins.is_held(8) && !pins.is_held(9));
        assert_eq!(pins.blocks_of(a), &[7, 8]);
        pins.note_freed(7);
        pins.note_freed(8);
        assert!(!pins.posted());
        unpin(&pins, a);
        assert!(pins.posted());
        assert_eq!(pins.release_posted(), vec![8], "7 is still held by b");
        assert!(!pins.posted());
        assert_eq!(pins.freed(), &[7]);
        assert!(pins.blocks_of(a).is_empty());
        unpin(&pins, b);
        assert_eq!(pins.release_posted(), vec![7]);
        assert!(!pins.is_held(7) && pins.freed().is_empty());
    }

    #[test]
    fn captures_of_two_devices_with_the_same_number_hold_apart() {
        let mut pins = Pins::default();
        let (own, peer) = (key(1, 1), key(2, 1));
        assert!(pins.hold(own, 7));
        assert!(
            pins.hold(peer, 8),
            "the peer's capture 1 is another capture: its own pin"
        );
        pins.note_freed(7);
        pins.note_freed(8);
        unpin(&pins, own);
        assert_eq!(
            pins.release_posted(),
            vec![7],
            "8 is still held by the peer"
        );
        assert!(pins.is_held(8));
        unpin(&pins, peer);
        assert_eq!(pins.release_posted(), vec![8]);
    }

    #[test]
    fn update_keys_are_new_each_time_and_hold_like_captures() {
        let mut pins = Pins::default();
        let (first, second) = (pins.update_key(), pins.update_key());
        assert_ne!(first, second);
        assert!(pins.hold(first, 7) && pins.hold(second, 7));
        pins.note_freed(7);
        unpin(&pins, first);
        assert!(
            pins.release_posted().is_empty(),
            "the second update holds 7"
        );
        unpin(&pins, second);
        assert_eq!(pins.release_posted(), vec![7]);
    }
}
