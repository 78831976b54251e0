//! The graph-mode scenario's figures follow the profile: replay beats eager dispatch, and
//! the tagged-stream branches shorten the replay.

#![cfg(feature = "sim")]

use braid::scenarios::graph_mode::{self, Step};

#[test]
fn graph_replay_beats_eager_and_branches_overlap() {
    let step = Step {
        layers: 8,
        ..Step::default()
    };
    let f = graph_mode::run_sim(step).unwrap();
    assert!(f.graph_us < f.eager_us, "{f:?}");
    assert!(f.graph_multistream_us < f.graph_us, "{f:?}");
    assert_eq!(f.rows.len(), 3);
    assert_eq!(f.rows[0].kernels, 8 * 23);
}

#[test]
fn graph_replays_compute_what_the_eager_step_computes() {
    let step = Step {
        layers: 3,
        vector_ops: 3,
        matmuls: 2,
        batch: 2,
        hidden: 64,
    };
    let device = braid::sim_device(braid::sim::SimConfig::new()).unwrap();
    let f = graph_mode::run(&device, step).unwrap();
    assert!(f.replays_match_eager, "{f:?}");
    assert_eq!(braid::sim_race_reports(&device).map(|r| r.len()), Some(0));
}
