//! PyTorch's memory snapshot (`torch.cuda.memory._dump_snapshot`) as serde types.
//!
//! The pickle is a dict with `segments` (the allocator's state when the snapshot was taken)
//! and `device_traces` (one list of events per device: the recorded history, oldest first),
//! plus `allocator_settings` and `external_annotations` in newer files. Every key but the
//! few that identify a segment, block or event is optional here, and unknown keys are
//! ignored, so snapshots from older and newer PyTorch versions parse.
//!
//! Parsing uses `serde_pickle` with `replace_recursive_structures`: PyTorch's pickles share
//! frame lists between events through the pickle memo, which the decoder cannot resolve
//! otherwise. A shared value it gives up on comes back as `None`; the list-valued fields
//! here read `None` as empty.

use crate::error::{Result, TraceError};
use crate::lenient;
use crate::pyvalue::PyValue;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Writes a `u64` as a signed 64-bit pickle integer: pytorch.org/memory_viz reads integers
/// of up to 8 bytes as JavaScript numbers but 9-byte ones (serde-pickle's form for `u64`
/// values of 2^31 and more) as `BigInt`, which its arithmetic rejects.
fn ser_u64<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    let v = i64::try_from(*v).map_err(|_| {
        serde::ser::Error::custom(format!("{v} does not fit a signed 64-bit integer"))
    })?;
    s.serialize_i64(v)
}

/// [`ser_u64`] for an optional value.
fn ser_opt_u64<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => ser_u64(v, s),
        None => s.serialize_none(),
    }
}

/// A whole snapshot: segments, per-device event traces and settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Segments held from the device when the snapshot was taken, with their blocks.
    #[serde(default, deserialize_with = "lenient::vec")]
    pub segments: Vec<Segment>,
    /// Per device index, the recorded events, oldest first.
    #[serde(default, deserialize_with = "lenient::vec")]
    pub device_traces: Vec<Vec<TraceEvent>>,
    /// The allocator's configuration (`expandable_segments`, `max_split_size`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_settings: Option<BTreeMap<String, PyValue>>,
    /// Annotations such as `Optimizer.step` START/END timestamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_annotations: Option<Vec<PyValue>>,
}

/// [`Snapshot`] as read from a pickle, telling an absent list from an empty one: a dict
/// with neither list is not a snapshot.
#[derive(Deserialize)]
struct Parsed {
    #[serde(default, deserialize_with = "lenient::present_vec")]
    segments: Option<Vec<Segment>>,
    #[serde(default, deserialize_with = "lenient::present_vec")]
    device_traces: Option<Vec<Vec<TraceEvent>>>,
    #[serde(default)]
    allocator_settings: Option<BTreeMap<String, PyValue>>,
    #[serde(default)]
    external_annotations: Option<Vec<PyValue>>,
}

/// One segment (one device malloc, or one mapped range of an expandable segment).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Device index.
    #[serde(default, deserialize_with = "lenient::i64")]
    pub device: i64,
    /// First byte.
    #[serde(deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub address: u64,
    /// Size in bytes.
    #[serde(deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub total_size: u64,
    /// Bytes in allocated blocks.
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub allocated_size: u64,
    /// Bytes in active blocks (allocated or awaiting free).
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub active_size: u64,
    /// Bytes requested by the users of allocated blocks.
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub requested_size: u64,
    /// The stream the segment belongs to (a CUDA stream handle, 0 for the default stream).
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub stream: u64,
    /// `"small"` or `"large"`.
    #[serde(default, deserialize_with = "lenient::string")]
    pub segment_type: String,
    /// The memory pool (a `(capture id, pool handle)` tuple; `(0, 0)` is the default pool).
    #[serde(default, deserialize_with = "lenient::pair")]
    pub segment_pool_id: (i64, i64),
    /// Whether this is a range of an expandable (virtual-memory) segment.
    #[serde(default, deserialize_with = "lenient::bool")]
    pub is_expandable: bool,
    /// Stack frames of the segment's allocation (usually empty).
    #[serde(default, deserialize_with = "lenient::vec")]
    pub frames: Vec<Frame>,
    /// Blocks by address.
    #[serde(default, deserialize_with = "lenient::vec")]
    pub blocks: Vec<Block>,
}

/// One block of a segment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Block {
    /// First byte (older snapshots omit it; [`Snapshot::from_reader`] then derives it from
    /// the segment's address and the sizes of the blocks before it).
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub address: u64,
    /// Size in bytes (rounded by the allocator).
    #[serde(deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub size: u64,
    /// Bytes the user asked for.
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub requested_size: u64,
    /// Allocated, awaiting free, or inactive.
    #[serde(default)]
    pub state: BlockState,
    /// Stack frames of the allocation.
    #[serde(default, deserialize_with = "lenient::vec")]
    pub frames: Vec<Frame>,
}

/// State of a block.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub enum BlockState {
    /// Held by a live tensor (`"active_allocated"`).
    ActiveAllocated,
    /// Freed by its user but still in use on another stream (`"active_pending_free"`, the
    /// name PyTorch writes and pytorch.org/memory_viz reads; `"active_awaiting_free"`, the
    /// name in PyTorch's docstring, reads as this too).
    ActivePendingFree,
    /// Cached, free for reuse (`"inactive"`).
    #[default]
    Inactive,
    /// A state this crate does not know, kept as written.
    Other(String),
}

impl BlockState {
    /// The name PyTorch writes.
    pub fn as_str(&self) -> &str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
            BlockState::Other(s) => s,
        }
    }

    /// Whether a user holds the block.
    pub fn is_allocated(&self) -> bool {
        matches!(self, BlockState::ActiveAllocated)
    }
}

impl From<Option<String>> for BlockState {
    fn from(s: Option<String>) -> Self {
        match s.as_deref() {
            Some("active_allocated") => BlockState::ActiveAllocated,
            Some("active_awaiting_free" | "active_pending_free") => BlockState::ActivePendingFree,
            Some("inactive") | None => BlockState::Inactive,
            Some(_) => BlockState::Other(s.unwrap_or_default()),
        }
    }
}

impl<'de> Deserialize<'de> for BlockState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient::string(d).map(|s| BlockState::from(Some(s).filter(|s| !s.is_empty())))
    }
}

impl From<BlockState> for String {
    fn from(s: BlockState) -> String {
        match s {
            BlockState::Other(s) => s,
            known => known.as_str().to_owned(),
        }
    }
}

/// One stack frame.
///
/// Frames are read leniently: PyTorch shares frame lists between events, and the pickle
/// decoder loses some of the shared strings inside them (they come back as `None`), so a
/// frame may have an empty name or file. Frames do not affect replay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Frame {
    /// Function name.
    pub name: String,
    /// Source file.
    pub filename: String,
    /// Line number.
    pub line: i64,
}

impl<'de> Deserialize<'de> for Frame {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key(String);
        impl<'de> Deserialize<'de> for Key {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                lenient::string(d).map(Key)
            }
        }
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Frame;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a frame dict")
            }
            fn visit_unit<E>(self) -> Result<Frame, E> {
                Ok(Frame::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Frame, A::Error> {
                let mut frame = Frame::default();
                while let Some(Key(key)) = map.next_key::<Key>()? {
                    let value = map.next_value::<PyValue>()?;
                    match (key.as_str(), value) {
                        ("name", PyValue::Str(v)) => frame.name = v,
                        ("filename", PyValue::Str(v)) => frame.filename = v,
                        ("line", PyValue::Int(v)) => frame.line = v,
                        _ => {}
                    }
                }
                Ok(frame)
            }
        }
        d.deserialize_any(V)
    }
}

/// What a trace event records.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub enum Action {
    /// A block was handed to a tensor.
    Alloc,
    /// The tensor was dropped; the block may still be awaiting uses on other streams.
    FreeRequested,
    /// The block returned to the cache.
    FreeCompleted,
    /// A segment was allocated from the device (a device malloc).
    SegmentAlloc,
    /// A segment was returned to the device.
    SegmentFree,
    /// Memory was mapped into an expandable segment.
    SegmentMap,
    /// Memory was unmapped from an expandable segment.
    SegmentUnmap,
    /// A snapshot was taken.
    Snapshot,
    /// An allocation failed (the event's `addr` holds the device's free bytes).
    Oom,
    /// An action this crate does not know (for example `annotate`), kept as written.
    Other(String),
}

impl Action {
    /// The name PyTorch writes.
    pub fn as_str(&self) -> &str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::Other(s) => s,
        }
    }
}

impl From<Option<String>> for Action {
    fn from(s: Option<String>) -> Self {
        match s.as_deref() {
            Some("alloc") => Action::Alloc,
            Some("free_requested") => Action::FreeRequested,
            Some("free_completed") => Action::FreeCompleted,
            Some("segment_alloc") => Action::SegmentAlloc,
            Some("segment_free") => Action::SegmentFree,
            Some("segment_map") => Action::SegmentMap,
            Some("segment_unmap") => Action::SegmentUnmap,
            Some("snapshot") => Action::Snapshot,
            Some("oom") => Action::Oom,
            _ => Action::Other(s.unwrap_or_default()),
        }
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient::string(d).map(|s| Action::from(Some(s)))
    }
}

impl From<Action> for String {
    fn from(a: Action) -> String {
        match a {
            Action::Other(s) => s,
            known => known.as_str().to_owned(),
        }
    }
}

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// What happened.
    pub action: Action,
    /// Address of the block or segment (for `oom`: the device's free bytes).
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub addr: u64,
    /// Bytes (for `alloc` and `free_*`: the size the user asked for).
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub size: u64,
    /// Stream (a CUDA stream handle, 0 for the default stream).
    #[serde(default, deserialize_with = "lenient::u64", serialize_with = "ser_u64")]
    pub stream: u64,
    /// Approximate wall time in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us: Option<i64>,
    /// Stack frames.
    #[serde(default, deserialize_with = "lenient::vec")]
    pub frames: Vec<Frame>,
    /// Device free bytes (some PyTorch versions, `oom` only).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_u64"
    )]
    pub device_free: Option<u64>,
    /// `torch.compile` context, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_context: Option<PyValue>,
    /// User metadata, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_metadata: Option<PyValue>,
}

impl TraceEvent {
    /// An event with no frames, time or metadata.
    pub fn new(action: Action, addr: u64, size: u64, stream: u64) -> Self {
        TraceEvent {
            action,
            addr,
            size,
            stream,
            time_us: None,
            frames: Vec::new(),
            device_free: None,
            compile_context: None,
            user_metadata: None,
        }
    }
}

impl Snapshot {
    /// Reads and parses a snapshot pickle file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Snapshot> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// Parses a snapshot pickle from a reader.
    pub fn from_reader(mut reader: impl Read) -> Result<Snapshot> {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|source| TraceError::Io {
                path: "<reader>".into(),
                source,
            })?;
        Self::parse(&bytes, "<reader>")
    }

    /// Parses a snapshot pickle held in memory.
    pub fn from_slice(bytes: &[u8]) -> Result<Snapshot> {
        Self::parse(bytes, "<bytes>")
    }

    fn parse(bytes: &[u8], origin: &str) -> Result<Snapshot> {
        let options = serde_pickle::DeOptions::new().replace_recursive_structures();
        let parsed: Parsed =
            serde_pickle::from_slice(bytes, options).map_err(|source| TraceError::Parse {
                origin: origin.to_owned(),
                source,
            })?;
        if parsed.segments.is_none() && parsed.device_traces.is_none() {
            return Err(TraceError::NotASnapshot {
                origin: origin.to_owned(),
            });
        }
        let mut snapshot = Snapshot {
            segments: parsed.segments.unwrap_or_default(),
            device_traces: parsed.device_traces.unwrap_or_default(),
            allocator_settings: parsed.allocator_settings,
            external_annotations: parsed.external_annotations,
        };
        snapshot.fill_block_addresses();
        Ok(snapshot)
    }

    /// Gives blocks without an address (older snapshots) the address implied by their
    /// segment and the blocks before them.
    fn fill_block_addresses(&mut self) {
        for segment in &mut self.segments {
            if segment.blocks.iter().all(|b| b.address == 0) {
                let mut address = segment.address;
                for block in &mut segment.blocks {
                    block.address = address;
                    address = address.saturating_add(block.size);
                }
            }
        }
    }

    /// Serializes the snapshot as a pickle in the layout `_dump_snapshot` writes.
    pub fn to_pickle(&self) -> Result<Vec<u8>> {
        serde_pickle::to_vec(self, serde_pickle::SerOptions::new()).map_err(TraceError::Export)
    }

    /// The events recorded for `device`, or an empty slice if it has none.
    pub fn events(&self, device: usize) -> &[TraceEvent] {
        self.device_traces.get(device).map_or(&[], Vec::as_slice)
    }

    /// The total number of recorded events over all devices.
    pub fn event_count(&self) -> usize {
        self.device_traces.iter().map(Vec::len).sum()
    }

    /// Bytes held from the device (sum of segment sizes) on `device`.
    pub fn reserved_bytes(&self, device: i64) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.device == device)
            .map(|s| s.total_size)
            .sum()
    }

    /// Number of blocks over all segments.
    pub fn block_count(&self) -> usize {
        self.segments.iter().map(|s| s.blocks.len()).sum()
    }

    /// Whether the snapshot carries no event history (a state-only snapshot).
    pub fn is_state_only(&self) -> bool {
        !self
            .device_traces
            .iter()
            .flatten()
            .any(|e| matches!(e.action, Action::Alloc | Action::SegmentAlloc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minimal_dict_with_missing_keys() {
        // A dict with only `segments`: no history, no settings, a block with no address.
        let mut seg = BTreeMap::new();
        seg.insert("address", PyValue::Int(4096));
        seg.insert("total_size", PyValue::Int(2048));
        let block = |size: i64, state: &str| {
            PyValue::Dict(BTreeMap::from([
                ("size".to_owned(), PyValue::Int(size)),
                ("state".to_owned(), PyValue::Str(state.to_owned())),
            ]))
        };
        seg.insert(
            "blocks",
            PyValue::List(vec![
                block(512, "active_allocated"),
                block(1536, "something_new"),
            ]),
        );
        let top = BTreeMap::from([("segments", vec![seg])]);
        let bytes = serde_pickle::to_vec(&top, serde_pickle::SerOptions::new()).unwrap();
        let snap = Snapshot::from_slice(&bytes).unwrap();
        assert_eq!(snap.segments.len(), 1);
        let blocks = &snap.segments[0].blocks;
        assert_eq!(blocks[0].address, 4096);
        assert_eq!(blocks[1].address, 4608);
        assert!(blocks[0].state.is_allocated());
        assert_eq!(blocks[1].state, BlockState::Other("something_new".into()));
        assert!(snap.device_traces.is_empty());
        assert!(snap.is_state_only());
        assert_eq!(snap.reserved_bytes(0), 2048);
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let err = Snapshot::from_slice(b"not a pickle").unwrap_err();
        assert!(matches!(err, TraceError::Parse { .. }), "{err}");
        let list = serde_pickle::to_vec(&vec![1, 2], serde_pickle::SerOptions::new()).unwrap();
        assert!(matches!(
            Snapshot::from_slice(&list),
            Err(TraceError::Parse { .. })
        ));
        let missing = Snapshot::from_path("/nonexistent/trace.pickle").unwrap_err();
        assert!(matches!(missing, TraceError::Io { .. }), "{missing}");
    }

    #[test]
    fn a_pickle_that_is_not_a_snapshot_says_what_is_missing() {
        let dict = BTreeMap::from([("a", 1)]);
        let bytes = serde_pickle::to_vec(&dict, serde_pickle::SerOptions::new()).unwrap();
        let err = Snapshot::from_slice(&bytes).unwrap_err();
        assert!(matches!(err, TraceError::NotASnapshot { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("not a PyTorch memory snapshot")
                && msg.contains("`segments`")
                && msg.contains("`device_traces`"),
            "{msg}"
        );
        // Present but empty (or None) is a snapshot with nothing in it.
        let empty = BTreeMap::from([("device_traces", PyValue::List(Vec::new()))]);
        let bytes = serde_pickle::to_vec(&empty, serde_pickle::SerOptions::new()).unwrap();
        assert_eq!(Snapshot::from_slice(&bytes).unwrap(), Snapshot::default());
        let none = BTreeMap::from([("segments", PyValue::None)]);
        let bytes = serde_pickle::to_vec(&none, serde_pickle::SerOptions::new()).unwrap();
        assert_eq!(Snapshot::from_slice(&bytes).unwrap(), Snapshot::default());
    }

    #[test]
    fn actions_and_states_round_trip_their_names() {
        for name in [
            "alloc",
            "free_requested",
            "free_completed",
            "segment_alloc",
            "segment_free",
            "segment_map",
            "segment_unmap",
            "snapshot",
            "oom",
            "annotate",
        ] {
            let action = Action::from(Some(name.to_owned()));
            assert_eq!(action.as_str(), name);
            assert_eq!(String::from(action), name);
        }
        for name in ["active_allocated", "active_pending_free", "inactive"] {
            assert_eq!(BlockState::from(Some(name.to_owned())).as_str(), name);
        }
    }
}
