//! `braid conformance`: braid's conformance suite (every case of `braid_conformance::CASES`
//! and `COLLECTIVE_CASES`) through the ACL library found as `braid demo --backend acl` finds it
//! (CANN when configured, else braid-acl-sim built beside the binary), printed as a table of
//! cases with a summary line. A case that needs more devices than ACL reports is skipped,
//! naming both counts, not failed.

use braid::acl::{aclnn, AclApi, AclBackend, AclConfig, AclDevice, NativeOpFn, OpenError};
use braid::hal::HalError;
use braid_conformance::{cases, collective_cases, run_case, CaseError, Harness, ScaleOpArgs};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

/// The outcome of one case.
#[derive(Debug)]
pub struct CaseOutcome {
    /// `module::case`.
    pub name: &'static str,
    /// Passed, or why not (a failure, or a skip: [`CaseError::skipped`]).
    pub result: Result<(), CaseError>,
}

/// What the suite gave, and on which library.
#[derive(Debug)]
pub struct Report {
    /// The ACL library the suite ran through.
    pub library: String,
    /// Whether it is braid-acl-sim.
    pub simulated: bool,
    /// Every case, in the suite's order.
    pub cases: Vec<CaseOutcome>,
    /// Wall-clock seconds the suite took.
    pub seconds: f64,
}

impl Report {
    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.count(|e| !e.skipped)
    }

    /// Cases skipped: they need more devices than the machine has.
    pub fn skipped(&self) -> usize {
        self.count(|e| e.skipped)
    }

    fn count(&self, which: impl Fn(&CaseError) -> bool) -> usize {
        (self.cases.iter())
            .filter(|c| c.result.as_ref().is_err_and(&which))
            .count()
    }

    /// Writes the per-case table, then the summary line.
    pub fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let what = if self.simulated {
            "braid-acl-sim: ACL's API on braid's simulator"
        } else {
            "CANN"
        };
        writeln!(out, "braid conformance through {} ({what})", self.library)?;
        writeln!(out)?;
        let width = self.cases.iter().map(|c| c.name.len()).max().unwrap_or(4);
        writeln!(out, "{:<width$}  result", "case")?;
        writeln!(out, "{}", "-".repeat(width + 8))?;
        for case in &self.cases {
            match &case.result {
                Ok(()) => writeln!(out, "{:<width$}  pass", case.name)?,
                Err(e) if e.skipped => writeln!(out, "{:<width$}  skip: {}", case.name, e.message)?,
                Err(e) => writeln!(out, "{:<width$}  FAIL: {e}", case.name)?,
            }
        }
        writeln!(out)?;
        writeln!(
            out,
            "{} cases: {} passed, {} failed, {} skipped ({:.1} s)",
            self.cases.len(),
            self.cases.len() - self.failed() - self.skipped(),
            self.failed(),
            self.skipped(),
            self.seconds
        )
    }
}

/// The suite's user operator `y = factor * x` on ACL: `aclnnMuls` on the native stream.
fn scale_body(args: ScaleOpArgs) -> Result<Arc<NativeOpFn>, String> {
    aclnn::muls_op(
        args.x,
        args.y,
        args.elements,
        args.dtype,
        args.factor,
        args.workspace,
    )
    .map_err(|e| e.to_string())
}

/// Runs every case through `api`, in the suite's order, each on a thread of its own (as
/// `cargo test` runs them: a case may leave thread-local state, the current stream for one,
/// that the next must not see). A case needing more devices than ACL reports is skipped.
/// Errors: ACL does not initialize or count its devices.
pub fn run_on(api: &'static AclApi) -> Result<Report, OpenError> {
    let count = AclDevice::count(api)?;
    let device = move |ordinal: u32| -> braid::Result<braid::Device<AclBackend>> {
        let hal =
            AclDevice::open_with(api, ordinal, AclConfig::default()).map_err(HalError::from)?;
        braid::Device::new(hal)
    };
    let harness = Harness::<AclBackend>::new(device)
        .with_scale_body(scale_body)
        .with_node(move |n| (0..n).map(device).collect())
        .with_device_count(count);
    let started = Instant::now();
    let mut list = cases::<AclBackend>();
    list.extend(collective_cases::<AclBackend>());
    let outcomes = list
        .into_iter()
        .map(|case| {
            let result = std::thread::scope(|scope| {
                scope
                    .spawn(|| run_case(&harness, case.run))
                    .join()
                    .unwrap_or_else(|_| Err(CaseError::new("the case's thread panicked")))
            });
            tracing::info!(
                case = case.name,
                passed = result.is_ok(),
                skipped = result.as_ref().is_err_and(|e| e.skipped),
                "conformance case"
            );
            CaseOutcome {
                name: case.name,
                result,
            }
        })
        .collect();
    Ok(Report {
        library: api.path().display().to_string(),
        simulated: api.is_braid_acl_sim(),
        cases: outcomes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `braid conformance`: loads ACL, runs the suite, prints the table; `Ok(false)` when a case
/// failed (a skipped case is no failure).
pub fn run(out: &mut impl Write) -> Result<bool, Box<dyn std::error::Error>> {
    let api = AclApi::load_or_sim().map_err(|e| HalError::from(OpenError::Load(e)))?;
    let report = run_on(api).map_err(HalError::from)?;
    report.write(out)?;
    Ok(report.failed() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(failing: bool) -> Report {
        Report {
            library: "/opt/lib/libascendcl.so".to_string(),
            simulated: false,
            cases: vec![
                CaseOutcome {
                    name: "streams::one",
                    result: Ok(()),
                },
                CaseOutcome {
                    name: "events::a_longer_name",
                    result: if failing {
                        Err(CaseError::new("the event never completed"))
                    } else {
                        Ok(())
                    },
                },
                CaseOutcome {
                    name: "collectives::four",
                    result: Err(CaseError::skip("needs 4 devices, this machine has 2")),
                },
            ],
            seconds: 1.25,
        }
    }

    #[test]
    fn the_table_has_a_row_per_case_and_a_summary_counting_failures_and_skips() {
        let mut out = Vec::new();
        report(true).write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(
            lines[0],
            "braid conformance through /opt/lib/libascendcl.so (CANN)"
        );
        assert!(lines.contains(&"streams::one           pass"), "{text}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("events::a_longer_name  FAIL: the event never completed")),
            "{text}"
        );
        assert!(
            lines.contains(&"collectives::four      skip: needs 4 devices, this machine has 2"),
            "{text}"
        );
        assert_eq!(
            *lines.last().unwrap(),
            "3 cases: 1 passed, 1 failed, 1 skipped (1.2 s)"
        );
        assert_eq!((report(true).failed(), report(true).skipped()), (1, 1));
        assert_eq!((report(false).failed(), report(false).skipped()), (0, 1));
    }
}
