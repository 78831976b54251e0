//! [`CollectiveBackend`] for ACL: HCCL's communicators ([`AclComm`]) and collectives on ACL
//! streams ([`AclStream::collective`]). Mismatch checking is an option
//! ([`crate::CommOptions::check_mismatch`], on by default).

use crate::backend::CollectiveBackend;
use braid_backend_acl::{AclBackend, AclComm, AclDevice, AclStream};
use braid_stream_core::collective::{CollectiveCall, RootInfo};
use braid_stream_core::hal::HalError;

impl CollectiveBackend for AclBackend {
    type Comm = AclComm;
    const ALWAYS_CHECKS_MISMATCH: bool = false;

    fn init_all(devices: &[&AclDevice]) -> Result<Vec<AclComm>, HalError> {
        AclComm::init_all(devices)
    }

    fn root_info(device: &AclDevice) -> Result<RootInfo, HalError> {
        AclComm::root_info(device)
    }

    fn init_root_info(
        device: &AclDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<AclComm, HalError> {
        AclComm::init_root_info(device, ranks, rank, info)
    }

    /// HCCL's `HCCL_E_PARA` too.
    fn is_refused_argument(error: &HalError) -> bool {
        match error {
            HalError::InvalidArgument(_) => true,
            HalError::Native { name, .. } => *name == "HCCL_E_PARA",
            _ => false,
        }
    }

    fn launch(
        stream: &AclStream,
        comm: &AclComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        stream.collective(comm, call, label)
    }
}
