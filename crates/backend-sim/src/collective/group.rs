//! Matching the ranks' parts of a collective: a communicator's ranks each submit their part
//! separately (from any thread, in any order between ranks); a call runs once every
//! participant's part is in.
//!
//! Parts match by call number: the `k`-th collective a rank issues on a communicator is call
//! `k` on that communicator, and every rank's call `k` must agree ([`Signature::pairs_with`]).
//! A send and its receive are numbered on their own channel, per (sender, receiver) pair, so
//! that point-to-point traffic between two ranks does not shift the other ranks' numbers.
//! Captured calls replayed from a graph are numbered per captured call and replay.
//! A part that does not match the parts already in is refused the moment it arrives, naming
//! the rank, the call and the difference; the refused part takes no number, so the rank can
//! submit the right one next.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use braid_stream_core::collective::{CollectiveCall, CollectiveOp, Signature};
use braid_stream_core::hal::HalError;

/// Which ranks take part in a call.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) enum Peers {
    /// Every rank of the communicator.
    All,
    /// A sender and its receiver.
    Pair {
        /// The sending rank.
        from: u32,
        /// The receiving rank.
        to: u32,
    },
}

impl Peers {
    /// The peers of `rank`'s call `op`.
    pub fn of(rank: u32, op: CollectiveOp) -> Peers {
        match op {
            CollectiveOp::Send { peer } => Peers::Pair {
                from: rank,
                to: peer,
            },
            CollectiveOp::Recv { peer } => Peers::Pair {
                from: peer,
                to: rank,
            },
            _ => Peers::All,
        }
    }

    fn ranks(self, ranks: u32) -> Vec<u32> {
        match self {
            Peers::All => (0..ranks).collect(),
            Peers::Pair { from, to } => vec![from, to],
        }
    }
}

/// One call of a communicator: which ranks, whether eager or which captured call replayed,
/// and its number on that channel.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) struct CallKey {
    /// Who takes part.
    pub peers: Peers,
    /// The captured call number this is a replay of (`None` for an eager call).
    pub replay_of: Option<u64>,
    /// The call's number on its channel (the replay's number for a replay).
    pub number: u64,
}

impl fmt::Display for CallKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.replay_of {
            None => write!(f, "call {}", self.number)?,
            Some(c) => write!(f, "replay {} of captured call {c}", self.number)?,
        }
        if let Peers::Pair { from, to } = self.peers {
            write!(f, " from rank {from} to rank {to}")?;
        }
        Ok(())
    }
}

/// One rank's part of a call, with what the caller attaches to it.
#[derive(Debug)]
pub(crate) struct Part<T> {
    /// The rank.
    pub rank: u32,
    /// Its call.
    pub call: CollectiveCall,
    /// The caller's data (the engine's: stream, host time).
    pub payload: T,
}

/// The parts of a call received so far.
#[derive(Debug)]
struct Pending<T> {
    parts: Vec<Part<T>>,
}

/// What submitting a part did.
#[derive(Debug)]
pub(crate) enum Arrival<T> {
    /// The call waits for other ranks' parts.
    Waiting(CallKey),
    /// This was the last part: every participant's part, in rank order.
    Complete(CallKey, Vec<Part<T>>),
}

/// A communicator's calls in flight.
#[derive(Debug)]
pub(crate) struct Group<T> {
    ranks: u32,
    /// Next number per (rank, peers, replayed captured call).
    next: HashMap<(u32, Peers, Option<u64>), u64>,
    pending: BTreeMap<CallKey, Pending<T>>,
}

impl<T> Group<T> {
    /// A group of `ranks` ranks with no call in flight.
    pub fn new(ranks: u32) -> Self {
        Group {
            ranks,
            next: HashMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// The key `rank`'s next call `op` would take (eager when `replay_of` is `None`).
    pub fn next_key(&self, rank: u32, op: CollectiveOp, replay_of: Option<u64>) -> CallKey {
        let peers = Peers::of(rank, op);
        CallKey {
            peers,
            replay_of,
            number: self
                .next
                .get(&(rank, peers, replay_of))
                .copied()
                .unwrap_or(0),
        }
    }

    /// Adds `rank`'s part `call` (of a replay of captured call `replay_of`, or eager). Refused
    /// as an invalid argument, taking no number, when it does not match the parts already in.
    pub fn submit(
        &mut self,
        rank: u32,
        call: CollectiveCall,
        replay_of: Option<u64>,
        payload: T,
    ) -> Result<Arrival<T>, HalError> {
        if rank >= self.ranks {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} is not in a communicator of {} ranks",
                self.ranks
            )));
        }
        let key = self.next_key(rank, call.op, replay_of);
        if let Some(pending) = self.pending.get(&key) {
            let first = &pending.parts[0];
            let (mine, theirs) = (call.signature(), first.call.signature());
            if !mine.pairs_with(rank, &theirs, first.rank) {
                return Err(mismatch(rank, &key, first.rank, &theirs, &mine));
            }
        }
        *self.next.entry((rank, key.peers, replay_of)).or_insert(0) += 1;
        let pending = self
            .pending
            .entry(key)
            .or_insert_with(|| Pending { parts: Vec::new() });
        pending.parts.push(Part {
            rank,
            call,
            payload,
        });
        let expected = key.peers.ranks(self.ranks).len();
        if pending.parts.len() < expected {
            return Ok(Arrival::Waiting(key));
        }
        let mut parts = self
            .pending
            .remove(&key)
            .map(|p| p.parts)
            .unwrap_or_default();
        parts.sort_by_key(|p| p.rank);
        Ok(Arrival::Complete(key, parts))
    }

    /// The ranks whose part of `key` is not in yet (empty when the call is not pending).
    pub fn missing(&self, key: &CallKey) -> Vec<u32> {
        let Some(pending) = self.pending.get(key) else {
            return Vec::new();
        };
        key.peers
            .ranks(self.ranks)
            .into_iter()
            .filter(|r| pending.parts.iter().all(|p| p.rank != *r))
            .collect()
    }
}

/// The refusal of `rank`'s part of `key` that differs from `first_rank`'s.
fn mismatch(
    rank: u32,
    key: &CallKey,
    first_rank: u32,
    theirs: &Signature,
    mine: &Signature,
) -> HalError {
    // A send and a receive differ in their operation by design: compare the rest.
    let compared = match (theirs.op, mine.op) {
        (CollectiveOp::Send { .. }, CollectiveOp::Recv { .. })
        | (CollectiveOp::Recv { .. }, CollectiveOp::Send { .. }) => Signature {
            op: theirs.op,
            ..*mine
        },
        _ => *mine,
    };
    let difference = match theirs.difference(&compared) {
        d if d.is_empty() => format!("{mine} does not pair with {theirs}"),
        d => d,
    };
    HalError::InvalidArgument(format!(
        "collective mismatch: rank {rank}'s {key} does not match rank {first_rank}'s \
         ({difference})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::collective::ReduceOp;
    use braid_stream_core::dtype::DType;
    use braid_stream_core::types::DevicePtr;

    fn call(op: CollectiveOp, count: u64) -> CollectiveCall {
        CollectiveCall {
            op,
            send: DevicePtr(0x10),
            recv: DevicePtr(0x20),
            count,
            dtype: DType::F16,
        }
    }

    const SUM: CollectiveOp = CollectiveOp::AllReduce(ReduceOp::Sum);

    fn complete<T>(arrival: Arrival<T>) -> (CallKey, Vec<Part<T>>) {
        match arrival {
            Arrival::Complete(key, parts) => (key, parts),
            Arrival::Waiting(key) => panic!("{key} still waiting"),
        }
    }

    #[test]
    fn the_last_part_completes_the_call_in_rank_order() {
        let mut g = Group::new(3);
        for rank in [2, 0] {
            let arrival = g.submit(rank, call(SUM, 4), None, rank).unwrap();
            assert!(matches!(arrival, Arrival::Waiting(k) if k.number == 0));
        }
        let key = g.next_key(1, SUM, None);
        assert_eq!(g.missing(&key), vec![1]);
        let (key, parts) = complete(g.submit(1, call(SUM, 4), None, 1).unwrap());
        assert_eq!(key.number, 0);
        assert_eq!(
            parts.iter().map(|p| p.payload).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(g.missing(&key).is_empty());
    }

    #[test]
    fn calls_are_numbered_per_rank_so_one_rank_may_run_ahead() {
        let mut g = Group::new(2);
        g.submit(0, call(SUM, 4), None, ()).unwrap();
        let ahead = g
            .submit(0, call(CollectiveOp::AllGather, 2), None, ())
            .unwrap();
        assert!(matches!(ahead, Arrival::Waiting(k) if k.number == 1));
        let (k0, _) = complete(g.submit(1, call(SUM, 4), None, ()).unwrap());
        let (k1, _) = complete(
            g.submit(1, call(CollectiveOp::AllGather, 2), None, ())
                .unwrap(),
        );
        assert_eq!((k0.number, k1.number), (0, 1));
    }

    #[test]
    fn a_mismatch_is_refused_when_it_arrives_and_takes_no_number() {
        let mut g = Group::new(2);
        g.submit(0, call(SUM, 4), None, ()).unwrap();
        let err = g
            .submit(1, call(CollectiveOp::AllReduce(ReduceOp::Max), 8), None, ())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid argument: collective mismatch: rank 1's call 0 does not match rank 0's \
             (operation allreduce(sum) vs allreduce(max), count 4 vs 8)"
        );
        // Still usable: the right part completes call 0.
        let (key, parts) = complete(g.submit(1, call(SUM, 4), None, ()).unwrap());
        assert_eq!((key.number, parts.len()), (0, 2));
    }

    #[test]
    fn sends_pair_with_receives_on_their_own_channel() {
        let mut g = Group::new(3);
        // Rank 2's all-reduce is call 0 whatever ranks 0 and 1 exchange.
        g.submit(0, call(CollectiveOp::Send { peer: 1 }, 4), None, 'a')
            .unwrap();
        g.submit(2, call(SUM, 4), None, 'x').unwrap();
        let (key, parts) = complete(
            g.submit(1, call(CollectiveOp::Recv { peer: 0 }, 4), None, 'b')
                .unwrap(),
        );
        assert_eq!(key.peers, Peers::Pair { from: 0, to: 1 });
        assert_eq!(parts.iter().map(|p| p.payload).collect::<String>(), "ab");
        let all = g.next_key(0, SUM, None);
        assert_eq!(all.number, 0);
        assert_eq!(g.missing(&all), vec![0, 1]);
        // A receive from the wrong count is refused naming the pair.
        g.submit(0, call(CollectiveOp::Send { peer: 1 }, 4), None, 'c')
            .unwrap();
        let err = g
            .submit(1, call(CollectiveOp::Recv { peer: 0 }, 2), None, 'd')
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "rank 1's call 1 from rank 0 to rank 1 does not match rank 0's (count 4 vs 2)"
            ),
            "{err}"
        );
    }

    #[test]
    fn replays_are_numbered_per_captured_call() {
        let mut g = Group::new(2);
        g.submit(0, call(SUM, 4), Some(7), ()).unwrap();
        // An eager call of rank 1 does not pair with rank 0's replay.
        assert!(matches!(
            g.submit(1, call(SUM, 4), None, ()).unwrap(),
            Arrival::Waiting(_)
        ));
        let (key, _) = complete(g.submit(1, call(SUM, 4), Some(7), ()).unwrap());
        assert_eq!(key.to_string(), "replay 0 of captured call 7");
    }

    #[test]
    fn a_rank_outside_the_communicator_is_refused() {
        let mut g: Group<()> = Group::new(2);
        assert!(matches!(
            g.submit(2, call(SUM, 4), None, ()),
            Err(HalError::InvalidArgument(m)) if m.contains("rank 2")
        ));
    }
}
