//! The sanitizer: an independent happens-before tracker over every memory access of every op.
//!
//! It keeps its own vector clocks (one actor per stream, plus one per lane of graph replays on
//! a stream), with these edges:
//! - stream order: each op on a stream is after the stream's earlier ops;
//! - event record/wait: a wait joins the clock the event captured at its record;
//! - host synchronization: synchronizing (or successfully querying) a stream, event or the
//!   device joins their clocks into the host's, and work submitted afterwards is after
//!   everything the host has observed;
//! - graph replays: a node is after the launching stream's earlier work and its dependencies,
//!   and later work on the stream is after every node.
//!
//! Each access is checked against the shadow memory (module `shadow`), and each range against the
//! live allocations (module `lifetime`). It does not use the front layer's ordering model: it checks
//! it. It needs only ranges, never data, so it works in timing-only mode too.

pub(crate) mod clock;
pub(crate) mod lifetime;
pub(crate) mod report;
pub(crate) mod shadow;

use crate::op::Accesses;
use braid_stream_core::types::DeviceSlice;
use clock::{Epoch, VectorClock};
use lifetime::{Lifetimes, Liveness};
use report::{slice, OpInfo, RaceKind, RaceReport};
use shadow::{Access, Shadow};
use std::collections::HashMap;
use std::sync::Arc;

/// How the sanitizer reacts to what it finds.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum SanitizerMode {
    /// No checking (clocks and shadow memory are not kept).
    Off,
    /// Reports are collected ([`crate::SimDevice::sanitizer_reports`]) and emitted as `tracing`
    /// warnings; work proceeds. The default: the simulator is a laboratory, and a race is
    /// something to look at, not a crash.
    #[default]
    Report,
    /// The first report is returned to the caller of the offending call as
    /// [`braid_stream_core::hal::HalError::InvalidArgument`] (text starting with
    /// `sanitizer:`), and the call has no effect — except a graph launch, whose replay has run
    /// when the error is returned. Reports are collected as in `Report` mode.
    Abort,
}

/// Reports kept at most; later ones are counted but not stored.
const MAX_STORED_REPORTS: usize = 10_000;

/// A stream's clock.
#[derive(Debug)]
struct StreamClock {
    actor: u32,
    vc: VectorClock,
    /// The host generation last joined into `vc`.
    host_seen: u64,
}

/// Sanitizer state of one device.
#[derive(Debug)]
pub(crate) struct Sanitizer {
    mode: SanitizerMode,
    actors: u32,
    streams: Vec<StreamClock>,
    /// Actor of lane `l` of graph replays on stream `s`, and that actor's op count.
    lanes: HashMap<(u32, u32), u32>,
    lane_counts: HashMap<u32, u64>,
    host: VectorClock,
    host_gen: u64,
    events: Vec<Option<VectorClock>>,
    shadow: Shadow,
    lifetimes: Lifetimes,
    reports: Vec<RaceReport>,
    total_reports: u64,
}

/// Ranges an op accesses, with their lifetime and whether written: the first three inline.
#[derive(Default)]
struct LiveRanges {
    inline: [(u64, u64, u64, bool); 3],
    len: usize,
    more: Vec<(u64, u64, u64, bool)>,
}

impl LiveRanges {
    fn push(&mut self, range: (u64, u64, u64, bool)) {
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = range;
                self.len += 1;
            }
            None => self.more.push(range),
        }
    }

    /// The ranges in the order pushed.
    fn iter(&self) -> impl Iterator<Item = (u64, u64, u64, bool)> + '_ {
        self.inline[..self.len].iter().chain(&self.more).copied()
    }
}

/// A replay in progress: each node's clock and lane.
#[derive(Debug)]
pub(crate) struct Replay {
    stream: u32,
    base: VectorClock,
    clocks: Vec<VectorClock>,
    lane_of: Vec<u32>,
    /// For each lane, the last node in it.
    lane_tail: Vec<usize>,
}

impl Sanitizer {
    /// A sanitizer with the default stream (index 0).
    pub fn new(mode: SanitizerMode) -> Self {
        let mut s = Sanitizer {
            mode,
            actors: 0,
            streams: Vec::new(),
            lanes: HashMap::new(),
            lane_counts: HashMap::new(),
            host: VectorClock::default(),
            host_gen: 0,
            events: Vec::new(),
            shadow: Shadow::default(),
            // With no checking, freed ranges (kept only to name the free in reports) are not
            // remembered.
            lifetimes: if mode == SanitizerMode::Off {
                Lifetimes::without_freed()
            } else {
                Lifetimes::default()
            },
            reports: Vec::new(),
            total_reports: 0,
        };
        s.stream_created();
        s
    }

    /// The mode.
    pub fn mode(&self) -> SanitizerMode {
        self.mode
    }

    fn on(&self) -> bool {
        self.mode != SanitizerMode::Off
    }

    fn new_actor(&mut self) -> u32 {
        self.actors += 1;
        self.actors - 1
    }

    /// A stream was created (indices are dense, in creation order).
    pub fn stream_created(&mut self) {
        let actor = self.new_actor();
        self.streams.push(StreamClock {
            actor,
            vc: VectorClock::default(),
            host_seen: 0,
        });
    }

    /// The clock of stream `s`, with everything the host has observed joined in.
    fn stream_clock(&mut self, s: u32) -> Option<&mut StreamClock> {
        let host_gen = self.host_gen;
        let st = self.streams.get_mut(s as usize)?;
        if st.host_seen != host_gen {
            st.vc.join(&self.host);
            st.host_seen = host_gen;
        }
        Some(st)
    }

    // ----- synchronization edges -----

    /// Event `e` was recorded eagerly on stream `s`.
    pub fn record(&mut self, s: u32, e: usize) {
        if !self.on() {
            return;
        }
        let vc = self.stream_clock(s).map(|st| st.vc.clone());
        self.set_event(e, vc);
    }

    /// Event `e` was recorded in a capture: an eager wait on it orders nothing.
    pub fn record_captured(&mut self, e: usize) {
        if self.on() {
            self.set_event(e, None);
        }
    }

    fn set_event(&mut self, e: usize, vc: Option<VectorClock>) {
        if self.events.len() <= e {
            self.events.resize(e + 1, None);
        }
        self.events[e] = vc;
    }

    /// Stream `s` waited eagerly on event `e`'s eager record.
    pub fn wait(&mut self, s: u32, e: usize) {
        if !self.on() {
            return;
        }
        let Some(Some(vc)) = self.events.get(e) else {
            return;
        };
        let vc = vc.clone();
        if let Some(st) = self.stream_clock(s) {
            st.vc.join(&vc);
        }
    }

    fn host_join(&mut self, vc: &VectorClock) {
        self.host.join(vc);
        self.host_gen += 1;
    }

    /// The host observed all work submitted to stream `s` complete.
    pub fn host_observed_stream(&mut self, s: u32) {
        if !self.on() {
            return;
        }
        if let Some(vc) = self.stream_clock(s).map(|st| st.vc.clone()) {
            self.host_join(&vc);
        }
    }

    /// The host observed event `e` complete.
    pub fn host_observed_event(&mut self, e: usize) {
        if !self.on() {
            return;
        }
        if let Some(Some(vc)) = self.events.get(e) {
            let vc = vc.clone();
            self.host_join(&vc);
        }
    }

    /// The host observed all work of `streams` complete (a device synchronize).
    pub fn host_observed_streams(&mut self, streams: &[u32]) {
        if !self.on() {
            return;
        }
        let mut all = self.host.clone();
        for st in streams.iter().filter_map(|&s| self.streams.get(s as usize)) {
            all.join(&st.vc);
        }
        self.host = all;
        self.host_gen += 1;
    }

    // ----- accesses -----

    /// Checks the accesses of an op running with clock `vc` (reads first, then writes) and,
    /// with `commit`, records them with `epoch`. Returns the reports, one per earlier op and
    /// kind (ranges merged).
    fn access(
        &mut self,
        vc: &VectorClock,
        epoch: Epoch,
        acc: &Accesses,
        op: &Arc<OpInfo>,
        commit: bool,
    ) -> Vec<RaceReport> {
        let mut found: Vec<(RaceKind, Option<Arc<OpInfo>>, u64, u64)> = Vec::new();
        let mut add = |kind, first: Option<&Arc<OpInfo>>, lo: u64, hi: u64| {
            let key = first.map(Arc::as_ptr);
            match found
                .iter_mut()
                .find(|f| f.0 == kind && f.1.as_ref().map(Arc::as_ptr) == key)
            {
                Some(f) => {
                    f.2 = f.2.min(lo);
                    f.3 = f.3.max(hi);
                }
                None => found.push((kind, first.cloned(), lo, hi)),
            }
        };
        // The checked ranges, recorded once all are checked: inline for the (at most three)
        // ranges of a built-in op, so that an op allocates nothing here.
        let mut live = LiveRanges::default();
        let ranges = acc
            .reads()
            .map(|r| (r, false))
            .chain(acc.writes().map(|w| (w, true)));
        for (range, write) in ranges {
            if range.len == 0 {
                continue;
            }
            let (lo, hi) = (range.ptr.0, range.ptr.0.saturating_add(range.len));
            let (life, stale) = match self.lifetimes.lookup(lo, hi) {
                // Not ordered after the block's hand-out: a stale pointer to a freed buffer.
                Liveness::Live(life, reuse) => (
                    life,
                    reuse.filter(|r| !vc.covers(r.after)).map(|r| &r.freed),
                ),
                Liveness::Freed(by) => {
                    add(RaceKind::UseAfterFree, Some(&by), lo, hi);
                    continue;
                }
                Liveness::Outside => {
                    add(RaceKind::OutOfBounds, None, lo, hi);
                    continue;
                }
            };
            self.shadow.conflicts(lo, hi, write, life, vc, |c| {
                let (kind, first) = if c.unwritten {
                    (RaceKind::UnwrittenRead, &c.prior.op)
                } else if let Some(freed) = stale {
                    (RaceKind::UseAfterFree, freed)
                } else if c.prior.life != life {
                    (RaceKind::UseAfterFree, &c.prior.op)
                } else if write && c.prior_write {
                    (RaceKind::WriteWrite, &c.prior.op)
                } else {
                    (RaceKind::ReadWrite, &c.prior.op)
                };
                add(kind, Some(first), c.start, c.end);
            });
            live.push((lo, hi, life, write));
        }
        if commit {
            for (lo, hi, life, write) in live.iter() {
                let a = Access {
                    epoch,
                    life,
                    op: op.clone(),
                };
                if write {
                    self.shadow.write(lo, hi, a);
                } else {
                    self.shadow.read(lo, hi, a);
                }
            }
        }
        if found.is_empty() {
            return Vec::new();
        }
        found
            .into_iter()
            .map(|(kind, first, lo, hi)| RaceReport {
                kind,
                range: slice(lo, hi),
                first: first.map(|f| f.to_ref()),
                second: op.to_ref(),
                hint: None,
            })
            .collect()
    }

    /// An eager op on stream `s`. In abort mode a report stops it: nothing is recorded and the
    /// first report is returned as the error. Otherwise the reports are stored.
    pub fn eager_op(
        &mut self,
        s: u32,
        acc: &Accesses,
        op: impl FnOnce() -> OpInfo,
    ) -> Result<(), Box<RaceReport>> {
        if !self.on() {
            return Ok(());
        }
        let op = Arc::new(op());
        let Some(st) = self.stream_clock(s) else {
            return Ok(());
        };
        let actor = st.actor;
        let count = st.vc.get(actor) + 1;
        let vc = std::mem::take(&mut st.vc);
        let epoch = Epoch { actor, count };
        let abort = self.mode == SanitizerMode::Abort;
        let reports = self.access(&vc, epoch, acc, &op, !abort);
        let mut vc = vc;
        let result = if abort && !reports.is_empty() {
            Err(Box::new(reports[0].clone()))
        } else {
            if abort {
                // Checked clean: now record.
                self.access(&vc, epoch, acc, &op, true);
            }
            vc.set(actor, count);
            Ok(())
        };
        if let Some(st) = self.streams.get_mut(s as usize) {
            st.vc = vc;
        }
        self.store(reports);
        result
    }

    /// Starts checking a replay of a graph on stream `s`.
    pub fn begin_replay(&mut self, s: u32) -> Option<Replay> {
        if !self.on() {
            return None;
        }
        let base = self.stream_clock(s)?.vc.clone();
        Some(Replay {
            stream: s,
            base,
            clocks: Vec::new(),
            lane_of: Vec::new(),
            lane_tail: Vec::new(),
        })
    }

    /// The next node of a replay, depending on the nodes `deps`. Reports are stored.
    pub fn replay_node(
        &mut self,
        r: &mut Replay,
        deps: &[usize],
        acc: &Accesses,
        op: OpInfo,
    ) -> Vec<RaceReport> {
        let index = r.clocks.len();
        let mut vc = r.base.clone();
        for &d in deps {
            if let Some(c) = r.clocks.get(d) {
                vc.join(c);
            }
        }
        // Greedy chain decomposition: continue the lane of a dependency that is its lane's
        // last node, so consecutive nodes of a lane are ordered by a real dependency.
        let lane = deps
            .iter()
            .filter_map(|&d| r.lane_of.get(d).map(|&l| (d, l)))
            .find(|&(d, l)| r.lane_tail.get(l as usize) == Some(&d))
            .map(|(_, l)| l)
            .unwrap_or(r.lane_tail.len() as u32);
        if lane as usize == r.lane_tail.len() {
            r.lane_tail.push(index);
        } else {
            r.lane_tail[lane as usize] = index;
        }
        let actor = match self.lanes.get(&(r.stream, lane)) {
            Some(&a) => a,
            None => {
                let a = self.new_actor();
                self.lanes.insert((r.stream, lane), a);
                a
            }
        };
        let count = self.lane_counts.get(&actor).copied().unwrap_or(0) + 1;
        self.lane_counts.insert(actor, count);
        vc.set(actor, count);
        let op = Arc::new(op);
        let reports = self.access(&vc, Epoch { actor, count }, acc, &op, true);
        r.clocks.push(vc);
        r.lane_of.push(lane);
        self.store(reports.clone());
        reports
    }

    /// Ends a replay: later work on its stream is after every node.
    pub fn end_replay(&mut self, r: Replay) {
        let mut joined = r.base;
        for c in &r.clocks {
            joined.join(c);
        }
        if let Some(st) = self.streams.get_mut(r.stream as usize) {
            st.vc.join(&joined);
        }
    }

    /// The op `failed` names (a user operator of device `device` that ran from `start_ns` to
    /// `end_ns`, labelled `label`) failed on the device: the bytes of `writes` it was the last
    /// to write are marked unwritten, so later reads of them are reported
    /// ([`RaceKind::UnwrittenRead`]), and so are the reads submitted since (queued behind it).
    pub fn op_failed(
        &mut self,
        device: u32,
        label: &str,
        (start_ns, end_ns): (u64, u64),
        writes: &[DeviceSlice],
    ) {
        if !self.on() {
            return;
        }
        let is_failed = |op: &OpInfo| {
            op.device == device
                && op.start_ns == start_ns
                && op.end_ns == end_ns
                && op.label.as_ref() == label
        };
        // Each reader once, with the union of the bytes it read (as `access` merges).
        let mut readers: Vec<(Arc<OpInfo>, u64, u64)> = Vec::new();
        let mut failed: Option<Arc<OpInfo>> = None;
        for w in writes {
            let (lo, hi) = (w.ptr.0, w.ptr.0.saturating_add(w.len));
            let marked =
                self.shadow
                    .mark_unwritten(lo, hi, is_failed, |read, lo, hi| {
                        match readers.iter_mut().find(|r| Arc::ptr_eq(&r.0, &read.op)) {
                            Some(r) => {
                                r.1 = r.1.min(lo);
                                r.2 = r.2.max(hi);
                            }
                            None => readers.push((read.op.clone(), lo, hi)),
                        }
                    });
            failed = failed.or(marked);
        }
        let first = failed.map(|op| op.to_ref());
        let reports = readers
            .into_iter()
            .map(|(reader, lo, hi)| RaceReport {
                kind: RaceKind::UnwrittenRead,
                range: slice(lo, hi),
                first: first.clone(),
                second: reader.to_ref(),
                hint: None,
            })
            .collect();
        self.store(reports);
    }

    // ----- lifetimes -----

    /// A segment was allocated.
    pub fn segment_alloc(&mut self, base: u64, size: u64) {
        self.lifetimes.segment_alloc(base, size);
    }

    /// An address range was reserved (see [`Lifetimes::segment_reserve`]).
    pub fn segment_reserve(&mut self, base: u64, size: u64) {
        self.lifetimes.segment_reserve(base, size);
    }

    /// Checks that a segment free by the host is after every access to the segment. In abort
    /// mode a report refuses the free (returned as the error).
    pub fn segment_free(
        &mut self,
        base: u64,
        free: impl FnOnce() -> OpInfo,
    ) -> Result<(), Box<RaceReport>> {
        let Some(end) = self.lifetimes.segment_end(base) else {
            return Ok(());
        };
        if !self.on() {
            self.lifetimes.segment_free(base, || Arc::new(free()));
            return Ok(());
        }
        let free = Arc::new(free());
        let mut found: Vec<(Arc<OpInfo>, u64, u64)> = Vec::new();
        self.shadow.conflicts(base, end, true, 0, &self.host, |c| {
            match found.iter_mut().find(|f| Arc::ptr_eq(&f.0, &c.prior.op)) {
                Some(f) => {
                    f.1 = f.1.min(c.start);
                    f.2 = f.2.max(c.end);
                }
                None => found.push((c.prior.op.clone(), c.start, c.end)),
            }
        });
        let reports: Vec<RaceReport> = found
            .into_iter()
            .map(|(first, lo, hi)| RaceReport {
                kind: RaceKind::UseAfterFree,
                range: slice(lo, hi),
                first: Some(first.to_ref()),
                second: free.to_ref(),
                hint: None,
            })
            .collect();
        if self.mode == SanitizerMode::Abort {
            if let Some(first) = reports.first().cloned() {
                self.store(reports);
                return Err(Box::new(first));
            }
        }
        self.store(reports);
        self.shadow.remove(base, end);
        self.lifetimes.segment_free(base, || free);
        Ok(())
    }

    /// Takes over the live segments and reservations `(base, size, is a reservation)` of a
    /// device whose segments were not tracked (see `Engine::track_lifetimes`), in address
    /// order.
    pub fn adopt_segments(&mut self, segments: impl Iterator<Item = (u64, u64, bool)>) {
        for (base, size, reserved) in segments {
            if reserved {
                self.lifetimes.segment_reserve(base, size);
            } else {
                self.lifetimes.segment_alloc(base, size);
            }
        }
    }

    /// A sub-allocator handed out `range` for use on stream `s`: work of other streams must
    /// be ordered after `s`'s work so far to use it (see `lifetime`'s docs).
    pub fn block_alloc(&mut self, range: DeviceSlice, s: u32) -> Result<(), String> {
        let after = self.streams.get(s as usize).map(|st| Epoch {
            actor: st.actor,
            count: st.vc.get(st.actor),
        });
        self.lifetimes.block_alloc(range, after)
    }

    /// A sub-allocator took back `range`; `by` names the free.
    pub fn block_free(
        &mut self,
        range: DeviceSlice,
        by: impl FnOnce() -> OpInfo,
    ) -> Result<(), String> {
        self.lifetimes.block_free(range, || Arc::new(by()))
    }

    /// Bytes in live allocations (blocks where declared, whole segments elsewhere).
    pub fn allocated(&self) -> u64 {
        self.lifetimes.allocated()
    }

    // ----- reports -----

    fn store(&mut self, reports: Vec<RaceReport>) {
        for r in reports {
            tracing::warn!(target: "braid_backend_sim::sanitizer", "{r}");
            self.total_reports += 1;
            if self.reports.len() < MAX_STORED_REPORTS {
                self.reports.push(r);
            }
        }
    }

    /// Stored reports.
    pub fn reports(&self) -> &[RaceReport] {
        &self.reports
    }

    /// Reports found so far, stored or not.
    pub fn total_reports(&self) -> u64 {
        self.total_reports
    }

    /// Forgets the reports.
    pub fn clear_reports(&mut self) {
        self.reports.clear();
        self.total_reports = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::LiveRanges;

    #[test]
    fn live_ranges_keep_the_order_pushed_past_the_inline_ones() {
        let mut live = LiveRanges::default();
        let ranges: Vec<_> = (0..5u64).map(|i| (i, i + 1, 7, i % 2 == 0)).collect();
        for &r in &ranges {
            live.push(r);
        }
        assert_eq!(live.iter().collect::<Vec<_>>(), ranges);
        assert!(LiveRanges::default().iter().next().is_none());
    }
}
