//! The Llama decoder through ACL on `braid-acl-sim` (aclnn operators, HCCL's collectives,
//! task-group updates through `aclmdlRICaptureTaskUpdateBegin/End`): the same tokens as
//! transformers on 1, 2, 4 and 8 devices, each replay equal to the eager step, the decode
//! pool as the dry run predicted it (asking aclnn's `GetWorkspaceSize`), and the first-step
//! logits equal to the simulator's. (Runs with `cargo test -p braid --features acl`.)
#![cfg(all(feature = "acl", feature = "sim"))]

use braid::scenarios::devices::{self, Role};
use braid::scenarios::llama::{self, ci, HostWeights, LlamaConfig};

use crate::common::{acl_sim, DEVICES};

#[test]
fn acl_gives_transformers_tokens_and_the_simulators_logits_on_every_device_count() {
    let _turn = DEVICES.lock();
    let api = acl_sim();
    let dir = std::env::temp_dir().join(format!("braid-acl-llama-{}", std::process::id()));
    let config = LlamaConfig::ci();
    llama::write_model(&dir, &config, ci::SEED).unwrap();
    let weights = HostWeights::load(&dir, &config).unwrap();
    let request = ci::request(4);
    for n in [1, 2, 4, 8] {
        let acl = llama::generate(
            &devices::acl_devices_with(api, Role::Data, n).unwrap(),
            &weights,
            &request,
        )
        .unwrap();
        assert!(ci::matches_reference(&acl.tokens), "{n}: {:?}", acl.tokens);
        assert!(acl.eager_equals_graph, "{n} devices");
        assert_eq!(acl.recaptures(), 0);
        assert_eq!(acl.predicted_pool_bytes, acl.pool_bytes, "{n} devices");
        let sim = llama::generate(
            &devices::sim_devices(&devices::sim_node(Role::Data, n)).unwrap(),
            &weights,
            &request,
        )
        .unwrap();
        assert_eq!(acl.first_logits, sim.first_logits, "{n} devices");
    }
    std::fs::remove_dir_all(dir).ok();
}
