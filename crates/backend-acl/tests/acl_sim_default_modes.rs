//! `braid-acl-sim` under its default settings (no `BRAID_ACL_SIM_TIMING_ONLY`): every device
//! computes, so the README's collective example — an all-reduce over four devices — runs
//! unchanged and sums real numbers. Its own test binary: the settings are read once per
//! process.

mod common;

use braid_collective::{Communicator, ReduceOp};
use braid_stream_core::DType;

#[test]
fn a_four_device_all_reduce_runs_under_the_default_settings() {
    assert!(std::env::var_os(braid_acl_sim::TIMING_ONLY_ENV).is_none());
    let devices = common::node(4).expect("braid-acl-sim's devices");
    let comms = Communicator::init_all(&devices).unwrap();
    let bufs: Vec<_> = comms
        .iter()
        .map(|c| {
            let s = c.device().create_stream(0).unwrap();
            let b = c.device().alloc(16).unwrap();
            s.copy_h2d(b.slice(), DType::F32.encode(&[c.rank() as f32 + 1.0; 4]))
                .unwrap();
            (s, b)
        })
        .collect();
    for (c, (s, b)) in comms.iter().zip(&bufs) {
        c.all_reduce(s, b, b, DType::F32, ReduceOp::Sum).unwrap();
    }
    for (s, b) in &bufs {
        let got = s.copy_d2h(b.slice()).unwrap().wait_f32().unwrap();
        assert_eq!(got, vec![10.0; 4]);
    }
}
