//! Mismatch detection: ranks that issue collectives in a different order, or with different
//! sizes, types, operations or roots, hang on real hardware. A [`MismatchCheck`] sees every
//! call of every rank before it is enqueued and refuses the one that does not match.
//!
//! [`Ledger`] is the check of a single-process communicator
//! ([`crate::Communicator::init_all`]): one ledger shared by the ranks, where rank `r`'s `k`-th
//! collective is compared with the `k`-th collective of the ranks that already issued it.
//! Sends and receives are matched per pair of ranks instead: the `k`-th send from `a` to `b`
//! with the `k`-th receive of `b` from `a`. The matching is stream-core's one
//! [`Matcher`] (the simulator matches the parts it runs with it too).
//!
//! Ranks in other processes (root-info communicators) need their signatures exchanged: the
//! crate's own exchange through the communicator ([`crate::CommOptions::exchange_signatures`],
//! module `exchange`), or a [`MismatchCheck`] the user passes in [`crate::CommOptions::check`].

use crate::error::{CollectiveError, Result};
use braid_stream_core::collective::{MatchError, Matcher, Mismatch, Peers, Signature};
use braid_stream_core::sync::Mutex;

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

    /// Admits `rank`'s batch of sends and receives `signatures` (one
    /// [`crate::Communicator::batch_send_recv`] or [`crate::Group`], in the order they are
    /// enqueued), running `launch` once to enqueue them all: refuse the whole batch if any
    /// part does not match, record every part if `launch` succeeds and none if it fails.
    ///
    /// The default runs `launch` unchecked, as sends and receives of a root-info
    /// communicator are not checked ([`crate::CommOptions::exchange_signatures`]).
    fn admit_batch(
        &self,
        rank: u32,
        signatures: &[Signature],
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let _ = (rank, signatures);
        launch()
    }
}

/// The shared record of a single-process communicator's calls: the one call matcher
/// ([`Matcher`]), held across each launch.
pub(crate) struct Ledger {
    matcher: Mutex<Matcher<()>>,
}

impl Ledger {
    /// A ledger for a communicator of `ranks` ranks.
    pub(crate) fn new(ranks: u32) -> Ledger {
        Ledger {
            matcher: Mutex::new(Matcher::new(ranks)),
        }
    }
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
        let mut matcher = self.matcher.lock();
        let ranks = matcher.ranks();
        let refused = |err| refusal(err, ranks);
        matcher.check(rank, signature, None).map_err(refused)?;
        launch()?;
        matcher
            .submit(rank, signature.clone(), None, ())
            .map_err(refused)?;
        Ok(())
    }

    /// Every part is checked before `launch` runs; all are recorded once it succeeded.
    fn admit_batch(
        &self,
        rank: u32,
        signatures: &[Signature],
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let mut matcher = self.matcher.lock();
        let ranks = matcher.ranks();
        let refused = |err| refusal(err, ranks);
        matcher
            .check_batch(rank, signatures, None)
            .map_err(refused)?;
        launch()?;
        for signature in signatures {
            matcher
                .submit(rank, signature.clone(), None, ())
                .map_err(refused)?;
        }
        Ok(())
    }
}

/// The matcher's refusal as this crate's error: a mismatch among all ranks names the call's
/// index, one of a send and its receive the pair.
fn refusal(err: MatchError, ranks: u32) -> CollectiveError {
    match err {
        MatchError::Mismatch(m) => {
            let Mismatch {
                rank,
                key,
                expected_rank,
                expected,
                found,
                difference,
            } = *m;
            match key.peers {
                Peers::All => CollectiveError::Mismatch {
                    rank,
                    call: key.number,
                    expected_rank,
                    expected,
                    found,
                    difference,
                },
                Peers::Pair { from, to } => CollectiveError::PeerMismatch {
                    rank,
                    peer: expected_rank,
                    sender: from,
                    receiver: to,
                    call: key.number,
                    expected,
                    found,
                    difference,
                },
            }
        }
        MatchError::NotARank { rank, .. } => CollectiveError::RankOutOfRange { rank, ranks },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::collective::{CollectiveOp, ReduceOp};
    use braid_stream_core::DType;

    fn sig(op: CollectiveOp) -> Signature {
        Signature {
            op,
            count: 4,
            dtype: DType::F32,
            v: None,
        }
    }

    /// Calls some rank issued and another has not yet.
    fn outstanding(ledger: &Ledger) -> usize {
        ledger.matcher.lock().in_flight()
    }

    #[test]
    fn calls_every_rank_issued_are_forgotten() {
        let ledger = Ledger::new(3);
        let ar = sig(CollectiveOp::AllReduce(ReduceOp::Sum));
        for _ in 0..100 {
            ledger.admit(0, &ar, &mut || Ok(())).unwrap();
        }
        assert_eq!(outstanding(&ledger), 100);
        for rank in [1, 2] {
            for _ in 0..100 {
                ledger.admit(rank, &ar, &mut || Ok(())).unwrap();
            }
        }
        assert_eq!(outstanding(&ledger), 0);
        let send = sig(CollectiveOp::Send { peer: 2 });
        let recv = sig(CollectiveOp::Recv { peer: 0 });
        ledger.admit(0, &send, &mut || Ok(())).unwrap();
        ledger.admit(0, &send, &mut || Ok(())).unwrap();
        assert_eq!(outstanding(&ledger), 2);
        ledger.admit(2, &recv, &mut || Ok(())).unwrap();
        ledger.admit(2, &recv, &mut || Ok(())).unwrap();
        assert_eq!(outstanding(&ledger), 0);
    }

    #[test]
    fn a_refused_launch_is_not_recorded() {
        let ledger = Ledger::new(2);
        let ar = sig(CollectiveOp::AllReduce(ReduceOp::Sum));
        let failing = || Err(CollectiveError::ZeroCount { op: ar.op });
        assert!(ledger.admit(0, &ar, &mut { failing }).is_err());
        assert_eq!(outstanding(&ledger), 0);
        let send = sig(CollectiveOp::Send { peer: 1 });
        assert!(ledger.admit(0, &send, &mut { failing }).is_err());
        assert_eq!(outstanding(&ledger), 0);
    }
}
