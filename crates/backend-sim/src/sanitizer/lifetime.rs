//! Which memory is live: device segments, and blocks a sub-allocator declared inside them.
//!
//! Every allocation (segment, or block once a segment is managed by a sub-allocator) gets a
//! fresh lifetime id. Accesses remember the lifetime they touched, so an access that conflicts
//! with one from an earlier lifetime of the same bytes is a use after free. Freed ranges are
//! remembered (adjacent ones merged) so that a later access to them can name the free.
//!
//! A block handed out over freed bytes remembers that free and the point of its stream the
//! hand-out follows ([`Reuse`]): an access not ordered after that point cannot belong to the
//! new buffer (its owner has not been given it yet); it is a stale pointer to the buffer that
//! was freed, so its conflicts are uses after free naming that free.

use super::clock::Epoch;
use super::report::OpInfo;
use crate::memory::AddrMap;
use braid_stream_core::types::DeviceSlice;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Segment bases are aligned to this (the simulator's segment alignment): a freed segment is
/// remembered up to the next boundary, so consecutive freed segments merge.
const SEGMENT_ALIGN: u64 = crate::memory::SEGMENT_ALIGN;

#[derive(Debug)]
struct Segment {
    end: u64,
    life: u64,
    /// Whether a sub-allocator declared blocks in it (then only its live blocks are live).
    managed: bool,
    /// Bytes of live blocks in it.
    block_bytes: u64,
}

#[derive(Debug)]
struct Block {
    end: u64,
    life: u64,
    /// Set when the block was handed out over freed bytes.
    reuse: Option<Reuse>,
}

/// A block handed out again over freed bytes (see the module docs).
#[derive(Debug)]
pub(crate) struct Reuse {
    /// The last op of the allocating stream before the hand-out: the new owner's work is
    /// ordered after it.
    pub after: Epoch,
    /// The free of the bytes' previous lifetime.
    pub freed: Arc<OpInfo>,
}

#[derive(Debug)]
struct Freed {
    end: u64,
    by: Arc<OpInfo>,
}

/// Whether a range is live.
#[derive(Debug)]
pub(crate) enum Liveness<'a> {
    /// Inside one live allocation with this lifetime id (and, for a block handed out again
    /// over freed bytes, where it came from).
    Live(u64, Option<&'a Reuse>),
    /// Starts in freed memory; the free.
    Freed(Arc<OpInfo>),
    /// Not inside one live allocation, and not freed.
    Outside,
}

/// Live and freed memory, with byte counters.
#[derive(Debug, Default)]
pub(crate) struct Lifetimes {
    /// By base address (segments come at increasing addresses, never reused).
    segments: AddrMap<Segment>,
    blocks: BTreeMap<u64, Block>,
    freed: BTreeMap<u64, Freed>,
    next_life: u64,
    /// Bytes in live allocations: unmanaged segments count whole, managed ones by live blocks.
    allocated: u64,
    /// Whether `freed` is left empty.
    forget_frees: bool,
}

impl Lifetimes {
    /// Lifetimes that do not remember freed ranges (whose only use is to name the free in a
    /// report, when nothing checks accesses).
    pub fn without_freed() -> Self {
        Lifetimes {
            forget_frees: true,
            ..Lifetimes::default()
        }
    }

    fn fresh(&mut self) -> u64 {
        self.next_life += 1;
        self.next_life
    }

    /// Bytes in live allocations (see the field).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Whether `[start, end)` lies inside one live allocation, and which.
    pub fn lookup(&self, start: u64, end: u64) -> Liveness<'_> {
        let seg = self
            .segments
            .floor(start)
            .filter(|(_, seg)| end <= seg.end && start < seg.end);
        match seg {
            Some((_, seg)) if !seg.managed => return Liveness::Live(seg.life, None),
            Some(_) => {
                let block = self
                    .blocks
                    .range(..=start)
                    .next_back()
                    .filter(|(_, b)| end <= b.end && start < b.end);
                if let Some((_, b)) = block {
                    return Liveness::Live(b.life, b.reuse.as_ref());
                }
            }
            None => {}
        }
        match self.freed.range(..=start).next_back() {
            Some((_, f)) if start < f.end => Liveness::Freed(f.by.clone()),
            _ => Liveness::Outside,
        }
    }

    /// A new segment `[base, base + size)`.
    pub fn segment_alloc(&mut self, base: u64, size: u64) {
        self.insert_segment(base, size, false);
        self.allocated += size;
    }

    /// A new reserved address range `[base, base + size)`: a segment managed from the start
    /// (memory is mapped into it only for a sub-allocator, whose declared blocks are live).
    pub fn segment_reserve(&mut self, base: u64, size: u64) {
        self.insert_segment(base, size, true);
    }

    fn insert_segment(&mut self, base: u64, size: u64, managed: bool) {
        let life = self.fresh();
        let end = base.saturating_add(size);
        self.forget_freed(base, end);
        self.segments.insert(
            base,
            Segment {
                end,
                life,
                managed,
                block_bytes: 0,
            },
        );
    }

    /// The end of the live segment at `base`, if there is one.
    pub fn segment_end(&self, base: u64) -> Option<u64> {
        self.segments.get(base).map(|s| s.end)
    }

    /// Frees the segment at `base` (and every block in it); `by` names the free.
    pub fn segment_free(&mut self, base: u64, by: impl FnOnce() -> Arc<OpInfo>) {
        let Some(seg) = self.segments.remove(base) else {
            return;
        };
        self.allocated -= if seg.managed {
            seg.block_bytes
        } else {
            seg.end - base
        };
        if seg.managed {
            while let Some((&k, _)) = self.blocks.range(base..seg.end).next() {
                self.blocks.remove(&k);
            }
        }
        let end = seg
            .end
            .checked_next_multiple_of(SEGMENT_ALIGN)
            .unwrap_or(seg.end);
        if !self.forget_frees {
            self.add_freed(base, end, by());
        }
    }

    /// A block `[start, end)` handed out by a sub-allocator; `after`: the last op of the
    /// stream it is handed out on (see [`Reuse`]).
    pub fn block_alloc(&mut self, range: DeviceSlice, after: Option<Epoch>) -> Result<(), String> {
        let (start, end) = bounds(range)?;
        let Some((base, seg)) = self.segments.floor(start) else {
            return Err(format!("{range:?} is not inside a live segment"));
        };
        if end > seg.end {
            return Err(format!("{range:?} is not inside a live segment"));
        }
        let overlaps = self
            .blocks
            .range(..end)
            .next_back()
            .is_some_and(|(_, b)| b.end > start);
        if overlaps {
            return Err(format!("{range:?} overlaps a live block"));
        }
        let life = self.fresh();
        let seg = self
            .segments
            .get_mut(base)
            .ok_or_else(|| "segment vanished".to_string())?;
        if !seg.managed {
            seg.managed = true;
            self.allocated -= seg.end - base;
        }
        seg.block_bytes += end - start;
        self.allocated += end - start;
        let freed = self
            .freed
            .range(..=start)
            .next_back()
            .filter(|(_, f)| start < f.end)
            .map(|(_, f)| f.by.clone());
        // With no op before it on its stream, everything is ordered after the hand-out.
        let reuse = after
            .filter(|a| a.count > 0)
            .zip(freed)
            .map(|(after, freed)| Reuse { after, freed });
        self.blocks.insert(start, Block { end, life, reuse });
        self.forget_freed(start, end);
        Ok(())
    }

    /// A block `[start, end)` taken back by a sub-allocator; it must be a live block exactly.
    /// `by` names the free.
    pub fn block_free(
        &mut self,
        range: DeviceSlice,
        by: impl FnOnce() -> Arc<OpInfo>,
    ) -> Result<(), String> {
        let (start, end) = bounds(range)?;
        match self.blocks.get(&start) {
            Some(b) if b.end == end => {}
            _ => return Err(format!("{range:?} is not a live block")),
        }
        self.blocks.remove(&start);
        if let Some((_, seg)) = self.segments.floor_mut(start) {
            seg.block_bytes -= end - start;
        }
        self.allocated -= end - start;
        if !self.forget_frees {
            self.add_freed(start, end, by());
        }
        Ok(())
    }

    /// Remembers `[start, end)` as freed by `by`, merging with adjacent freed ranges.
    fn add_freed(&mut self, mut start: u64, mut end: u64, by: Arc<OpInfo>) {
        if let Some((&s, f)) = self.freed.range(..=start).next_back() {
            if f.end >= start {
                start = s;
                end = end.max(f.end);
            }
        }
        let reach = end;
        while let Some((&k, _)) = self.freed.range(start..=reach).next() {
            if let Some(f) = self.freed.remove(&k) {
                end = end.max(f.end);
            }
        }
        self.freed.insert(start, Freed { end, by });
    }

    /// Forgets that `[start, end)` was freed (it is live again).
    fn forget_freed(&mut self, start: u64, end: u64) {
        if self.freed.is_empty() {
            return;
        }
        // A range starting before `start` and reaching into it keeps its part before `start`
        // (and its part after `end`, if it goes past it).
        let first = self
            .freed
            .range(..start)
            .next_back()
            .filter(|(_, f)| f.end > start)
            .map(|(&k, _)| k);
        if let Some(k) = first {
            if let Some(f) = self.freed.get_mut(&k) {
                let (old_end, by) = (f.end, f.by.clone());
                f.end = start;
                if old_end > end {
                    self.freed.insert(end, Freed { end: old_end, by });
                    return;
                }
            }
        }
        while let Some((&k, _)) = self.freed.range(start..end).next() {
            if let Some(f) = self.freed.remove(&k) {
                if f.end > end {
                    self.freed.insert(end, f);
                }
            }
        }
    }
}

fn bounds(range: DeviceSlice) -> Result<(u64, u64), String> {
    if range.len == 0 {
        return Err("empty range".to_string());
    }
    range
        .ptr
        .0
        .checked_add(range.len)
        .map(|end| (range.ptr.0, end))
        .ok_or_else(|| format!("{range:?} overflows the address space"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::types::DevicePtr;

    fn by() -> Arc<OpInfo> {
        Arc::new(OpInfo {
            device: 0,
            stream: None,
            label: Arc::from("free"),
            kind: "free",
            start_ns: 0,
            end_ns: 0,
            from_graph: false,
            rank: None,
        })
    }

    fn s(a: u64, n: u64) -> DeviceSlice {
        DeviceSlice::new(DevicePtr(a), n)
    }

    #[test]
    fn segments_blocks_and_frees() {
        let base = 4 * SEGMENT_ALIGN;
        let mut l = Lifetimes::default();
        l.segment_alloc(base, 1000);
        assert!(matches!(
            l.lookup(base, base + 1000),
            Liveness::Live(1, None)
        ));
        assert!(matches!(l.lookup(base, base + 1001), Liveness::Outside));
        assert_eq!(l.allocated(), 1000);
        l.block_alloc(s(base, 100), None).unwrap();
        assert_eq!(l.allocated(), 100);
        assert!(l.block_alloc(s(base + 50, 100), None).is_err());
        assert!(matches!(
            l.lookup(base, base + 100),
            Liveness::Live(2, None)
        ));
        assert!(matches!(
            l.lookup(base + 100, base + 101),
            Liveness::Outside
        ));
        l.block_free(s(base, 100), by).unwrap();
        assert!(l.block_free(s(base, 100), by).is_err());
        assert!(matches!(l.lookup(base + 10, base + 20), Liveness::Freed(_)));
        let after = Epoch { actor: 2, count: 7 };
        l.block_alloc(s(base, 50), Some(after)).unwrap();
        match l.lookup(base, base + 50) {
            Liveness::Live(3, Some(reuse)) => {
                assert_eq!(reuse.after, after);
                assert_eq!(reuse.freed.kind, "free");
            }
            other => panic!("a block handed out over freed bytes: {other:?}"),
        }
        assert!(matches!(l.lookup(base + 60, base + 70), Liveness::Freed(_)));
        l.segment_free(base, by);
        assert_eq!(l.allocated(), 0);
        assert!(matches!(l.lookup(base, base + 4), Liveness::Freed(_)));
        l.segment_alloc(base + SEGMENT_ALIGN, 10);
        l.segment_free(base + SEGMENT_ALIGN, by);
        assert_eq!(l.freed.len(), 1, "adjacent freed segments merge");
    }
}
