//! [`SimComm`]: a communicator of the simulated node, HCCL-style.

use crate::collective::cost::LinkParams;
use crate::collective::remote::RemoteGroup;
use crate::device::{checked, lock, same_node, Shared};
use crate::fault::CallKind;
use crate::stream::SimStream;
use crate::SimDevice;
use braid_stream_core::collective::{CollectiveCall, RootInfo};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::HalError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One rank's handle of a communicator: a group of devices of one [`crate::SimNode`] that run
/// collectives together ([`SimStream::collective`]). Cloning gives another handle of the same
/// rank; handles may move between threads.
///
/// Every rank submits its part of each collective separately, in the same order on every
/// rank (call `k` of each rank belongs together; sends and receives pair per peer). A part
/// that does not match the parts already in is refused when it arrives, naming the rank, the
/// call and the difference. A rank's stream holds back the work submitted after its part
/// until every rank's part is in; a host synchronization that would wait on such work waits
/// for the ranks driven by other host threads (up to
/// [`SimConfig::collective_timeout`](crate::SimConfig#structfield.collective_timeout)), then
/// fails with an error naming the ranks that have not issued the call, instead of hanging
/// (at once when the calling thread drives those ranks itself: see
/// [`SimStream::collective`]).
///
/// ```
/// use braid_backend_sim::{NodeConfig, SimComm, SimNode};
/// use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
/// use braid_stream_core::dtype::DType;
/// use braid_stream_core::hal::{Device as _, Stream as _};
///
/// let node = SimNode::new(NodeConfig::new(2));
/// let devices = node.devices();
/// let comms = SimComm::init_all(&[&devices[0], &devices[1]]).unwrap();
/// let mut results = Vec::new();
/// for (dev, comm) in devices.iter().zip(&comms) {
///     let s = dev.create_stream(0).unwrap();
///     let x = dev.alloc(8).unwrap();
///     let bytes = DType::F16.encode(&[1.0, 2.0, 3.0, 4.0]);
///     // SAFETY: `bytes` outlives the copy (the stream is synchronized below).
///     unsafe { s.memcpy_h2d(x, bytes.as_ptr(), 8).unwrap() };
///     let call = CollectiveCall {
///         op: CollectiveOp::AllReduce(ReduceOp::Sum),
///         send: x,
///         recv: x,
///         count: 4,
///         dtype: DType::F16,
///     };
///     s.collective(comm, &call, "allreduce(sum)").unwrap();
///     results.push((s, x, bytes));
/// }
/// for (s, x, _bytes) in results {
///     let mut out = [0u8; 8];
///     // SAFETY: `out` is read only after the synchronize.
///     unsafe { s.memcpy_d2h(out.as_mut_ptr(), x, 8).unwrap() };
///     s.synchronize().unwrap();
///     assert_eq!(DType::F16.decode(&out), vec![2.0, 4.0, 6.0, 8.0]);
/// }
/// ```
#[derive(Clone, Debug)]
pub struct SimComm {
    shared: Shared,
    kind: Kind,
    rank: u32,
    ranks: u32,
}

/// Where a communicator's collectives run.
#[derive(Clone, Debug)]
enum Kind {
    /// Every rank is a device of one node: the node's engine matches and runs them.
    Node(usize),
    /// The ranks are in several processes (or nodes): parts are exchanged over the root
    /// info's transport; `calls` counts this rank's calls (shared by its handles).
    Remote {
        group: Arc<RemoteGroup>,
        calls: Arc<Mutex<u64>>,
    },
}

/// How long joining a root info and each exchange of a communicator spanning processes
/// wait for the other ranks: HCCL's default `HCCL_CONNECT_TIMEOUT` (120 s).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(120);

impl SimComm {
    /// A communicator of `devices` (rank `r` is `devices[r]`), all of one node and distinct;
    /// one handle per rank (HCCL's `HcclCommInitAll`).
    pub fn init_all(devices: &[&SimDevice]) -> Result<Vec<SimComm>, HalError> {
        let first = devices.first().ok_or_else(|| {
            HalError::InvalidArgument("a communicator needs at least one device".to_string())
        })?;
        for d in devices {
            same_node(&first.shared, &d.shared)?;
        }
        let indices: Vec<u32> = devices.iter().map(|d| d.shared.device).collect();
        let comm = lock(&first.shared).comm_init_all(&indices)?;
        let ranks = devices.len() as u32;
        Ok(devices
            .iter()
            .enumerate()
            .map(|(rank, d)| SimComm {
                shared: d.shared.clone(),
                kind: Kind::Node(comm),
                rank: rank as u32,
                ranks,
            })
            .collect())
    }

    /// A root info for a new communicator (HCCL's `HcclGetRootInfo`), made in the process of
    /// the rank 0 that will join it: the simulator's transport between processes
    /// ([`RemoteGroup::root_info`], a listener on `127.0.0.1`). Its 4,108 bytes go to the other
    /// ranks by any means (for example `braid_collective`'s `TcpRootInfoTransport`).
    pub fn root_info(device: &SimDevice) -> Result<RootInfo, HalError> {
        lock(&device.shared).host_call("comm_root_info");
        RemoteGroup::root_info()
    }

    /// Rank `rank` of `ranks` joins the communicator of `info` on `device` (HCCL's
    /// `HcclCommInitRootInfo`): blocks until every rank has joined (at most
    /// [`JOIN_TIMEOUT`]; rank 0 joins in the process that made `info`), so ranks of one
    /// process join from their own threads.
    ///
    /// When every rank turns out to be a device of `device`'s node, the communicator is the
    /// node's own (its collectives match and run in the node's engine, as with
    /// [`SimComm::init_all`]); otherwise each collective exchanges the ranks' parts over the
    /// transport (see [`SimStream::collective`] for what that supports). Refused: a root info
    /// not made by [`SimComm::root_info`], a rank out of range or taken, a rank count that
    /// differs from rank 0's, two ranks on one device; ranks that do not join in time are an
    /// HCCL timeout naming them.
    pub fn init_root_info(
        device: &SimDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<SimComm, HalError> {
        let group = RemoteGroup::join(info, ranks, rank, JOIN_TIMEOUT)?;
        let node = lock(&device.shared).node_id();
        let mut mine = std::process::id().to_le_bytes().to_vec();
        mine.extend(node.to_le_bytes());
        let everyone = group.exchange(0, mine.clone())?;
        let one_node = everyone.iter().all(|theirs| theirs[..] == mine[..]);
        let kind = if one_node {
            let comm = lock(&device.shared).comm_join_local(group.id(), ranks, rank)?;
            Kind::Node(comm)
        } else {
            Kind::Remote {
                group: Arc::new(group),
                calls: Arc::new(Mutex::new(1)),
            }
        };
        Ok(SimComm {
            shared: device.shared.clone(),
            kind,
            rank,
            ranks,
        })
    }

    /// This handle's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// Whether the communicator's ranks are all devices of one node (otherwise its parts go
    /// over the transport between processes).
    pub fn is_node_local(&self) -> bool {
        matches!(self.kind, Kind::Node(_))
    }

    /// The cost model's numbers for this communicator's collectives on `dtype` elements: the
    /// links between its devices and the reduction rate, for [`crate::collective_bound`].
    pub fn link_params(&self, dtype: DType) -> LinkParams {
        let engine = lock(&self.shared);
        match &self.kind {
            Kind::Node(comm) => engine.comm_link_params(*comm, dtype),
            Kind::Remote { .. } => engine.network_link_params(dtype),
        }
    }

    /// Submits this rank's part `call` on `stream` (see [`SimStream::collective`]).
    pub(crate) fn submit(
        &self,
        stream: &SimStream,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        same_node(&self.shared, &stream.shared)?;
        // The fault plan of the stream's device decides first: a failed part does nothing.
        let mut engine = checked(&stream.shared, CallKind::Collective)?;
        match &self.kind {
            Kind::Node(comm) => engine.collective(stream.global(), *comm, self.rank, call, label),
            Kind::Remote { group, calls } => {
                if stream.shared.device != self.shared.device {
                    return Err(HalError::InvalidArgument(format!(
                        "rank {}'s part submitted on a stream of another device than the rank's",
                        self.rank
                    )));
                }
                drop(engine);
                // One call at a time per rank, in the order the rank issues them.
                let mut next = calls.lock().unwrap_or_else(|e| e.into_inner());
                let part = lock(&stream.shared).remote_prepare(
                    stream.global(),
                    self.rank,
                    self.ranks,
                    call,
                    label,
                )?;
                let blobs = group.exchange(*next, part.blob.clone())?;
                *next += 1;
                lock(&stream.shared).remote_finish(part, blobs)
            }
        }
    }
}
