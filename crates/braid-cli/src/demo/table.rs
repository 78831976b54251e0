//! The demo's rows, whether each shows what it is meant to, and the table that prints them.
//!
//! Each row says in words what it shows (`right`, `wrong, as expected without the wait`, or
//! `UNEXPECTED: ...`), so a newcomer reads the table without its notes.

use std::io::Write;

/// One line of the table.
#[derive(Clone, PartialEq, Debug)]
pub struct Row {
    /// Scenario name.
    pub scenario: &'static str,
    /// Mode within the scenario.
    pub mode: &'static str,
    /// Whether the computed result is correct.
    pub correct: bool,
    /// What the mode leaves out when it is meant to give a wrong result (`"the wait"`): a
    /// mode that leaves out an ordering must be wrong, and the sanitizer must report it.
    /// `None`: the mode is meant to be right, with no report.
    pub left_out: Option<&'static str>,
    /// Device time in microseconds (simulated on the simulator and on `braid-acl-sim`);
    /// `None` where the row is about memory, not time.
    pub device_us: Option<f64>,
    /// Bytes the mode's graph pools reserve (memory_reuse); `None` elsewhere.
    pub reserved_bytes: Option<u64>,
    /// For memory_reuse: what the reservation must show (`"no more than the largest
    /// graph"`) and whether it does; `None` for rows that are not about memory.
    pub memory: Option<(&'static str, bool)>,
    /// Reports of the race detector (the simulator's sanitizer) during the run that computed
    /// the result; `None` where the backend has none to ask (ACL on CANN).
    pub reports: Option<usize>,
}

impl Row {
    /// Whether the result is meant to be right.
    pub fn expected_correct(&self) -> bool {
        self.left_out.is_none()
    }

    /// What the row shows, in words: `right` (with what its reservation shows, for memory
    /// rows), `wrong, as expected without ...`, or `UNEXPECTED: ...` naming what is not as
    /// meant.
    pub fn result(&self) -> String {
        let expected = self.expected_correct();
        if self.correct != expected {
            return match self.left_out {
                Some(left_out) => format!("UNEXPECTED: right even without {left_out}"),
                None => "UNEXPECTED: wrong".to_string(),
            };
        }
        match self.reports {
            Some(0) if !expected => return "UNEXPECTED: wrong, but no race reported".to_string(),
            Some(n) if n > 0 && expected => {
                return format!("UNEXPECTED: {n} race report(s)");
            }
            _ => {}
        }
        match (self.left_out, self.memory) {
            (Some(left_out), _) => format!("wrong, as expected without {left_out}"),
            (None, Some((meant, true))) => format!("right; {meant}"),
            (None, Some((meant, false))) => {
                format!("UNEXPECTED: reservation not {meant}")
            }
            (None, None) => "right".to_string(),
        }
    }
}

/// Whether a row shows what its scenario is meant to show: the expected result, a report
/// exactly when the result is meant to be wrong (where reports are known), and the expected
/// reservation where the row is about memory.
pub fn as_meant(r: &Row) -> bool {
    !r.result().starts_with("UNEXPECTED")
}

/// What the columns mean, printed under the table.
const NOTES: &str = "\
result:    whether the numbers the device computed are right. \"wrong, as expected without
           X\" is a mode that leaves out an ordering (the wait, the record, record_stream) on
           purpose, to show what goes wrong without it: it is as meant when its numbers come
           out wrong and the sanitizer reports the race. A row marked UNEXPECTED did not
           behave as meant, and the command exits non-zero.
device us: device time of the scenario's work from timing events (simulated on the
           simulator and on braid-acl-sim); results are checked at a small shape, times taken
           at a model-sized one on the timing device. A graph replay saves the host's launch
           cost of each kernel and pays for one graph launch: where launches dominate
           (graph_mode's 1,012 short kernels) it is several times faster, but where the eager
           step's launches already hide behind long kernels (tensor_parallel, overlapped)
           there is nothing to save, and the replay is slower by its launch.
reserved:  MiB the graph pools of memory_reuse reserve for a decoder captured at 8 batch
           sizes, at Llama-2-7B's width.
reports:   races and uses after free the simulator's sanitizer found in the run (n/a: the
           backend has no race detector to ask).
";

/// Width of the result column: the longest result of an as-meant row.
const RESULT_WIDTH: usize = 40;

/// The header, the rule under it and one line per row.
fn rows_text(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<21} {:<26} {:<RESULT_WIDTH$} {:>10} {:>9} {:>7}",
        "scenario", "mode", "result", "device us", "reserved", "reports"
    )?;
    writeln!(
        out,
        "{}",
        "-".repeat(21 + 26 + RESULT_WIDTH + 10 + 9 + 7 + 5)
    )?;
    for r in rows {
        let line = format!(
            "{:<21} {:<26} {:<RESULT_WIDTH$} {:>10} {:>9} {:>7}",
            r.scenario,
            r.mode,
            r.result(),
            r.device_us
                .map_or_else(|| "-".to_string(), |us| format!("{us:.1}")),
            r.reserved_bytes.map_or_else(
                || "-".to_string(),
                |b| format!("{:.1}", b as f64 / f64::from(1 << 20))
            ),
            r.reports
                .map_or_else(|| "n/a".to_string(), |n| n.to_string())
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The table of `rows` (header, rows, and what the columns mean), without the title.
pub fn table(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    rows_text(out, rows)?;
    writeln!(out)?;
    write!(out, "{NOTES}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(correct: bool, left_out: Option<&'static str>, reports: Option<usize>) -> Row {
        Row {
            scenario: "s",
            mode: "m",
            correct,
            left_out,
            device_us: Some(1.0),
            reserved_bytes: None,
            memory: None,
            reports,
        }
    }

    #[test]
    fn each_row_says_what_it_shows() {
        let wait = Some("the wait");
        assert_eq!(row(true, None, Some(0)).result(), "right");
        assert_eq!(
            row(false, wait, Some(1)).result(),
            "wrong, as expected without the wait"
        );
        assert_eq!(
            row(true, wait, Some(0)).result(),
            "UNEXPECTED: right even without the wait"
        );
        assert_eq!(row(false, None, Some(0)).result(), "UNEXPECTED: wrong");
        assert_eq!(
            row(false, wait, Some(0)).result(),
            "UNEXPECTED: wrong, but no race reported"
        );
        assert_eq!(
            row(true, None, Some(2)).result(),
            "UNEXPECTED: 2 race report(s)"
        );
        // Without a race detector, rows are judged by their results.
        assert!(as_meant(&row(false, wait, None)));
        assert!(as_meant(&row(true, None, None)));
        assert!(!as_meant(&row(false, None, None)));
        let mut out = Vec::new();
        table(&mut out, &[row(true, None, None)]).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("n/a"));
    }

    #[test]
    fn a_memory_row_is_as_meant_only_with_its_reservation() {
        let memory = |shown| Row {
            device_us: None,
            reserved_bytes: Some(40 << 20),
            memory: Some(("at most the largest graph", shown)),
            ..row(true, None, Some(0))
        };
        assert_eq!(memory(true).result(), "right; at most the largest graph");
        assert!(as_meant(&memory(true)));
        assert!(!as_meant(&memory(false)));
        let mut out = Vec::new();
        table(&mut out, &[memory(false)]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text.lines().nth(2).unwrap();
        // The result, no device time, 40 MiB reserved, no report.
        assert!(
            line.contains("UNEXPECTED: reservation not at most the largest graph")
                && line.ends_with("-      40.0       0"),
            "{line}"
        );
    }

    #[test]
    fn the_notes_explain_the_expected_wrong_rows_and_slower_replays() {
        let mut out = Vec::new();
        table(&mut out, &[row(false, Some("the wait"), Some(1))]).unwrap();
        let text = String::from_utf8(out).unwrap();
        // The row's words, and the note that says what they mean.
        assert!(
            text.contains("wrong, as expected without the wait"),
            "{text}"
        );
        assert!(text.contains("\"wrong, as expected without\n           X\" is a mode that leaves out an ordering"), "{text}");
        assert!(
            text.contains("there is nothing to save, and the replay is slower by its launch"),
            "{text}"
        );
    }

    #[test]
    fn every_as_meant_result_fits_its_column() {
        for left_out in ["the wait", "the record", "record_stream"] {
            assert!(row(false, Some(left_out), Some(1)).result().len() <= RESULT_WIDTH);
        }
    }
}
