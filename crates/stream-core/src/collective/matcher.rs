//! The one call matcher: which parts of a communicator's ranks belong to one collective, and
//! whether they agree. `braid-collective`'s ledger refuses a mismatched call with it before
//! anything is enqueued; the simulator matches the parts it runs with it.
//!
//! The `k`-th collective a rank issues on a communicator is call `k` on that communicator,
//! and every rank's call `k` must agree ([`Signature`]). Sends and receives are numbered on
//! their own channel, per (sender, receiver) pair ([`Peers::Pair`]), so that point-to-point
//! traffic between two ranks does not shift the other ranks' numbers: the `k`-th send from
//! `a` to `b` pairs with the `k`-th receive of `b` from `a`. Replays of a captured call are
//! numbered per captured call ([`CallKey::replay_of`]). A part that does not match the parts
//! already in is refused the moment it arrives ([`Mismatch`], naming the rank, the call and the
//! difference) and takes no number, so the rank can submit the right one next.

use super::{CollectiveOp, Signature};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Which ranks take part in a call.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Peers {
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
    /// The peers of `rank`'s call `op`: the pair of a send or receive, else every rank.
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

    /// The ranks taking part, of a communicator of `ranks` ranks.
    fn members(self, ranks: u32) -> impl Iterator<Item = u32> {
        let (all, pair) = match self {
            Peers::All => (0..ranks, None),
            Peers::Pair { from, to } => (0..0, Some([from, to])),
        };
        all.chain(pair.into_iter().flatten())
    }
}

/// One call of a communicator: which ranks, whether eager or a replay of which captured call,
/// and its number on that channel.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct CallKey {
    /// Who takes part.
    pub peers: Peers,
    /// The captured call this is a replay of (`None` for an eager call).
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

/// A rank's part that does not match what another rank issued at the same place (on
/// hardware both would hang).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error(
    "collective mismatch: rank {rank}'s {key} does not match rank {expected_rank}'s ({difference})"
)]
pub struct Mismatch {
    /// The rank whose part is refused.
    pub rank: u32,
    /// The call it would have been.
    pub key: CallKey,
    /// The rank that issued the call first.
    pub expected_rank: u32,
    /// What that rank issued.
    pub expected: Signature,
    /// What this rank issued.
    pub found: Signature,
    /// How they differ (for a send and its receive: count and data type).
    pub difference: String,
}

/// Why the matcher refuses a part.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum MatchError {
    /// The part does not match the parts already in.
    #[error(transparent)]
    Mismatch(Box<Mismatch>),
    /// The rank is not one of the communicator's.
    #[error("rank {rank} is not in a communicator of {ranks} ranks")]
    NotARank {
        /// The rank.
        rank: u32,
        /// Ranks of the communicator.
        ranks: u32,
    },
}

/// One rank's part of a call, with what the caller attaches to it.
#[derive(Debug)]
pub struct Part<T> {
    /// The rank.
    pub rank: u32,
    /// What it issued.
    pub signature: Signature,
    /// The caller's data (the simulator's: the call's buffers, stream, host time).
    pub payload: T,
}

/// What submitting a part did.
#[derive(Debug)]
pub enum Arrival<T> {
    /// The call waits for other ranks' parts.
    Waiting(CallKey),
    /// This was the last part: every participant's part, in rank order.
    Complete(CallKey, Vec<Part<T>>),
}

/// The calls in flight of one communicator of a fixed number of ranks. Parts of calls every
/// participant has issued are handed back ([`Arrival::Complete`]) and forgotten: the matcher
/// holds only what some rank issued and another has not yet.
#[derive(Debug)]
pub struct Matcher<T> {
    ranks: u32,
    /// Next number per (rank, peers, replayed captured call).
    next: HashMap<(u32, Peers, Option<u64>), u64>,
    pending: BTreeMap<CallKey, Vec<Part<T>>>,
}

impl<T> Matcher<T> {
    /// A matcher for a communicator of `ranks` ranks, with no call in flight.
    pub fn new(ranks: u32) -> Self {
        Matcher {
            ranks,
            next: HashMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The key `rank`'s next call `op` takes (eager when `replay_of` is `None`).
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

    /// The key `rank`'s next part, of `signature`, would take, if it matches the parts
    /// already in; nothing is recorded (a caller runs its launch between this and
    /// [`Matcher::submit`], which records).
    pub fn check(
        &self,
        rank: u32,
        signature: &Signature,
        replay_of: Option<u64>,
    ) -> Result<CallKey, MatchError> {
        if rank >= self.ranks {
            return Err(MatchError::NotARank {
                rank,
                ranks: self.ranks,
            });
        }
        let key = self.next_key(rank, signature.op, replay_of);
        self.check_against_parts_in(rank, key, signature)?;
        Ok(key)
    }

    /// Checks `rank`'s part of `signature`, taking `key`, against every part of `key` already
    /// in, not only the first: an all-to-all-v pairs each two ranks' counts.
    fn check_against_parts_in(
        &self,
        rank: u32,
        key: CallKey,
        signature: &Signature,
    ) -> Result<(), MatchError> {
        let parts = self.pending.get(&key).map_or(&[][..], Vec::as_slice);
        match parts
            .iter()
            .find(|p| !signature.pairs_with(rank, &p.signature, p.rank))
        {
            Some(first) => Err(MatchError::Mismatch(Box::new(Mismatch {
                rank,
                key,
                expected_rank: first.rank,
                expected: first.signature.clone(),
                found: signature.clone(),
                difference: difference(rank, signature, first.rank, &first.signature),
            }))),
            None => Ok(()),
        }
    }

    /// Adds `rank`'s part, of `signature` (of a replay of captured call `replay_of`, or
    /// eager), refused (taking no number) as [`Matcher::check`] refuses it.
    pub fn submit(
        &mut self,
        rank: u32,
        signature: Signature,
        replay_of: Option<u64>,
        payload: T,
    ) -> Result<Arrival<T>, MatchError> {
        let key = self.check(rank, &signature, replay_of)?;
        *self.next.entry((rank, key.peers, replay_of)).or_insert(0) += 1;
        let parts = self.pending.entry(key).or_default();
        parts.push(Part {
            rank,
            signature,
            payload,
        });
        if parts.len() < key.peers.members(self.ranks).count() {
            return Ok(Arrival::Waiting(key));
        }
        let mut parts = self.pending.remove(&key).unwrap_or_default();
        parts.sort_by_key(|p| p.rank);
        Ok(Arrival::Complete(key, parts))
    }

    /// The ranks whose part of `key` is not in yet (empty when the call is not pending).
    pub fn missing(&self, key: &CallKey) -> Vec<u32> {
        let Some(parts) = self.pending.get(key) else {
            return Vec::new();
        };
        key.peers
            .members(self.ranks)
            .filter(|r| parts.iter().all(|p| p.rank != *r))
            .collect()
    }

    /// The calls some rank issued and others have not yet.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Checks `rank`'s parts `signatures`, to be submitted one after the other (a batch of
    /// sends and receives), each as [`Matcher::check`] would once the ones before it are in;
    /// returns their keys. Nothing is recorded, so a batch with one refused part is refused
    /// whole before any of it is launched.
    pub fn check_batch(
        &self,
        rank: u32,
        signatures: &[Signature],
        replay_of: Option<u64>,
    ) -> Result<Vec<CallKey>, MatchError> {
        if rank >= self.ranks {
            return Err(MatchError::NotARank {
                rank,
                ranks: self.ranks,
            });
        }
        let mut ahead: HashMap<Peers, u64> = HashMap::new();
        let mut keys = Vec::with_capacity(signatures.len());
        for signature in signatures {
            let mut key = self.next_key(rank, signature.op, replay_of);
            let earlier = ahead.entry(key.peers).or_insert(0);
            key.number += *earlier;
            *earlier += 1;
            self.check_against_parts_in(rank, key, signature)?;
            keys.push(key);
        }
        Ok(keys)
    }
}

/// How rank `rank`'s `found` differs from rank `expected_rank`'s `expected`, issued at the
/// same place: a send and its receive differ in their operation by design, so only the rest
/// is compared; two all-to-all-v parts differ in the counts they exchange.
fn difference(rank: u32, found: &Signature, expected_rank: u32, expected: &Signature) -> String {
    let compared = match (expected.op, found.op) {
        (CollectiveOp::Send { .. }, CollectiveOp::Recv { .. })
        | (CollectiveOp::Recv { .. }, CollectiveOp::Send { .. }) => Signature {
            op: expected.op,
            ..found.clone()
        },
        (CollectiveOp::AllToAllV, CollectiveOp::AllToAllV) if expected.dtype == found.dtype => {
            let counts = found
                .v
                .as_deref()
                .zip(expected.v.as_deref())
                .and_then(|(f, e)| f.all_to_all_difference(rank, e, expected_rank));
            return counts.unwrap_or_else(|| "per-rank blocks given by one call only".to_string());
        }
        _ => found.clone(),
    };
    match expected.difference(&compared) {
        d if d.is_empty() => format!("{found} does not pair with {expected}"),
        d => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::ReduceOp;
    use crate::dtype::DType;
    use crate::hal::HalError;

    fn sig(op: CollectiveOp, count: u64) -> Signature {
        Signature {
            op,
            count,
            dtype: DType::F16,
            v: None,
        }
    }

    const SUM: CollectiveOp = CollectiveOp::AllReduce(ReduceOp::Sum);

    fn complete<T>(arrival: Arrival<T>) -> (CallKey, Vec<Part<T>>) {
        match arrival {
            Arrival::Complete(key, parts) => (key, parts),
            Arrival::Waiting(key) => panic!("{key} still waiting"),
        }
    }

    fn mismatch<T: fmt::Debug>(result: Result<T, MatchError>) -> Mismatch {
        match result {
            Err(MatchError::Mismatch(m)) => *m,
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    #[test]
    fn the_last_part_completes_the_call_in_rank_order() {
        let mut m = Matcher::new(3);
        for rank in [2, 0] {
            let arrival = m.submit(rank, sig(SUM, 4), None, rank).unwrap();
            assert!(matches!(arrival, Arrival::Waiting(k) if k.number == 0));
        }
        let key = m.next_key(1, SUM, None);
        assert_eq!(m.missing(&key), vec![1]);
        let (key, parts) = complete(m.submit(1, sig(SUM, 4), None, 1).unwrap());
        assert_eq!(key.number, 0);
        assert_eq!(
            parts.iter().map(|p| p.payload).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(m.missing(&key).is_empty());
        assert_eq!(m.in_flight(), 0);
    }

    #[test]
    fn calls_are_numbered_per_rank_so_one_rank_may_run_ahead() {
        let mut m = Matcher::new(2);
        m.submit(0, sig(SUM, 4), None, ()).unwrap();
        let ahead = m
            .submit(0, sig(CollectiveOp::AllGather, 2), None, ())
            .unwrap();
        assert!(matches!(ahead, Arrival::Waiting(k) if k.number == 1));
        assert_eq!(m.in_flight(), 2);
        let (k0, _) = complete(m.submit(1, sig(SUM, 4), None, ()).unwrap());
        let (k1, _) = complete(
            m.submit(1, sig(CollectiveOp::AllGather, 2), None, ())
                .unwrap(),
        );
        assert_eq!((k0.number, k1.number), (0, 1));
    }

    #[test]
    fn a_mismatch_is_refused_when_it_arrives_and_takes_no_number() {
        let mut m = Matcher::new(2);
        m.submit(0, sig(SUM, 4), None, ()).unwrap();
        let max = sig(CollectiveOp::AllReduce(ReduceOp::Max), 8);
        assert_eq!(
            m.check(1, &max, None).map_err(|e| e.to_string()),
            Err(
                "collective mismatch: rank 1's call 0 does not match rank 0's \
             (operation allreduce(sum) vs allreduce(max), count 4 vs 8)"
                    .to_string()
            )
        );
        let refused = mismatch(m.submit(1, max.clone(), None, ()));
        assert_eq!(
            (refused.rank, refused.expected_rank, refused.key.number),
            (1, 0, 0)
        );
        assert_eq!((&refused.expected, &refused.found), (&sig(SUM, 4), &max));
        // Into the hal: a typed mismatch, a refused argument.
        let hal = HalError::from(MatchError::Mismatch(Box::new(refused.clone())));
        assert_eq!(hal, HalError::CollectiveMismatch(Box::new(refused)));
        assert!(hal.is_invalid_argument());
        // Still usable: the right part completes call 0.
        let (key, parts) = complete(m.submit(1, sig(SUM, 4), None, ()).unwrap());
        assert_eq!((key.number, parts.len()), (0, 2));
    }

    #[test]
    fn sends_pair_with_receives_on_their_own_channel() {
        let mut m = Matcher::new(3);
        // Rank 2's all-reduce is call 0 whatever ranks 0 and 1 exchange.
        m.submit(0, sig(CollectiveOp::Send { peer: 1 }, 4), None, 'a')
            .unwrap();
        m.submit(2, sig(SUM, 4), None, 'x').unwrap();
        let (key, parts) = complete(
            m.submit(1, sig(CollectiveOp::Recv { peer: 0 }, 4), None, 'b')
                .unwrap(),
        );
        assert_eq!(key.peers, Peers::Pair { from: 0, to: 1 });
        assert_eq!(parts.iter().map(|p| p.payload).collect::<String>(), "ab");
        let all = m.next_key(0, SUM, None);
        assert_eq!(all.number, 0);
        assert_eq!(m.missing(&all), vec![0, 1]);
        // A receive of another count is refused naming the pair; only count and type count.
        m.submit(0, sig(CollectiveOp::Send { peer: 1 }, 4), None, 'c')
            .unwrap();
        let refused = mismatch(m.submit(1, sig(CollectiveOp::Recv { peer: 0 }, 2), None, 'd'));
        assert_eq!(
            refused.to_string(),
            "collective mismatch: rank 1's call 1 from rank 0 to rank 1 does not match rank 0's \
             (count 4 vs 2)"
        );
        assert_eq!(refused.difference, "count 4 vs 2");
    }

    #[test]
    fn replays_are_numbered_per_captured_call() {
        let mut m = Matcher::new(2);
        m.submit(0, sig(SUM, 4), Some(7), ()).unwrap();
        // An eager call of rank 1 does not pair with rank 0's replay.
        assert!(matches!(
            m.submit(1, sig(SUM, 4), None, ()).unwrap(),
            Arrival::Waiting(_)
        ));
        let (key, _) = complete(m.submit(1, sig(SUM, 4), Some(7), ()).unwrap());
        assert_eq!(key.to_string(), "replay 0 of captured call 7");
    }

    fn v_sig(op: CollectiveOp, send: &[u64], recv: &[u64]) -> Signature {
        use crate::collective::{Blocks, CollectiveCall, VCounts};
        use crate::types::DevicePtr;
        let v = VCounts {
            send: Blocks::packed(send),
            recv: Blocks::packed(recv),
        };
        let mut call = CollectiveCall::new(op, DevicePtr(0), DevicePtr(0), 0, DType::F16);
        call.v = Some(std::sync::Arc::new(v));
        call.signature()
    }

    #[test]
    fn all_gather_v_parts_must_agree_on_every_block() {
        let op = CollectiveOp::AllGatherV;
        let mut m = Matcher::new(3);
        m.submit(0, v_sig(op, &[], &[1, 0, 2]), None, ()).unwrap();
        let refused = mismatch(m.submit(2, v_sig(op, &[], &[1, 0, 3]), None, ()));
        assert_eq!(refused.rank, 2);
        assert_eq!(
            refused.difference,
            "count 3 vs 4, receive block of rank 2: 2 element(s) at offset 1 vs 3 element(s) at offset 1"
        );
        m.submit(2, v_sig(op, &[], &[1, 0, 2]), None, ()).unwrap();
        let (_, parts) = complete(m.submit(1, v_sig(op, &[], &[1, 0, 2]), None, ()).unwrap());
        assert_eq!(parts.len(), 3);
    }

    #[test]
    fn all_to_all_v_parts_pair_each_send_count_with_the_peer_s_receive_count() {
        let op = CollectiveOp::AllToAllV;
        let mut m = Matcher::new(3);
        // Rank r sends r + j elements to rank j (rank j receives r + j from rank r).
        let row = |r: u64| [r, r + 1, r + 2];
        let col = |j: u64| [j, j + 1, j + 2];
        m.submit(0, v_sig(op, &row(0), &col(0)), None, ()).unwrap();
        m.submit(1, v_sig(op, &row(1), &col(1)), None, ()).unwrap();
        // Rank 2 expects 9 from rank 1, which sends it 3: refused naming both ranks,
        // whichever part came first.
        let wrong = v_sig(op, &row(2), &[2, 9, 4]);
        let refused = mismatch(m.submit(2, wrong, None, ()));
        assert_eq!((refused.rank, refused.expected_rank), (2, 1));
        assert_eq!(
            refused.difference,
            "rank 2 expects 9 element(s) from rank 1, which sends 3"
        );
        let (_, parts) = complete(m.submit(2, v_sig(op, &row(2), &col(2)), None, ()).unwrap());
        assert_eq!(parts.len(), 3);
    }

    #[test]
    fn a_batch_is_checked_part_by_part_as_if_submitted_in_order() {
        let mut m = Matcher::new(2);
        let send = |count| sig(CollectiveOp::Send { peer: 1 }, count);
        let recv = |count| sig(CollectiveOp::Recv { peer: 0 }, count);
        m.submit(0, send(4), None, ()).unwrap();
        m.submit(0, send(8), None, ()).unwrap();
        // Rank 1's second receive meets rank 0's second send (8), not the first (4).
        let keys = m.check_batch(1, &[recv(4), recv(8)], None).unwrap();
        assert_eq!(keys.iter().map(|k| k.number).collect::<Vec<_>>(), [0, 1]);
        let refused = mismatch(m.check_batch(1, &[recv(4), recv(4)], None));
        assert_eq!(
            (refused.key.number, refused.difference.as_str()),
            (1, "count 8 vs 4")
        );
        // Nothing was recorded.
        assert_eq!(m.next_key(1, recv(4).op, None).number, 0);
        assert_eq!(m.in_flight(), 2);
    }

    #[test]
    fn a_rank_outside_the_communicator_is_refused() {
        let mut m: Matcher<()> = Matcher::new(2);
        assert_eq!(
            m.submit(2, sig(SUM, 4), None, ()).map(|_| ()),
            Err(MatchError::NotARank { rank: 2, ranks: 2 })
        );
        let hal = HalError::from(MatchError::NotARank { rank: 2, ranks: 2 });
        assert!(matches!(hal, HalError::InvalidArgument(m) if m.contains("rank 2")));
        assert_eq!(m.in_flight(), 0);
    }
}
