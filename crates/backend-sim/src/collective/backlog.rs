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

use std::collections::{BTreeMap, HashMap, VecDeque};

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
