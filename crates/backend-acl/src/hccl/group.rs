//! Grouped calls through HCCL: `HcclGroupStart` / `HcclGroupEnd` around a group's calls, and
//! `HcclBatchSendRecv` for a batch of sends and receives. Both are optional symbols (newer
//! releases): without them a group's calls, and a batch's items, are issued one by one in the
//! order `braid-collective` hands them (`braid_stream_core::collective::batch_order`, an order
//! in which plain sends and receives cannot deadlock), as torch_npu falls back where a symbol
//! is missing.

use super::calls::BatchItem;
use super::comm::{dtype_of, AclComm};
use crate::stream::AclStream;
use braid_acl_sys::hccl::{HCCL_RECV, HCCL_SEND};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp};
use braid_stream_core::hal::HalError;
use braid_stream_core::types::DeviceSlice;

impl AclComm {
    /// `HcclGroupStart`, when the library has it.
    pub(crate) fn group_start(&self) -> Result<(), HalError> {
        match self.hccl.calls.group_start() {
            Some(code) => self.hccl.check("HcclGroupStart", code),
            None => {
                tracing::debug!("no HcclGroupStart: the group's calls are issued one by one");
                Ok(())
            }
        }
    }

    /// `HcclGroupEnd`, when the library has it.
    pub(crate) fn group_end(&self) -> Result<(), HalError> {
        match self.hccl.calls.group_end() {
            Some(code) => self.hccl.check("HcclGroupEnd", code),
            None => Ok(()),
        }
    }

    /// Enqueues this rank's sends and receives `calls` on `stream` as one `HcclBatchSendRecv`
    /// (one by one without the symbol). Anything but a send or a receive is refused before
    /// HCCL is called.
    pub(crate) fn launch_batch(
        &self,
        stream: &AclStream,
        calls: &[CollectiveCall],
        label: &str,
    ) -> Result<(), HalError> {
        let items = calls
            .iter()
            .map(|call| {
                let (kind, buf, peer) = match call.op {
                    CollectiveOp::Send { peer } => (HCCL_SEND, call.send.0, peer),
                    CollectiveOp::Recv { peer } => (HCCL_RECV, call.recv.0, peer),
                    op => {
                        return Err(HalError::InvalidArgument(format!(
                            "{label}: {op} is not a send or a receive"
                        )))
                    }
                };
                Ok(BatchItem {
                    kind,
                    buf,
                    count: call.count,
                    dtype: dtype_of(call.dtype),
                    peer,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if u32::try_from(items.len()).is_err() {
            return Err(HalError::InvalidArgument(format!(
                "{label}: {} items do not fit HcclBatchSendRecv's 32-bit count",
                items.len()
            )));
        }
        self.check_stream(stream, label)?;
        stream.shared.bind()?;
        tracing::trace!(label, items = items.len(), "HCCL batch send/recv");
        match self
            .hccl
            .calls
            .batch_send_recv(&items, self.raw, stream.raw)
        {
            Some(code) => {
                self.hccl.check("HcclBatchSendRecv", code)?;
                stream.shared.note_work(stream.raw, 1);
                Ok(())
            }
            None => calls
                .iter()
                .try_for_each(|call| self.launch(stream, call, label, DeviceSlice::default())),
        }
    }
}
