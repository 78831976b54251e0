//! Tests that run their second half in another process: the test executable starts itself
//! again, filtered to the one test, with a role in the child's environment, and the two talk
//! in lines over the child's standard input and output.
//!
//! ```no_run
//! use braid_conformance::child_process::{next_line, ChildTest};
//!
//! // A `#[test]` of the test executable.
//! fn shared_between_two_processes() {
//!     if std::env::var("MY_ROLE").is_ok() {
//!         // The child: say it is ready, wait for the go.
//!         println!("ready");
//!         let go = next_line(&mut std::io::stdin().lock());
//!         assert_eq!(go.as_deref(), Some("go"));
//!         return;
//!     }
//!     let env = [("MY_ROLE", "child".to_string())];
//!     let mut child = ChildTest::spawn("shared_between_two_processes", &env).unwrap();
//!     child.expect("ready").unwrap();
//!     child.send("go").unwrap();
//!     assert!(child.wait().unwrap().success());
//! }
//! ```

use std::fmt;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;

/// The next line of `input` with its surrounding white space trimmed; `None` at the end of the
/// input or when it cannot be read.
pub fn next_line(input: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_string()),
    }
}

/// Runs this test executable's `test` (its exact name) to its end in a child process whose
/// directory `dir` is a fresh tmpfs of `size` bytes (as `mount -o size=` takes it: `1m`),
/// with the variables of `env` added to its environment: its output, whether its test passed,
/// failed or was killed by a signal. `None` where the system gives the child no such
/// directory: the child runs in a mount namespace of its own (`unshare --user
/// --map-root-user --mount`, so nothing is mounted outside it, and no privilege is needed
/// where user namespaces are allowed), and a system without `unshare` or that refuses the
/// namespace or the mount gives none; the caller says so and checks nothing.
///
/// Tests use it to run out of room in a directory (a container's 64 MiB `/dev/shm`).
pub fn run_over_small_tmpfs(
    test: &str,
    dir: &Path,
    size: &str,
    env: &[(&str, String)],
) -> Option<Output> {
    const SETUP_FAILED: i32 = 77;
    let script = format!(
        "mount -t tmpfs -o size={size} braid-test \"$0\" || exit {SETUP_FAILED}; exec \"$@\""
    );
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
        .arg(dir)
        .arg(std::env::current_exe().ok()?)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .ok()?;
    // The test harness exits with 0 or 101, or a signal ends the test; any other status is
    // `unshare`'s or the mount's.
    let ran = match out.status.code() {
        None | Some(0) | Some(101) => true,
        Some(_) => false,
    };
    ran.then_some(out)
}

/// This test executable running one of its tests in a child process, with the child's
/// standard input, output and error piped to this process.
pub struct ChildTest {
    child: Child,
    to_child: ChildStdin,
    from_child: BufReader<ChildStdout>,
    /// Reads the child's standard error to its end (so that a full pipe never blocks the
    /// child); joined only to explain a child that ended early.
    stderr: Option<JoinHandle<String>>,
}

impl ChildTest {
    /// Starts this test executable again running only `test` (its exact name, with
    /// `--nocapture` so that its printed lines reach [`ChildTest::expect`], on one test
    /// thread), with the variables of `env` added to its environment.
    pub fn spawn(test: &str, env: &[(&str, String)]) -> io::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let not_piped = || io::Error::other("a stream of the child is not piped");
        let to_child = child.stdin.take().ok_or_else(not_piped)?;
        let from_child = child.stdout.take().ok_or_else(not_piped)?;
        let child_err = child.stderr.take().ok_or_else(not_piped)?;
        let stderr = std::thread::spawn(move || io::read_to_string(child_err).unwrap_or_default());
        Ok(Self {
            child,
            to_child,
            from_child: BufReader::new(from_child),
            stderr: Some(stderr),
        })
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `line` (and a line end) to the child's standard input.
    pub fn send(&mut self, line: &str) -> io::Result<()> {
        writeln!(self.to_child, "{line}")
    }

    /// Reads the child's output up to a line that ends with `what` (the test harness prints
    /// `test NAME ... ` before the child's first line); the error, with the child's standard
    /// error, when the child's output ends first.
    pub fn expect(&mut self, what: &str) -> Result<(), ChildEnded> {
        loop {
            match next_line(&mut self.from_child) {
                Some(line) if line.ends_with(what) => return Ok(()),
                Some(_) => {}
                None => {
                    let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default());
                    return Err(ChildEnded {
                        awaited: what.to_string(),
                        stderr: stderr.unwrap_or_default(),
                    });
                }
            }
        }
    }

    /// Waits for the child to exit. Its standard output stays open meanwhile: the test
    /// harness still writes its summary there.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait()
    }
}

/// The child's output ended before the line a [`ChildTest::expect`] waited for.
///
/// Its `Debug` form is its message, so that an `unwrap` in a test shows the child's standard
/// error as the child wrote it.
pub struct ChildEnded {
    /// The end of the line that was awaited.
    pub awaited: String,
    /// What the child wrote to its standard error.
    pub stderr: String,
}

impl fmt::Display for ChildEnded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the child ended before {:?}: {}",
            self.awaited, self.stderr
        )
    }
}

impl fmt::Debug for ChildEnded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for ChildEnded {}
