//! What the sanitizer reports: the kind of problem, the memory, and the two ops involved.

use braid_stream_core::types::{DevicePtr, DeviceSlice};
use std::fmt;
use std::sync::Arc;

/// The kind of a [`RaceReport`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum RaceKind {
    /// A read and a write of the same bytes, on different streams, not ordered by stream
    /// order, events or host synchronization.
    ReadWrite,
    /// Two writes of the same bytes, unordered as above.
    WriteWrite,
    /// Memory used after it was freed: an access to a freed range, or an access unordered with
    /// an access from a different lifetime of the same bytes (a freed block handed to another
    /// allocation while its previous user was still running, or a segment freed while work on
    /// it was unfinished).
    UseAfterFree,
    /// An access outside every live allocation (never allocated, or straddling the end of an
    /// allocation).
    OutOfBounds,
    /// A read of bytes whose last writer failed on the device (a user operator whose host body
    /// panicked): they hold nothing that operator computed. Reported for every such read,
    /// ordered after the failure or not, until something writes the bytes again.
    UnwrittenRead,
}

impl fmt::Display for RaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaceKind::ReadWrite => "read-write race",
            RaceKind::WriteWrite => "write-write race",
            RaceKind::UseAfterFree => "use after free",
            RaceKind::OutOfBounds => "access outside any live allocation",
            RaceKind::UnwrittenRead => "read of memory a failed operator left unwritten",
        })
    }
}

/// One op named in a report.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OpRef {
    /// Ordinal of the device whose stream (or host, for a free) made the op.
    pub device: u32,
    /// Stream index within its device of the op (for graph nodes the stream it was captured on); `None` for the
    /// host (a free of a segment).
    pub stream: Option<u32>,
    /// Its label (`free` and `alloc` for lifetime events).
    pub label: String,
    /// What ran: the kernel's name, a copy kind, `memset`, or `free`.
    pub kind: &'static str,
    /// Virtual start time in nanoseconds.
    pub start_ns: u64,
    /// Virtual end time in nanoseconds.
    pub end_ns: u64,
    /// Whether it ran as a node of a graph replay.
    pub from_graph: bool,
    /// The tag of its stream, when the front layer made it a tagged stream.
    pub stream_tag: Option<String>,
    /// For a rank's part of a collective, the rank.
    pub rank: Option<u32>,
}

impl fmt::Display for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device {} ", self.device)?;
        match (self.stream, &self.stream_tag) {
            (Some(s), Some(tag)) => write!(f, "stream {s} (tagged {tag:?})")?,
            (Some(s), None) => write!(f, "stream {s}")?,
            (None, _) => f.write_str("host")?,
        }
        write!(f, " `{}` ({}", self.label, self.kind)?;
        if let Some(rank) = self.rank {
            write!(f, ", rank {rank}")?;
        }
        if self.from_graph {
            f.write_str(", graph node")?;
        }
        write!(
            f,
            ") at {:.3}..{:.3} us",
            self.start_ns as f64 / 1000.0,
            self.end_ns as f64 / 1000.0
        )
    }
}

/// One problem the sanitizer found.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RaceReport {
    /// What is wrong.
    pub kind: RaceKind,
    /// The bytes involved (the union of the overlapping ranges of the two ops).
    pub range: DeviceSlice,
    /// The earlier op (in submission order); for a use after free of a freed range, the free;
    /// for an unwritten read, the operator that failed; `None` for an access to memory that
    /// was never allocated.
    pub first: Option<OpRef>,
    /// The later op: the one whose submission revealed the problem.
    pub second: OpRef,
    /// What usually fixes it, when the simulator can tell (for example a tagged stream
    /// inside a capture that needs a tagged event).
    pub hint: Option<String>,
}

impl fmt::Display for RaceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {} bytes at {}: ",
            self.kind, self.range.len, self.range.ptr
        )?;
        match &self.first {
            Some(first) => write!(f, "{first} and {}", self.second)?,
            None => write!(f, "{}", self.second)?,
        }
        match &self.hint {
            Some(hint) => write!(f, " (hint: {hint})"),
            None => Ok(()),
        }
    }
}

/// What the sanitizer keeps about an op while its accesses are in the shadow memory.
#[derive(Debug)]
pub(crate) struct OpInfo {
    /// Ordinal of the device.
    pub device: u32,
    /// Stream index within the device; `None` for the host.
    pub stream: Option<u32>,
    pub label: Arc<str>,
    pub kind: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub from_graph: bool,
    /// For a rank's part of a collective, the rank.
    pub rank: Option<u32>,
}

impl OpInfo {
    /// The public form.
    pub fn to_ref(&self) -> OpRef {
        OpRef {
            device: self.device,
            stream: self.stream,
            label: self.label.to_string(),
            kind: self.kind,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            from_graph: self.from_graph,
            stream_tag: None,
            rank: self.rank,
        }
    }
}

/// `[start, end)` as a slice.
pub(crate) fn slice(start: u64, end: u64) -> DeviceSlice {
    DeviceSlice::new(DevicePtr(start), end.saturating_sub(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_well() {
        let op = |stream, label: &str| OpRef {
            device: 2,
            stream,
            label: label.to_string(),
            kind: "fill",
            start_ns: 1500,
            end_ns: 2500,
            from_graph: false,
            stream_tag: None,
            rank: None,
        };
        let r = RaceReport {
            kind: RaceKind::WriteWrite,
            range: slice(0x1000, 0x1010),
            first: Some(op(Some(1), "a")),
            second: op(None, "free"),
            hint: None,
        };
        let text = r.to_string();
        assert!(text.contains("write-write race on 16 bytes"), "{text}");
        assert!(
            text.contains("device 2 stream 1 `a` (fill) at 1.500..2.500 us"),
            "{text}"
        );
        assert!(text.contains("and device 2 host `free`"), "{text}");
    }
}
