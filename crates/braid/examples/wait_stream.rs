//! MindSpore's `wait_stream` example: `sum` on a side stream of a matmul computed on the default
//! stream, without and with `side.wait_stream(&main)`.
//!
//! `cargo run -p braid --example wait_stream` runs it on the simulated device;
//! `cargo run -p braid --example wait_stream --features acl` through ACL: CANN when it is
//! configured (`BRAID_ACL_LIB`, `ASCEND_HOME_PATH`, ...), else `braid-acl-sim` (built with the
//! example), with the same `RESULT` line. Devices come from `braid::scenarios::devices`.

use braid::scenarios::devices::{self, Role};
use braid::scenarios::wait_stream::{self, Shape};

fn main() -> Result<(), braid::Report> {
    let shape = Shape::default();
    println!(
        "running on {}, in {}",
        devices::describe(),
        braid::scenarios::wait_stream::DTYPE
    );
    println!(
        "c = a @ b ({}x{} @ {}x{}) on the default stream, behind {} us of earlier work; sum(c) on a side stream",
        shape.m,
        shape.k,
        shape.k,
        shape.n,
        shape.earlier_work_ns / 1000
    );
    let without = wait_stream::run_checked(
        &devices::open(Role::Data)?,
        shape,
        false,
        devices::race_reports,
    )?;
    let with = wait_stream::run_checked(
        &devices::open(Role::Data)?,
        shape,
        true,
        devices::race_reports,
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
    // `n/a` where the backend has no race detector to ask (ACL on CANN).
    let count = |run: &wait_stream::Run| {
        run.reports
            .as_ref()
            .map_or_else(|| "n/a".to_string(), |r| r.len().to_string())
    };
    match &without.reports {
        Some(reports) => {
            println!("sanitizer reports without wait_stream:");
            for report in reports {
                println!("  {report}");
            }
        }
        None => println!("sanitizer reports: n/a (the backend has no race detector to ask)"),
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
