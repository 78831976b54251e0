//! [`SimComm`]: a communicator of the simulated node, HCCL-style.

use crate::collective::cost::LinkParams;
use crate::device::{lock, same_node, Shared};
use crate::stream::SimStream;
use crate::SimDevice;
use braid_stream_core::collective::{CollectiveCall, RootInfo};
use braid_stream_core::dtype::DType;
use braid_stream_core::hal::HalError;

/// One rank's handle of a communicator: a group of devices of one [`crate::SimNode`] that run
/// collectives together ([`SimStream::collective`]). Cloning gives another handle of the same
/// rank; handles may move between threads.
///
/// Every rank submits its part of each collective separately, in the same order on every
/// rank (call `k` of each rank belongs together; sends and receives pair per peer). A part
/// that does not match the parts already in is refused when it arrives, naming the rank, the
/// call and the difference. A rank's stream holds back the work submitted after its part
/// until every rank's part is in; a host synchronization that would wait on such work fails
/// with an error naming the ranks that have not issued the call, instead of hanging.
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
    comm: usize,
    rank: u32,
    ranks: u32,
}

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
                comm,
                rank: rank as u32,
                ranks,
            })
            .collect())
    }

    /// A root info for a new communicator (HCCL's `HcclGetRootInfo`, called on the root
    /// rank's device): it names a rendezvous of `device`'s node, which ranks on devices of
    /// that node join with [`SimComm::init_root_info`].
    pub fn root_info(device: &SimDevice) -> Result<RootInfo, HalError> {
        Ok(lock(&device.shared).comm_root_info())
    }

    /// Rank `rank` of `ranks` joins the communicator of `info` on `device` (HCCL's
    /// `HcclCommInitRootInfo`). Ranks join in any order without waiting for each other;
    /// a collective runs once every rank has joined and submitted its part. Refused: a root
    /// info of another node, a rank out of range or taken, a device holding another rank,
    /// a different rank count than the first joiner's.
    pub fn init_root_info(
        device: &SimDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<SimComm, HalError> {
        let comm = lock(&device.shared).comm_join(info, ranks, rank)?;
        Ok(SimComm {
            shared: device.shared.clone(),
            comm,
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

    /// The cost model's numbers for this communicator's collectives on `dtype` elements: the
    /// links between its devices and the reduction rate, for
    /// [`crate::collective_bound`].
    pub fn link_params(&self, dtype: DType) -> LinkParams {
        lock(&self.shared).comm_link_params(self.comm, dtype)
    }

    /// Submits this rank's part `call` on `stream` (see [`SimStream::collective`]).
    pub(crate) fn submit(
        &self,
        stream: &SimStream,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        same_node(&self.shared, &stream.shared)?;
        lock(&stream.shared).collective(stream.global(), self.comm, self.rank, call, label)
    }
}
