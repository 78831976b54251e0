//! Work held back behind a collective: the engine places work in virtual time when it is
//! submitted, but a rank's part of a collective cannot be placed until every rank's part is
//! in. A stream with a part not yet run is *deferred*: what is submitted to it afterwards is
//! kept here in order, each with the host time of its submission, and placed once the
//! collective has run (as if it had been placed at that host time).
//!
//! An event whose latest record is held back is *pending*; a stream that waits on a pending
//! event is deferred too, from that wait on. A later record of the same event that is not
//! held back supersedes the held one: when the held record is finally placed it no longer
//! changes the event ([`Backlog::take_record`]).
//!
//! Here too the engine's side: what is held back ([`Held`], [`Work`]), placing it once its
//! stream is free ([`Engine::pump`]), and the host calls that would wait on it: they wait for
//! other threads' ranks, or fail at once naming what is missing ([`Engine::may_be_released`]).

use crate::capture::{ExternalEvents, Node};
use crate::engine::Engine;
use crate::op::Op;
use braid_stream_core::collective::{CallKey, Incomplete};
use braid_stream_core::hal::HalError;
use braid_stream_core::sync::{thread, Condvar};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// One held-back call.
#[derive(Debug)]
pub(crate) struct Deferred<A> {
    /// The host time of the submission: the held work is ready no earlier.
    pub host_ns: u64,
    /// The call.
    pub action: A,
}

/// The held-back calls of every deferred stream, and the pending events.
#[derive(Debug)]
pub(crate) struct Backlog<A> {
    queues: BTreeMap<u32, VecDeque<Deferred<A>>>,
    /// Event → the ticket of its latest record, while that record is held back.
    pending: HashMap<usize, u64>,
    next_ticket: u64,
}

impl<A> Default for Backlog<A> {
    fn default() -> Self {
        Backlog {
            queues: BTreeMap::new(),
            pending: HashMap::new(),
            next_ticket: 0,
        }
    }
}

impl<A> Backlog<A> {
    /// Whether stream `s` holds back work.
    pub fn is_deferred(&self, s: u32) -> bool {
        self.queues.contains_key(&s)
    }

    /// Holds back `action` on stream `s`, submitted at host time `host_ns`.
    pub fn push(&mut self, s: u32, host_ns: u64, action: A) {
        self.queues
            .entry(s)
            .or_default()
            .push_back(Deferred { host_ns, action });
    }

    /// A ticket for a record of event `e` about to be held back: `e` is pending until the
    /// record is taken ([`Backlog::take_record`]) or superseded.
    pub fn hold_record(&mut self, e: usize) -> u64 {
        self.next_ticket += 1;
        self.pending.insert(e, self.next_ticket);
        self.next_ticket
    }

    /// A record of `e` placed now (not held back) supersedes any held one; whether one was.
    pub fn supersede_record(&mut self, e: usize) -> bool {
        self.pending.remove(&e).is_some()
    }

    /// Whether the held record of `e` with `ticket` still is `e`'s latest (then `e` is no
    /// longer pending and the record must be applied) or was superseded (then it must not).
    pub fn take_record(&mut self, e: usize, ticket: u64) -> bool {
        if self.pending.get(&e) == Some(&ticket) {
            self.pending.remove(&e);
            true
        } else {
            false
        }
    }

    /// Whether event `e`'s latest record is held back.
    pub fn is_pending(&self, e: usize) -> bool {
        self.pending.contains_key(&e)
    }

    /// The first held-back call of stream `s`.
    pub fn front(&self, s: u32) -> Option<&Deferred<A>> {
        self.queues.get(&s).and_then(|q| q.front())
    }

    /// Removes and returns the first held-back call of stream `s`; a stream left with none is
    /// no longer deferred.
    pub fn pop(&mut self, s: u32) -> Option<Deferred<A>> {
        let queue = self.queues.get_mut(&s)?;
        let front = queue.pop_front();
        if queue.is_empty() {
            self.queues.remove(&s);
        }
        front
    }

    /// The first stream (by index) holding back a call for which `pred` holds.
    pub fn holder_of(&self, pred: impl Fn(&A) -> bool) -> Option<u32> {
        self.queues
            .iter()
            .find(|(_, q)| q.iter().any(|d| pred(&d.action)))
            .map(|(s, _)| *s)
    }

    /// The deferred streams, in index order.
    pub fn streams(&self) -> Vec<u32> {
        self.queues.keys().copied().collect()
    }
}

/// Work held back on a deferred stream, placed in order once the stream is free.
#[derive(Debug)]
pub(crate) enum Work {
    /// An op.
    Op(Op),
    /// A record of an event ([`Backlog::hold_record`]'s ticket).
    Record { e: usize, ticket: u64 },
    /// A wait on an event.
    Wait(usize),
    /// A graph launch without collectives (its external events held separately).
    Graph(Arc<[Node]>),
}

/// A held-back call: a rank's part of a collective, a host gate, or other work.
#[derive(Debug)]
pub(crate) enum Held {
    /// The part of call `key` of communicator `comm`.
    Part { comm: usize, key: CallKey },
    /// A launch of a graph with collective parts (`engine::graph_run`), by number.
    Graph(u64),
    /// A host gate (`engine::gates`), by number: the stream waits until the host opens it.
    Gate(u64),
    /// Anything else.
    Work(Work),
}

/// What a host call waits on (for [`Engine::may_be_released`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum HostWait {
    /// Every call so far on a stream (node-wide index).
    Stream(u32),
    /// An event's latest record.
    Event(usize),
    /// The latest records of two events (elapsed time).
    Events(usize, usize),
    /// Every stream of the current device (device synchronize, `free_host`).
    Device,
}

impl Engine {
    // ----- running held-back work -----

    /// Places every held-back call that can be placed now, until none can. A call that fails
    /// (a sanitizer report in abort mode) does not stop the others; the first error is
    /// returned.
    pub(crate) fn pump(&mut self) -> Result<(), HalError> {
        // Host synchronizations waiting on held-back work re-check it once this call lets go
        // of the engine (cheap when nobody waits).
        self.progress.notify_all();
        let mut first_error = None;
        enum Front {
            Blocked,
            Part(usize, CallKey),
            Graph(u64),
            Gate(u64),
            Ready,
        }
        loop {
            let mut progressed = false;
            for s in self.coll.backlog.streams() {
                loop {
                    let front = match self.coll.backlog.front(s).map(|d| &d.action) {
                        None => break,
                        Some(Held::Work(Work::Wait(e))) if self.coll.backlog.is_pending(*e) => {
                            Front::Blocked
                        }
                        Some(Held::Part { comm, key }) => Front::Part(*comm, *key),
                        Some(Held::Graph(id)) => Front::Graph(*id),
                        Some(Held::Gate(id)) => Front::Gate(*id),
                        Some(Held::Work(_)) => Front::Ready,
                    };
                    match front {
                        Front::Blocked => break,
                        Front::Part(comm, key) => {
                            if !self.call_ready(comm, &key) {
                                break;
                            }
                            if let Err(e) = self.run_collective(comm, key) {
                                first_error.get_or_insert(e);
                            }
                        }
                        Front::Gate(id) => {
                            if !self.pass_gate(s, id) {
                                break;
                            }
                        }
                        Front::Graph(id) => match self.advance_run(s, id, &mut first_error) {
                            Ok(true) => {}
                            Ok(false) => break,
                            Err(e) => {
                                first_error.get_or_insert(e);
                            }
                        },
                        Front::Ready => {
                            if let Some(Deferred {
                                host_ns,
                                action: Held::Work(work),
                            }) = self.coll.backlog.pop(s)
                            {
                                if let Err(e) = self.run_work(s, host_ns, work) {
                                    first_error.get_or_insert(e);
                                }
                            }
                        }
                    }
                    progressed = true;
                }
            }
            if !progressed {
                return first_error.map_or(Ok(()), Err);
            }
        }
    }

    /// Places held-back `work` of stream `s`, submitted at host time `host_ns`.
    fn run_work(&mut self, s: u32, host_ns: u64, work: Work) -> Result<(), HalError> {
        match work {
            Work::Op(op) => self.place_at(op, host_ns),
            Work::Record { e, ticket } => {
                if self.coll.backlog.take_record(e, ticket) {
                    let t = self.stream(s)?.tail.max(host_ns);
                    self.record_at(s, e, t);
                }
                Ok(())
            }
            Work::Wait(e) => self.wait_at(s, e, host_ns),
            Work::Graph(nodes) => self.replay_at(s, &nodes, &ExternalEvents::default(), host_ns),
        }
    }

    // ----- blocked host calls -----

    /// The condition variable paired with the engine's mutex, notified when held-back work
    /// may have been released.
    pub(crate) fn progress(&self) -> Arc<Condvar> {
        self.progress.clone()
    }

    /// How long a host synchronization waits for other threads' ranks.
    pub(crate) fn collective_timeout(&self) -> Duration {
        self.collective_timeout
    }

    /// Whether the host call waiting on `what` (on behalf of the current device, from the
    /// calling thread) waits on work held back behind a collective that another host thread
    /// may still release by submitting its rank's part: then the call waits for it rather
    /// than failing.
    ///
    /// No other thread can release it when the calling thread is the only one that has ever
    /// submitted parts to the communicator the work waits for, and has submitted parts of
    /// every rank whose part is missing: it drives those ranks itself, and it is blocked. A
    /// rank that has never submitted a part might be driven by a thread that has not reached
    /// its first call yet, so a wait on it is given the timeout.
    pub(crate) fn may_be_released(&self, what: HostWait) -> bool {
        self.held_stream(what)
            .is_some_and(|s| self.stream_may_be_released(s, 0))
    }

    /// The stream whose held-back work the host call waiting on `what` waits for (for a
    /// device-wide wait, the current device's first stream holding work back), if any.
    pub(crate) fn held_stream(&self, what: HostWait) -> Option<u32> {
        match what {
            HostWait::Stream(s) => self.coll.is_deferred(s).then_some(s),
            HostWait::Event(e) => self.record_holder(e),
            HostWait::Events(a, b) => self.record_holder(a).or_else(|| self.record_holder(b)),
            HostWait::Device => self.devices[self.cur]
                .streams
                .iter()
                .copied()
                .find(|&s| self.coll.is_deferred(s)),
        }
    }

    /// The stream holding back event `e`'s latest record, if it is held back.
    pub(super) fn record_holder(&self, e: usize) -> Option<u32> {
        if !self.coll.is_pending(e) {
            return None;
        }
        self.coll
            .backlog
            .holder_of(|h| matches!(h, Held::Work(Work::Record { e: x, .. }) if *x == e))
    }

    /// Whether another thread may release stream `s`'s held-back work (see
    /// [`Engine::may_be_released`]); `depth` bounds the chain of held records followed.
    fn stream_may_be_released(&self, s: u32, depth: u32) -> bool {
        match self.coll.backlog.front(s).map(|d| &d.action) {
            Some(Held::Part { comm, key }) => self.call_may_be_released(*comm, key, depth),
            Some(Held::Graph(id)) => self
                .run_blocker(*id)
                .is_none_or(|(comm, key)| self.call_may_be_released(comm, &key, depth)),
            Some(Held::Work(Work::Wait(e))) if depth < 4 => self
                .record_holder(*e)
                .is_none_or(|h| self.stream_may_be_released(h, depth + 1)),
            // A host gate is opened by another thread (the one running its callback).
            Some(Held::Gate(_)) => true,
            // A longer chain: give it the timeout.
            _ => true,
        }
    }

    /// Whether another thread may still submit a missing part of call `key` of `comm` (see
    /// [`Engine::may_be_released`]).
    fn call_may_be_released(&self, comm: usize, key: &CallKey, depth: u32) -> bool {
        let Some(drivers) = self.coll.drivers.get(&comm) else {
            return true;
        };
        let me = thread::current().id();
        let missing = self.coll.comms[comm].matcher.missing(key);
        if missing.is_empty() {
            // Every part is in, but some rank's stream has not reached it: that stream may be
            // held back behind another call a thread has still to complete (sends and
            // receives of ranks on threads chain this way).
            return depth < 4
                && self.coll.comms[comm].ready.get(key).is_some_and(|parts| {
                    parts.iter().any(|p| {
                        let s = p.payload.stream;
                        let at_front = matches!(
                            self.coll.backlog.front(s).map(|d| &d.action),
                            Some(Held::Part { comm: c, key: k }) if *c == comm && k == key
                        );
                        !at_front && self.stream_may_be_released(s, depth + 1)
                    })
                });
        }
        // Released when some missing rank was never driven (its thread may not have reached
        // its first call) or was driven by another thread.
        missing.iter().any(|r| {
            drivers
                .ranks
                .get(r)
                .is_none_or(|threads| threads.iter().any(|t| *t != me))
        })
    }

    /// The error of a host call that would wait on stream `s`, whose work is held back.
    pub(crate) fn blocked_stream(&self, s: u32) -> HalError {
        let (device, local) = self.locate(s);
        let (why, missing) = self.blocker(s, 0);
        self.incomplete(
            format!("stream {local} of device {device} would wait forever: it {why}"),
            missing,
        )
    }

    /// The error of a host call that would wait on event `e`, whose record is held back.
    pub(crate) fn blocked_event(&self, e: usize) -> HalError {
        let (why, missing) = self.event_blocker(e, 0);
        self.incomplete(format!("event {e} would never complete: {why}"), missing)
    }

    fn incomplete(&self, what: String, missing: Vec<u32>) -> HalError {
        HalError::CollectiveIncomplete(Box::new(Incomplete {
            what,
            missing,
            waited: None,
            timeout: self.collective_timeout,
        }))
    }

    /// Why event `e`'s record is held back, and the ranks whose missing parts hold it.
    fn event_blocker(&self, e: usize, depth: u32) -> (String, Vec<u32>) {
        match self
            .coll
            .backlog
            .holder_of(|h| matches!(h, Held::Work(Work::Record { e: x, .. }) if *x == e))
        {
            Some(s) if depth < 4 => {
                let (device, local) = self.locate(s);
                let (why, missing) = self.blocker(s, depth + 1);
                (
                    format!(
                        "its record is held back on stream {local} of device {device}, which {why}"
                    ),
                    missing,
                )
            }
            _ => (
                "its record is held back behind a collective".to_string(),
                Vec::new(),
            ),
        }
    }

    /// What stream `s`'s held-back work waits for, and the ranks whose missing parts hold it.
    fn blocker(&self, s: u32, depth: u32) -> (String, Vec<u32>) {
        let front = match self.coll.backlog.front(s).map(|d| &d.action) {
            Some(Held::Graph(id)) => self
                .run_blocker(*id)
                .map(|(comm, key)| Held::Part { comm, key }),
            Some(Held::Part { comm, key }) => Some(Held::Part {
                comm: *comm,
                key: *key,
            }),
            _ => None,
        };
        match (
            front.as_ref(),
            self.coll.backlog.front(s).map(|d| &d.action),
        ) {
            (Some(Held::Part { comm, key }), _) => {
                let state = &self.coll.comms[*comm];
                let missing = state.matcher.missing(key);
                if missing.is_empty() {
                    (
                        format!(
                            "waits for {key} of communicator {comm}, issued by every rank but \
                             not yet reached by every rank's stream"
                        ),
                        missing,
                    )
                } else {
                    let list: Vec<String> = missing.iter().map(u32::to_string).collect();
                    (
                        format!(
                            "waits for {key} of communicator {comm}, which rank(s) {} have not \
                             issued",
                            list.join(", ")
                        ),
                        missing,
                    )
                }
            }
            (_, Some(Held::Work(Work::Wait(e)))) => {
                let (why, missing) = self.event_blocker(*e, depth);
                (format!("waits on event {e}: {why}"), missing)
            }
            (_, Some(Held::Gate(id))) => (
                format!("waits for host gate {id}, which the host has not opened (a blocking host callback not yet run)"),
                Vec::new(),
            ),
            (_, Some(Held::Graph(run))) => match self.run_gate(*run) {
                Some((gate, _)) => (
                    format!("runs a graph waiting at its host gate {gate}, which the host has not opened (a blocking host callback not yet run)"),
                    Vec::new(),
                ),
                None => ("holds back work".to_string(), Vec::new()),
            },
            _ => ("holds back work".to_string(), Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_calls_come_back_in_order_and_the_stream_is_then_free() {
        let mut b = Backlog::default();
        assert!(b.streams().is_empty());
        b.push(3, 10, 'a');
        b.push(3, 20, 'b');
        b.push(1, 15, 'c');
        assert!(b.is_deferred(3) && b.is_deferred(1) && !b.is_deferred(2));
        assert_eq!(b.streams(), vec![1, 3]);
        assert_eq!(b.holder_of(|a| *a == 'b'), Some(3));
        assert_eq!(b.holder_of(|a| *a == 'z'), None);
        assert_eq!(b.front(3).map(|d| (d.host_ns, d.action)), Some((10, 'a')));
        assert_eq!(b.pop(3).map(|d| d.action), Some('a'));
        assert_eq!(b.pop(3).map(|d| d.action), Some('b'));
        assert!(!b.is_deferred(3));
        assert!(b.pop(3).is_none());
        assert_eq!(b.pop(1).map(|d| d.action), Some('c'));
        assert!(b.streams().is_empty());
    }

    #[test]
    fn a_held_record_keeps_its_event_pending_until_taken() {
        let mut b: Backlog<()> = Backlog::default();
        let t = b.hold_record(5);
        assert!(b.is_pending(5));
        assert!(b.take_record(5, t));
        assert!(!b.is_pending(5));
        assert!(!b.take_record(5, t));
    }

    #[test]
    fn a_newer_record_supersedes_a_held_one() {
        let mut b: Backlog<()> = Backlog::default();
        let old = b.hold_record(5);
        assert!(b.supersede_record(5));
        assert!(!b.supersede_record(5));
        assert!(!b.is_pending(5));
        assert!(!b.take_record(5, old));
        // Two held records: only the newer one applies.
        let first = b.hold_record(6);
        let second = b.hold_record(6);
        assert!(!b.take_record(6, first));
        assert!(b.is_pending(6));
        assert!(b.take_record(6, second));
    }
}
