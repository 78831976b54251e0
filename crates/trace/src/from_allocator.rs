//! braid's own memory as a `_dump_snapshot` pickle: the adapter from the caching allocator's
//! snapshot and history to [`MemoryExport`].

use crate::export::{ExportBlock, ExportEvent, ExportSegment, MemoryExport};
use crate::pyvalue::PyValue;
use crate::snapshot::{Action, BlockState};
use braid_allocator::{
    AllocatorConfig, BlockState as AllocBlockState, CachingAllocator, HistoryAction,
    MemorySnapshot, SegmentType,
};
use braid_stream_core::hal::Backend;
use std::collections::BTreeMap;

impl MemoryExport {
    /// The allocator's current segments, blocks and history, ready to write with
    /// [`MemoryExport::write`] and open in pytorch.org/memory_viz.
    pub fn from_allocator<B: Backend>(allocator: &CachingAllocator<B>) -> MemoryExport {
        MemoryExport::from_snapshot(
            allocator.device().ordinal(),
            &allocator.snapshot(),
            &allocator.config(),
        )
    }

    /// The export of an allocator snapshot taken on device `device` with `config`.
    pub fn from_snapshot(
        device: u32,
        snapshot: &MemorySnapshot,
        config: &AllocatorConfig,
    ) -> MemoryExport {
        let segments = snapshot
            .segments
            .iter()
            .map(|seg| ExportSegment {
                address: seg.address,
                total_size: seg.total_size,
                stream: u64::from(seg.stream.0),
                small: seg.segment_type == SegmentType::Small,
                // memory_viz shows pool ids as PyTorch's (id, id) pairs; the default pool is (0, 0).
                pool_id: (0, seg.pool_id.0 as i64),
                is_expandable: seg.is_expandable,
                blocks: seg
                    .blocks
                    .iter()
                    .map(|b| ExportBlock {
                        address: b.address,
                        size: b.size,
                        requested_size: b.requested_size,
                        state: block_state(b.state),
                    })
                    .collect(),
            })
            .collect();
        let history = snapshot
            .history
            .iter()
            .map(|e| ExportEvent {
                action: action(e.action),
                addr: e.addr,
                size: e.size,
                stream: u64::from(e.stream.0),
                // The history's clock is logical: one tick per event, shown as microseconds.
                time_us: i64::try_from(e.time).ok(),
            })
            .collect();
        MemoryExport {
            device,
            segments,
            history,
            allocator_settings: settings(config),
        }
    }
}

fn block_state(state: AllocBlockState) -> BlockState {
    match state {
        AllocBlockState::ActiveAllocated => BlockState::ActiveAllocated,
        AllocBlockState::ActivePendingFree => BlockState::ActivePendingFree,
        AllocBlockState::Inactive => BlockState::Inactive,
    }
}

fn action(action: HistoryAction) -> Action {
    match action {
        HistoryAction::Alloc => Action::Alloc,
        HistoryAction::FreeRequested => Action::FreeRequested,
        HistoryAction::FreeCompleted => Action::FreeCompleted,
        HistoryAction::SegmentAlloc => Action::SegmentAlloc,
        HistoryAction::SegmentFree => Action::SegmentFree,
        HistoryAction::SegmentMap => Action::SegmentMap,
        HistoryAction::SegmentUnmap => Action::SegmentUnmap,
        HistoryAction::Oom => Action::Oom,
    }
}

/// The settings PyTorch writes under `allocator_settings`, from braid's configuration.
fn settings(config: &AllocatorConfig) -> BTreeMap<String, PyValue> {
    let int = |v: u64| PyValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
    let mut out = BTreeMap::new();
    // PyTorch writes -1 for "no max_split_size".
    let max_split = if config.max_split_size == u64::MAX {
        PyValue::Int(-1)
    } else {
        int(config.max_split_size)
    };
    out.insert("max_split_size".to_string(), max_split);
    out.insert(
        "garbage_collection_threshold".to_string(),
        PyValue::Float(config.garbage_collection_threshold),
    );
    out.insert(
        "expandable_segments".to_string(),
        PyValue::Bool(config.expandable_segments),
    );
    let divisions = config
        .roundup_power2_divisions
        .iter()
        .enumerate()
        .map(|(i, d)| ((1u64 << i).to_string(), int(*d)))
        .collect();
    out.insert(
        "roundup_power2_divisions".to_string(),
        PyValue::Dict(divisions),
    );
    out
}
