//! [`Communicator`]: one rank's handle on a communicator, and how communicators are made
//! (all ranks in this process, or one rank joining through a root info).

use crate::error::{CollectiveError, Result};
use crate::exchange::SignatureExchange;
use crate::group::GroupSlot;
use crate::ledger::{Ledger, MismatchCheck};
use crate::split::Splits;
use braid_stream_core::collective::RootInfo;
use braid_stream_core::hal::{CollectiveBackend, HalError};
use braid_stream_core::sync::Mutex;
use braid_stream_core::Device;
use std::fmt;
use std::sync::Arc;

/// How a communicator is made.
#[derive(Clone)]
pub struct CommOptions {
    /// Compare the ranks' calls of a single-process communicator and refuse a mismatch with a
    /// typed error instead of hanging (default `true`). Backends that always check (the
    /// simulator, [`CollectiveBackend::ALWAYS_CHECKS_MISMATCH`]) ignore `false`.
    pub check_mismatch: bool,
    /// A check of your own for a root-info communicator, whose other ranks live in other
    /// processes (for one that works on any backend, see
    /// [`CommOptions::exchange_signatures`]). `None` (the default): such a communicator is not
    /// checked unless [`CommOptions::exchange_signatures`] is set.
    /// Ignored by [`Communicator::init_all`], whose ranks share a ledger.
    pub check: Option<Arc<dyn MismatchCheck>>,
    /// Check a root-info communicator's collectives by exchanging their signatures through
    /// the communicator itself (default `false`; see [`CommOptions::exchange_signatures`]).
    /// With a [`CommOptions::check`] as well, the exchange runs first and the given check
    /// admits the calls the exchange let through. Ignored by [`Communicator::init_all`].
    pub exchange_signatures: bool,
}

impl CommOptions {
    /// The options of a root-info communicator whose ranks check every collective against
    /// each other on any backend, across processes and nodes: before each collective, every
    /// rank all-gathers the call's [`crate::Signature`] (32 bytes: operation, reduction, root
    /// or peer, count, data type) through the communicator on a side stream of its device,
    /// waits for it on the host and compares. When a rank's differs from rank 0's, the call
    /// is refused on every rank with the same [`CollectiveError::Mismatch`], naming that
    /// rank, the call's index and the difference, and nothing is enqueued: the ranks stay in
    /// step and the next matching call works.
    ///
    /// The cost is one small all-gather and a host wait per collective, which serializes the
    /// host with every collective: a debugging aid, not for production runs. Sends and
    /// receives are not checked (only two ranks take part in them, so no all-gather can run).
    /// Every rank must set it alike: a rank without it would not join the exchanges.
    ///
    /// On the simulator the ranks must live in separate processes: a root-info communicator
    /// whose ranks are all in one process runs in the node's engine, which refuses (as a
    /// typed error) a host wait on a collective another thread has not issued yet.
    pub fn exchange_signatures() -> CommOptions {
        CommOptions {
            exchange_signatures: true,
            ..CommOptions::default()
        }
    }
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions {
            check_mismatch: true,
            check: None,
            exchange_signatures: false,
        }
    }
}

impl fmt::Debug for CommOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommOptions")
            .field("check_mismatch", &self.check_mismatch)
            .field("check", &self.check.as_ref().map(|_| "dyn MismatchCheck"))
            .field("exchange_signatures", &self.exchange_signatures)
            .finish()
    }
}

/// One rank of a communicator: its device, its rank among `ranks`, the backend's communicator
/// and the mismatch check its calls pass. Cheap to clone (clones are the same rank), and usable
/// from any thread.
pub struct Communicator<B: CollectiveBackend> {
    pub(crate) inner: Arc<RankInner<B>>,
}

pub(crate) struct RankInner<B: CollectiveBackend> {
    pub(crate) device: Device<B>,
    pub(crate) rank: u32,
    pub(crate) ranks: u32,
    pub(crate) comm: Arc<B::Comm>,
    pub(crate) check: Option<Arc<dyn MismatchCheck>>,
    /// Whether a group is open on this rank, or was dropped open ([`crate::Group`]).
    pub(crate) group: Mutex<GroupSlot>,
    /// The sub-communicators made so far, shared by the ranks of a single-process
    /// communicator (`None` for a root-info one, whose ranks share nothing).
    pub(crate) splits: Option<Arc<Splits>>,
}

impl<B: CollectiveBackend> Clone for Communicator<B> {
    fn clone(&self) -> Self {
        Communicator {
            inner: self.inner.clone(),
        }
    }
}

impl<B: CollectiveBackend> fmt::Debug for Communicator<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Communicator<{}>(rank {} of {} on {})",
            B::NAME,
            self.inner.rank,
            self.inner.ranks,
            self.inner.device.id()
        )
    }
}

impl<B: CollectiveBackend> Communicator<B> {
    /// A communicator over `devices`, all in this process, rank `i` on `devices[i]`
    /// (`HcclCommInitAll`), with the default options: mismatches are checked.
    pub fn init_all(devices: &[Device<B>]) -> Result<Vec<Communicator<B>>> {
        Communicator::init_all_with(devices, CommOptions::default())
    }

    /// [`Communicator::init_all`] with `options`. An empty list or a device given twice is
    /// refused before the backend is asked.
    pub fn init_all_with(
        devices: &[Device<B>],
        options: CommOptions,
    ) -> Result<Vec<Communicator<B>>> {
        if devices.is_empty() {
            return Err(CollectiveError::NoDevices);
        }
        for (second, device) in devices.iter().enumerate() {
            if let Some(first) = devices[..second].iter().position(|d| d.same_as(device)) {
                return Err(CollectiveError::DuplicateDevice {
                    device: device.id(),
                    first,
                    second,
                });
            }
        }
        // Distinct devices of one process: far fewer than 2^32.
        let ranks = devices.len() as u32;
        let hal: Vec<&B::Device> = devices.iter().map(Device::hal).collect();
        let comms = B::init_all(&hal).map_err(|source| CollectiveError::Backend {
            call: "init_all",
            source,
        })?;
        if comms.len() != devices.len() {
            return Err(CollectiveError::Backend {
                call: "init_all",
                source: HalError::InvalidArgument(format!(
                    "the backend made {} communicator(s) for {} device(s)",
                    comms.len(),
                    devices.len()
                )),
            });
        }
        let check = (options.check_mismatch || B::ALWAYS_CHECKS_MISMATCH)
            .then(|| Arc::new(Ledger::new(ranks)) as Arc<dyn MismatchCheck>);
        let splits = Arc::new(Splits::default());
        tracing::debug!(
            backend = B::NAME,
            ranks,
            checked = check.is_some(),
            "communicator made"
        );
        Ok(devices
            .iter()
            .zip(comms)
            .zip(0..)
            .map(|((device, comm), rank)| Communicator {
                inner: Arc::new(RankInner {
                    device: device.clone(),
                    rank,
                    ranks,
                    comm: Arc::new(comm),
                    check: check.clone(),
                    group: Mutex::default(),
                    splits: Some(splits.clone()),
                }),
            })
            .collect())
    }

    /// A fresh root info for a communicator whose rank 0 runs on `device`
    /// (`HcclGetRootInfo`): send its bytes ([`RootInfo::as_bytes`]) to every other rank.
    pub fn root_info(device: &Device<B>) -> Result<RootInfo> {
        B::root_info(device.hal()).map_err(|source| CollectiveError::Backend {
            call: "root_info",
            source,
        })
    }

    /// Joins the communicator of `ranks` ranks that `info` describes, as rank `rank` on
    /// `device` (`HcclCommInitRootInfo`); returns once every rank has joined. Its calls are
    /// checked by exchanging signatures when `options.exchange_signatures` is set (see
    /// [`CommOptions::exchange_signatures`]; every rank must set it alike) and by
    /// `options.check` when given (see [`CommOptions::check`]).
    pub fn init_root_info(
        device: &Device<B>,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
        options: CommOptions,
    ) -> Result<Communicator<B>> {
        if rank >= ranks {
            return Err(CollectiveError::RankOutOfRange { rank, ranks });
        }
        let comm = B::init_root_info(device.hal(), ranks, rank, info).map_err(|source| {
            if source.is_invalid_argument() {
                CollectiveError::BadRootInfo { rank, source }
            } else {
                CollectiveError::Backend {
                    call: "init_root_info",
                    source,
                }
            }
        })?;
        let comm = Arc::new(comm);
        let check = if options.exchange_signatures {
            let exchange = SignatureExchange::new(device, rank, ranks, comm.clone())?;
            Some(Arc::new(exchange.then(options.check)) as Arc<dyn MismatchCheck>)
        } else {
            options.check
        };
        tracing::debug!(
            backend = B::NAME,
            ranks,
            rank,
            exchange_signatures = options.exchange_signatures,
            "joined a communicator"
        );
        Ok(Communicator {
            inner: Arc::new(RankInner {
                device: device.clone(),
                rank,
                ranks,
                comm,
                check,
                group: Mutex::default(),
                splits: None,
            }),
        })
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// Ranks of the communicator.
    pub fn ranks(&self) -> u32 {
        self.inner.ranks
    }

    /// This rank's device.
    pub fn device(&self) -> &Device<B> {
        &self.inner.device
    }

    /// Whether this rank's calls pass a mismatch check.
    pub fn checks_mismatch(&self) -> bool {
        self.inner.check.is_some()
    }

    /// The backend's communicator, for backend-specific calls (on ACL the `HcclComm`).
    pub fn native(&self) -> &B::Comm {
        &self.inner.comm
    }
}
