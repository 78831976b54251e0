//! The `tensor_parallel` scenario through ACL on `braid-acl-sim` (HCCL's communicators and
//! collectives, loaded by path through the real loading path): the example's `RESULT` facts
//! hold on 2, 4 and 8 devices (the check passes, the overlap beats the compute stream), and
//! the figures are the simulator's. (Runs with `cargo test -p braid --features acl`.)
//!
//! The library runs under `devices::ACL_SIM_NODE_SETTINGS` (24 devices: the data node 8–15,
//! the timing node 16–23), set before its first call (`common::acl_sim`), as every ACL test
//! binary of this crate does.
#![cfg(all(feature = "acl", feature = "sim"))]

use braid::scenarios::devices::{self, Role};
use braid::scenarios::tensor_parallel::{self, Shape};

use crate::common;
use common::{acl_sim, DEVICES};

#[test]
fn the_result_facts_hold_through_hccl_on_2_4_and_8_devices() {
    let _turn = DEVICES.lock();
    let api = acl_sim();
    for n in [2, 4, 8] {
        let data = devices::acl_devices_with(api, Role::Data, n).unwrap();
        let ordinals: Vec<u32> = data.iter().map(|d| d.ordinal()).collect();
        let base = devices::DATA_NODE_BASE;
        assert_eq!(ordinals, (base..base + n).collect::<Vec<_>>());
        let check = tensor_parallel::check(&data, &Shape::small()).unwrap();
        assert!(check.correct(), "{n} devices: {check:?}");

        let timing = devices::acl_devices_with(api, Role::Timing, n).unwrap();
        let ordinals: Vec<u32> = timing.iter().map(|d| d.ordinal()).collect();
        let base = devices::TIMING_NODE_BASE;
        assert_eq!(ordinals, (base..base + n).collect::<Vec<_>>());
        let acl = tensor_parallel::time(&timing, &Shape::llama2_7b()).unwrap();
        assert!(acl.overlap_us < acl.serial_us, "{acl:?}");
        // The same figures as on a fresh simulated node: the devices used before (16 and 17
        // for 4 devices, …) are lined up by the barrier before each timed step.
        let sim = tensor_parallel::time(
            &devices::sim_devices(&devices::sim_node(Role::Timing, n)).unwrap(),
            &Shape::llama2_7b(),
        )
        .unwrap();
        for mode in tensor_parallel::Mode::ALL {
            let (a, s) = (acl.us(mode), sim.us(mode));
            assert!(
                (a - s).abs() <= 0.01 * s,
                "{mode:?}: ACL {acl:?} vs sim {sim:?}"
            );
        }
    }
}
