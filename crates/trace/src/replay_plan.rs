//! From a snapshot to a replay sequence: a prologue of the blocks that were live before
//! recording started, then the recorded window's allocs and frees, and what PyTorch itself
//! reserved over that window.
//!
//! Choices, in the order the builder applies them:
//!
//! - **Window.** The events of one device's trace, oldest first.
//! - **Alloc** → a new buffer `(id, size, stream)`; `size` is the size the user asked for
//!   (PyTorch records the requested size, not the rounded block size).
//! - **Free.** `free_requested` is when the user dropped the tensor, and is what the replay
//!   frees on: it is matched to the most recent live alloc at that address. The braid
//!   allocator decides itself when the memory is reusable (cross-stream uses), so
//!   `free_completed` only matters where no `free_requested` came first: it frees a live
//!   alloc that had none, and in a trace with allocs but no `free_requested` event at all
//!   (recorded with that action skipped) it is the free. A `free_completed` whose
//!   `free_requested` came before the window belongs to a tensor already dropped when
//!   recording started; it is ignored.
//! - **Prologue.** Recording usually starts after warm-up, so weights and optimizer state
//!   were live before the first event. The prologue allocates, before the window, every
//!   block freed in the window without an alloc there (size and stream from the free event)
//!   and every block still allocated in the final `segments` state without a live alloc from
//!   the window (size `requested_size`, stream of its segment), in address order.
//! - **An alloc at an address still live** (a free missing from the trace) frees the older
//!   buffer first; [`PlanSummary::implicit_frees`] counts these.
//! - **Live bytes** are the sum over live buffers of the size rounded up to PyTorch's 512-byte
//!   minimum block (`peak_live_bytes`, what PyTorch calls allocated), and of the requested
//!   size (`peak_requested_bytes`, the lower bound for any allocator that does not move
//!   memory).
//! - **PyTorch's reservation over the window**: its reserved bytes when recording started
//!   are the final segments' `total_size` sum minus the window's `segment_alloc` /
//!   `segment_map` sizes plus its `segment_free` / `segment_unmap` sizes; walking those events
//!   from there gives the peak. Device mallocs count `segment_alloc` and `segment_map`.

use crate::error::{Result, TraceError};
use crate::snapshot::{Action, Snapshot};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// PyTorch's smallest block: every size is rounded up to a multiple of this.
pub const MIN_BLOCK_SIZE: u64 = 512;

/// `size` rounded up to a multiple of [`MIN_BLOCK_SIZE`] (at least one).
pub fn round_block(size: u64) -> u64 {
    size.max(1).div_ceil(MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE
}

/// One step of a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Allocate `size` bytes on stream `stream` (an index into [`ReplayPlan::streams`]);
    /// later ops name the buffer `id`.
    Alloc {
        /// Buffer id, below [`ReplayPlan::buffer_count`].
        id: u32,
        /// Requested bytes.
        size: u64,
        /// Index into [`ReplayPlan::streams`].
        stream: u32,
    },
    /// Free buffer `id`.
    Free {
        /// Buffer id of an earlier `Alloc`.
        id: u32,
    },
}

/// What the plan found in the trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlanSummary {
    /// `alloc` events in the window.
    pub alloc_events: u64,
    /// Frees in the window (matched to a window alloc or to a prologue block).
    pub free_events: u64,
    /// Blocks allocated by the prologue.
    pub prologue_blocks: u64,
    /// Requested bytes of the prologue blocks.
    pub prologue_bytes: u64,
    /// Peak of live bytes, sizes rounded to 512 (PyTorch's "allocated").
    pub peak_live_bytes: u64,
    /// Peak of live requested bytes.
    pub peak_requested_bytes: u64,
    /// Allocs at an address that was still live (the free is missing from the trace).
    pub implicit_frees: u64,
    /// Events that do not change the replay (`free_completed` after `free_requested`,
    /// segment events, `oom`, `snapshot`, unknown actions, frees of tensors dropped before
    /// the window).
    pub ignored_events: u64,
    /// PyTorch's own reservation over the window (for a state-only snapshot: its
    /// reservation at that instant).
    pub torch: TorchWindow,
}

/// PyTorch's reservation over the recorded window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TorchWindow {
    /// Reserved bytes when recording started.
    pub reserved_at_start: u64,
    /// Peak reserved bytes over the window.
    pub peak_reserved_bytes: u64,
    /// Reserved bytes when the snapshot was taken (sum of the segments' sizes).
    pub final_reserved_bytes: u64,
    /// Device mallocs in the window (`segment_alloc` and `segment_map`).
    pub device_mallocs: u64,
    /// Device frees in the window (`segment_free` and `segment_unmap`).
    pub device_frees: u64,
}

/// A replay sequence: `ops[..prologue_len]` are the prologue's allocs, the rest the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayPlan {
    /// Prologue, then window.
    pub ops: Vec<Op>,
    /// Number of prologue ops at the front of `ops`.
    pub prologue_len: usize,
    /// The trace's stream handles, in order of first use; `Op::Alloc::stream` indexes this.
    pub streams: Vec<u64>,
    /// Number of buffer ids used (ids are `0..buffer_count`).
    pub buffer_count: u32,
    /// Counts and peaks.
    pub summary: PlanSummary,
}

/// Live state while walking the window.
#[derive(Default)]
struct Builder {
    window: Vec<Op>,
    /// Prologue blocks found so far: (address, id, size, stream index).
    prologue: Vec<(u64, u32, u64, u32)>,
    /// Live buffers by address: (id, size).
    live: HashMap<u64, (u32, u64)>,
    /// Addresses whose free was requested but not yet completed.
    awaiting: HashSet<u64>,
    streams: Vec<u64>,
    stream_index: HashMap<u64, u32>,
    next_id: u32,
    summary: PlanSummary,
}

impl Builder {
    fn stream(&mut self, handle: u64) -> u32 {
        if let Some(&i) = self.stream_index.get(&handle) {
            return i;
        }
        let i = self.streams.len() as u32;
        self.streams.push(handle);
        self.stream_index.insert(handle, i);
        i
    }

    fn new_id(&mut self) -> Result<u32> {
        let id = self.next_id;
        self.next_id = id
            .checked_add(1)
            .ok_or_else(|| TraceError::Format("more than 2^32 buffers".into()))?;
        Ok(id)
    }

    fn alloc(&mut self, addr: u64, size: u64, stream: u64) -> Result<()> {
        if let Some((old, _)) = self.live.remove(&addr) {
            self.window.push(Op::Free { id: old });
            self.summary.implicit_frees += 1;
        }
        let id = self.new_id()?;
        let stream = self.stream(stream);
        self.window.push(Op::Alloc { id, size, stream });
        self.live.insert(addr, (id, size));
        self.awaiting.remove(&addr);
        self.summary.alloc_events += 1;
        Ok(())
    }

    /// Frees the live buffer at `addr`, or records a prologue block freed here.
    fn free(&mut self, addr: u64, size: u64, stream: u64) -> Result<()> {
        let id = match self.live.remove(&addr) {
            Some((id, _)) => id,
            None => {
                let id = self.new_id()?;
                let stream = self.stream(stream);
                self.prologue.push((addr, id, size, stream));
                id
            }
        };
        self.window.push(Op::Free { id });
        self.summary.free_events += 1;
        Ok(())
    }
}

impl ReplayPlan {
    /// Builds the replay of `device`'s trace (device 0 for single-GPU snapshots).
    ///
    /// A snapshot without history (state only) gives a plan with only a prologue: every
    /// allocated block of the final state.
    pub fn from_snapshot(snapshot: &Snapshot, device: usize) -> Result<ReplayPlan> {
        let device_id = i64::try_from(device)
            .map_err(|_| TraceError::Format(format!("device index {device} out of range")))?;
        if device >= snapshot.device_traces.len().max(1) {
            return Err(TraceError::Format(format!(
                "device {device} has no trace (the snapshot has {})",
                snapshot.device_traces.len()
            )));
        }
        let events = snapshot.events(device);
        // A history with allocs but no `free_requested` was recorded with that action
        // skipped: there `free_completed` is the free.
        let completed_is_free = !events.iter().any(|e| e.action == Action::FreeRequested)
            && events.iter().any(|e| e.action == Action::Alloc);
        let mut b = Builder::default();
        let mut segment_delta: i128 = 0;
        let mut walk: Vec<i128> = Vec::new();
        let (mut mallocs, mut frees) = (0u64, 0u64);
        for e in events {
            match e.action {
                Action::Alloc => b.alloc(e.addr, e.size, e.stream)?,
                Action::FreeRequested => {
                    b.free(e.addr, e.size, e.stream)?;
                    b.awaiting.insert(e.addr);
                }
                Action::FreeCompleted => {
                    if b.awaiting.remove(&e.addr) {
                        b.summary.ignored_events += 1;
                    } else if b.live.contains_key(&e.addr) || completed_is_free {
                        b.free(e.addr, e.size, e.stream)?;
                    } else {
                        b.summary.ignored_events += 1;
                    }
                }
                Action::SegmentAlloc | Action::SegmentMap => {
                    segment_delta += i128::from(e.size);
                    walk.push(i128::from(e.size));
                    mallocs += 1;
                    b.summary.ignored_events += 1;
                }
                Action::SegmentFree | Action::SegmentUnmap => {
                    segment_delta -= i128::from(e.size);
                    walk.push(-i128::from(e.size));
                    frees += 1;
                    b.summary.ignored_events += 1;
                }
                Action::Oom | Action::Snapshot | Action::Other(_) => b.summary.ignored_events += 1,
            }
        }

        // Blocks allocated at the end that no window alloc accounts for.
        for segment in snapshot.segments.iter().filter(|s| s.device == device_id) {
            for block in segment.blocks.iter().filter(|b| b.state.is_allocated()) {
                if !b.live.contains_key(&block.address) {
                    let id = b.new_id()?;
                    let stream = b.stream(segment.stream);
                    let size = if block.requested_size > 0 {
                        block.requested_size
                    } else {
                        block.size
                    };
                    b.prologue.push((block.address, id, size, stream));
                }
            }
        }
        b.prologue
            .sort_unstable_by_key(|&(addr, id, ..)| (addr, id));

        let mut summary = b.summary;
        let mut ops = Vec::with_capacity(b.prologue.len() + b.window.len());
        let mut sizes = vec![0u64; b.next_id as usize];
        for &(_, id, size, stream) in &b.prologue {
            ops.push(Op::Alloc { id, size, stream });
            summary.prologue_blocks += 1;
            summary.prologue_bytes += size;
        }
        let prologue_len = ops.len();
        ops.extend_from_slice(&b.window);

        let (mut live, mut requested) = (0u64, 0u64);
        for op in &ops {
            match *op {
                Op::Alloc { id, size, .. } => {
                    sizes[id as usize] = size;
                    live += round_block(size);
                    requested += size;
                    summary.peak_live_bytes = summary.peak_live_bytes.max(live);
                    summary.peak_requested_bytes = summary.peak_requested_bytes.max(requested);
                }
                Op::Free { id } => {
                    let size = sizes[id as usize];
                    live -= round_block(size);
                    requested -= size;
                }
            }
        }

        let final_reserved = i128::from(snapshot.reserved_bytes(device_id));
        let start = final_reserved - segment_delta;
        if start < 0 {
            return Err(TraceError::Format(format!(
                "the window's segment events free {} bytes more than the final segments hold",
                -start
            )));
        }
        let (mut current, mut peak) = (start, start);
        for delta in walk {
            current += delta;
            peak = peak.max(current);
        }
        let to_u64 = |v: i128| u64::try_from(v).unwrap_or(u64::MAX);
        summary.torch = TorchWindow {
            reserved_at_start: to_u64(start),
            peak_reserved_bytes: to_u64(peak),
            final_reserved_bytes: to_u64(final_reserved),
            device_mallocs: mallocs,
            device_frees: frees,
        };

        Ok(ReplayPlan {
            ops,
            prologue_len,
            streams: b.streams,
            buffer_count: b.next_id,
            summary,
        })
    }

    /// The prologue's ops.
    pub fn prologue(&self) -> &[Op] {
        &self.ops[..self.prologue_len]
    }

    /// The window's ops.
    pub fn window(&self) -> &[Op] {
        &self.ops[self.prologue_len..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Block, BlockState, Segment, TraceEvent};

    fn ev(action: Action, addr: u64, size: u64) -> TraceEvent {
        TraceEvent::new(action, addr, size, 7)
    }

    fn segment(address: u64, total: u64, blocks: Vec<(u64, u64, BlockState)>) -> Segment {
        Segment {
            address,
            total_size: total,
            stream: 7,
            blocks: blocks
                .into_iter()
                .map(|(address, size, state)| Block {
                    address,
                    size: round_block(size),
                    requested_size: size,
                    state,
                    frames: Vec::new(),
                })
                .collect(),
            ..Segment::default()
        }
    }

    /// Window: alloc A, free of pre-window block P, alloc B at A's old place after A's free,
    /// B stays live; final state: B allocated, W (weights, no event) allocated.
    fn sample() -> Snapshot {
        use Action::{Alloc, FreeCompleted, FreeRequested};
        Snapshot {
            segments: vec![segment(
                0x10000,
                1 << 20,
                vec![
                    (0x10000, 4096, BlockState::ActiveAllocated), // W
                    (0x20000, 1000, BlockState::ActiveAllocated), // B
                    (0x30000, 2048, BlockState::Inactive),
                ],
            )],
            device_traces: vec![vec![
                ev(Alloc, 0x20000, 1500),
                ev(FreeRequested, 0x40000, 3000), // P: allocated before the window
                ev(FreeCompleted, 0x40000, 3000),
                ev(FreeRequested, 0x20000, 1500),
                ev(FreeCompleted, 0x20000, 1500),
                ev(Alloc, 0x20000, 1000),
            ]],
            ..Snapshot::default()
        }
    }

    #[test]
    fn prologue_holds_pre_window_blocks_in_address_order() {
        let plan = ReplayPlan::from_snapshot(&sample(), 0).unwrap();
        // ids: A=0, P=1, B=2, W=3.
        assert_eq!(
            plan.prologue(),
            &[
                Op::Alloc {
                    id: 3,
                    size: 4096,
                    stream: 0
                },
                Op::Alloc {
                    id: 1,
                    size: 3000,
                    stream: 0
                },
            ]
        );
        assert_eq!(
            plan.window(),
            &[
                Op::Alloc {
                    id: 0,
                    size: 1500,
                    stream: 0
                },
                Op::Free { id: 1 },
                Op::Free { id: 0 },
                Op::Alloc {
                    id: 2,
                    size: 1000,
                    stream: 0
                },
            ]
        );
        assert_eq!(plan.streams, vec![7]);
        assert_eq!(plan.buffer_count, 4);
        let s = &plan.summary;
        assert_eq!((s.alloc_events, s.free_events), (2, 2));
        assert_eq!((s.prologue_blocks, s.prologue_bytes), (2, 7096));
        assert_eq!(s.peak_requested_bytes, 4096 + 3000 + 1500);
        assert_eq!(s.peak_live_bytes, 4096 + 3072 + 1536);
        assert_eq!(s.ignored_events, 2);
        assert_eq!(s.implicit_frees, 0);
        assert_eq!(s.torch.reserved_at_start, 1 << 20);
        assert_eq!(s.torch.peak_reserved_bytes, 1 << 20);
        assert_eq!(s.torch.device_mallocs, 0);
    }

    #[test]
    fn torch_reservation_walks_segment_events_back_from_the_final_state() {
        use Action::{SegmentAlloc, SegmentFree};
        let snap = Snapshot {
            segments: vec![segment(0, 3 << 20, vec![])],
            device_traces: vec![vec![
                ev(SegmentAlloc, 0x100000, 2 << 20),
                ev(SegmentAlloc, 0x300000, 2 << 20),
                ev(SegmentFree, 0x100000, 2 << 20),
                ev(SegmentAlloc, 0x500000, 1 << 20),
                ev(SegmentFree, 0x300000, 2 << 20),
            ]],
            ..Snapshot::default()
        };
        let t = ReplayPlan::from_snapshot(&snap, 0).unwrap().summary.torch;
        // Final 3 MiB = start + 2 + 2 - 2 + 1 - 2 MiB, so start = 2 MiB; peak 6 MiB.
        assert_eq!(t.reserved_at_start, 2 << 20);
        assert_eq!(t.peak_reserved_bytes, 6 << 20);
        assert_eq!(t.final_reserved_bytes, 3 << 20);
        assert_eq!((t.device_mallocs, t.device_frees), (3, 2));

        let bad = Snapshot {
            device_traces: vec![vec![ev(SegmentFree, 0, 1 << 20)]],
            ..Snapshot::default()
        };
        assert!(ReplayPlan::from_snapshot(
            &Snapshot {
                segments: vec![],
                ..bad
            },
            0
        )
        .is_ok());
        let bad = Snapshot {
            device_traces: vec![vec![ev(SegmentAlloc, 0, 1 << 20)]],
            ..Snapshot::default()
        };
        assert!(matches!(
            ReplayPlan::from_snapshot(&bad, 0),
            Err(TraceError::Format(_))
        ));
    }

    #[test]
    fn free_completed_is_the_free_when_no_free_requested_was_recorded() {
        use Action::{Alloc, FreeCompleted};
        let snap = Snapshot {
            device_traces: vec![vec![
                ev(Alloc, 0x1000, 512),
                ev(FreeCompleted, 0x1000, 512),
                ev(FreeCompleted, 0x9000, 1024), // pre-window block
            ]],
            ..Snapshot::default()
        };
        let plan = ReplayPlan::from_snapshot(&snap, 0).unwrap();
        assert_eq!(plan.prologue_len, 1);
        assert_eq!(plan.summary.free_events, 2);
        assert_eq!(plan.summary.prologue_bytes, 1024);
    }

    #[test]
    fn completed_free_of_a_tensor_dropped_before_the_window_is_ignored() {
        use Action::{Alloc, FreeCompleted, FreeRequested};
        let snap = Snapshot {
            device_traces: vec![vec![
                ev(Alloc, 0x1000, 512),
                ev(FreeRequested, 0x1000, 512),
                ev(FreeCompleted, 0x9000, 1024),
                ev(FreeCompleted, 0x1000, 512),
            ]],
            ..Snapshot::default()
        };
        let plan = ReplayPlan::from_snapshot(&snap, 0).unwrap();
        assert_eq!(plan.prologue_len, 0);
        assert_eq!(plan.summary.ignored_events, 2);
    }

    #[test]
    fn alloc_over_a_live_address_frees_the_old_buffer() {
        use Action::Alloc;
        let snap = Snapshot {
            device_traces: vec![vec![ev(Alloc, 0x1000, 512), ev(Alloc, 0x1000, 700)]],
            ..Snapshot::default()
        };
        let plan = ReplayPlan::from_snapshot(&snap, 0).unwrap();
        assert_eq!(plan.summary.implicit_frees, 1);
        assert_eq!(
            plan.ops,
            vec![
                Op::Alloc {
                    id: 0,
                    size: 512,
                    stream: 0
                },
                Op::Free { id: 0 },
                Op::Alloc {
                    id: 1,
                    size: 700,
                    stream: 0
                },
            ]
        );
        assert_eq!(plan.summary.peak_live_bytes, 1024);
    }

    #[test]
    fn state_only_snapshot_is_all_prologue() {
        let snap = Snapshot {
            segments: vec![segment(
                0,
                1 << 20,
                vec![
                    (0x800, 100, BlockState::ActiveAllocated),
                    (0x0, 600, BlockState::ActiveAllocated),
                    (0x1000, 100, BlockState::ActivePendingFree),
                ],
            )],
            ..Snapshot::default()
        };
        let plan = ReplayPlan::from_snapshot(&snap, 0).unwrap();
        assert_eq!(plan.prologue_len, 2);
        assert_eq!(plan.window(), &[]);
        assert_eq!(
            plan.prologue()[0],
            Op::Alloc {
                id: 1,
                size: 600,
                stream: 0
            }
        );
        assert_eq!(plan.summary.peak_live_bytes, 1024 + 512);
        assert_eq!(plan.summary.torch.peak_reserved_bytes, 1 << 20);
        assert!(ReplayPlan::from_snapshot(&snap, 1).is_err());
    }

    #[test]
    fn rounding() {
        assert_eq!(round_block(0), 512);
        assert_eq!(round_block(1), 512);
        assert_eq!(round_block(512), 512);
        assert_eq!(round_block(513), 1024);
    }
}
