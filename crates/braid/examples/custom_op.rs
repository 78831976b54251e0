//! A user-defined operator (RMSNorm in float16) on two streams in the allocator's automatic
//! mode, captured into a graph and replayed, checked against a host reference; then once more
//! without the wait, which the race detector reports. See `braid::scenarios::custom_op`.
//!
//! `cargo run -p braid --example custom_op` (add `--features acl` to run it through ACL:
//! `aclnnRmsNorm` on the native stream, on CANN or on `braid-acl-sim`).

use braid::scenarios::custom_op;
use braid::scenarios::devices::{self, Role};

fn main() -> Result<(), braid::Report> {
    println!("running on {}", devices::describe());
    let device = devices::open(Role::Data)?;
    let run = custom_op::run(&device, devices::rms_norm_body, devices::race_reports)?;
    let count = |n: Option<usize>| n.map_or("n/a".to_string(), |n| n.to_string());
    println!(
        "rms_norm ({} x {}, {}) on a second stream: correct={}",
        custom_op::ROWS,
        custom_op::COLS,
        custom_op::DTYPE,
        run.correct
    );
    println!(
        "captured and replayed twice: correct={}",
        run.replay_correct
    );
    println!(
        "race reports: {} with the waits, {} without",
        count(run.reports),
        count(run.race_reports)
    );
    println!(
        "RESULT correct={} replay_correct={} reports={} race_reports={}",
        run.correct,
        run.replay_correct,
        count(run.reports),
        count(run.race_reports)
    );
    Ok(())
}
