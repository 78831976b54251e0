//! Replay order of graphs sharing a pool: which bytes of the pool each graph needs from which
//! other graph at replay, and a ledger of which graph's launch last wrote each byte, so that a
//! launch that would read data another graph has overwritten (or that was never written) is
//! refused instead of computing silently wrong results.
//!
//! A graph captured into a shared pool may read blocks that an earlier-captured graph left
//! live (its outputs). The later graph's capture may also reuse blocks an earlier graph freed
//! — an output freed during the next capture, the usual chain `g1 → g2 → g3`. Replayed in
//! capture order every read finds what it expects; replayed otherwise, a graph may read a
//! block another graph has overwritten since.
//!
//! At capture, [`AccessRecorder`] sees every range the capture's work reads and writes (the
//! front layer's use notifications). A read of a block that was live in the pool when the
//! capture began, not written earlier by the same capture, is a *need*: the bytes must hold
//! what the latest earlier-captured graph writing them wrote ([`Footprint`]). At launch the
//! pool's [`Ledger`] (last writer of each byte, by graph launches) must agree with every need;
//! then the graph's writes become the ledger's.

use braid_stream_core::{Access, CaptureId, DeviceSlice, Domain, StreamPosition, UseObserver};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A byte range `[start, end)` of device memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Span {
    pub start: u64,
    pub end: u64,
}

impl Span {
    pub fn new(start: u64, len: u64) -> Self {
        Span {
            start,
            end: start.saturating_add(len),
        }
    }

    fn of(slice: DeviceSlice) -> Self {
        Span::new(slice.ptr.0, slice.len)
    }

    fn is_empty(self) -> bool {
        self.start >= self.end
    }

    fn intersect(self, other: Span) -> Option<Span> {
        let s = Span {
            start: self.start.max(other.start),
            end: self.end.min(other.end),
        };
        (!s.is_empty()).then_some(s)
    }

    /// The parts of `self` outside `other` (zero, one or two spans).
    fn minus(self, other: Span) -> impl Iterator<Item = Span> {
        let left = Span {
            start: self.start,
            end: self.end.min(other.start),
        };
        let right = Span {
            start: self.start.max(other.end),
            end: self.end,
        };
        [left, right].into_iter().filter(|s| !s.is_empty())
    }
}

/// The parts of `spans` outside `cut`.
fn subtract(spans: Vec<Span>, cut: Span) -> Vec<Span> {
    spans.into_iter().flat_map(|s| s.minus(cut)).collect()
}

/// Adds `new` to the sorted, disjoint `spans`, merging what it overlaps or touches (a graph
/// writes the same blocks many times: the set stays as small as the blocks written).
/// Every byte `accesses` touch, as sorted, disjoint spans.
pub(crate) fn touched(accesses: &[(Span, Access)]) -> Vec<Span> {
    let mut spans: Vec<Span> = accesses.iter().map(|&(s, _)| s).collect();
    spans.sort_unstable_by_key(|s| s.start);
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

fn insert_merged(spans: &mut Vec<Span>, new: Span) {
    let mut merged = new;
    spans.retain(|s| {
        let apart = s.end < merged.start || s.start > merged.end;
        if !apart {
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
        }
        apart
    });
    let at = spans.partition_point(|s| s.start < merged.start);
    spans.insert(at, merged);
}

/// Collects the ranges the work of one capture reads and writes, in submission order.
pub(crate) struct AccessRecorder {
    capture: CaptureId,
    seen: Mutex<Vec<(Span, Access)>>,
}

impl AccessRecorder {
    pub fn new(capture: CaptureId) -> Self {
        AccessRecorder {
            capture,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// What was seen, in order.
    pub fn take(&self) -> Vec<(Span, Access)> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl UseObserver for AccessRecorder {
    fn note_use(&self, position: StreamPosition, range: DeviceSlice, access: Access) {
        if position.domain == Domain::Capture(self.capture) && range.len > 0 {
            self.seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((Span::of(range), access));
        }
    }
}

/// What one graph does to its pool's memory at each replay.
#[derive(Clone, Debug, Default)]
pub(crate) struct Footprint {
    /// Bytes the graph reads that another graph of the pool wrote, with that graph's index.
    pub needs: Vec<(Span, u32)>,
    /// Bytes of the pool the graph writes (sorted, disjoint).
    pub writes: Vec<Span>,
}

impl Footprint {
    /// The footprint of a capture that saw `accesses`, in a pool whose blocks `live_at_begin`
    /// were allocated when it began, whose segments are `pool_segments` at its end, and whose
    /// earlier graphs wrote `earlier` (index and spans, in capture order).
    pub fn of_capture(
        accesses: &[(Span, Access)],
        live_at_begin: &[Span],
        pool_segments: &[Span],
        earlier: &[(u32, Vec<Span>)],
    ) -> Self {
        let mut fp = Footprint::default();
        for &(span, access) in accesses {
            match access {
                Access::Write => {
                    for piece in pool_segments.iter().filter_map(|seg| seg.intersect(span)) {
                        insert_merged(&mut fp.writes, piece);
                    }
                }
                Access::Read => {
                    let mut open: Vec<Span> = live_at_begin
                        .iter()
                        .filter_map(|b| b.intersect(span))
                        .collect();
                    for &w in &fp.writes {
                        open = subtract(open, w);
                    }
                    for (producer, written) in earlier.iter().rev() {
                        for &w in written {
                            for piece in &open {
                                if let Some(need) = piece.intersect(w) {
                                    fp.needs.push((need, *producer));
                                }
                            }
                            open = subtract(open, w);
                        }
                    }
                }
            }
        }
        fp
    }
}

/// Why a launch would read the wrong bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Conflict {
    /// The bytes.
    pub span: Span,
    /// The graph whose data the launching graph reads there.
    pub producer: u32,
    /// The graph whose launch wrote them since; `None`: no launch of the producer wrote them.
    pub overwritten_by: Option<u32>,
}

/// Which graph's launch last wrote each byte of a pool (bytes no launch wrote are absent).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Non-overlapping spans by start: (end, writer).
    spans: BTreeMap<u64, (u64, u32)>,
}

impl Ledger {
    /// The first need of `fp` the ledger contradicts.
    pub fn check(&self, fp: &Footprint) -> Option<Conflict> {
        fp.needs
            .iter()
            .find_map(|&(span, producer)| self.check_need(span, producer))
    }

    fn check_need(&self, span: Span, producer: u32) -> Option<Conflict> {
        let mut next = span.start;
        let first = self
            .spans
            .range(..span.start)
            .next_back()
            .map_or(span.start, |(&s, _)| s);
        for (&start, &(end, writer)) in self.spans.range(first..span.end) {
            let Some(overlap) = Span { start, end }.intersect(span) else {
                continue;
            };
            if overlap.start > next {
                return Some(Conflict {
                    span: Span {
                        start: next,
                        end: overlap.start,
                    },
                    producer,
                    overwritten_by: None,
                });
            }
            if writer != producer {
                return Some(Conflict {
                    span: overlap,
                    producer,
                    overwritten_by: Some(writer),
                });
            }
            next = overlap.end;
        }
        (next < span.end).then_some(Conflict {
            span: Span {
                start: next,
                end: span.end,
            },
            producer,
            overwritten_by: None,
        })
    }

    /// Graph `writer`'s launch wrote `fp`'s writes.
    pub fn apply(&mut self, fp: &Footprint, writer: u32) {
        for &span in &fp.writes {
            self.write(span, writer);
        }
    }

    fn write(&mut self, span: Span, writer: u32) {
        let first = self
            .spans
            .range(..span.start)
            .next_back()
            .map_or(span.start, |(&s, _)| s);
        let overlapping: Vec<(u64, u64, u32)> = self
            .spans
            .range(first..span.end)
            .filter(|(&s, &(e, _))| Span { start: s, end: e }.intersect(span).is_some())
            .map(|(&s, &(e, w))| (s, e, w))
            .collect();
        for (start, end, old) in overlapping {
            self.spans.remove(&start);
            for rest in (Span { start, end }).minus(span) {
                self.spans.insert(rest.start, (rest.end, old));
            }
        }
        self.spans.insert(span.start, (span.end, writer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(start: u64, end: u64) -> Span {
        Span { start, end }
    }

    #[test]
    fn reads_of_live_blocks_need_their_latest_writer() {
        let accesses = [
            (sp(0, 10), Access::Read),
            (sp(20, 30), Access::Write),
            (sp(20, 30), Access::Read),
            (sp(40, 50), Access::Read),
        ];
        let live = [sp(0, 10), sp(20, 30)];
        let earlier = [(1, vec![sp(0, 30)]), (2, vec![sp(5, 10)])];
        let fp = Footprint::of_capture(&accesses, &live, &[sp(0, 100)], &earlier);
        // 40..50 was not live; 20..30 was written first by the graph itself.
        assert_eq!(fp.needs, vec![(sp(5, 10), 2), (sp(0, 5), 1)]);
        assert_eq!(fp.writes, vec![sp(20, 30)]);
    }

    #[test]
    fn writes_merge_into_disjoint_sorted_spans() {
        let mut spans = Vec::new();
        for s in [sp(20, 30), sp(0, 10), sp(25, 40), sp(10, 12), sp(50, 60)] {
            insert_merged(&mut spans, s);
        }
        assert_eq!(spans, vec![sp(0, 12), sp(20, 40), sp(50, 60)]);
    }

    #[test]
    fn a_gap_in_the_ledger_is_never_written() {
        let mut ledger = Ledger::default();
        let writes = |spans: Vec<Span>| Footprint {
            needs: Vec::new(),
            writes: spans,
        };
        ledger.apply(&writes(vec![sp(0, 4), sp(6, 10)]), 1);
        let need = Footprint {
            needs: vec![(sp(0, 10), 1)],
            writes: Vec::new(),
        };
        assert_eq!(
            ledger.check(&need),
            Some(Conflict {
                span: sp(4, 6),
                producer: 1,
                overwritten_by: None
            })
        );
    }

    #[test]
    fn the_ledger_names_the_graph_that_overwrote_a_need() {
        let need = Footprint {
            needs: vec![(sp(0, 10), 1)],
            writes: Vec::new(),
        };
        let mut ledger = Ledger::default();
        assert_eq!(
            ledger.check(&need),
            Some(Conflict {
                span: sp(0, 10),
                producer: 1,
                overwritten_by: None
            })
        );
        ledger.apply(
            &Footprint {
                needs: Vec::new(),
                writes: vec![sp(0, 10)],
            },
            1,
        );
        assert_eq!(ledger.check(&need), None);
        ledger.apply(
            &Footprint {
                needs: Vec::new(),
                writes: vec![sp(4, 6)],
            },
            3,
        );
        assert_eq!(
            ledger.check(&need).map(|c| (c.span, c.overwritten_by)),
            Some((sp(4, 6), Some(3)))
        );
        ledger.apply(
            &Footprint {
                needs: Vec::new(),
                writes: vec![sp(2, 8)],
            },
            1,
        );
        assert_eq!(ledger.check(&need), None);
        assert_eq!(ledger.spans.len(), 3);
    }
}
