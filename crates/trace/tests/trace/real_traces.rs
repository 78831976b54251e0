//! Parses and plans the real PyTorch snapshots in the repository's `traces/` (provenance in
//! `traces/README.md`). Expected event counts are the files' own; sums and peaks were checked
//! with Python's `pickle`.

use crate::common;

use braid_trace::{replay_on_sim, Action, ReplayPlan, Snapshot};
use common::load;

/// (count, sum of sizes) of one action on device 0.
fn tally(s: &Snapshot, a: Action) -> (usize, u64) {
    let mut out = (0, 0);
    for e in s.events(0).iter().filter(|e| e.action == a) {
        out.0 += 1;
        out.1 += e.size;
    }
    out
}

struct Expected {
    allocs: (usize, u64),
    frees: (usize, u64),
    segments: usize,
    blocks: usize,
    reserved: u64,
    prologue_bytes: u64,
    peak_requested: u64,
}

fn check(name: &str, want: Expected) {
    let s = load(name);
    assert_eq!(tally(&s, Action::Alloc), want.allocs, "{name} allocs");
    assert_eq!(tally(&s, Action::FreeRequested), want.frees, "{name} frees");
    assert_eq!(
        tally(&s, Action::FreeCompleted),
        want.frees,
        "{name} completed"
    );
    assert_eq!(s.segments.len(), want.segments);
    assert_eq!(s.block_count(), want.blocks);
    assert_eq!(s.reserved_bytes(0), want.reserved);
    assert!(s.allocator_settings.is_some());
    // The decoder loses some shared strings (frames); never the ones replay depends on.
    assert!(!s
        .events(0)
        .iter()
        .any(|e| matches!(e.action, Action::Other(_))));
    assert!(s
        .segments
        .iter()
        .all(|g| g.segment_type == "small" || g.segment_type == "large"));
    let plan = ReplayPlan::from_snapshot(&s, 0).expect("plans");
    let sum = &plan.summary;
    assert_eq!(sum.alloc_events as usize, want.allocs.0);
    assert_eq!(sum.free_events as usize, want.frees.0);
    assert_eq!(sum.prologue_bytes, want.prologue_bytes, "{name} prologue");
    assert_eq!(sum.peak_requested_bytes, want.peak_requested, "{name} peak");
    assert_eq!(sum.implicit_frees, 0);
    assert_eq!(sum.torch.peak_reserved_bytes, want.reserved);
    assert_eq!(sum.torch.device_mallocs, 0, "these windows start warm");
    assert_eq!(plan.streams, vec![0]);
    replay_side_by_side(name, &plan);
    // Every buffer the plan frees was allocated before, once.
    let mut live = vec![false; plan.buffer_count as usize];
    for op in &plan.ops {
        match *op {
            braid_trace::Op::Alloc { id, .. } => {
                assert!(!live[id as usize]);
                live[id as usize] = true;
            }
            braid_trace::Op::Free { id } => {
                assert!(live[id as usize]);
                live[id as usize] = false;
            }
        }
    }
}

/// Replays the plan through braid's allocator and checks it against PyTorch's reservation.
fn replay_side_by_side(name: &str, plan: &ReplayPlan) {
    let stats = replay_on_sim(plan, None).expect("replays");
    let torch = plan.summary.torch.peak_reserved_bytes;
    eprintln!(
        "{name}: braid peak reserved {} vs PyTorch {torch}; {} device mallocs",
        stats.peak_reserved_bytes, stats.device_mallocs
    );
    assert_eq!(stats.events as usize, plan.ops.len());
    assert!(stats.peak_allocated_bytes >= plan.summary.peak_live_bytes);
    assert!(stats.peak_reserved_bytes >= stats.peak_allocated_bytes);
    assert!(stats.peak_requested_bytes >= plan.summary.peak_requested_bytes);
    assert!(
        stats.peak_reserved_bytes <= torch,
        "{name}: braid reserves more than PyTorch did over the same window"
    );
}

#[test]
fn inference_snapshot() {
    check(
        "cs336_wedsonlin_medium_128_inference_memory_snapshot.pickle",
        Expected {
            allocs: (1280, 2_851_305_568),
            frees: (1280, 2_851_305_568),
            segments: 98,
            blocks: 230,
            reserved: 1_763_704_832,
            prologue_bytes: 1_701_310_464,
            peak_requested: 1_736_962_048,
        },
    );
}

#[test]
fn training_snapshot() {
    check(
        "cs336_wedsonlin_medium_128_training_memory_snapshot.pickle",
        Expected {
            allocs: (6526, 34_448_091_337),
            frees: (6305, 32_734_877_893),
            segments: 377,
            blocks: 918,
            reserved: 7_235_174_400,
            // 438 blocks freed in the window without an alloc, 226 held at the end.
            prologue_bytes: 3_385_466_880 + 1_709_854_720,
            peak_requested: 7_013_335_044,
        },
    );
}

#[test]
fn bf16_snapshot() {
    check(
        "cs336_silmont2000_memory_forward_bf16_128.pickle",
        Expected {
            allocs: (937, 1_132_065_792),
            frees: (937, 1_132_065_792),
            segments: 43,
            blocks: 178,
            reserved: 861_929_472,
            prologue_bytes: 523_811_840,
            peak_requested: 779_837_440,
        },
    );
}

#[test]
fn sketchkv2_state_snapshot() {
    let s = load("sketchkv2_llama2_7b_kivi_state_snapshot.pickle");
    assert_eq!(s.segments.len(), 259);
    assert_eq!(s.block_count(), 868);
    assert!(s.is_state_only());
    assert_eq!(s.reserved_bytes(0), 17_133_731_840);
    let plan = ReplayPlan::from_snapshot(&s, 0).expect("plans");
    assert_eq!(plan.summary.alloc_events, 0);
    assert_eq!(plan.summary.prologue_blocks, 839);
    assert_eq!(plan.summary.prologue_bytes, 16_380_108_168);
    assert_eq!(plan.prologue_len, plan.ops.len());
    replay_side_by_side("sketchkv2", &plan);
}
