//! The data effect of a collective that runs: read every rank's send buffer at the start,
//! write every rank's receive buffer at the end (through the engine's effect queue).

use braid_stream_core::collective::CollectiveOp;
use braid_stream_core::dtype::DType;
use braid_stream_core::types::DeviceSlice;

use crate::compute::PendingWrite;
use crate::memory::DataView;

use super::data;

/// Where a participant's send data comes from.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum Source {
    /// A range of the node's memory (empty where the participant sends nothing), read at
    /// the collective's start.
    Memory(DeviceSlice),
    /// Bytes received from another process.
    Bytes(Vec<u8>),
}

/// Every participant's buffers of one collective run (in rank order; for a send and its
/// receive, the sender then the receiver).
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Exchange {
    /// The operation (the sender's, for a send and its receive).
    pub op: CollectiveOp,
    /// Element count, HCCL's meaning.
    pub count: u64,
    /// Element type.
    pub dtype: DType,
    /// Each participant's send data.
    pub sends: Vec<Source>,
    /// Each participant's receive range (empty where it receives nothing).
    pub recvs: Vec<DeviceSlice>,
}

impl Exchange {
    /// Reads the send ranges and computes what every receive range gets (at the start).
    pub fn begin(&self, mem: &mut DataView<'_>) -> Vec<PendingWrite> {
        let inputs: Vec<Vec<u8>> = self
            .sends
            .iter()
            .map(|s| match s {
                Source::Memory(r) if r.len > 0 => mem.read(*r).unwrap_or_default(),
                Source::Memory(_) => Vec::new(),
                Source::Bytes(b) => b.clone(),
            })
            .collect();
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let outputs = data::receive(self.op, self.count, self.dtype, &refs);
        self.recvs
            .iter()
            .zip(outputs)
            .filter(|(r, _)| r.len > 0)
            .map(|(r, mut bytes)| {
                bytes.resize(r.len as usize, 0);
                PendingWrite::Device {
                    ptr: r.ptr,
                    data: mem.is_valid(*r).then_some(bytes),
                }
            })
            .collect()
    }
}
