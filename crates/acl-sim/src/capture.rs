//! The join rule of cross-stream capture, as ACL enforces it at `aclmdlRICaptureEnd`.
//!
//! Every stream that joined a capture (by waiting on an event recorded in it) must return to
//! the origin stream before the end: the origin must have waited, directly or through other
//! members, on an event recorded after the member's last captured task. Joining itself counts
//! as a task of the member. Vector clocks over the members decide it.

use std::collections::BTreeMap;
use std::thread::ThreadId;

/// What one stream knows of each member's tasks.
pub(crate) type Clock = BTreeMap<usize, u64>;

/// Joins `b` into `a`.
pub(crate) fn join(a: &mut Clock, b: &Clock) {
    for (s, n) in b {
        let e = a.entry(*s).or_insert(0);
        *e = (*e).max(*n);
    }
}

/// One stream's part in a capture.
#[derive(Debug)]
pub(crate) struct Member {
    /// Tasks captured on the stream (its join included).
    pub work: u64,
    /// What the stream has waited for.
    pub clock: Clock,
}

/// An active capture.
#[derive(Debug)]
pub(crate) struct CaptureState {
    /// The device.
    pub device: usize,
    /// The stream that began it.
    pub origin: usize,
    /// `aclmdlRICaptureMode`.
    pub mode: u32,
    /// The thread that began it.
    pub thread: ThreadId,
    /// Its model handle (reported by `aclmdlRICaptureGetInfo`, returned by the end).
    pub model: usize,
    /// Member streams, the origin included.
    pub members: BTreeMap<usize, Member>,
}

impl CaptureState {
    /// A capture begun on `origin`.
    pub fn new(device: usize, origin: usize, mode: u32, model: usize) -> Self {
        let mut members = BTreeMap::new();
        members.insert(
            origin,
            Member {
                work: 0,
                clock: Clock::from([(origin, 0)]),
            },
        );
        CaptureState {
            device,
            origin,
            mode,
            thread: std::thread::current().id(),
            model,
            members,
        }
    }

    /// A task was captured on `stream`.
    pub fn task(&mut self, stream: usize) {
        if let Some(m) = self.members.get_mut(&stream) {
            m.work += 1;
            m.clock.insert(stream, m.work);
        }
    }

    /// The clock an event recorded on `stream` now carries.
    pub fn snapshot(&self, stream: usize) -> Clock {
        self.members
            .get(&stream)
            .map(|m| m.clock.clone())
            .unwrap_or_default()
    }

    /// `stream` waited on an event with `clock` (joining the capture if it was not a member).
    pub fn wait(&mut self, stream: usize, clock: &Clock) {
        match self.members.get_mut(&stream) {
            Some(m) => join(&mut m.clock, clock),
            None => {
                let mut c = clock.clone();
                c.insert(stream, 1);
                self.members.insert(stream, Member { work: 1, clock: c });
            }
        }
    }

    /// Members whose tasks the origin has not waited for.
    pub fn unjoined(&self) -> Vec<usize> {
        let origin_clock = self
            .members
            .get(&self.origin)
            .map(|m| m.clock.clone())
            .unwrap_or_default();
        self.members
            .iter()
            .filter(|(s, m)| {
                **s != self.origin && origin_clock.get(s).copied().unwrap_or(0) < m.work
            })
            .map(|(s, _)| *s)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_must_return_to_the_origin() {
        let (o, a, b) = (1, 2, 3);
        let mut cap = CaptureState::new(0, o, 0, 99);
        cap.task(o);
        let fork = cap.snapshot(o);
        cap.wait(a, &fork);
        cap.wait(b, &fork);
        cap.task(a);
        cap.task(b);
        assert_eq!(cap.unjoined(), vec![a, b]);
        let back = cap.snapshot(a);
        cap.wait(o, &back);
        assert_eq!(cap.unjoined(), vec![b]);
        // A join through another member counts.
        let from_b = cap.snapshot(b);
        cap.wait(a, &from_b);
        let again = cap.snapshot(a);
        cap.wait(o, &again);
        assert!(cap.unjoined().is_empty());
        // Work after the return must return again.
        cap.task(b);
        assert_eq!(cap.unjoined(), vec![b]);
    }

    #[test]
    fn joining_without_work_must_still_return() {
        let mut cap = CaptureState::new(0, 1, 0, 99);
        let fork = cap.snapshot(1);
        cap.wait(2, &fork);
        assert_eq!(cap.unjoined(), vec![2]);
    }
}
