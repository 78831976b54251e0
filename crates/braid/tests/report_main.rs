//! What a person reads when a program's `main` returns `Err(braid::Report)`: Rust prints
//! `Error: `, the error's message and one `caused by:` line per cause, with no `Debug`
//! struct. This test is such a program: run with `BRAID_REPORT_CHILD` set, it fails in a
//! decode step (a real braid error as the cause); run plainly, it runs itself that way and
//! checks the child's exit status and standard error.

use braid::sim::SimConfig;
use std::process::Command;

/// Set in the child, which fails.
const CHILD: &str = "BRAID_REPORT_CHILD";

/// A program's own error, with a braid error as its source.
#[derive(Debug, thiserror::Error)]
#[error("decode step {step} failed")]
struct StepFailed {
    step: u32,
    #[source]
    source: braid::StreamError,
}

/// A decode step that ends a capture never begun: braid refuses it.
fn decode_step(step: u32) -> Result<(), StepFailed> {
    let device = braid::sim_device(SimConfig::new()).expect("a simulated device");
    let stream = device.create_stream(0).expect("a stream");
    stream
        .end_capture()
        .map(drop)
        .map_err(|source| StepFailed { step, source })
}

fn main() -> Result<(), braid::Report> {
    if std::env::var_os(CHILD).is_some() {
        decode_step(3)?;
        return Ok(());
    }
    let expected_cause = match decode_step(3) {
        Err(e) => e.source.to_string(),
        Ok(()) => return Err(braid::Report::msg("the decode step did not fail")),
    };
    let out = Command::new(std::env::current_exe()?)
        .env(CHILD, "1")
        .output()?;
    let stderr = String::from_utf8(out.stderr)?;
    let expected = format!("Error: decode step 3 failed\n  caused by: {expected_cause}\n");
    if out.status.success() || stderr != expected {
        return Err(braid::Report::msg(format!(
            "the failing program's standard error:\n{stderr}\nexpected (and a failure status, \
             got {}):\n{expected}",
            out.status
        )));
    }
    println!("report_main: a failing main prints its report ... ok");
    Ok(())
}
