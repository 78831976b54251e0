//! Buffers a captured graph uses stay allocated while the graph lives.
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
//! The capture may be another device's: work captured on a peer's stream that reads or
//! writes this device's memory (a peer copy, a kernel on peer memory, foreign work noted
//! with `Stream::note_foreign_work`) is told to this device's capture observers with the
//! peer's position, and the pin goes to the peer's capture (`Device::attach_to_capture`
//! reaches it by uid). Captures are numbered per device, so a
//! hold is keyed by device and capture ([`CaptureKey`]). Blocks allocated for a capture (its
//! private pool) are not held, whichever device captures: the pool keeps them for its graphs.
//!
//! A pin may be dropped anywhere — with a device lock held, inside a call of this very
//! allocator — so its drop takes no lock of the allocator: it posts the capture to a board
//! (a leaf lock), and the allocator releases the capture's blocks at its next allocation,
//! free, cache release or drop.

use crate::block::BlockId;
use braid_stream_core::sync::Mutex;
use braid_stream_core::CaptureId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A capture of some device: captures are numbered per device, and a block of this
/// allocator's device may be used by captures of other devices too (peer copies).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct CaptureKey {
    /// The capturing device's uid.
    pub(crate) device: u64,
    /// The capture, numbered on that device.
    pub(crate) capture: CaptureId,
}

/// Where dropped pins post their capture.
#[derive(Debug, Default)]
pub(crate) struct PinBoard {
    released: Mutex<Vec<CaptureKey>>,
    /// Whether `released` may be non-empty (read without the lock on the allocator's paths).
    posted: AtomicBool,
}

impl PinBoard {
    fn post(&self, capture: CaptureKey) {
        self.released.lock().push(capture);
        self.posted.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<CaptureKey> {
        self.posted.store(false, Ordering::Relaxed);
        std::mem::take(&mut *self.released.lock())
    }
}

/// The hold of one capture, then of the graph it became, on the blocks its work uses. Lives in
/// the graph (`Device::attach_to_capture`); its drop releases them.
#[derive(Debug)]
pub(crate) struct GraphPin {
    board: Arc<PinBoard>,
    capture: CaptureKey,
}

impl Drop for GraphPin {
    fn drop(&mut self) {
        self.board.post(self.capture);
    }
}

/// The blocks live captures and graphs hold, in the allocator's locked state.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    board: Arc<PinBoard>,
    /// The blocks each capture (or its graph) holds.
    by_capture: HashMap<CaptureKey, Vec<BlockId>>,
    /// How many captures hold each held block.
    holds: HashMap<BlockId, u32>,
    /// Held blocks their buffer freed: freed for real when their last hold goes.
    freed: Vec<BlockId>,
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
        !self.by_capture.is_empty() && self.board.posted.load(Ordering::Acquire)
    }

    /// Capture `capture`'s work uses block `b`. Returns the capture's pin when it held nothing
    /// before (the caller hands it to the capture).
    pub(crate) fn hold(&mut self, capture: CaptureKey, b: BlockId) -> Option<GraphPin> {
        let (blocks, new) = match self.by_capture.get_mut(&capture) {
            Some(blocks) => (blocks, false),
            None => (self.by_capture.entry(capture).or_default(), true),
        };
        if !blocks.contains(&b) {
            blocks.push(b);
            *self.holds.entry(b).or_insert(0) += 1;
        }
        new.then(|| GraphPin {
            board: self.board.clone(),
            capture,
        })
    }

    /// Held block `b` was freed by its buffer.
    pub(crate) fn note_freed(&mut self, b: BlockId) {
        self.freed.push(b);
    }

    /// The held blocks their buffers freed.
    pub(crate) fn freed(&self) -> &[BlockId] {
        &self.freed
    }

    /// Releases the holds of the captures whose pins were dropped; returns the freed blocks no
    /// capture holds any more (to be freed for real).
    pub(crate) fn release_posted(&mut self) -> Vec<BlockId> {
        for capture in self.board.take() {
            for b in self.by_capture.remove(&capture).unwrap_or_default() {
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

    fn key(device: u64, capture: u64) -> CaptureKey {
        CaptureKey {
            device,
            capture: CaptureId(capture),
        }
    }

    #[test]
    fn a_block_is_released_when_the_last_capture_holding_it_is_gone() {
        let mut pins = Pins::default();
        let (a, b) = (key(1, 1), key(1, 2));
        let pin_a = pins.hold(a, 7).expect("a's first block gives its pin");
        assert!(pins.hold(a, 7).is_none() && pins.hold(a, 8).is_none());
        let pin_b = pins.hold(b, 7).expect("b's pin");
        assert!(pins.is_held(7) && pins.is_held(8) && !pins.is_held(9));
        pins.note_freed(7);
        pins.note_freed(8);
        assert!(!pins.posted());
        drop(pin_a);
        assert!(pins.posted());
        assert_eq!(pins.release_posted(), vec![8], "7 is still held by b");
        assert!(!pins.posted());
        assert_eq!(pins.freed(), &[7]);
        drop(pin_b);
        assert_eq!(pins.release_posted(), vec![7]);
        assert!(!pins.is_held(7) && pins.freed().is_empty());
    }

    #[test]
    fn captures_of_two_devices_with_the_same_number_hold_apart() {
        let mut pins = Pins::default();
        let (own, peer) = (key(1, 1), key(2, 1));
        let own_pin = pins.hold(own, 7).expect("the own capture's pin");
        let peer_pin = pins
            .hold(peer, 8)
            .expect("the peer's capture 1 is another capture: its own pin");
        pins.note_freed(7);
        pins.note_freed(8);
        drop(own_pin);
        assert_eq!(
            pins.release_posted(),
            vec![7],
            "8 is still held by the peer"
        );
        assert!(pins.is_held(8));
        drop(peer_pin);
        assert_eq!(pins.release_posted(), vec![8]);
    }
}
