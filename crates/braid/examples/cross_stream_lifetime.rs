//! MindSpore's cross-stream memory example: `x` is read by `add_s0` on a side stream, then
//! dropped on the default stream, whose next allocation may take its memory. The allocator in
//! automatic mode (MindSpore's semantics) keeps `x` alive without any `record_stream` call; in
//! manual mode (PyTorch's semantics, no `record_stream`) the sanitizer reports the reuse.
//!
//! `cargo run -p braid --example cross_stream_lifetime`

use braid::allocator::CrossStreamMode;
use braid::scenarios::cross_stream_lifetime;
use braid::scenarios::devices::{self, Role};

fn main() -> Result<(), braid::Report> {
    println!(
        "running on {}, in {}",
        devices::describe(),
        braid::scenarios::cross_stream_lifetime::DTYPE
    );
    let auto = cross_stream_lifetime::run(
        &devices::open(Role::Data)?,
        CrossStreamMode::Automatic,
        devices::race_reports,
    )?;
    let manual = cross_stream_lifetime::run(
        &devices::open(Role::Data)?,
        CrossStreamMode::Manual,
        devices::race_reports,
    )?;
    let count = |run: &cross_stream_lifetime::Run| {
        run.reports
            .as_ref()
            .map_or_else(|| "n/a".to_string(), |r| r.len().to_string())
    };
    for (name, run) in [("automatic", &auto), ("manual, no record_stream", &manual)] {
        println!(
            "{name:>25}: y correct {}, z reused x's memory {}, events recorded {}, sanitizer reports {}",
            run.correct,
            run.z_reused_x,
            run.events_recorded,
            count(run)
        );
    }
    if let Some(reports) = &manual.reports {
        for report in reports {
            println!("sanitizer (manual): {report}");
        }
    }
    println!(
        "RESULT auto_correct={} auto_reports={} manual_reports={}",
        auto.correct,
        count(&auto),
        count(&manual)
    );
    Ok(())
}
