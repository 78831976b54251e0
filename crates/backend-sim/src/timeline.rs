//! What the simulator reports about executed work.

use braid_stream_core::kernel::ComputeUnit;
use braid_stream_core::types::DeviceSlice;
use std::collections::VecDeque;

/// A bounded record log: at most `capacity` records, the oldest dropped first and counted.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
    dropped: u64,
}

impl<T> Ring<T> {
    /// An empty ring of at most `capacity` records.
    pub fn new(capacity: usize) -> Self {
        Ring {
            items: VecDeque::new(),
            capacity,
            dropped: 0,
        }
    }

    /// Appends `item`, dropping the oldest record when full (or `item` itself at capacity 0).
    pub fn push(&mut self, item: T) {
        if self.capacity == 0 {
            self.dropped += 1;
            return;
        }
        if self.items.len() >= self.capacity {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(item);
    }

    /// The records kept, oldest first.
    pub fn iter(&self) -> std::collections::vec_deque::Iter<'_, T> {
        self.items.iter()
    }

    /// Records dropped so far to stay within the capacity.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl<'a, T> IntoIterator for &'a Ring<T> {
    type Item = &'a T;
    type IntoIter = std::collections::vec_deque::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// One executed op (eager, or a node of a graph replay), as placed in virtual time.
#[derive(Clone, PartialEq, Debug)]
pub struct OpRecord {
    /// Ordinal of the device whose stream submitted it.
    pub device: u32,
    /// Index of the stream, within its device, that submitted it (for graph nodes: the stream it was captured on).
    pub stream: u32,
    /// Label given at submission (for copies and memsets, their kind).
    pub label: String,
    /// What ran: the kernel's name, or `memcpy_h2d`, `memcpy_d2h`, `memcpy_d2d`, `memset`.
    pub kind: &'static str,
    /// Virtual time the op started, in nanoseconds.
    pub start_ns: u64,
    /// Virtual time the op ended, in nanoseconds.
    pub end_ns: u64,
    /// Resource it occupied.
    pub unit: ComputeUnit,
    /// Device ranges it read.
    pub reads: Vec<DeviceSlice>,
    /// Device ranges it wrote.
    pub writes: Vec<DeviceSlice>,
    /// Whether it ran as a node of a graph launch.
    pub from_graph: bool,
}

impl OpRecord {
    /// Device time the op took.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// Counters of a simulated device (each device of a node has its own).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SimStats {
    /// Ops placed on the device (eager ops and graph nodes).
    pub ops_executed: u64,
    /// Graph launches executed (not counting launches into a capture).
    pub graph_launches: u64,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
    /// Bytes currently allocated (each allocation rounded up to 512 bytes).
    pub bytes_allocated: u64,
    /// Highest value `bytes_allocated` reached.
    pub peak_bytes_allocated: u64,
    /// Host bytes holding the device's data in data mode: the pages (64 KiB each) written
    /// and not freed, unmapped or discarded since. Back to zero once every segment is freed;
    /// always zero in timing-only mode.
    pub resident_data_bytes: u64,
    /// Data accesses (reads or writes) that fell outside every live allocation. A copy reads
    /// zeros, a built-in kernel writes zeros, a tensor operator fails (the stream's next
    /// synchronize reports it); writes are dropped. Always zero in timing-only mode, where
    /// no data is accessed.
    pub invalid_accesses: u64,
    /// User operators whose host body panicked (they wrote nothing).
    pub failed_ops: u64,
    /// Successful pinned host allocations (`alloc_host`).
    pub host_allocations: u64,
    /// Successful pinned host frees (`free_host`).
    pub host_frees: u64,
    /// Pinned host bytes currently allocated.
    pub host_bytes_allocated: u64,
    /// Highest value `host_bytes_allocated` reached.
    pub peak_host_bytes_allocated: u64,
}
