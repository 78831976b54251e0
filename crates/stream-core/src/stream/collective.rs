//! A rank's part of a collective enqueued as an operator ([`Stream::launch_collective`]).

use super::Stream;
use crate::collective::CollectiveCall;
use crate::error::Result;
use crate::hal::{self, Comm as _};
use crate::lowered::Lowered;
use crate::ordering::StreamPosition;
use crate::uses::Access;

impl<B: hal::CollectiveBackend> Stream<B> {
    /// Enqueues rank `comm.rank()`'s part of `call` with its backend communicator `comm`
    /// (the backend's collective extension, [`hal::CollectiveBackend::launch_collective`]),
    /// labelled `label`: an operator reading its send buffer and writing its receive buffer
    /// ([`CollectiveCall::ranges`]), so ordering, the allocator's automatic mode, capture and
    /// replay treat it like a kernel. Workspace the backend asks for
    /// ([`hal::CollectiveBackend::collective_workspace`]) is taken as a kernel's is
    /// ([`Stream::workspace`]). Nothing checks that the other ranks agree: that is
    /// `braid-collective`'s job, which checks every call before it gets here.
    pub fn launch_collective(
        &self,
        comm: &B::Comm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<StreamPosition> {
        let (rank, ranks) = (comm.rank(), comm.ranks());
        let (send, recv) = call.ranges(rank, ranks).ok_or_else(|| {
            hal::HalError::InvalidArgument(format!(
                "{label}: the buffers of {} of {} elements over {ranks} ranks overflow",
                call.op, call.count
            ))
        })?;
        let uses = [(send, Access::Read), (recv, Access::Write)];
        let used = match (call.op.reads_send(rank), call.op.writes_recv(rank)) {
            (true, true) => &uses[..],
            (true, false) => &uses[..1],
            (false, true) => &uses[1..],
            (false, false) => &[],
        };
        // Scratch the backend needs beside the buffers (an average scaled before its sum on
        // HCCL), in stream order and given back once the part is submitted.
        let workspace = self.workspace(B::collective_workspace(comm, call))?;
        let scratch = workspace.slice();
        let enqueue = |s: &B::Stream| B::launch_collective_in(s, comm, call, label, scratch);
        let position = self.submit_operator(Lowered::Collective {
            label,
            uses: used,
            enqueue: &enqueue,
        });
        drop(workspace);
        position
    }
}
