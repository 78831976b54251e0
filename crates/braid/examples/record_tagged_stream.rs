//! TorchAir's `npu_record_tagged_stream` example: `A` is used on tagged stream
//! "second_stream" behind long work and freed on the main stream, where `C` is allocated and
//! written next. With `npu_record_tagged_stream(A, "second_stream")` (braid's
//! `record_tagged_stream`) `B == 1` everywhere and the sanitizer is silent; with
//! `--without-record` `C` takes A's memory first, `B` is wrong and the sanitizer reports it.
//!
//! `cargo run -p braid --example record_tagged_stream [-- --without-record]`

use braid::scenarios::devices::{self, Role};
use braid::scenarios::record_tagged_stream;

fn main() -> Result<(), braid::Report> {
    let with_record = !std::env::args().any(|a| a == "--without-record");
    println!(
        "running on {}, in {}",
        devices::describe(),
        braid::scenarios::record_tagged_stream::DTYPE
    );
    let run = record_tagged_stream::run(
        &devices::open(Role::Data)?,
        with_record,
        devices::race_reports,
    )?;
    println!(
        "record_tagged_stream(A, \"{}\"): {}",
        record_tagged_stream::STREAM_TAG,
        if with_record {
            "yes"
        } else {
            "no (--without-record)"
        }
    );
    println!("C took A's memory: {}", run.c_reused_a);
    println!(
        "B == 1 everywhere: {}; C == 3 everywhere: {}",
        run.b_correct, run.c_correct
    );
    let reports = match &run.reports {
        Some(reports) => {
            for report in reports {
                println!("sanitizer: {report}");
            }
            reports.len().to_string()
        }
        None => "n/a".to_string(),
    };
    println!("RESULT b_correct={} reports={reports}", run.b_correct);
    Ok(())
}
