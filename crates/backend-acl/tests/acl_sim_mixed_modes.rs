//! `braid-acl-sim` with device 1 timing-only (`BRAID_ACL_SIM_TIMING_ONLY=1`, as braid's
//! examples set it): a communicator over devices of both modes is refused with `HCCL_E_PARA`,
//! naming the variable and what to set, not the simulator's "different simulated nodes". Its
//! own test binary: the settings are read once per process.

// The helpers of the main test binary (`tests/backend_acl/`).
#[path = "backend_acl/common/mod.rs"]
mod common;

use braid_acl_sys::hccl::codes::HCCL_E_PARA;
use braid_backend_acl::{AclApi, AclComm, AclConfig, AclDevice};
use braid_stream_core::hal::HalError;

#[test]
fn a_communicator_over_both_modes_names_the_setting_and_one_mode_still_works() {
    // Before the library's first call reads it; this binary's only test.
    std::env::set_var(braid_acl_sim::TIMING_ONLY_ENV, "1");
    let api = AclApi::load_from(common::sim_library()).unwrap();
    let devices: Vec<AclDevice> = (0..4)
        .map(|d| AclDevice::open_with(api, d, AclConfig::default()).unwrap())
        .collect();
    let refs: Vec<&AclDevice> = devices.iter().collect();
    match AclComm::init_all(&refs) {
        Err(HalError::NativeInvalidArgument { code, message, .. }) => {
            assert_eq!(code, HCCL_E_PARA);
            assert!(message.contains("BRAID_ACL_SIM_TIMING_ONLY"), "{message}");
            assert!(message.contains("timing-only: 1"), "{message}");
            assert!(
                message.contains("BRAID_ACL_SIM_TIMING_ONLY=none"),
                "{message}"
            );
        }
        Err(other) => panic!("unexpected error {other:?}"),
        Ok(_) => panic!("a communicator over both modes was made"),
    }
    // The data-mode devices still form one.
    let comms = AclComm::init_all(&[&devices[0], &devices[2], &devices[3]]).unwrap();
    assert_eq!(comms.len(), 3);
}
