//! Writing memory state and history as a `_dump_snapshot` pickle, so pytorch.org/memory_viz
//! opens it.
//!
//! The input is format-neutral ([`MemoryExport`]: segments, blocks and events with plain
//! fields), so any allocator maps its snapshot and history into it with a small adapter.
//! The output has the keys memory_viz reads (`segments` with `device`, `address`,
//! `total_size`, `stream`, `segment_type`, `blocks` with `size`, `requested_size`, `state`
//! and `frames`; `device_traces` with `action`, `addr`, `size`, `stream`), plus
//! `allocator_settings`.
//!
//! memory_viz derives block addresses by adding up block sizes from the segment's start, so
//! blocks must tile their segment: [`MemoryExport::to_snapshot`] fills any gap with an
//! inactive block and rejects overlapping blocks.

use crate::error::{Result, TraceError};
use crate::pyvalue::PyValue;
use crate::snapshot::{Action, Block, BlockState, Segment, Snapshot, TraceEvent};
use std::collections::BTreeMap;
use std::path::Path;

/// One block, for export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportBlock {
    /// First byte.
    pub address: u64,
    /// Size in bytes (as rounded by the allocator).
    pub size: u64,
    /// Bytes the user asked for (0 for a free block).
    pub requested_size: u64,
    /// Allocated, pending free, or inactive.
    pub state: BlockState,
}

/// One segment, for export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSegment {
    /// First byte.
    pub address: u64,
    /// Size in bytes.
    pub total_size: u64,
    /// Stream the segment belongs to (any stable number; 0 reads as the default stream).
    pub stream: u64,
    /// Whether the segment serves the small pool.
    pub small: bool,
    /// Pool id (`(0, 0)` for the default pool).
    pub pool_id: (i64, i64),
    /// Whether the segment is a range of an expandable segment.
    pub is_expandable: bool,
    /// Blocks, in any order; gaps are filled with inactive blocks.
    pub blocks: Vec<ExportBlock>,
}

/// One history event, for export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportEvent {
    /// What happened.
    pub action: Action,
    /// Block or segment address (for [`Action::Oom`]: the device's free bytes).
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Stream.
    pub stream: u64,
    /// Time stamp in microseconds, if known (a logical clock is fine).
    pub time_us: Option<i64>,
}

/// A device's memory state and history, ready to be written as a snapshot pickle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryExport {
    /// Device index (the pickle's `device_traces` gets an empty list for lower indices).
    pub device: u32,
    /// Segments.
    pub segments: Vec<ExportSegment>,
    /// History, oldest first.
    pub history: Vec<ExportEvent>,
    /// Allocator settings, written as `allocator_settings`.
    pub allocator_settings: BTreeMap<String, PyValue>,
}

impl MemoryExport {
    /// The snapshot this export writes.
    pub fn to_snapshot(&self) -> Result<Snapshot> {
        let device = i64::from(self.device);
        let mut segments = Vec::with_capacity(self.segments.len());
        for seg in &self.segments {
            segments.push(export_segment(seg, device)?);
        }
        segments.sort_by_key(|s| s.address);
        let mut device_traces = vec![Vec::new(); self.device as usize + 1];
        device_traces[self.device as usize] = self
            .history
            .iter()
            .map(|e| {
                let mut event = TraceEvent::new(e.action.clone(), e.addr, e.size, e.stream);
                event.time_us = e.time_us;
                if e.action == Action::Oom {
                    event.device_free = Some(e.addr);
                }
                event
            })
            .collect();
        Ok(Snapshot {
            segments,
            device_traces,
            allocator_settings: Some(self.allocator_settings.clone()),
            external_annotations: None,
        })
    }

    /// The snapshot as pickle bytes.
    pub fn to_pickle(&self) -> Result<Vec<u8>> {
        self.to_snapshot()?.to_pickle()
    }

    /// Writes the snapshot pickle to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = self.to_pickle()?;
        std::fs::write(path, bytes).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })
    }
}

fn export_segment(seg: &ExportSegment, device: i64) -> Result<Segment> {
    let mut sorted: Vec<&ExportBlock> = seg.blocks.iter().collect();
    sorted.sort_by_key(|b| b.address);
    let end = seg.address.checked_add(seg.total_size).ok_or_else(|| {
        TraceError::Format(format!(
            "segment {:#x} overflows the address space",
            seg.address
        ))
    })?;
    let filler = |address: u64, size: u64| Block {
        address,
        size,
        requested_size: 0,
        state: BlockState::Inactive,
        frames: Vec::new(),
    };
    let mut blocks = Vec::with_capacity(sorted.len() + 1);
    let mut cursor = seg.address;
    let (mut allocated, mut active, mut requested) = (0u64, 0u64, 0u64);
    for b in sorted {
        let block_end = b.address.checked_add(b.size).filter(|&e| e <= end);
        let Some(block_end) = block_end.filter(|_| b.address >= cursor) else {
            return Err(TraceError::Format(format!(
                "block {:#x} (+{}) overlaps another block or leaves segment {:#x} (+{})",
                b.address, b.size, seg.address, seg.total_size
            )));
        };
        if b.address > cursor {
            blocks.push(filler(cursor, b.address - cursor));
        }
        match b.state {
            BlockState::ActiveAllocated => {
                allocated += b.size;
                active += b.size;
                requested += b.requested_size;
            }
            BlockState::ActivePendingFree => active += b.size,
            _ => {}
        }
        blocks.push(Block {
            address: b.address,
            size: b.size,
            requested_size: b.requested_size,
            state: b.state.clone(),
            frames: Vec::new(),
        });
        cursor = block_end;
    }
    if cursor < end {
        blocks.push(filler(cursor, end - cursor));
    }
    Ok(Segment {
        device,
        address: seg.address,
        total_size: seg.total_size,
        allocated_size: allocated,
        active_size: active,
        requested_size: requested,
        stream: seg.stream,
        segment_type: if seg.small { "small" } else { "large" }.to_owned(),
        segment_pool_id: seg.pool_id,
        is_expandable: seg.is_expandable,
        frames: Vec::new(),
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(address: u64, size: u64, requested: u64, state: BlockState) -> ExportBlock {
        ExportBlock {
            address,
            size,
            requested_size: requested,
            state,
        }
    }

    fn sample() -> MemoryExport {
        let base = 0x7f00_0000_0000; // above 2^31: written as 8-byte integers
        MemoryExport {
            device: 1,
            segments: vec![
                ExportSegment {
                    address: base + (20 << 20),
                    total_size: 2 << 20,
                    stream: 3,
                    small: true,
                    pool_id: (0, 0),
                    is_expandable: false,
                    blocks: vec![block(
                        base + (20 << 20),
                        512,
                        100,
                        BlockState::ActiveAllocated,
                    )],
                },
                ExportSegment {
                    address: base,
                    total_size: 20 << 20,
                    stream: 0,
                    small: false,
                    pool_id: (1, 0),
                    is_expandable: false,
                    blocks: vec![
                        block(
                            base + (4 << 20),
                            4 << 20,
                            4 << 20,
                            BlockState::ActivePendingFree,
                        ),
                        block(base, 2 << 20, (2 << 20) - 5, BlockState::ActiveAllocated),
                    ],
                },
            ],
            history: vec![
                ExportEvent {
                    action: Action::SegmentAlloc,
                    addr: base,
                    size: 20 << 20,
                    stream: 0,
                    time_us: Some(1),
                },
                ExportEvent {
                    action: Action::Alloc,
                    addr: base,
                    size: (2 << 20) - 5,
                    stream: 0,
                    time_us: Some(2),
                },
                ExportEvent {
                    action: Action::Oom,
                    addr: 1 << 40,
                    size: 1 << 41,
                    stream: 0,
                    time_us: None,
                },
            ],
            allocator_settings: BTreeMap::from([("max_split_size".to_owned(), PyValue::Int(-1))]),
        }
    }

    #[test]
    fn fills_gaps_and_sums_sizes() {
        let snap = sample().to_snapshot().unwrap();
        let large = &snap.segments[0];
        assert_eq!(large.device, 1);
        assert_eq!(large.segment_type, "large");
        let layout: Vec<(u64, BlockState)> = large
            .blocks
            .iter()
            .map(|b| (b.size, b.state.clone()))
            .collect();
        assert_eq!(
            layout,
            vec![
                (2 << 20, BlockState::ActiveAllocated),
                (2 << 20, BlockState::Inactive),
                (4 << 20, BlockState::ActivePendingFree),
                (12 << 20, BlockState::Inactive),
            ]
        );
        assert_eq!(large.allocated_size, 2 << 20);
        assert_eq!(large.active_size, 6 << 20);
        assert_eq!(large.requested_size, (2 << 20) - 5);
        assert_eq!(snap.device_traces.len(), 2);
        assert!(snap.device_traces[0].is_empty());
        assert_eq!(snap.device_traces[1][2].device_free, Some(1 << 40));
    }

    #[test]
    fn round_trips_through_the_parser() {
        let export = sample();
        let bytes = export.to_pickle().unwrap();
        let parsed = Snapshot::from_slice(&bytes).unwrap();
        assert_eq!(parsed, export.to_snapshot().unwrap());
        assert_eq!(parsed.events(1).len(), 3);
        assert_eq!(parsed.reserved_bytes(1), 22 << 20);
        assert_eq!(parsed.segments[0].segment_pool_id, (1, 0));
    }

    #[test]
    fn writes_only_opcodes_memory_viz_reads() {
        // memory_viz's unpickler knows protocol 2-4 and integers of up to 8 bytes; a
        // 9-byte LONG1 (serde-pickle's unsigned form) would be a BigInt there.
        let bytes = sample().to_pickle().unwrap();
        assert_eq!(&bytes[..2], &[0x80, 3]);
        assert!(!bytes.windows(2).any(|w| w == [0x8a, 9]));
    }

    #[test]
    fn rejects_overlapping_blocks() {
        let mut export = sample();
        export.segments[1].blocks.push(block(
            0x7f00_0000_0000 + 512,
            512,
            512,
            BlockState::ActiveAllocated,
        ));
        assert!(matches!(export.to_snapshot(), Err(TraceError::Format(_))));
        let mut export = sample();
        export.segments[0].blocks[0].size = 4 << 20;
        assert!(matches!(export.to_pickle(), Err(TraceError::Format(_))));
    }

    #[test]
    fn writes_a_file() {
        let path =
            std::env::temp_dir().join(format!("braid-trace-export-{}.pickle", std::process::id()));
        sample().write(&path).unwrap();
        let parsed = Snapshot::from_path(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(parsed.segments.len(), 2);
        let bad = sample().write("/nonexistent-dir/x.pickle").unwrap_err();
        assert!(matches!(bad, TraceError::Io { .. }));
    }
}
