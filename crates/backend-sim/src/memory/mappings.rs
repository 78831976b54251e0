//! The mappings of one reservation, kept as runs: consecutive mappings of one page size whose
//! physical handles are consecutive too are one entry, so mapping or unmapping many pages at
//! once (expandable segments map thousands of 2 MiB pages) costs one map operation, not one
//! per page, while every page stays a mapping of its own (unmapped alone, with its handle).

/// `count` mappings of `page` bytes each at consecutive offsets, of the physical handles
/// `handle`, `handle + 1`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    /// Bytes of each mapping.
    pub page: u64,
    /// Mappings in the run (at least one).
    pub count: u64,
    /// Handle of the first mapping.
    pub handle: u64,
    /// Whether the memory came with the mapping (the hal's `map_physical`), so its handles
    /// are in no handle table while mapped; `false` for a handle mapped by `map_handle`.
    pub anonymous: bool,
}

impl Run {
    /// Bytes the run covers.
    pub fn len(&self) -> u64 {
        self.page * self.count
    }
}

/// One mapping: where it starts (offset), its size and handle, and whether it is anonymous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Mapping {
    pub offset: u64,
    pub size: u64,
    pub handle: u64,
    pub anonymous: bool,
}

/// The runs of a reservation, sorted by offset; runs never overlap. A sorted list rather than
/// a tree: runs are few and mostly appended (a reservation is mapped from its start up), so a
/// binary search and an append beat a tree's node walks.
#[derive(Debug, Default)]
pub(super) struct Mappings {
    runs: Vec<(u64, Run)>,
}

impl Mappings {
    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Number of mappings.
    pub fn count(&self) -> u64 {
        self.runs.iter().map(|(_, r)| r.count).sum()
    }

    /// Index of the first run starting after `offset`.
    #[inline]
    fn after(&self, offset: u64) -> usize {
        // Runs are mostly appended: at or past the last run's start, no search is needed.
        match self.runs.last() {
            Some(&(at, _)) if at <= offset => self.runs.len(),
            _ => self.runs.partition_point(|&(at, _)| at <= offset),
        }
    }

    /// The run covering `offset`, with its offset.
    pub fn run_at(&self, offset: u64) -> Option<(u64, Run)> {
        let (at, run) = *self.runs.get(self.after(offset).checked_sub(1)?)?;
        (offset < at + run.len()).then_some((at, run))
    }

    /// The mapping that starts at `offset`.
    pub fn mapping_at(&self, offset: u64) -> Option<Mapping> {
        let (at, run) = self.run_at(offset)?;
        let i = (offset - at) / run.page;
        (offset - at == i * run.page).then_some(Mapping {
            offset,
            size: run.page,
            handle: run.handle + i,
            anonymous: run.anonymous,
        })
    }

    /// When no run covers `offset`: where a run starting there goes (for
    /// [`Mappings::insert_at`]) and where the next run starts (`u64::MAX` when none does).
    #[inline]
    pub fn free_at(&self, offset: u64) -> Option<(usize, u64)> {
        let i = self.after(offset);
        if let Some(&(at, run)) = i.checked_sub(1).and_then(|p| self.runs.get(p)) {
            if offset < at + run.len() {
                return None;
            }
        }
        Some((i, self.runs.get(i).map_or(u64::MAX, |&(at, _)| at)))
    }

    /// Whether `[offset, offset + len)` (non-empty) overlaps a mapping.
    pub fn overlaps(&self, offset: u64, len: u64) -> bool {
        self.free_at(offset)
            .is_none_or(|(_, next)| next < offset + len)
    }

    /// Whether consecutive mappings cover `[start, end)` (non-empty).
    pub fn cover(&self, start: u64, end: u64) -> bool {
        let Some(first) = self.after(start).checked_sub(1) else {
            return false;
        };
        let mut at = start;
        for &(off, run) in &self.runs[first..] {
            if at >= end {
                break;
            }
            if off > at || at >= off + run.len() {
                return false;
            }
            at = off + run.len();
        }
        at >= end
    }

    /// Adds `run` at `offset` (over no mapping), merged with the runs it continues.
    pub fn insert(&mut self, offset: u64, run: Run) {
        self.insert_at(self.after(offset), offset, run);
    }

    /// [`Mappings::insert`] where [`Mappings::free_at`] said the run goes at index `i`.
    #[inline]
    pub fn insert_at(&mut self, i: usize, offset: u64, run: Run) {
        let end = offset + run.len();
        let left = i.checked_sub(1).filter(|&p| {
            let (at, prev) = &self.runs[p];
            at + prev.len() == offset && joins(prev, &run)
        });
        let right = self
            .runs
            .get(i)
            .is_some_and(|(at, next)| *at == end && joins(&run, next));
        match (left, right) {
            (Some(p), true) => {
                let next = self.runs.remove(i).1;
                self.runs[p].1.count += run.count + next.count;
            }
            (Some(p), false) => self.runs[p].1.count += run.count,
            (None, true) => {
                let next = &mut self.runs[i];
                *next = (
                    offset,
                    Run {
                        count: run.count + next.1.count,
                        ..run
                    },
                );
            }
            (None, false) => self.runs.insert(i, (offset, run)),
        }
    }

    /// Removes the `count` mappings from the one at `offset` on, which all lie in the run
    /// `(at, run)` (from [`Mappings::run_at`], starting on a page boundary of it): the rest of
    /// the run stays, split in two when the removed part lies inside it.
    pub fn remove(&mut self, at: u64, run: Run, offset: u64, count: u64) {
        let Ok(i) = self.runs.binary_search_by_key(&at, |&(a, _)| a) else {
            return;
        };
        let first = (offset - at) / run.page;
        let after = run.count - first - count;
        let rest = (after > 0).then(|| {
            let rest = Run {
                count: after,
                handle: run.handle + first + count,
                ..run
            };
            (offset + count * run.page, rest)
        });
        match (first, rest) {
            (0, None) => {
                self.runs.remove(i);
            }
            (0, Some(rest)) => self.runs[i] = rest,
            (_, rest) => {
                self.runs[i].1.count = first;
                if let Some(rest) = rest {
                    self.runs.insert(i + 1, rest);
                }
            }
        }
    }

    /// Where the anonymous mapping of `handle` is (its offset), if it is one.
    pub fn anonymous_handle(&self, handle: u64) -> Option<u64> {
        self.runs.iter().find_map(|&(at, run)| {
            (run.anonymous && (run.handle..run.handle + run.count).contains(&handle))
                .then(|| at + (handle - run.handle) * run.page)
        })
    }
}

/// Whether `next` continues `prev` as one run (same kind and page size, handles in sequence).
fn joins(prev: &Run, next: &Run) -> bool {
    prev.anonymous
        && next.anonymous
        && prev.page == next.page
        && prev.handle + prev.count == next.handle
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anon(page: u64, count: u64, handle: u64) -> Run {
        Run {
            page,
            count,
            handle,
            anonymous: true,
        }
    }

    #[test]
    fn runs_merge_only_when_handles_follow_and_split_on_removal() {
        let mut m = Mappings::default();
        m.insert(0, anon(2, 3, 1));
        m.insert(6, anon(2, 2, 4));
        assert_eq!(m.run_at(7), Some((0, anon(2, 5, 1))), "merged");
        m.insert(10, anon(2, 1, 9));
        assert_eq!(
            m.run_at(10),
            Some((10, anon(2, 1, 9))),
            "handles do not follow"
        );
        m.insert(14, anon(2, 1, 11));
        m.insert(12, anon(2, 1, 10));
        assert_eq!(
            m.run_at(14),
            Some((10, anon(2, 3, 9))),
            "joined on both sides"
        );
        assert_eq!(m.count(), 8);
        let (at, run) = m.run_at(4).unwrap();
        m.remove(at, run, 2, 2);
        assert_eq!(m.run_at(0), Some((0, anon(2, 1, 1))));
        assert_eq!(m.run_at(2), None);
        assert_eq!(m.run_at(6), Some((6, anon(2, 2, 4))));
        assert_eq!(
            m.mapping_at(8),
            Some(Mapping {
                offset: 8,
                size: 2,
                handle: 5,
                anonymous: true
            })
        );
        assert_eq!(m.mapping_at(9), None, "not a page boundary");
        assert_eq!(m.anonymous_handle(10), Some(12));
        assert_eq!(m.anonymous_handle(2), None, "unmapped");
        assert!(m.cover(6, 16) && !m.cover(0, 4));
        assert!(m.overlaps(1, 4) && !m.overlaps(2, 4));
        assert_eq!(m.free_at(2), Some((1, 6)));
        assert_eq!(m.free_at(7), None);
        assert_eq!(m.free_at(16), Some((3, u64::MAX)));
        assert_eq!(m.count(), 6);
    }

    #[test]
    fn handle_mappings_never_merge() {
        let mut m = Mappings::default();
        let h = |handle| Run {
            page: 4,
            count: 1,
            handle,
            anonymous: false,
        };
        m.insert(0, h(1));
        m.insert(4, h(2));
        assert_eq!(m.run_at(4), Some((4, h(2))));
        assert_eq!(m.anonymous_handle(2), None);
        let (at, run) = m.run_at(0).unwrap();
        m.remove(at, run, 0, 1);
        assert!(m.run_at(0).is_none() && !m.is_empty());
    }
}
