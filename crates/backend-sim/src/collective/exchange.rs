//! The data effect of a collective that runs: read every rank's send buffer at the start,
//! write every rank's receive buffer at the end (through the engine's effect queue).

use braid_stream_core::collective::CollectiveOp;
use braid_stream_core::dtype::DType;
use braid_stream_core::types::DeviceSlice;

use crate::compute::PendingWrite;
use crate::memory::DataView;

use super::data;

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
    /// Each participant's send range (empty where it sends nothing).
    pub sends: Vec<DeviceSlice>,
    /// Each participant's receive range (empty where it receives nothing).
    pub recvs: Vec<DeviceSlice>,
}

impl Exchange {
    /// Reads the send ranges and computes what every receive range gets (at the start).
    pub fn begin(&self, mem: &mut DataView<'_>) -> Vec<PendingWrite> {
        let inputs: Vec<Vec<u8>> = self
            .sends
            .iter()
            .map(|s| {
                if s.len == 0 {
                    Vec::new()
                } else {
                    mem.read(*s).unwrap_or_default()
                }
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
