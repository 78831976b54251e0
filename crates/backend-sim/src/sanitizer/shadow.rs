//! Shadow memory: for every accessed byte range, the last write and the reads since it.
//!
//! Ranges are kept as disjoint intervals in a `BTreeMap` keyed by start address, FastTrack
//! style: one last-write epoch and at most one read epoch per actor. A new access is checked
//! against the intervals it overlaps (a write against the last write and all reads, a read
//! against the last write), so the cost of an access is logarithmic in the number of intervals
//! plus the number it overlaps.
//!
//! An interval whose last write failed (a user operator whose host body panicked) is marked
//! unwritten: every later read of it is a conflict, ordered or not, until something writes it.

use super::clock::{Epoch, VectorClock};
use super::report::OpInfo;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// One recorded access.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    /// The op's epoch.
    pub epoch: Epoch,
    /// The lifetime of the memory the op accessed (an allocation's id).
    pub life: u64,
    /// The op, for reports.
    pub op: Arc<OpInfo>,
}

/// The state of one interval `[start, end)`.
#[derive(Clone, Debug)]
struct Cell {
    end: u64,
    write: Option<Access>,
    reads: Vec<Access>,
    /// The last write failed: the bytes hold nothing it wrote.
    unwritten: bool,
}

/// An earlier access that the new one is not ordered after.
pub(crate) struct Conflict<'a> {
    /// The earlier access.
    pub prior: &'a Access,
    /// Whether the earlier access was a write.
    pub prior_write: bool,
    /// The earlier access is a failed write the new access reads ([`Shadow::mark_unwritten`]):
    /// a conflict whatever the ordering.
    pub unwritten: bool,
    /// Overlap with the new access.
    pub start: u64,
    /// End of the overlap.
    pub end: u64,
}

/// Shadow state of the whole address space.
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    cells: BTreeMap<u64, Cell>,
}

impl Shadow {
    /// Calls `f` for every earlier access overlapping `[start, end)` that conflicts with a new
    /// access of memory lifetime `life` (a write conflicts with writes and reads, a read with
    /// writes) and that `vc` does not cover, and, for a read, for every failed write of the
    /// same lifetime it reads, covered or not.
    pub fn conflicts<'a>(
        &'a self,
        start: u64,
        end: u64,
        write: bool,
        life: u64,
        vc: &VectorClock,
        mut f: impl FnMut(Conflict<'a>),
    ) {
        for (&cell_start, cell) in self.cells.range(..end).rev() {
            if cell.end <= start {
                break;
            }
            let (lo, hi) = (cell_start.max(start), cell.end.min(end));
            if let Some(w) = &cell.write {
                let unwritten = cell.unwritten && !write && w.life == life;
                if unwritten || !vc.covers(w.epoch) {
                    f(Conflict {
                        prior: w,
                        prior_write: true,
                        unwritten,
                        start: lo,
                        end: hi,
                    });
                }
            }
            if write {
                for r in &cell.reads {
                    if !vc.covers(r.epoch) {
                        f(Conflict {
                            prior: r,
                            prior_write: false,
                            unwritten: false,
                            start: lo,
                            end: hi,
                        });
                    }
                }
            }
        }
    }

    /// Marks the bytes of `[start, end)` whose last write is the op `failed` names as
    /// unwritten (the op failed: it wrote nothing), and calls `f` with each read recorded
    /// there since that write and the bytes it overlaps. Returns the failed op, when some
    /// bytes were marked.
    pub fn mark_unwritten(
        &mut self,
        start: u64,
        end: u64,
        failed: impl Fn(&OpInfo) -> bool,
        mut f: impl FnMut(&Access, u64, u64),
    ) -> Option<Arc<OpInfo>> {
        if start >= end {
            return None;
        }
        self.split(start);
        self.split(end);
        let mut op = None;
        for (&k, cell) in self.cells.range_mut(start..end) {
            let Some(w) = cell.write.as_ref().filter(|w| failed(&w.op)) else {
                continue;
            };
            op.get_or_insert_with(|| w.op.clone());
            cell.unwritten = true;
            for r in &cell.reads {
                f(r, k, cell.end);
            }
        }
        op
    }

    /// Splits the interval containing `at` (if any starts before it) into two at `at`.
    fn split(&mut self, at: u64) {
        let Some((&start, cell)) = self.cells.range_mut(..at).next_back() else {
            return;
        };
        if cell.end <= at {
            return;
        }
        let right = Cell {
            end: cell.end,
            write: cell.write.clone(),
            reads: cell.reads.clone(),
            unwritten: cell.unwritten,
        };
        cell.end = at;
        debug_assert!(start < at);
        self.cells.insert(at, right);
    }

    /// Removes every interval inside `[start, end)` (after splitting at the bounds).
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        self.split(start);
        self.split(end);
        let keys: Vec<u64> = self.cells.range(start..end).map(|(&k, _)| k).collect();
        for k in keys {
            self.cells.remove(&k);
        }
    }

    /// Records a write of `[start, end)`: it becomes the last write and clears the reads.
    pub fn write(&mut self, start: u64, end: u64, access: Access) {
        if start >= end {
            return;
        }
        // The common case, a range written again as it was last accessed: one interval
        // already covers exactly `[start, end)` (so no interval straddles a bound), and is
        // overwritten in place (no split, no map rebalancing, no allocation).
        if let Some(cell) = self.cells.get_mut(&start).filter(|c| c.end == end) {
            cell.write = Some(access);
            cell.reads.clear();
            cell.unwritten = false;
            return;
        }
        self.remove(start, end);
        self.cells.insert(
            start,
            Cell {
                end,
                write: Some(access),
                reads: Vec::new(),
                unwritten: false,
            },
        );
    }

    /// Records a read of `[start, end)`: it replaces the read of the same actor, if any.
    pub fn read(&mut self, start: u64, end: u64, access: Access) {
        if start >= end {
            return;
        }
        self.split(start);
        self.split(end);
        let mut cursor = start;
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        for (&k, cell) in self
            .cells
            .range_mut((Bound::Included(start), Bound::Excluded(end)))
        {
            if k > cursor {
                gaps.push((cursor, k));
            }
            match cell
                .reads
                .iter_mut()
                .find(|r| r.epoch.actor == access.epoch.actor)
            {
                Some(r) => *r = access.clone(),
                None => cell.reads.push(access.clone()),
            }
            cursor = cell.end;
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (s, e) in gaps {
            self.cells.insert(
                s,
                Cell {
                    end: e,
                    write: None,
                    reads: vec![access.clone()],
                    unwritten: false,
                },
            );
        }
    }

    /// Number of intervals.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.cells.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(actor: u32, count: u64) -> Access {
        Access {
            epoch: Epoch { actor, count },
            life: 1,
            op: Arc::new(OpInfo {
                device: 0,
                stream: Some(actor),
                label: Arc::from("x"),
                kind: "fill",
                start_ns: 0,
                end_ns: 0,
                from_graph: false,
                rank: None,
            }),
        }
    }

    fn found(
        sh: &Shadow,
        s: u64,
        e: u64,
        write: bool,
        vc: &VectorClock,
    ) -> Vec<(u32, bool, u64, u64)> {
        let mut out = Vec::new();
        sh.conflicts(s, e, write, 1, vc, |c| {
            out.push((c.prior.epoch.actor, c.prior_write, c.start, c.end))
        });
        out.sort();
        out
    }

    #[test]
    fn writes_and_reads_conflict_as_they_should() {
        let mut sh = Shadow::default();
        sh.write(0, 100, acc(0, 1));
        sh.read(50, 150, acc(1, 1));
        assert_eq!(sh.len(), 3);
        let empty = VectorClock::default();
        // a read of [0, 200) by a third actor conflicts only with the write (per interval)
        assert_eq!(
            found(&sh, 0, 200, false, &empty),
            vec![(0, true, 0, 50), (0, true, 50, 100)]
        );
        // a write conflicts with both, over their overlaps
        assert_eq!(
            found(&sh, 60, 70, true, &empty),
            vec![(0, true, 60, 70), (1, false, 60, 70)]
        );
        let mut vc = VectorClock::default();
        vc.set(0, 1);
        vc.set(1, 1);
        assert!(found(&sh, 0, 200, true, &vc).is_empty());
        // a newer read by the same actor replaces the old one
        sh.read(0, 150, acc(1, 2));
        vc.set(1, 1);
        assert_eq!(found(&sh, 140, 141, true, &vc), vec![(1, false, 140, 141)]);
        // a write clears the reads it covers
        sh.write(0, 150, acc(2, 1));
        assert_eq!(sh.len(), 1);
        sh.remove(10, 20);
        assert_eq!(sh.len(), 2);
        assert!(found(&sh, 10, 20, true, &empty).is_empty());
    }

    #[test]
    fn rewriting_an_interval_replaces_its_write_reads_and_unwritten_mark() {
        let mut sh = Shadow::default();
        sh.write(0, 100, acc(0, 1));
        sh.read(0, 100, acc(1, 1));
        sh.mark_unwritten(0, 100, |_| true, |_, _, _| {});
        // The same range again: the interval is overwritten in place.
        sh.write(0, 100, acc(2, 1));
        assert_eq!(sh.len(), 1);
        let empty = VectorClock::default();
        assert_eq!(
            found(&sh, 0, 100, true, &empty),
            vec![(2, true, 0, 100)],
            "only the new write is left"
        );
        let mut vc = VectorClock::default();
        vc.set(2, 1);
        let mut conflicts = 0;
        sh.conflicts(0, 100, false, 1, &vc, |_| conflicts += 1);
        assert_eq!(conflicts, 0, "the bytes are written again");
    }

    #[test]
    fn a_failed_write_conflicts_with_every_later_read_until_rewritten() {
        let mut sh = Shadow::default();
        sh.write(0, 100, acc(0, 1));
        sh.read(20, 40, acc(1, 1));
        let mut vc = VectorClock::default();
        vc.set(0, 1);
        assert!(
            found(&sh, 0, 100, false, &vc).is_empty(),
            "ordered reads are fine"
        );
        let mut readers = Vec::new();
        sh.mark_unwritten(
            10,
            60,
            |op| op.label.as_ref() == "x",
            |r, lo, hi| readers.push((r.epoch.actor, lo, hi)),
        );
        assert_eq!(
            readers,
            vec![(1, 20, 40)],
            "the read recorded since the write"
        );
        // Ordered or not, a read of the marked bytes conflicts; outside them it does not.
        let unwritten = |sh: &Shadow, s, e, life, vc: &VectorClock| {
            let mut out = Vec::new();
            sh.conflicts(s, e, false, life, vc, |c| {
                out.push((c.unwritten, c.start, c.end))
            });
            out.sort();
            out
        };
        assert_eq!(
            unwritten(&sh, 0, 100, 1, &vc),
            vec![(true, 10, 20), (true, 20, 40), (true, 40, 60)]
        );
        assert!(
            unwritten(&sh, 0, 100, 2, &vc).is_empty(),
            "another lifetime of the bytes"
        );
        // A write is checked as usual, and makes the bytes good again.
        assert!(found(&sh, 10, 60, true, &vc).iter().all(|c| c.0 == 1));
        sh.write(0, 50, acc(0, 2));
        vc.set(0, 2);
        assert_eq!(unwritten(&sh, 0, 100, 1, &vc), vec![(true, 50, 60)]);
    }
}
