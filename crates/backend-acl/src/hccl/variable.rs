//! The variable-count collectives through HCCL (`HcclAllGatherV`, `HcclReduceScatterV`,
//! `HcclAlltoAllV`; optional symbols of Atlas A2 releases): HCCL reads one count and one
//! displacement per rank from host arrays, so their lengths are checked here, where a short
//! array would be read past its end, whatever the front layer checked.

use super::calls::{Buffers, HcclCalls};
use super::comm::reduce_op_of;
use crate::calls::Handle;
use braid_acl_sys::hccl::HcclResult;
use braid_stream_core::collective::{CollectiveCall, CollectiveOp};
use braid_stream_core::hal::HalError;

/// Calls HCCL's variable-count function for `call` among `ranks` ranks; the function's name
/// and its result. [`HalError::InvalidArgument`] for blocks that are missing or not one entry
/// per rank, [`HalError::Unsupported`] when the library lacks the symbol.
pub(super) fn launch(
    calls: &dyn HcclCalls,
    b: Buffers,
    call: &CollectiveCall,
    ranks: u32,
    comm: Handle,
    stream: Handle,
) -> Result<(&'static str, HcclResult), HalError> {
    let v = call.v.as_deref().ok_or_else(|| {
        HalError::InvalidArgument(format!("{}: no per-rank counts given", call.op))
    })?;
    let uses_send = !matches!(call.op, CollectiveOp::AllGatherV);
    let uses_recv = !matches!(call.op, CollectiveOp::ReduceScatterV(_));
    for (side, blocks, used) in [
        ("send", &v.send, uses_send),
        ("receive", &v.recv, uses_recv),
    ] {
        let lengths = [blocks.counts.len(), blocks.displs.len()];
        if used && lengths != [ranks as usize; 2] {
            return Err(HalError::InvalidArgument(format!(
                "{}: {} {side} counts and {} displacements for {ranks} ranks; HCCL reads one of each per rank",
                call.op, lengths[0], lengths[1]
            )));
        }
    }
    let (name, code) = match call.op {
        CollectiveOp::AllGatherV => ("HcclAllGatherV", calls.all_gather_v(b, v, comm, stream)),
        CollectiveOp::ReduceScatterV(op) => (
            "HcclReduceScatterV",
            calls.reduce_scatter_v(b, v, reduce_op_of(op), comm, stream),
        ),
        _ => ("HcclAlltoAllV", calls.all_to_all_v(b, v, comm, stream)),
    };
    match code {
        Some(code) => Ok((name, code)),
        None => Err(HalError::Unsupported(match call.op {
            CollectiveOp::AllGatherV => "all-gather-v: this libhccl.so has no HcclAllGatherV",
            CollectiveOp::ReduceScatterV(_) => {
                "reduce-scatter-v: this libhccl.so has no HcclReduceScatterV"
            }
            _ => "all-to-all-v: this libhccl.so has no HcclAlltoAllV",
        })),
    }
}
