//! MindSpore's `wait_stream` example on the simulated device: `sum` on a side stream of a
//! matmul computed on the default stream, without and with `side.wait_stream(&main)`.
//!
//! `cargo run -p braid --example wait_stream`

use braid::scenarios::wait_stream::{self, Shape};
use braid::sim::SimConfig;

fn main() -> Result<(), braid::Error> {
    let shape = Shape::default();
    println!(
        "c = a @ b ({}x{} @ {}x{}) on the default stream, behind {} us of earlier work; sum(c) on a side stream",
        shape.m,
        shape.k,
        shape.k,
        shape.n,
        shape.earlier_work_ns / 1000
    );
    let without = wait_stream::run_checked(
        &braid::sim_device(SimConfig::new())?,
        shape,
        false,
        braid::sim_race_reports,
    )?;
    let with = wait_stream::run_checked(
        &braid::sim_device(SimConfig::new())?,
        shape,
        true,
        braid::sim_race_reports,
    )?;
    for (name, run) in [
        ("without wait_stream", &without),
        ("with wait_stream", &with),
    ] {
        println!(
            "{name:>20}: sum = {:>12} (expected {}), {:.1} us",
            run.sum, run.expected, run.elapsed_us
        );
    }
    let count = |run: &wait_stream::Run| run.reports.as_ref().map_or(0, Vec::len);
    println!("sanitizer reports without wait_stream:");
    for report in without.reports.iter().flatten() {
        println!("  {report}");
    }
    println!(
        "RESULT without_wait_correct={} with_wait_correct={} reports_without_wait={} reports_with_wait={}",
        without.correct,
        with.correct,
        count(&without),
        count(&with)
    );
    Ok(())
}
