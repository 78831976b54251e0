//! `braid-acl-sim` under its default settings (no `BRAID_ACL_SIM_TIMING_ONLY`): every device
//! computes, so the README's collective example — an all-reduce over four devices — runs
//! unchanged and sums real numbers. The settings are read once per process: no test of this
//! binary sets them (those that do are binaries of their own).

use crate::common;

use braid_collective::Communicator;

#[test]
fn a_four_device_all_reduce_runs_under_the_default_settings() {
    assert!(std::env::var_os(braid_acl_sim::TIMING_ONLY_ENV).is_none());
    let devices = common::node(4).expect("braid-acl-sim's devices");
    let comms = Communicator::init_all(&devices).unwrap();
    common::all_reduce_sums(&comms);
}
