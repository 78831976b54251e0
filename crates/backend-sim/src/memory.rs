//! The device address space, memory accounting and (in data mode) the host-backed data store.

use braid_stream_core::hal::HalError;
use braid_stream_core::types::{DevicePtr, DeviceSlice, MemInfo};
use std::collections::{BTreeMap, BTreeSet};

mod backing;
pub mod host_budget;
mod mappings;
mod shared;
mod view;
mod vmm;

use backing::{Backing, Source};
pub(crate) use backing::{Pin, Place};

pub(crate) use view::DataView;

use mappings::Mappings;

/// What a run of page calls did: the pages done, and the failure that stopped it.
pub(crate) type PageRun = (u64, Result<(), HalError>);

/// First address handed out: non-zero and far from small integers, so that stray offsets are
/// easy to tell from real addresses.
pub(crate) const BASE_ADDRESS: u64 = 0x1_0000_0000;
/// Address space of each device of a node: device `i`'s addresses start at
/// `BASE_ADDRESS + i * DEVICE_SPAN` (256 TiB each), so every device of a node has its own.
pub(crate) const DEVICE_SPAN: u64 = 1 << 48;
/// Every segment starts on this boundary (like device huge pages).
pub(crate) const SEGMENT_ALIGN: u64 = 2 << 20;
/// Allocations are accounted in multiples of this many bytes.
pub(crate) const ACCOUNTING_GRANULE: u64 = 512;
/// Page size of the virtual-memory API: reservations, mappings and their offsets are
/// multiples of it.
pub(crate) const VMM_GRANULARITY: u64 = SEGMENT_ALIGN;

/// A map from addresses to values, kept as a list sorted by address: cheap when keys are
/// inserted in increasing order (segment bases: the simulator never reuses an address), as they
/// are here. A removal leaves a dead entry, dropped in bulk once dead entries are the majority,
/// so every operation is O(1) amortized or a binary search.
#[derive(Debug)]
pub(crate) struct AddrMap<V> {
    entries: Vec<(u64, Option<V>)>,
    dead: usize,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        AddrMap {
            entries: Vec::new(),
            dead: 0,
        }
    }
}

impl<V> AddrMap<V> {
    /// Index of the entry at `key`, live or dead.
    fn index(&self, key: u64) -> Option<usize> {
        // Most lookups are of recent entries: try the last one first.
        match self.entries.last() {
            Some(&(k, _)) if k == key => Some(self.entries.len() - 1),
            _ => self.entries.binary_search_by_key(&key, |e| e.0).ok(),
        }
    }

    /// Inserts (or replaces) the value at `key`.
    pub fn insert(&mut self, key: u64, value: V) {
        match self.entries.last() {
            Some(&(k, _)) if k >= key => {
                let i = self.entries.partition_point(|e| e.0 < key);
                match self.entries.get_mut(i) {
                    Some(e) if e.0 == key => {
                        if e.1.is_none() {
                            self.dead -= 1;
                        }
                        e.1 = Some(value);
                    }
                    _ => self.entries.insert(i, (key, Some(value))),
                }
            }
            _ => self.entries.push((key, Some(value))),
        }
    }

    /// The value at `key`.
    pub fn get(&self, key: u64) -> Option<&V> {
        self.index(key).and_then(|i| self.entries[i].1.as_ref())
    }

    /// The value at `key`, mutably.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        self.index(key).and_then(|i| self.entries[i].1.as_mut())
    }

    /// Removes and returns the value at `key`.
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let i = self.index(key)?;
        let v = self.entries[i].1.take()?;
        self.dead += 1;
        if self.dead > 16 && self.dead * 2 > self.entries.len() {
            self.entries.retain(|e| e.1.is_some());
            self.dead = 0;
        }
        Some(v)
    }

    /// A live entry at or below `key` that has no live entry between it and `key` (`None` when
    /// there is none, or when a removed entry is in between). Callers check that the entry's
    /// range contains what they look for: with disjoint ranges allocated at increasing
    /// addresses, a range removed in between means no live range below it reaches `key`, so
    /// the answer is the same as with the last live entry.
    pub fn floor(&self, key: u64) -> Option<(u64, &V)> {
        let i = self.entries.partition_point(|e| e.0 <= key);
        let (k, v) = self.entries.get(i.checked_sub(1)?)?;
        v.as_ref().map(|v| (*k, v))
    }

    /// Like [`AddrMap::floor`], mutably.
    pub fn floor_mut(&mut self, key: u64) -> Option<(u64, &mut V)> {
        let i = self.entries.partition_point(|e| e.0 <= key);
        let (k, v) = self.entries.get_mut(i.checked_sub(1)?)?;
        v.as_mut().map(|v| (*k, v))
    }

    /// Live entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        self.entries
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (*k, v)))
    }
}

/// One live allocation, or one reserved address range.
#[derive(Debug)]
struct Segment {
    /// Bytes requested (for a reservation: bytes of address space).
    size: u64,
    /// Bytes charged against the capacity (for a reservation: its mapped bytes).
    accounted: u64,
    /// Host backing in data mode.
    data: Option<Backing>,
    /// For a reservation: its mappings; `None` for a plain allocation.
    mappings: Option<Mappings>,
}

impl Segment {
    /// Whether `[start, end)` (offsets, non-empty, inside the segment) is accessible: always
    /// in a plain allocation, in a reservation when consecutive mappings cover it.
    fn accessible(&self, start: u64, end: u64) -> bool {
        match &self.mappings {
            None => true,
            Some(maps) => maps.cover(start, end),
        }
    }
}

/// Address space, accounting and data of one device.
#[derive(Debug)]
pub(crate) struct Memory {
    capacity: u64,
    used: u64,
    peak: u64,
    /// Start of this device's address space.
    start: u64,
    next: u64,
    /// End of this device's address space: nothing is placed at or past it.
    limit: u64,
    store_data: bool,
    /// The process's host-memory budget this device's allocations are held to (data mode,
    /// [`host_budget`]).
    host_budget: u64,
    segments: AddrMap<Segment>,
    /// Sum of the segments' resident backing bytes ([`Memory::resident_data_bytes`]).
    resident: u64,
    /// Physical memory of the virtual-memory API by handle: (size, where it is mapped).
    physical: BTreeMap<u64, (u64, Option<u64>)>,
    /// Physical handles whose bytes are shared with other processes (`shared`).
    shared_physical: BTreeSet<u64>,
    next_physical: u64,
    allocations: u64,
    frees: u64,
    invalid_accesses: u64,
    failed_ops: u64,
}

impl Drop for Memory {
    /// Physical memory still allocated when the device goes gives its host-memory budget
    /// back (segments give theirs with their backing).
    fn drop(&mut self) {
        if self.store_data {
            // What `used` counts beyond the segments is physical memory, by handle or mapped
            // anonymously: what it took from the budget.
            let segments: u64 = self.segments.iter().map(|(_, s)| s.accounted).sum();
            host_budget::release(self.used.saturating_sub(segments));
        }
    }
}

impl Memory {
    /// An empty device of `capacity` bytes; `store_data` gives segments host backing.
    #[cfg(test)]
    pub fn new(capacity: u64, store_data: bool) -> Self {
        Memory::for_device(0, capacity, store_data)
    }

    /// The memory of device `index` of a node: its addresses start at
    /// `BASE_ADDRESS + index * DEVICE_SPAN` and stay below the next device's (a device whose
    /// base would be past the end of the address space gets none: every allocation fails).
    pub fn for_device(index: u32, capacity: u64, store_data: bool) -> Self {
        let base = u64::from(index)
            .checked_mul(DEVICE_SPAN)
            .and_then(|o| o.checked_add(BASE_ADDRESS));
        let (start, limit) = match base {
            Some(b) => (b, b.saturating_add(DEVICE_SPAN)),
            None => (u64::MAX, u64::MAX),
        };
        Memory {
            capacity,
            used: 0,
            peak: 0,
            start,
            next: start,
            limit,
            store_data,
            host_budget: host_budget::default_budget(),
            segments: AddrMap::default(),
            resident: 0,
            physical: BTreeMap::new(),
            shared_physical: BTreeSet::new(),
            next_physical: 1,
            allocations: 0,
            frees: 0,
            invalid_accesses: 0,
            failed_ops: 0,
        }
    }

    /// Allocates a segment of `size` bytes at a fresh, never reused, 2 MiB aligned address.
    pub fn alloc(&mut self, size: u64) -> Result<DevicePtr, HalError> {
        if size == 0 {
            return Err(HalError::InvalidArgument(
                "cannot allocate 0 bytes".to_string(),
            ));
        }
        let free = self.capacity.saturating_sub(self.used);
        let oom = HalError::OutOfMemory {
            requested: size,
            free,
            total: self.capacity,
        };
        let Some(accounted) = size.checked_next_multiple_of(ACCOUNTING_GRANULE) else {
            return Err(oom);
        };
        if accounted > free {
            return Err(oom);
        }
        let base = self.next;
        let Some(next) = base
            .checked_add(size)
            .and_then(|e| e.checked_next_multiple_of(SEGMENT_ALIGN))
            .filter(|&n| n <= self.limit)
        else {
            return Err(HalError::InvalidArgument(format!(
                "the simulated address space is exhausted; cannot place {size} bytes"
            )));
        };
        let data = self.backing(size, true)?;
        self.next = next;
        self.used += accounted;
        self.peak = self.peak.max(self.used);
        self.allocations += 1;
        self.segments.insert(
            base,
            Segment {
                size,
                accounted,
                data,
                mappings: None,
            },
        );
        tracing::debug!(ptr = %DevicePtr(base), size, accounted, used = self.used, "sim alloc");
        Ok(DevicePtr(base))
    }

    /// Holds this device's allocations to `budget` bytes of host memory for the whole
    /// process ([`host_budget`]).
    pub fn set_host_budget(&mut self, budget: u64) {
        self.host_budget = budget;
    }

    /// Host backing for a segment of `size` bytes in data mode (`None` in timing-only mode),
    /// taken from the host-memory budget when `budgeted`.
    fn backing(&self, size: u64, budgeted: bool) -> Result<Option<Backing>, HalError> {
        if !self.store_data {
            return Ok(None);
        }
        Backing::new(size, budgeted.then_some(self.host_budget)).map(Some)
    }

    /// Host bytes holding this device's data (data mode): the pages written and not freed,
    /// discarded or unmapped since, counted in 64 KiB pages. Zero once every segment is freed.
    pub fn resident_data_bytes(&self) -> u64 {
        self.resident
    }

    /// Removes the segment at `base`, its host backing going back to the operating system.
    fn remove_segment(&mut self, base: u64) -> Option<Segment> {
        let seg = self.segments.remove(base)?;
        self.resident -= seg.data.as_ref().map_or(0, Backing::resident);
        Some(seg)
    }

    /// Frees the segment at `ptr`, which must be the base of a live segment.
    pub fn free(&mut self, ptr: DevicePtr) -> Result<(), HalError> {
        let seg = match self.is_segment(ptr) {
            true => self.remove_segment(ptr.0),
            false => None,
        };
        let Some(seg) = seg else {
            return Err(HalError::InvalidArgument(format!(
                "free of {ptr}, which is not the base of a live allocation on this device"
            )));
        };
        self.used -= seg.accounted;
        self.frees += 1;
        tracing::debug!(%ptr, size = seg.size, used = self.used, "sim free");
        Ok(())
    }

    /// Whether `addr` lies in this device's address space (allocated or not).
    pub fn owns(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.limit
    }

    /// Whether `ptr` is the base of a live segment (a plain allocation).
    pub fn is_segment(&self, ptr: DevicePtr) -> bool {
        self.segments
            .get(ptr.0)
            .is_some_and(|s| s.mappings.is_none())
    }

    /// Whether `ptr` is the base of a live reservation with nothing mapped in it.
    pub fn is_empty_reservation(&self, ptr: DevicePtr) -> bool {
        self.segments
            .get(ptr.0)
            .and_then(|s| s.mappings.as_ref())
            .is_some_and(Mappings::is_empty)
    }

    /// The live segments and reservations as (base, size, is a reservation), in address order.
    pub fn segments(&self) -> impl Iterator<Item = (u64, u64, bool)> + '_ {
        self.segments
            .iter()
            .map(|(base, seg)| (base, seg.size, seg.mappings.is_some()))
    }

    /// Free and total bytes.
    pub fn info(&self) -> MemInfo {
        MemInfo {
            free: self.capacity.saturating_sub(self.used),
            total: self.capacity,
        }
    }

    /// Bytes currently charged against the capacity.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Highest value `used` reached.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Number of successful allocations.
    pub fn allocations(&self) -> u64 {
        self.allocations
    }

    /// Number of successful frees.
    pub fn frees(&self) -> u64 {
        self.frees
    }

    /// Accesses that fell outside every live segment so far.
    pub fn invalid_accesses(&self) -> u64 {
        self.invalid_accesses
    }

    /// Counts one access outside every live segment.
    pub fn note_invalid(&mut self) {
        self.invalid_accesses += 1;
    }

    /// Operators whose host body panicked so far.
    pub fn failed_ops(&self) -> u64 {
        self.failed_ops
    }

    /// Counts one operator whose host body panicked.
    pub fn note_failed_op(&mut self) {
        self.failed_ops += 1;
    }

    /// The live segment wholly containing `s` (for a reservation: in consecutive mappings),
    /// as (base, segment).
    fn find(&self, s: DeviceSlice) -> Option<(u64, &Segment)> {
        let (base, seg) = self.segments.floor(s.ptr.0)?;
        let end = s.ptr.0.checked_add(s.len)?;
        (end <= base + seg.size && seg.accessible(s.ptr.0 - base, end - base))
            .then_some((base, seg))
    }

    /// Whether `s` lies inside one live segment, or in mapped memory of one reservation
    /// (empty ranges always do).
    pub fn is_valid(&self, s: DeviceSlice) -> bool {
        s.len == 0 || self.find(s).is_some()
    }

    /// Reads `s`. `None` (and one invalid access counted) when `s` is not inside one live
    /// segment; the caller treats that as zeros. Without backing (timing-only), zeros.
    pub fn read(&mut self, s: DeviceSlice) -> Option<Vec<u8>> {
        // Checked first: an invalid range may be far larger than the host's memory.
        if !self.is_valid(s) {
            self.invalid_accesses += 1;
            return None;
        }
        let mut out = vec![0u8; s.len as usize];
        self.read_into(s, &mut out).then_some(out)
    }

    /// [`Memory::read`] into `out` (`s.len` bytes): `false` (and one invalid access counted,
    /// `out` left as it was) when `s` is not inside one live segment.
    pub fn read_into(&mut self, s: DeviceSlice, out: &mut [u8]) -> bool {
        if s.len == 0 {
            return true;
        }
        let Some((base, seg)) = self.find(s) else {
            self.invalid_accesses += 1;
            return false;
        };
        match &seg.data {
            Some(data) => data.read(s.ptr.0 - base, out),
            None => out.fill(0),
        }
        true
    }

    /// A pin of `s` for a kernel to read in place ([`Pin`]): `None` when `s` is not inside one
    /// live segment with host backing, or lies partly in memory shared with other processes
    /// (the caller reads a copy then, [`Memory::read`], which counts an invalid access).
    pub fn pin(&self, s: DeviceSlice) -> Option<Pin> {
        if s.len == 0 {
            return None;
        }
        let (base, seg) = self.find(s)?;
        seg.data.as_ref()?.pin(s.ptr.0 - base, s.len)
    }

    /// `s` for a kernel to write in place at its end ([`Place`]): `None` when `s` is empty,
    /// not inside one live segment with host backing, or lies partly in memory shared with
    /// other processes (the caller computes into a buffer then, and stores it). Its bytes
    /// count as written once the kernel's end is applied ([`Memory::note_written`]).
    pub fn place(&mut self, s: DeviceSlice) -> Option<Place> {
        if s.len == 0 {
            return None;
        }
        let (base, _) = self.find(s)?;
        self.segments
            .get_mut(base)?
            .data
            .as_mut()?
            .place(s.ptr.0 - base, s.len)
    }

    /// Counts `len` bytes at `ptr`, which a kernel wrote in place ([`Memory::place`]), as
    /// written: their pages are resident.
    pub fn note_written(&mut self, ptr: DevicePtr, len: u64) {
        let Some((base, _)) = self.find(DeviceSlice::new(ptr, len)) else {
            return;
        };
        if let Some(backing) = self.segments.get_mut(base).and_then(|s| s.data.as_mut()) {
            let before = backing.resident();
            backing.note_written(ptr.0 - base, len as usize);
            self.resident += backing.resident() - before;
        }
    }

    /// Writes `data` at `ptr`. Dropped (and one invalid access counted) when the range is not
    /// inside one live segment.
    pub fn write(&mut self, ptr: DevicePtr, data: &[u8]) {
        self.store(ptr, Source::Bytes(data));
    }

    /// Sets `len` bytes at `ptr` to `value` (a memset's effect: no buffer of its length);
    /// dropped and counted as [`Memory::write`].
    pub fn fill(&mut self, ptr: DevicePtr, len: u64, value: u8) {
        self.store(ptr, Source::Fill(value, len as usize));
    }

    fn store(&mut self, ptr: DevicePtr, source: Source<'_>) {
        if source.len() == 0 {
            return;
        }
        let s = DeviceSlice::new(ptr, source.len() as u64);
        let Some((base, _)) = self.find(s) else {
            self.invalid_accesses += 1;
            return;
        };
        if let Some(seg) = self.segments.get_mut(base) {
            if let Some(backing) = &mut seg.data {
                let before = backing.resident();
                backing.write(ptr.0 - base, source);
                self.resident += backing.resident() - before;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::backing::PAGE;
    use super::*;

    #[test]
    fn addresses_are_aligned_fresh_and_accounted() {
        let mut m = Memory::new(1 << 30, true);
        let a = m.alloc(100).unwrap();
        let b = m.alloc(3 << 20).unwrap();
        assert_eq!(a.0, BASE_ADDRESS);
        assert_eq!(b.0, BASE_ADDRESS + SEGMENT_ALIGN);
        assert_eq!(m.used(), 512 + (3 << 20));
        m.free(a).unwrap();
        let c = m.alloc(100).unwrap();
        assert_eq!(c.0, BASE_ADDRESS + 3 * SEGMENT_ALIGN);
        assert!(m.free(DevicePtr(a.0)).is_err());
        assert!(m.free(DevicePtr(c.0 + 4)).is_err());
        assert!(matches!(m.alloc(0), Err(HalError::InvalidArgument(_))));
        assert!(matches!(
            m.alloc(u64::MAX),
            Err(HalError::OutOfMemory { .. })
        ));
    }

    #[test]
    fn addr_map_keeps_order_through_removals() {
        let mut m: AddrMap<u64> = AddrMap::default();
        for k in 0..100u64 {
            m.insert(k * 10, k);
        }
        for k in (0..100u64).filter(|k| k % 3 != 0) {
            assert_eq!(m.remove(k * 10), Some(k));
        }
        assert_eq!(m.remove(10), None);
        assert_eq!(m.floor(35), Some((30, &3)));
        assert_eq!(m.floor(30), Some((30, &3)));
        // entry 20 is dead: either it is still there (no answer) or compacted away
        assert!(m.floor(25).is_none_or(|(k, _)| k == 0));
        m.insert(5, 7);
        m.insert(20, 2);
        assert_eq!(m.get(20), Some(&2));
        let keys: Vec<u64> = m.iter().map(|(k, _)| k).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
        assert_eq!(keys.len(), 34 + 2);
    }

    #[test]
    fn paged_backing_reads_back_across_pages() {
        let mut m = Memory::new(1 << 30, true);
        let a = m.alloc(3 * PAGE).unwrap();
        let data: Vec<u8> = (0..PAGE + 10).map(|i| (i % 251) as u8).collect();
        m.write(DevicePtr(a.0 + PAGE - 5), &data);
        let back = m
            .read(DeviceSlice::new(DevicePtr(a.0 + PAGE - 5), PAGE + 10))
            .unwrap();
        assert_eq!(back, data);
        assert_eq!(m.read(DeviceSlice::new(a, 4)).unwrap(), vec![0; 4]);
        assert_eq!(m.invalid_accesses(), 0);
        assert!(m.read(DeviceSlice::new(a, 3 * PAGE + 1)).is_none());
        m.write(DevicePtr(7), &[1]);
        assert_eq!(m.invalid_accesses(), 2);
    }
}
