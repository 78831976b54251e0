//! [`CollectiveBackend`] for the simulator: a simulated node's devices run collectives over
//! its links ([`SimComm`], [`SimStream::collective`]). Mismatches are always checked: a hang
//! in a simulation helps nobody.

use crate::backend::CollectiveBackend;
use braid_backend_sim::{SimBackend, SimComm, SimDevice, SimStream};
use braid_stream_core::collective::{CollectiveCall, RootInfo};
use braid_stream_core::hal::HalError;

impl CollectiveBackend for SimBackend {
    type Comm = SimComm;
    const ALWAYS_CHECKS_MISMATCH: bool = true;

    fn init_all(devices: &[&SimDevice]) -> Result<Vec<SimComm>, HalError> {
        SimComm::init_all(devices)
    }

    fn root_info(device: &SimDevice) -> Result<RootInfo, HalError> {
        SimComm::root_info(device)
    }

    fn init_root_info(
        device: &SimDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<SimComm, HalError> {
        SimComm::init_root_info(device, ranks, rank, info)
    }

    fn launch(
        stream: &SimStream,
        comm: &SimComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        stream.collective(comm, call, label)
    }
}
