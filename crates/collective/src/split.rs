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
}

impl<B: CollectiveBackend> Communicator<B> {
    /// This rank's handle of sub-communicator `id`, made of this communicator's ranks
    /// `ranks`: its rank `i` is rank `ranks[i]` here, on the same device, and its collectives
    /// involve only those ranks (HCCL's `HcclCreateSubCommConfig`). Every member calls it,
    /// with the same list and id; the parent keeps working.
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
        // Held across the backend's call, so the first member's list is the one recorded.
        let mut made = self.inner.splits.as_ref().map(|s| s.made.lock());
        let (check, splits) = match made.as_ref().and_then(|m| m.get(&id)) {
            Some(first) if first.ranks[..] != ranks[..] => {
                return Err(CollectiveError::SubCommMismatch {
                    id,
                    rank,
                    ranks: ranks.to_vec(),
                    first: first.ranks.clone(),
                })
            }
            Some(first) => (first.check.clone(), first.splits.clone()),
            None => (
                self.inner
                    .check
                    .as_ref()
                    .map(|_| Arc::new(Ledger::new(size)) as Arc<dyn MismatchCheck>),
                Arc::new(Splits::default()),
            ),
        };
        let comm = B::create_sub_comm(&self.inner.comm, ranks, id, sub_rank).map_err(|source| {
            CollectiveError::Backend {
                call: "create_sub_comm",
                source,
            }
        })?;
        if let Some(made) = made.as_mut() {
            made.entry(id).or_insert_with(|| Made {
                ranks: ranks.to_vec(),
                check: check.clone(),
                splits: splits.clone(),
            });
        }
        // A root-info parent shares nothing: its sub-communicator is unchecked here.
        let (check, splits) = match made {
            Some(_) => (check, Some(splits)),
            None => (None, None),
        };
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
