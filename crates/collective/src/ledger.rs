//! Mismatch detection: ranks that issue collectives in a different order, or with different
//! sizes, types, operations or roots, hang on real hardware. A [`MismatchCheck`] sees every
//! call of every rank before it is enqueued and refuses the one that does not match.
//!
//! [`Ledger`] is the check of a single-process communicator
//! ([`crate::Communicator::init_all`]): one ledger shared by the ranks, where rank `r`'s `k`-th
//! collective is compared with the `k`-th collective of the ranks that already issued it.
//! Sends and receives are matched per pair of ranks instead: the `k`-th send from `a` to `b`
//! with the `k`-th receive of `b` from `a`.
//!
//! Ranks in other processes (root-info communicators) need their signatures exchanged: the
//! crate's own exchange through the communicator ([`crate::CommOptions::exchange_signatures`],
//! module `exchange`), or a [`MismatchCheck`] the user passes in [`crate::CommOptions::check`].

use crate::error::{CollectiveError, Result};
use braid_stream_core::collective::{CollectiveOp, Signature};
use braid_stream_core::sync::Mutex;
use std::collections::{HashMap, VecDeque};

/// Checks each rank's next call against the other ranks' before it is enqueued.
///
/// Implementations compare `signature` with what the other ranks issued at the same place,
/// refuse a mismatch with [`CollectiveError::Mismatch`] (or
/// [`CollectiveError::PeerMismatch`] for sends and receives) without calling `launch`, and
/// otherwise call `launch` once and record the call only if it succeeds, so a refused or
/// failed call leaves the sequence as it was and the rank can issue the right call next.
pub trait MismatchCheck: Send + Sync {
    /// Admits `rank`'s next call, of `signature`, running `launch` to enqueue it.
    fn admit(
        &self,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()>;
}

/// The shared record of a single-process communicator's calls.
pub(crate) struct Ledger {
    ranks: u32,
    state: Mutex<LedgerState>,
}

struct LedgerState {
    /// Index of each rank's next collective.
    next: Vec<u64>,
    /// Index of `pending`'s front.
    base: u64,
    /// Collectives some rank issued and not every rank has yet, from index `base` on.
    pending: VecDeque<Issued>,
    /// Sends and receives per (sender, receiver): at most `ranks²` pairs, each holding only
    /// the posts its other side has not matched yet.
    pairs: HashMap<(u32, u32), Pair>,
}

/// A collective as the first rank issued it.
struct Issued {
    signature: Signature,
    by: u32,
    /// Ranks that issued it so far.
    seen: u32,
}

/// The transfers from one rank to another.
#[derive(Default)]
struct Pair {
    sends: u64,
    receives: u64,
    /// Posts of the side that is ahead, not yet matched by the other side.
    unmatched: VecDeque<Signature>,
}

impl Ledger {
    /// A ledger for a communicator of `ranks` ranks.
    pub(crate) fn new(ranks: u32) -> Ledger {
        Ledger {
            ranks,
            state: Mutex::new(LedgerState {
                next: vec![0; ranks as usize],
                base: 0,
                pending: VecDeque::new(),
                pairs: HashMap::new(),
            }),
        }
    }

    fn admit_collective(
        &self,
        st: &mut LedgerState,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let call = st.next[rank as usize];
        // Every rank passed the calls before `base`, so `call >= base`.
        let offset = (call - st.base) as usize;
        if let Some(issued) = st.pending.get(offset) {
            if issued.signature != *signature {
                return Err(CollectiveError::Mismatch {
                    rank,
                    call,
                    expected_rank: issued.by,
                    expected: issued.signature,
                    found: *signature,
                    difference: issued.signature.difference(signature),
                });
            }
            launch()?;
            let issued = &mut st.pending[offset];
            issued.seen += 1;
        } else {
            launch()?;
            st.pending.push_back(Issued {
                signature: *signature,
                by: rank,
                seen: 1,
            });
        }
        st.next[rank as usize] += 1;
        while st.pending.front().is_some_and(|i| i.seen == self.ranks) {
            st.pending.pop_front();
            st.base += 1;
        }
        Ok(())
    }

    /// A send (`sending`) or receive of the transfers from `sender` to `receiver`.
    fn admit_transfer(
        st: &mut LedgerState,
        (sender, receiver, sending): (u32, u32, bool),
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let pair = st.pairs.entry((sender, receiver)).or_default();
        let (mine, theirs) = if sending {
            (pair.sends, pair.receives)
        } else {
            (pair.receives, pair.sends)
        };
        let peer = if sending { receiver } else { sender };
        if theirs > mine {
            let expected = pair.unmatched[0];
            if !signature.pairs_with(rank, &expected, peer) {
                return Err(CollectiveError::PeerMismatch {
                    rank,
                    peer,
                    sender,
                    receiver,
                    call: mine,
                    expected,
                    found: *signature,
                    difference: pair_difference(&expected, signature),
                });
            }
            launch()?;
            pair.unmatched.pop_front();
        } else {
            launch()?;
            pair.unmatched.push_back(*signature);
        }
        if sending {
            pair.sends += 1;
        } else {
            pair.receives += 1;
        }
        Ok(())
    }
}

/// How two transfers of one pair differ: their peers agree, so only counts and data types can.
fn pair_difference(expected: &Signature, found: &Signature) -> String {
    let mut parts = Vec::new();
    if expected.count != found.count {
        parts.push(format!("count {} vs {}", expected.count, found.count));
    }
    if expected.dtype != found.dtype {
        parts.push(format!("data type {} vs {}", expected.dtype, found.dtype));
    }
    parts.join(", ")
}

impl MismatchCheck for Ledger {
    /// Held across `launch`, so every rank's calls enter the ledger in the order they are
    /// enqueued and a failed launch leaves no trace.
    fn admit(
        &self,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let mut st = self.state.lock();
        match signature.op {
            CollectiveOp::Send { peer } => {
                Ledger::admit_transfer(&mut st, (rank, peer, true), rank, signature, launch)
            }
            CollectiveOp::Recv { peer } => {
                Ledger::admit_transfer(&mut st, (peer, rank, false), rank, signature, launch)
            }
            _ => self.admit_collective(&mut st, rank, signature, launch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::collective::ReduceOp;
    use braid_stream_core::DType;

    fn sig(op: CollectiveOp) -> Signature {
        Signature {
            op,
            count: 4,
            dtype: DType::F32,
        }
    }

    fn outstanding(ledger: &Ledger) -> (usize, usize) {
        let st = ledger.state.lock();
        let unmatched = st.pairs.values().map(|p| p.unmatched.len()).sum();
        (st.pending.len(), unmatched)
    }

    #[test]
    fn calls_every_rank_issued_are_forgotten() {
        let ledger = Ledger::new(3);
        let ar = sig(CollectiveOp::AllReduce(ReduceOp::Sum));
        for _ in 0..100 {
            ledger.admit(0, &ar, &mut || Ok(())).unwrap();
        }
        assert_eq!(outstanding(&ledger), (100, 0));
        for rank in [1, 2] {
            for _ in 0..100 {
                ledger.admit(rank, &ar, &mut || Ok(())).unwrap();
            }
        }
        assert_eq!(outstanding(&ledger), (0, 0));
        let send = sig(CollectiveOp::Send { peer: 2 });
        let recv = sig(CollectiveOp::Recv { peer: 0 });
        ledger.admit(0, &send, &mut || Ok(())).unwrap();
        ledger.admit(0, &send, &mut || Ok(())).unwrap();
        assert_eq!(outstanding(&ledger), (0, 2));
        ledger.admit(2, &recv, &mut || Ok(())).unwrap();
        ledger.admit(2, &recv, &mut || Ok(())).unwrap();
        assert_eq!(outstanding(&ledger), (0, 0));
    }

    #[test]
    fn a_refused_launch_is_not_recorded() {
        let ledger = Ledger::new(2);
        let ar = sig(CollectiveOp::AllReduce(ReduceOp::Sum));
        let failing = || Err(CollectiveError::ZeroCount { op: ar.op });
        assert!(ledger.admit(0, &ar, &mut { failing }).is_err());
        assert_eq!(outstanding(&ledger), (0, 0));
        let send = sig(CollectiveOp::Send { peer: 1 });
        assert!(ledger.admit(0, &send, &mut { failing }).is_err());
        assert_eq!(outstanding(&ledger), (0, 0));
    }
}
