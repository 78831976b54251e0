//! The happens-before model: the one model of ordering the whole project uses.
//!
//! Each stream is a FIFO of work whose submissions get increasing positions. Each stream keeps a
//! vector clock of what it is known to be ordered after; recording an event snapshots the
//! recording stream's clock, waiting on it joins the snapshot into the waiting stream's clock,
//! and host observations (synchronize, a query that answers "complete") join into a host clock.
//!
//! # Several devices
//!
//! Every device has its own [`Ordering`], but the model spans all devices of the process. A
//! position names its device ([`StreamPosition::device`], the device's process-unique uid). A
//! stream's eager clock has two parts: a [`VectorClock`] over its own device's streams (the
//! fast path, untouched by single-device work) and [`RemoteClocks`], what it knows of other
//! devices' streams. An event recorded on device A and waited on by a stream of device B
//! carries both parts in its [`EventSnapshot`]; B's stream joins A's local clock as its
//! knowledge of A, and takes back whatever the snapshot knew of B itself as local knowledge,
//! so ordering is transitive through any chain of devices. The host clock of a device covers
//! only that device's streams: a host observation on B returns what the observed work knew of
//! other devices ([`Ordering::observe_event`] and friends), and the front layer hands that to
//! each of those devices' host clocks in turn (an event on B recorded after waiting on A's
//! work, once complete, makes that A work complete too). "Is `u` (on A) ordered before the next
//! work on `t` (on B)?" is true when `t`'s clock knows `u` or A's host observed `u` complete.
//!
//! Work inside a graph capture runs only when the graph is launched, so captured work lives in
//! its own *domain*: each capture has clocks of its own over the streams that joined it, and no
//! knowledge crosses between a capture and eager work. Captures belong to one device: a wait
//! from another device's stream follows the same rule ([`crate::capture_rule`]) with the
//! other device's capture counted as a different capture, so no stream joins a capture across
//! devices. The question the allocator and graph capture ask — "is use U ordered before the
//! next work on stream T?" — is answered inside one domain, or through the host clock for
//! eager work.

use crate::capture_rule::{capture_wait, RecordSite, WaitOutcome};
use crate::clock::{RemoteClocks, VectorClock};
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

/// A point in a stream's work: the `seq`-th submission on `stream` of `device`, in `domain`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct StreamPosition {
    /// The device of the stream: its process-unique uid ([`crate::DeviceId::uid`]).
    pub device: u64,
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
    /// Where the record happened (its `device` is the recording device).
    pub position: StreamPosition,
    /// The recording stream's clock over its own device's streams at the record.
    pub clock: VectorClock,
    /// What the recording stream knew of other devices' streams at the record.
    pub remote: RemoteClocks,
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
    device: u64,
    positions: Vec<u64>,
    eager: Vec<VectorClock>,
    /// Per stream, what its eager clock knows of other devices' streams.
    remote: Vec<RemoteClocks>,
    domain: Vec<Domain>,
    host: VectorClock,
    captures: BTreeMap<CaptureId, CaptureState>,
    next_capture: u64,
}

impl Ordering {
    /// State for the device with uid `device`, with no work yet.
    pub fn new(device: u64) -> Self {
        Ordering {
            device,
            positions: Vec::new(),
            eager: Vec::new(),
            remote: Vec::new(),
            domain: Vec::new(),
            host: VectorClock::new(),
            captures: BTreeMap::new(),
            next_capture: 1,
        }
    }

    /// The uid of the device this state belongs to.
    pub fn device(&self) -> u64 {
        self.device
    }

    fn ensure(&mut self, s: StreamId) {
        let n = s.index() + 1;
        if self.positions.len() < n {
            self.positions.resize(n, 0);
            self.eager.resize(n, VectorClock::new());
            self.remote.resize(n, RemoteClocks::new());
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
            device: self.device,
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
        let remote = match position.domain {
            Domain::Eager => self.remote[s.index()].clone(),
            Domain::Capture(_) => RemoteClocks::new(),
        };
        EventSnapshot {
            position,
            clock,
            remote,
        }
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
        // Captures are told apart by device too: another device's capture is always a
        // different capture from the waiter's.
        let capture_of = |device: u64, d: Domain| match d {
            Domain::Eager => None,
            Domain::Capture(c) => Some((device, c)),
        };
        let site = match snap.map(|s| (s.position.device, s.position.domain)) {
            None => RecordSite::Never,
            Some((device, domain)) => match capture_of(device, domain) {
                None => RecordSite::Eager,
                Some(id) => RecordSite::Capture {
                    id,
                    live: device != self.device || self.captures.contains_key(&id.1),
                },
            },
        };
        let outcome = capture_wait(capture_of(self.device, self.domain_of(t)), site, external)?;
        match snap {
            // A stream joins captures of its own device only (capture domains are per device).
            Some(s) if outcome == WaitOutcome::Joins && s.position.device != self.device => {
                Err(WaitRefusal::RecordedInOtherCapture)
            }
            _ => Ok(outcome),
        }
    }

    /// Makes `t` wait on an event recorded with `snap` (on this device or another one).
    pub fn wait(&mut self, t: StreamId, snap: &EventSnapshot) -> Result<WaitEffect, WaitRefusal> {
        self.check_wait(t, snap)?;
        self.ensure(t);
        if snap.position.device != self.device {
            // Only eager work crosses devices (`check_wait` refused the rest).
            self.join_foreign(t, snap);
            return Ok(WaitEffect::Ordered);
        }
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
                if !snap.remote.is_empty() && self.domain[t.index()] == Domain::Eager {
                    self.remote[t.index()].join(&snap.remote);
                }
                Ok(WaitEffect::Ordered)
            }
        }
    }

    /// Joins a snapshot recorded on another device into eager stream `t`: the recording
    /// device's clock becomes knowledge of that device, and what the snapshot knew of this
    /// device comes back as local knowledge.
    fn join_foreign(&mut self, t: StreamId, snap: &EventSnapshot) {
        let i = t.index();
        self.remote[i].join_device(snap.position.device, &snap.clock);
        for (device, clock) in snap.remote.devices() {
            if device == self.device {
                self.eager[i].join(clock);
            } else {
                self.remote[i].join_device(device, clock);
            }
        }
    }

    /// The host observed that all work submitted to `s` so far is done. Returns what that work
    /// knew of other devices' streams: it is complete too (the front layer hands each entry to [`Ordering::observe_clock`] of its device).
    pub fn observe_stream(&mut self, s: StreamId) -> RemoteClocks {
        if let (Domain::Eager, Some(c)) = (self.domain_of(s), self.eager.get(s.index())) {
            let c = c.clone();
            self.host.join(&c);
            return self.remote[s.index()].clone();
        }
        RemoteClocks::new()
    }

    /// The host observed that the work before a record (made on this device) is done. Returns
    /// what that work knew of other devices' streams: it is complete too.
    pub fn observe_event(&mut self, snap: &EventSnapshot) -> RemoteClocks {
        if snap.position.domain == Domain::Eager && snap.position.device == self.device {
            self.host.join(&snap.clock);
            return snap.remote.clone();
        }
        RemoteClocks::new()
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

    /// What the eager work of every stream knew of other devices' streams: complete, too,
    /// once a device-wide synchronize taken after it returns.
    pub fn eager_remote(&self) -> RemoteClocks {
        let mut all = RemoteClocks::new();
        for remote in &self.remote {
            all.join(remote);
        }
        all
    }

    /// Snapshot of what the host knows (for observations made after releasing a lock).
    pub fn host_clock(&self) -> &VectorClock {
        &self.host
    }

    /// Joins a clock captured earlier into the host clock: a stream's or the device's clock
    /// taken before a synchronize, or another device's knowledge of this one (an entry of the
    /// [`RemoteClocks`] an observation there returned).
    pub fn observe_clock(&mut self, clock: &VectorClock) {
        self.host.join(clock);
    }

    /// The clock of `s` in its current domain (empty for unknown streams).
    pub fn clock_of(&self, s: StreamId) -> VectorClock {
        self.clock(s).cloned().unwrap_or_default()
    }

    /// What `s` knows of other devices' streams in its current domain (nothing inside a
    /// capture: captures do not cross devices).
    pub fn remote_of(&self, s: StreamId) -> RemoteClocks {
        match self.domain_of(s) {
            Domain::Eager => self.remote.get(s.index()).cloned().unwrap_or_default(),
            Domain::Capture(_) => RemoteClocks::new(),
        }
    }

    /// Is `u` ordered before the next work submitted to `t`? For `u` on another device, only
    /// what `t` knows of it counts here: the host's knowledge of `u` lives with `u`'s device.
    pub fn ordered_before(&self, u: StreamPosition, t: StreamId) -> bool {
        if u.seq == 0 {
            return true;
        }
        if u.device != self.device {
            return u.domain == Domain::Eager
                && self.domain_of(t) == Domain::Eager
                && self
                    .remote
                    .get(t.index())
                    .is_some_and(|r| r.get(u.device, u.stream.index()) >= u.seq);
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

    /// Is `u` known complete by the host? (For `u` on another device: only if nothing was
    /// submitted there, `seq` 0; ask `u`'s device otherwise.)
    pub fn ordered_before_host(&self, u: StreamPosition) -> bool {
        u.seq == 0
            || (u.device == self.device
                && u.domain == Domain::Eager
                && self.host.get(u.stream.index()) >= u.seq)
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

    const DEV: u64 = 1;
    const S0: StreamId = StreamId(0);
    const S1: StreamId = StreamId(1);
    const S2: StreamId = StreamId(2);

    fn me() -> ThreadId {
        std::thread::current().id()
    }

    #[test]
    fn same_stream_work_is_ordered() {
        let mut o = Ordering::new(DEV);
        let u = o.submit(S1);
        assert!(o.ordered_before(u, S1));
        assert!(!o.ordered_before(u, S2));
        assert!(!o.ordered_before_host(u));
    }

    #[test]
    fn record_wait_orders_and_is_transitive() {
        let mut o = Ordering::new(DEV);
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
        let mut o = Ordering::new(DEV);
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
        let mut o = Ordering::new(DEV);
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
        let mut o = Ordering::new(DEV);
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
        let mut o = Ordering::new(DEV);
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

    const A: u64 = 10;
    const B: u64 = 20;
    const C: u64 = 30;

    #[test]
    fn positions_name_their_device() {
        let mut a = Ordering::new(A);
        assert_eq!(a.device(), A);
        assert_eq!(a.submit(S1).device, A);
        assert_eq!(a.position(S2).device, A);
        assert_eq!(a.record(S1).position.device, A);
    }

    #[test]
    fn a_wait_across_devices_orders_the_waiter_after_the_record() {
        let (mut a, mut b) = (Ordering::new(A), Ordering::new(B));
        let u = a.submit(S1);
        let e = a.record(S1);
        let later = a.submit(S1);
        assert!(!b.ordered_before(u, S2));
        assert_eq!(b.wait(S2, &e), Ok(WaitEffect::Ordered));
        assert!(b.ordered_before(u, S2));
        assert!(
            !b.ordered_before(later, S2),
            "work after the record is not covered"
        );
        assert!(
            !b.ordered_before(u, S1),
            "only the waiting stream learnt it"
        );
        // A stream of A with the same id as B's waiter learnt nothing.
        assert!(!a.ordered_before(u, S2));
        // B's host knows nothing of A's work; A's host clock is A's business.
        assert!(!b.ordered_before_host(u));
        assert!(!a.ordered_before_host(u));
    }

    #[test]
    fn knowledge_crosses_devices_transitively_and_comes_back_home() {
        let (mut a, mut b, mut c) = (Ordering::new(A), Ordering::new(B), Ordering::new(C));
        let ua = a.submit(S1);
        let ea = a.record(S1);
        b.wait(S1, &ea).unwrap();
        let ub = b.submit(S1);
        // B's snapshot carries its knowledge of A to C.
        let eb = b.record(S1);
        assert_eq!(eb.remote.get(A, S1.index()), ua.seq);
        c.wait(S0, &eb).unwrap();
        assert!(c.ordered_before(ua, S0) && c.ordered_before(ub, S0));
        // Back to A: A's stream S2 learns of A's own S1 work through B and C, as local
        // knowledge.
        let ec = c.record(S0);
        a.wait(S2, &ec).unwrap();
        assert!(a.ordered_before(ua, S2));
        assert!(a.ordered_before(ub, S2));
        assert!(
            a.remote_of(S2).of(A).is_none(),
            "a device never lists itself as remote"
        );
        // And same-device waits on A pass the remote knowledge on.
        let ea = a.record(S2);
        a.wait(S0, &ea).unwrap();
        assert!(a.ordered_before(ub, S0));
    }

    #[test]
    fn host_observations_return_what_the_observed_work_knew_of_other_devices() {
        let (mut a, mut b) = (Ordering::new(A), Ordering::new(B));
        let ua = a.submit(S1);
        let other_a = a.submit(S2);
        let ea = a.record(S1);
        b.wait(S1, &ea).unwrap();
        let ub = b.submit(S1);
        let eb = b.record(S1);
        // B's host observes B's event: B's work is complete, and A's up to the record too.
        let learnt = b.observe_event(&eb);
        assert!(b.ordered_before_host(ub));
        a.observe_clock(learnt.of(A).expect("B's event knew A's work"));
        assert!(a.ordered_before_host(ua));
        assert!(
            !a.ordered_before_host(other_a),
            "A's unrelated work is not complete"
        );
        // A stream synchronize and a device synchronize return the same knowledge.
        assert_eq!(b.observe_stream(S1).get(A, S1.index()), ua.seq);
        assert_eq!(b.eager_remote().get(A, S1.index()), ua.seq);
        assert!(b.observe_stream(S2).is_empty());
        // An observation of another device's snapshot teaches this host nothing.
        let ea = a.record(S2);
        assert!(b.observe_event(&ea).is_empty());
        assert!(!b.ordered_before_host(other_a));
    }

    #[test]
    fn captures_do_not_cross_devices() {
        let (mut a, mut b) = (Ordering::new(A), Ordering::new(B));
        a.submit(S1);
        let eager_a = a.record(S1);
        let ca = a.begin_capture(S2, CaptureMode::Relaxed, me());
        let captured = a.submit(S2);
        let in_capture = a.record(S2);
        // An eager stream of B would join A's capture: refused, nothing changes.
        assert_eq!(
            b.wait(S1, &in_capture),
            Err(WaitRefusal::RecordedInOtherCapture)
        );
        assert_eq!(b.domain_of(S1), Domain::Eager);
        assert!(!b.ordered_before(captured, S1));
        // A capturing stream of B waits on nothing recorded on A, eager or captured.
        let cb = b.begin_capture(S2, CaptureMode::Relaxed, me());
        assert_eq!(
            b.wait(S2, &eager_a),
            Err(WaitRefusal::RecordedOutsideCapture)
        );
        // Same capture id on both devices is still a different capture.
        assert_eq!(ca, cb);
        assert_eq!(
            b.wait(S2, &in_capture),
            Err(WaitRefusal::RecordedInOtherCapture)
        );
        // External events follow the one rule: a wait node.
        assert_eq!(
            b.wait_outcome(S2, Some(&eager_a), true),
            Ok(WaitOutcome::WaitNode)
        );
        // A's capture ended: still refused for B's eager streams (B cannot tell whether a
        // capture of A is live; it is a different capture either way).
        a.end_capture(ca);
        assert_eq!(
            b.wait(S0, &in_capture),
            Err(WaitRefusal::RecordedInOtherCapture)
        );
    }
}
