//! [`Communicator::async_error`]: failures of a communicator's collectives that come after
//! their calls returned, as HCCL reports them to `HcclGetCommAsyncError` (torch_npu's
//! watchdog polls it and aborts the communicator).
//!
//! On the simulator, a host wait on work held back behind one of the communicator's
//! collectives that cannot complete (a rank never issued its part, or its stream never
//! reaches it within the collective timeout) fails with
//! `HalError::CollectiveIncomplete`, and the communicator keeps that error; so it keeps a
//! rank's part that the simulator's fault plan made fail on the device
//! (`FaultPlan::fail_collective_async_nth`: the part's stream reports the same error, 507000
//! naming the call, communicator and rank, and the part's receive buffer is left
//! untouched); on HCCL it is
//! whatever `HcclGetCommAsyncError` answers (a timeout, a remote or device failure). Either
//! way the first error is kept for the communicator's life, as HCCL keeps it: poll it from a
//! watchdog thread (a [`Communicator`] is `Send + Sync`). The communicator, its streams and
//! devices still run later work.

use crate::communicator::Communicator;
use crate::error::{CollectiveError, Result};
use braid_stream_core::hal::CollectiveBackend;

impl<B: CollectiveBackend> Communicator<B> {
    /// The communicator's asynchronous error, if one of its collectives failed after its call
    /// returned: [`CollectiveError::Async`] naming this rank and what the backend reported;
    /// `None` while there is none. A backend that cannot be asked
    /// (a `libhccl.so` without `HcclGetCommAsyncError`) is [`CollectiveError::Backend`].
    pub fn async_error(&self) -> Result<Option<CollectiveError>> {
        let found =
            B::comm_async_error(&self.inner.comm).map_err(|source| CollectiveError::Backend {
                call: "async_error",
                source,
            })?;
        Ok(found.map(|source| {
            tracing::debug!(rank = self.rank(), %source, "asynchronous communicator error");
            CollectiveError::Async {
                rank: self.rank(),
                source,
            }
        }))
    }
}
