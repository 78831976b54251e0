//! The mappings of one reservation, kept as runs: consecutive mappings of one page size whose
//! physical handles are consecutive too are one entry, so mapping or unmapping many pages at
//! once (expandable segments map thousands of 2 MiB pages) costs one map operation, not one
//! per page, while every page stays a mapping of its own (unmapped alone, with its handle).

use std::collections::BTreeMap;

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

/// The runs of a reservation by offset; runs never overlap.
#[derive(Debug, Default)]
pub(super) struct Mappings {
    runs: BTreeMap<u64, Run>,
}

impl Mappings {
    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Number of mappings.
    pub fn count(&self) -> u64 {
        self.runs.values().map(|r| r.count).sum()
    }

    /// The run covering `offset`, with its offset.
    pub fn run_at(&self, offset: u64) -> Option<(u64, Run)> {
        let (&at, &run) = self.runs.range(..=offset).next_back()?;
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

    /// Where the first run at or after `offset` starts (`None`: no run there).
    pub fn next_start(&self, offset: u64) -> Option<u64> {
        self.runs.range(offset..).next().map(|(&at, _)| at)
    }

    /// Whether `[offset, offset + len)` (non-empty) overlaps a mapping.
    pub fn overlaps(&self, offset: u64, len: u64) -> bool {
        self.runs
            .range(..offset + len)
            .next_back()
            .is_some_and(|(&at, run)| at + run.len() > offset)
    }

    /// Whether consecutive mappings cover `[start, end)` (non-empty).
    pub fn cover(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        let mut iter = self
            .runs
            .range(..=start)
            .next_back()
            .into_iter()
            .chain(self.runs.range(start.saturating_add(1)..end));
        while at < end {
            match iter.next() {
                Some((&off, run)) if off <= at && at < off + run.len() => at = off + run.len(),
                _ => return false,
            }
        }
        true
    }

    /// Adds `run` at `offset` (over no mapping), merged with the runs it continues.
    pub fn insert(&mut self, offset: u64, mut run: Run) {
        let mut offset = offset;
        if let Some((&at, prev)) = self.runs.range_mut(..offset).next_back() {
            if at + prev.len() == offset && joins(prev, &run) {
                prev.count += run.count;
                run = *prev;
                offset = at;
            }
        }
        let end = offset + run.len();
        if let Some(next) = self.runs.get(&end).copied() {
            if joins(&run, &next) {
                self.runs.remove(&end);
                run.count += next.count;
            }
        }
        self.runs.insert(offset, run);
    }

    /// Removes the `count` mappings from the one at `offset` on, which all lie in the run
    /// `(at, run)` (from [`Mappings::run_at`], starting on a page boundary of it): the rest of
    /// the run stays, split in two when the removed part lies inside it.
    pub fn remove(&mut self, at: u64, run: Run, offset: u64, count: u64) {
        let first = (offset - at) / run.page;
        let after = run.count - first - count;
        if first == 0 {
            self.runs.remove(&at);
        } else if let Some(r) = self.runs.get_mut(&at) {
            r.count = first;
        }
        if after > 0 {
            let rest = Run {
                count: after,
                handle: run.handle + first + count,
                ..run
            };
            self.runs.insert(offset + count * run.page, rest);
        }
    }

    /// Where the anonymous mapping of `handle` is (its offset), if it is one.
    pub fn anonymous_handle(&self, handle: u64) -> Option<u64> {
        self.runs.iter().find_map(|(&at, run)| {
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
        assert_eq!(m.next_start(2), Some(6));
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
