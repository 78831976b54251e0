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
