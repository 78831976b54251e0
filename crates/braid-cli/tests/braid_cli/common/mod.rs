//! Helpers shared by the CLI's integration tests: running the built `braid` and reading what
//! it printed.
// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::process::{Command, Output, Stdio};

/// The built `braid` binary, ready for arguments.
pub fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

/// Standard output, after asserting the command succeeded (showing both outputs if not).
#[track_caller]
pub fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "the command failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error, after asserting the command failed (showing both outputs if not).
#[track_caller]
pub fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "the command succeeded:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `command` with its standard output a pipe whose reading end is already closed (as
/// `braid ... | head` leaves it once `head` has exited), capturing standard error.
pub fn into_closed_pipe(command: &mut Command) -> Output {
    // A child that exits at once leaves the write end of its stdin pipe with no reader: this
    // process never held the read end.
    let mut reader = Command::new("true")
        .stdin(Stdio::piped())
        .spawn()
        .expect("`true` runs");
    let write_end = reader.stdin.take().expect("piped stdin");
    reader.wait().expect("`true` exits");
    command
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .expect("runs")
}
