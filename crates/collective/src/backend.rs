//! [`CollectiveBackend`]: what a backend provides for collectives (HCCL's communicator
//! calls), implemented for the simulator and, with the `acl` feature, for HCCL.

use braid_stream_core::collective::{CollectiveCall, RootInfo};
use braid_stream_core::hal::{Backend, HalError};

/// A backend that can run collectives: communicator creation and one rank's part of a
/// collective enqueued on one of its streams. Thin and unvalidated like the rest of the hal:
/// [`crate::Communicator`] checks everything first.
pub trait CollectiveBackend: Backend {
    /// One rank's native communicator (`HcclComm`).
    type Comm: Send + Sync + 'static;

    /// Whether single-process communicators of this backend ([`crate::Communicator::init_all`])
    /// check every call for mismatches whatever [`crate::CommOptions::check_mismatch`] says
    /// (the simulator: a hang there helps nobody).
    const ALWAYS_CHECKS_MISMATCH: bool;

    /// One communicator per device, rank `i` on `devices[i]`, all in this process
    /// (`HcclCommInitAll`).
    fn init_all(devices: &[&Self::Device]) -> Result<Vec<Self::Comm>, HalError>;

    /// A fresh root info for a communicator whose rank 0 runs on `device` (`HcclGetRootInfo`).
    fn root_info(device: &Self::Device) -> Result<RootInfo, HalError>;

    /// Joins the communicator of `ranks` ranks described by `info` as rank `rank`
    /// (`HcclCommInitRootInfo`); returns once every rank has joined.
    fn init_root_info(
        device: &Self::Device,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<Self::Comm, HalError>;

    /// Whether `error`, from one of these calls, says an argument was refused (rather than
    /// the runtime failing): how [`crate::Communicator::init_root_info`] tells a root info
    /// that is not one. The default: [`HalError::InvalidArgument`].
    fn is_refused_argument(error: &HalError) -> bool {
        matches!(error, HalError::InvalidArgument(_))
    }

    /// Enqueues this rank's part of `call` on `stream` (`HcclAllReduce` and friends).
    fn launch(
        stream: &Self::Stream,
        comm: &Self::Comm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError>;
}
