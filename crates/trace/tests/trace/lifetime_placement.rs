//! `lifetime_placement` on the real PyTorch snapshots in the repository's `traces/`: under 2%
//! waste on every file, and never above expandable segments without it.

use crate::common;

use braid_trace::{replay_on_sim, ReplayPlan};
use common::load;

const EXPANDABLE: &str = "expandable_segments:true,expandable_large_page_mb:2";

fn plan(name: &str) -> ReplayPlan {
    ReplayPlan::from_snapshot(&load(name), 0).expect("plans")
}

/// Peak reserved bytes with `lifetime_placement` and without, and the waste with it.
fn check(name: &str, want_peak: u64) {
    let plan = plan(name);
    let conf = format!("{EXPANDABLE},lifetime_placement:true");
    let with = replay_on_sim(&plan, Some(&conf)).expect("replays");
    let without = replay_on_sim(&plan, Some(EXPANDABLE)).expect("replays");
    let live = plan.summary.peak_live_bytes;
    let waste = 1.0 - live as f64 / with.peak_reserved_bytes as f64;
    eprintln!(
        "{name}: peak reserved {} with lifetime_placement, {} without; waste {:.2}%",
        with.peak_reserved_bytes,
        without.peak_reserved_bytes,
        100.0 * waste
    );
    assert_eq!(with.peak_reserved_bytes, want_peak, "{name}");
    assert!(
        with.peak_reserved_bytes <= without.peak_reserved_bytes,
        "{name}"
    );
    assert!(waste < 0.02, "{name}: waste {waste}");
}

#[test]
fn bf16_forward() {
    check(
        "cs336_silmont2000_memory_forward_bf16_128.pickle",
        790_626_304,
    );
}

#[test]
fn inference() {
    check(
        "cs336_wedsonlin_medium_128_inference_memory_snapshot.pickle",
        1_742_733_312,
    );
}

#[test]
fn training() {
    check(
        "cs336_wedsonlin_medium_128_training_memory_snapshot.pickle",
        7_117_733_888,
    );
}

#[test]
fn sketchkv2() {
    check(
        "sketchkv2_llama2_7b_kivi_state_snapshot.pickle",
        16_382_951_424,
    );
}
