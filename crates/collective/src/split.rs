//! Sub-communicators ([`Communicator::split`], HCCL's `HcclCreateSubCommConfig`): some of a
//! communicator's ranks form a communicator of their own, whose collectives involve only them.

use crate::communicator::{Communicator, RankInner};
use crate::error::{CollectiveError, Result};
use crate::ledger::{Ledger, MismatchCheck};
use braid_stream_core::hal::CollectiveBackend;
use braid_stream_core::sync::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// The sub-communicators of a single-process communicator, by id: the parent ranks each was
/// made of and the ledger its members share.
#[derive(Default)]
pub(crate) struct Splits {
    made: Mutex<HashMap<u64, Made>>,
}

/// One sub-communicator, as its first member made it.
struct Made {
    ranks: Vec<u32>,
    check: Option<Arc<dyn MismatchCheck>>,
    splits: Arc<Splits>,
    /// Members whose backend call succeeded.
    joined: u32,
    /// Members whose backend call is in progress.
    pending: u32,
}

/// What a member's sub-communicator shares with the other members: the ledger (when the
/// parent checks mismatches) and its own sub-communicators.
type Shared = (Option<Arc<dyn MismatchCheck>>, Arc<Splits>);

impl Splits {
    /// Rank `rank`'s claim on sub-communicator `id` of `ranks`: the first member records its
    /// list, a later member whose list differs is refused.
    fn claim(&self, id: u64, rank: u32, ranks: &[u32], checked: bool) -> Result<Shared> {
        let mut made = self.made.lock();
        let first = made.entry(id).or_insert_with(|| Made {
            ranks: ranks.to_vec(),
            check: checked
                .then(|| Arc::new(Ledger::new(ranks.len() as u32)) as Arc<dyn MismatchCheck>),
            splits: Arc::new(Splits::default()),
            joined: 0,
            pending: 0,
        });
        if first.ranks[..] != ranks[..] {
            return Err(CollectiveError::SubCommMismatch {
                id,
                rank,
                ranks: ranks.to_vec(),
                first: first.ranks.clone(),
            });
        }
        first.pending += 1;
        Ok((first.check.clone(), first.splits.clone()))
    }

    /// Ends a member's backend call: counts it when it succeeded; a claim that no member
    /// made good and none is still making is dropped, so a failed first call does not fix
    /// the list.
    fn settle(&self, id: u64, joined: bool) {
        let mut made = self.made.lock();
        if let Some(entry) = made.get_mut(&id) {
            entry.pending -= 1;
            entry.joined += u32::from(joined);
            if entry.joined == 0 && entry.pending == 0 {
                made.remove(&id);
            }
        }
    }
}

impl<B: CollectiveBackend> Communicator<B> {
    /// This rank's handle of sub-communicator `id`, made of this communicator's ranks
    /// `ranks`: its rank `i` is rank `ranks[i]` here, on the same device, and its collectives
    /// involve only those ranks (HCCL's `HcclCreateSubCommConfig`). Every member calls it,
    /// with the same list and id, from its own thread if need be (HCCL's call may wait for
    /// the other members; no lock of this crate is held across it); the parent keeps working.
    ///
    /// Refused before the backend is asked: an empty list
    /// ([`CollectiveError::EmptySubComm`]), a rank out of range
    /// ([`CollectiveError::RankOutOfRange`]) or listed twice
    /// ([`CollectiveError::DuplicateRank`]), a caller that is not in the list
    /// ([`CollectiveError::NotAMember`]: non-members do not call it) and, on a communicator
    /// made by [`Communicator::init_all`], a member whose list differs from the first
    /// member's ([`CollectiveError::SubCommMismatch`]; the simulator refuses that for any
    /// communicator). The sub-communicator of an [`Communicator::init_all`] communicator
    /// checks mismatches as its parent does, with a ledger of its own; one of a root-info
    /// communicator is not checked by this crate. A backend without sub-communicators
    /// answers [`CollectiveError::Backend`] with an unsupported call.
    ///
    /// ```
    /// use braid_backend_sim::{NodeConfig, SimBackend, SimNode};
    /// use braid_collective::Communicator;
    /// use braid_stream_core::Device;
    ///
    /// let node = SimNode::new(NodeConfig::new(4));
    /// let devices: Vec<Device<SimBackend>> =
    ///     node.devices().into_iter().map(|d| Device::new(d).unwrap()).collect();
    /// let comms = Communicator::init_all(&devices).unwrap();
    /// let odd: Vec<_> = [1, 3].iter().map(|&r| comms[r].split(&[1, 3], 7).unwrap()).collect();
    /// assert_eq!((odd[1].rank(), odd[1].ranks()), (1, 2));
    /// assert!(comms[0].split(&[1, 3], 7).is_err());
    /// ```
    pub fn split(&self, ranks: &[u32], id: u64) -> Result<Communicator<B>> {
        let rank = self.rank();
        if ranks.is_empty() {
            return Err(CollectiveError::EmptySubComm { id });
        }
        for (i, &r) in ranks.iter().enumerate() {
            if r >= self.ranks() {
                return Err(CollectiveError::RankOutOfRange {
                    rank: r,
                    ranks: self.ranks(),
                });
            }
            if ranks[..i].contains(&r) {
                return Err(CollectiveError::DuplicateRank { id, rank: r });
            }
        }
        let sub_rank =
            ranks
                .iter()
                .position(|&r| r == rank)
                .ok_or_else(|| CollectiveError::NotAMember {
                    id,
                    rank,
                    ranks: ranks.to_vec(),
                })? as u32;
        let size = ranks.len() as u32;
        // The first member claims the id with its list; the lock is not held across the
        // backend's call, which may wait for the other members (HCCL).
        let claimed = match &self.inner.splits {
            Some(splits) => Some(splits.claim(id, rank, ranks, self.inner.check.is_some())?),
            None => None,
        };
        let made = B::create_sub_comm(&self.inner.comm, ranks, id, sub_rank).map_err(|source| {
            CollectiveError::Backend {
                call: "create_sub_comm",
                source,
            }
        });
        let (check, splits) = match (&self.inner.splits, claimed) {
            (Some(parent), Some(claim)) => {
                parent.settle(id, made.is_ok());
                (claim.0, Some(claim.1))
            }
            // A root-info parent shares nothing: its sub-communicator is unchecked here.
            _ => (None, None),
        };
        let comm = made?;
        tracing::debug!(
            backend = B::NAME,
            rank,
            sub_rank,
            size,
            id,
            "joined a sub-communicator"
        );
        Ok(Communicator {
            inner: Arc::new(RankInner {
                device: self.inner.device.clone(),
                rank: sub_rank,
                ranks: size,
                comm: Arc::new(comm),
                check,
                group: Mutex::default(),
                splits,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{CollectiveError, Communicator, ReduceOp};
    use braid_backend_sim::{NodeConfig, SimBackend, SimNode};
    use braid_stream_core::hal::noop::NoopBackend;
    use braid_stream_core::hal::HalError;
    use braid_stream_core::{DType, Device};
    use std::sync::Barrier;

    #[test]
    fn a_backend_without_sub_communicators_is_unsupported_and_fixes_no_list() {
        let devices: Vec<Device<NoopBackend>> = (0..2)
            .map(|i| Device::new(braid_stream_core::hal::noop::NoopDevice::new(i)).unwrap())
            .collect();
        let comms = Communicator::init_all(&devices).unwrap();
        for list in [&[0u32, 1][..], &[1, 0]] {
            match comms[0].split(list, 3) {
                Err(CollectiveError::Backend {
                    call: "create_sub_comm",
                    source: HalError::Unsupported(_),
                }) => {}
                other => panic!("{list:?}: expected unsupported, got {other:?}"),
            }
        }
    }

    #[test]
    fn members_split_and_reduce_from_their_own_threads() {
        let node = SimNode::new(NodeConfig::new(4));
        let devices: Vec<Device<SimBackend>> = node
            .devices()
            .into_iter()
            .map(|d| Device::new(d).unwrap())
            .collect();
        let comms = Communicator::init_all(&devices).unwrap();
        let start = Barrier::new(3);
        let sums: Vec<Vec<f32>> = std::thread::scope(|s| {
            let handles: Vec<_> = [0usize, 2, 3]
                .into_iter()
                .map(|r| {
                    let (comm, start) = (comms[r].clone(), &start);
                    s.spawn(move || {
                        start.wait();
                        let sub = comm.split(&[0, 2, 3], 11).unwrap();
                        let stream = comm.device().create_stream(0).unwrap();
                        let x = comm.device().alloc(8).unwrap();
                        stream
                            .copy_h2d(x.slice(), DType::F32.encode(&[r as f32; 2]))
                            .unwrap();
                        sub.all_reduce(&stream, &x, &x, DType::F32, ReduceOp::Sum)
                            .unwrap();
                        DType::F32.decode(&stream.copy_d2h(x.slice()).unwrap().wait().unwrap())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(sums, vec![vec![5.0; 2]; 3]);
    }
}
