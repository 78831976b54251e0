//! The happens-before model: the one model of ordering the whole project uses.
//!
//! Each stream is a FIFO of work whose submissions get increasing positions. Each stream keeps a
//! vector clock of what it is known to be ordered after; recording an event snapshots the
//! recording stream's clock, waiting on it joins the snapshot into the waiting stream's clock,
//! and host observations (synchronize, a query that answers "complete") join into a host clock.
//!
//! Work inside a graph capture runs only when the graph is launched, so captured work lives in
//! its own *domain*: each capture has clocks of its own over the streams that joined it, and no
//! knowledge crosses between a capture and eager work. The question the allocator and graph
//! capture ask — "is use U ordered before the next work on stream T?" — is answered inside one
//! domain, or through the host clock for eager work.

use crate::capture_rule::{capture_wait, RecordSite, WaitOutcome};
use crate::clock::VectorClock;
use crate::types::{CaptureMode, StreamId};
use std::collections::BTreeMap;
use std::thread::ThreadId;

/// Identifies one capture on a device.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct CaptureId(pub u64);

/// Where a piece of work runs: eagerly, or inside a capture (at each launch of the graph).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Domain {
    /// Work that runs when submitted.
    Eager,
    /// Work recorded into a capture.
    Capture(CaptureId),
}

/// A point in a stream's work: the `seq`-th submission on `stream`, in `domain`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct StreamPosition {
    /// The stream.
    pub stream: StreamId,
    /// Position of the work on the stream (1 for the first submission; 0 means "nothing yet").
    pub seq: u64,
    /// Where the work runs.
    pub domain: Domain,
}

/// What an event record captured: the recording stream's knowledge at that point.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EventSnapshot {
    /// Where the record happened.
    pub position: StreamPosition,
    /// The recording stream's clock at the record.
    pub clock: VectorClock,
}

pub use crate::capture_rule::WaitRefusal;

/// What a successful wait did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitEffect {
    /// The waiting stream's clock absorbed the event's.
    Ordered,
    /// The waiting stream joined the event's capture.
    JoinedCapture(CaptureId),
}

/// A stream that takes part in a capture.
#[derive(Clone, Debug)]
pub struct CaptureMember {
    /// The member's clock inside the capture.
    pub clock: VectorClock,
    /// Position at which the member joined (its fork point).
    pub joined_at: u64,
}

/// An active capture.
#[derive(Clone, Debug)]
pub struct CaptureState {
    /// Its id.
    pub id: CaptureId,
    /// The stream that began it and must end it.
    pub origin: StreamId,
    /// How strict it is about host-blocking calls.
    pub mode: CaptureMode,
    /// The thread that began it.
    pub thread: ThreadId,
    /// All streams in the capture, the origin included.
    pub members: BTreeMap<StreamId, CaptureMember>,
}

/// A member that did not rejoin the origin before the end of its capture.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Unjoined {
    /// The stream.
    pub stream: StreamId,
    /// Its fork point.
    pub joined_at: u64,
    /// Its last captured work.
    pub last_work: u64,
}

/// The vector-clock state of one device.
#[derive(Debug)]
pub struct Ordering {
    positions: Vec<u64>,
    eager: Vec<VectorClock>,
    domain: Vec<Domain>,
    host: VectorClock,
    captures: BTreeMap<CaptureId, CaptureState>,
    next_capture: u64,
}

impl Default for Ordering {
    fn default() -> Self {
        Self::new()
    }
}

impl Ordering {
    /// State for a device with no work yet.
    pub fn new() -> Self {
        Ordering {
            positions: Vec::new(),
            eager: Vec::new(),
            domain: Vec::new(),
            host: VectorClock::new(),
            captures: BTreeMap::new(),
            next_capture: 1,
        }
    }

    fn ensure(&mut self, s: StreamId) {
        let n = s.index() + 1;
        if self.positions.len() < n {
            self.positions.resize(n, 0);
            self.eager.resize(n, VectorClock::new());
            self.domain.resize(n, Domain::Eager);
        }
    }

    /// The domain new work on `s` goes to.
    pub fn domain_of(&self, s: StreamId) -> Domain {
        self.domain.get(s.index()).copied().unwrap_or(Domain::Eager)
    }

    /// The position of the last work submitted on `s`.
    pub fn position(&self, s: StreamId) -> StreamPosition {
        StreamPosition {
            stream: s,
            seq: self.positions.get(s.index()).copied().unwrap_or(0),
            domain: self.domain_of(s),
        }
    }

    fn clock_mut(&mut self, s: StreamId) -> &mut VectorClock {
        self.ensure(s);
        match self.domain[s.index()] {
            Domain::Eager => &mut self.eager[s.index()],
            Domain::Capture(c) => {
                &mut self
                    .captures
                    .get_mut(&c)
                    .and_then(|cap| cap.members.get_mut(&s))
                    .expect("a capturing stream is a member of its capture")
                    .clock
            }
        }
    }

    fn clock(&self, s: StreamId) -> Option<&VectorClock> {
        match self.domain_of(s) {
            Domain::Eager => self.eager.get(s.index()),
            Domain::Capture(c) => self.captures.get(&c)?.members.get(&s).map(|m| &m.clock),
        }
    }

    /// Notes one submission of work on `s` and returns its position.
    pub fn submit(&mut self, s: StreamId) -> StreamPosition {
        self.ensure(s);
        self.positions[s.index()] += 1;
        let seq = self.positions[s.index()];
        self.clock_mut(s).advance(s.index(), seq);
        self.position(s)
    }

    /// Snapshot for an event recorded on `s` now.
    pub fn record(&mut self, s: StreamId) -> EventSnapshot {
        self.ensure(s);
        let position = self.position(s);
        let mut clock = self.clock_mut(s).clone();
        clock.advance(s.index(), position.seq);
        EventSnapshot { position, clock }
    }

    /// Whether `t` may wait on an event recorded with `snap`, without changing anything.
    pub fn check_wait(&self, t: StreamId, snap: &EventSnapshot) -> Result<(), WaitRefusal> {
        self.wait_outcome(t, Some(snap), false).map(|_| ())
    }

    /// What a wait of `t` on an event last recorded with `snap` (`None`: never recorded), an
    /// external one or not, does under the one capture rule ([`crate::capture_rule`]), without
    /// changing anything.
    pub fn wait_outcome(
        &self,
        t: StreamId,
        snap: Option<&EventSnapshot>,
        external: bool,
    ) -> Result<WaitOutcome, WaitRefusal> {
        let capture_of = |d: Domain| match d {
            Domain::Eager => None,
            Domain::Capture(c) => Some(c),
        };
        let site = match snap.map(|s| capture_of(s.position.domain)) {
            None => RecordSite::Never,
            Some(None) => RecordSite::Eager,
            Some(Some(id)) => RecordSite::Capture {
                id,
                live: self.captures.contains_key(&id),
            },
        };
        capture_wait(capture_of(self.domain_of(t)), site, external)
    }

    /// Makes `t` wait on an event recorded with `snap`.
    pub fn wait(&mut self, t: StreamId, snap: &EventSnapshot) -> Result<WaitEffect, WaitRefusal> {
        self.check_wait(t, snap)?;
        self.ensure(t);
        match (self.domain_of(t), snap.position.domain) {
            (Domain::Eager, Domain::Capture(c)) => {
                // Joining is itself a captured step on `t`: the fork point must be joined back.
                self.positions[t.index()] += 1;
                let joined_at = self.positions[t.index()];
                let mut clock = snap.clock.clone();
                clock.advance(t.index(), joined_at);
                if let Some(cap) = self.captures.get_mut(&c) {
                    cap.members.insert(t, CaptureMember { clock, joined_at });
                }
                self.domain[t.index()] = Domain::Capture(c);
                Ok(WaitEffect::JoinedCapture(c))
            }
            // `check_wait` let only same-domain waits through otherwise.
            _ => {
                self.clock_mut(t).join(&snap.clock);
                Ok(WaitEffect::Ordered)
            }
        }
    }

    /// The host observed that all work submitted to `s` so far is done.
    pub fn observe_stream(&mut self, s: StreamId) {
        if let (Domain::Eager, Some(c)) = (self.domain_of(s), self.eager.get(s.index())) {
            let c = c.clone();
            self.host.join(&c);
        }
    }

    /// The host observed that the work before a record is done.
    pub fn observe_event(&mut self, snap: &EventSnapshot) {
        if snap.position.domain == Domain::Eager {
            self.host.join(&snap.clock);
        }
    }

    /// What all eager work submitted so far on every stream is ordered after: the join of the
    /// streams' eager clocks. Taken before a device-wide synchronize, it is what the host may
    /// observe complete once the synchronize returns ([`Ordering::observe_clock`]).
    pub fn eager_clock(&self) -> VectorClock {
        let mut all = VectorClock::new();
        for clock in &self.eager {
            all.join(clock);
        }
        all
    }

    /// Snapshot of what the host knows (for observations made after releasing a lock).
    pub fn host_clock(&self) -> &VectorClock {
        &self.host
    }

    /// Joins a clock captured earlier into the host clock.
    pub fn observe_clock(&mut self, clock: &VectorClock) {
        self.host.join(clock);
    }

    /// The clock of `s` in its current domain (empty for unknown streams).
    pub fn clock_of(&self, s: StreamId) -> VectorClock {
        self.clock(s).cloned().unwrap_or_default()
    }

    /// Is `u` ordered before the next work submitted to `t`?
    pub fn ordered_before(&self, u: StreamPosition, t: StreamId) -> bool {
        if u.seq == 0 {
            return true;
        }
        match u.domain {
            Domain::Eager => {
                self.host.get(u.stream.index()) >= u.seq
                    || (self.domain_of(t) == Domain::Eager
                        && self
                            .eager
                            .get(t.index())
                            .is_some_and(|c| c.get(u.stream.index()) >= u.seq))
            }
            Domain::Capture(c) => {
                self.domain_of(t) == Domain::Capture(c)
                    && self
                        .clock(t)
                        .is_some_and(|clk| clk.get(u.stream.index()) >= u.seq)
            }
        }
    }

    /// Is `u` known complete by the host?
    pub fn ordered_before_host(&self, u: StreamPosition) -> bool {
        u.seq == 0 || (u.domain == Domain::Eager && self.host.get(u.stream.index()) >= u.seq)
    }

    /// Starts a capture with origin `s`.
    pub fn begin_capture(&mut self, s: StreamId, mode: CaptureMode, thread: ThreadId) -> CaptureId {
        self.ensure(s);
        let id = CaptureId(self.next_capture);
        self.next_capture += 1;
        let mut clock = VectorClock::new();
        clock.advance(s.index(), self.positions[s.index()]);
        let mut members = BTreeMap::new();
        members.insert(
            s,
            CaptureMember {
                clock,
                joined_at: self.positions[s.index()],
            },
        );
        self.captures.insert(
            id,
            CaptureState {
                id,
                origin: s,
                mode,
                thread,
                members,
            },
        );
        self.domain[s.index()] = Domain::Capture(id);
        id
    }

    /// The capture `s` belongs to, if any.
    pub fn capture_of(&self, s: StreamId) -> Option<&CaptureState> {
        match self.domain_of(s) {
            Domain::Capture(c) => self.captures.get(&c),
            Domain::Eager => None,
        }
    }

    /// All active captures.
    pub fn captures(&self) -> impl Iterator<Item = &CaptureState> {
        self.captures.values()
    }

    /// Members of capture `c` whose last captured work is not ordered before the origin's end.
    pub fn unjoined(&self, c: CaptureId) -> Vec<Unjoined> {
        let Some(cap) = self.captures.get(&c) else {
            return Vec::new();
        };
        let origin_clock = &cap.members[&cap.origin].clock;
        cap.members
            .iter()
            .filter(|(s, _)| **s != cap.origin)
            .filter_map(|(s, m)| {
                let last_work = self.positions[s.index()];
                (origin_clock.get(s.index()) < last_work).then_some(Unjoined {
                    stream: *s,
                    joined_at: m.joined_at,
                    last_work,
                })
            })
            .collect()
    }

    /// Ends capture `c`: every member goes back to eager work. Returns the ended state.
    pub fn end_capture(&mut self, c: CaptureId) -> Option<CaptureState> {
        let cap = self.captures.remove(&c)?;
        for s in cap.members.keys() {
            self.domain[s.index()] = Domain::Eager;
        }
        Some(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S0: StreamId = StreamId(0);
    const S1: StreamId = StreamId(1);
    const S2: StreamId = StreamId(2);

    fn me() -> ThreadId {
        std::thread::current().id()
    }

    #[test]
    fn same_stream_work_is_ordered() {
        let mut o = Ordering::new();
        let u = o.submit(S1);
        assert!(o.ordered_before(u, S1));
        assert!(!o.ordered_before(u, S2));
        assert!(!o.ordered_before_host(u));
    }

    #[test]
    fn record_wait_orders_and_is_transitive() {
        let mut o = Ordering::new();
        let u = o.submit(S0);
        let e = o.record(S0);
        o.wait(S1, &e).unwrap();
        assert!(o.ordered_before(u, S1));
        assert!(!o.ordered_before(u, S2));
        let e1 = o.record(S1);
        o.wait(S2, &e1).unwrap();
        assert!(o.ordered_before(u, S2), "ordering is transitive through S1");
        // Work submitted on S0 after the record is not covered.
        let later = o.submit(S0);
        assert!(!o.ordered_before(later, S2));
    }

    #[test]
    fn host_observations_order_for_everyone() {
        let mut o = Ordering::new();
        let u = o.submit(S1);
        let e = o.record(S1);
        let v = o.submit(S1);
        o.observe_event(&e);
        assert!(o.ordered_before_host(u));
        assert!(o.ordered_before(u, S2));
        assert!(!o.ordered_before_host(v));
        o.observe_stream(S1);
        assert!(o.ordered_before(v, S2));
    }

    #[test]
    fn a_device_synchronize_observes_only_work_submitted_before_it() {
        let mut o = Ordering::new();
        let (a, b) = (o.submit(S0), o.submit(S2));
        // Taken before the backend synchronize; another thread submits meanwhile.
        let submitted = o.eager_clock();
        let later = o.submit(S1);
        o.observe_clock(&submitted);
        assert!(o.ordered_before_host(a) && o.ordered_before_host(b));
        assert!(!o.ordered_before_host(later));
    }

    #[test]
    fn capture_domain_is_isolated_from_eager_work() {
        let mut o = Ordering::new();
        let eager = o.submit(S1);
        let c = o.begin_capture(S1, CaptureMode::Global, me());
        let captured = o.submit(S1);
        assert_eq!(captured.domain, Domain::Capture(c));
        // Eager work before the capture is not known to precede replays of the graph.
        assert!(!o.ordered_before(eager, S1));
        let e = o.record(S1);
        assert_eq!(o.wait(S2, &e), Ok(WaitEffect::JoinedCapture(c)));
        assert!(o.ordered_before(captured, S2));
        // S2 has not rejoined.
        let un = o.unjoined(c);
        assert_eq!(un.len(), 1);
        assert_eq!(un[0].stream, S2);
        let e2 = o.record(S2);
        o.wait(S1, &e2).unwrap();
        assert!(o.unjoined(c).is_empty());
        o.end_capture(c).unwrap();
        assert_eq!(o.domain_of(S2), Domain::Eager);
        // Captured work is never known complete by eager observers.
        let all = o.eager_clock();
        o.observe_clock(&all);
        assert!(!o.ordered_before_host(captured));
        assert!(o.ordered_before_host(eager));
    }

    #[test]
    fn waits_across_capture_boundaries_are_refused() {
        let mut o = Ordering::new();
        o.submit(S0);
        let eager_event = o.record(S0);
        let c = o.begin_capture(S1, CaptureMode::Global, me());
        assert_eq!(
            o.wait(S1, &eager_event),
            Err(WaitRefusal::RecordedOutsideCapture)
        );
        let d = o.begin_capture(S2, CaptureMode::Global, me());
        let in_d = o.record(S2);
        assert_eq!(o.wait(S1, &in_d), Err(WaitRefusal::RecordedInOtherCapture));
        let in_c = o.record(S1);
        o.end_capture(c);
        o.end_capture(d);
        assert_eq!(o.wait(S0, &in_c), Err(WaitRefusal::RecordedInEndedCapture));
    }
}
