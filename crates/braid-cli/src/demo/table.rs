//! The demo's rows, whether each shows what it is meant to, and the table that prints them.

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
    /// Whether `correct` is what the scenario is meant to show: a mode that leaves out an
    /// ordering (a wait, a record) must be wrong.
    pub expected_correct: bool,
    /// Device time in microseconds (simulated on the simulator and on `braid-acl-sim`);
    /// `None` where the row is about memory, not time.
    pub device_us: Option<f64>,
    /// Bytes the mode's graph pools reserve (memory_reuse); `None` elsewhere.
    pub reserved_bytes: Option<u64>,
    /// For memory_reuse: whether the reservation is what the mode is meant to show (see
    /// [`table`]'s column notes); `None` for rows that are not about memory.
    pub memory_as_meant: Option<bool>,
    /// Reports of the race detector (the simulator's sanitizer) during the run that computed
    /// the result; `None` where the backend has none to ask (ACL on CANN).
    pub reports: Option<usize>,
}

/// Whether a row shows what its scenario is meant to show: the expected result, a report
/// exactly when the result is meant to be wrong (where reports are known), and the expected
/// reservation where the row is about memory.
pub fn as_meant(r: &Row) -> bool {
    r.correct == r.expected_correct
        && r.reports.is_none_or(|n| (n == 0) == r.expected_correct)
        && r.memory_as_meant != Some(false)
}

/// What the columns mean, printed under the table.
const NOTES: &str = "\
correct:   whether the numbers computed on the device are right (memory_reuse: every graph
           replay computes what eager execution of the same model computes).
as meant:  the modes that leave out an ordering (without wait_stream, without the
           record_tagged_stream call, manual mode with no record_stream) must give a wrong
           result and a sanitizer report; every other mode a right result and no report.
           memory_reuse must also show its reservations: a pool per graph more than the
           largest graph alone (each graph keeps its own), one pool per runner no more than
           the largest graph (the smaller graphs reuse its memory), two runners sharing a pool
           less than a pool per graph.
device us: device time of the scenario's work from timing events (simulated on the
           simulator and on braid-acl-sim); tagged_events checks results at a small shape and
           times a model-sized shape on the timing device (timing-only on the simulators).
           graph_mode: one decode step eager, replayed as a graph, and replayed with its
           branches on tagged stream \"1\"; correct means both replays compute what the eager
           step computes.
           tensor_parallel: Llama-2-7B's layers over 2,048 tokens sharded over 4 devices of
           a node, the slowest device's step with each all-reduce on the compute stream
           (serial), on its own stream overlapping the next micro-batch (overlapped), and the
           overlapped step replayed as graphs; correct means the sharded step and its replay
           match one device at a small size (overlapped: and beats serial).
reserved:  MiB the graph pools of memory_reuse reserve for a decoder captured at 8 batch
           sizes, measured at Llama-2-7B's width on the timing device.
reports:   races and uses after free the simulator's sanitizer found in the run (n/a: the
           backend has no race detector to ask).
";

/// The table of `rows` (header, rows, and what the columns mean), without the title.
pub fn table(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<21} {:<26} {:<7} {:<8} {:>10} {:>9} {:>7}",
        "scenario", "mode", "correct", "as meant", "device us", "reserved", "reports"
    )?;
    writeln!(out, "{}", "-".repeat(94))?;
    let yes_no = |b: bool| if b { "yes" } else { "NO" };
    for r in rows {
        writeln!(
            out,
            "{:<21} {:<26} {:<7} {:<8} {:>10} {:>9} {:>7}",
            r.scenario,
            r.mode,
            yes_no(r.correct),
            yes_no(as_meant(r)),
            r.device_us
                .map_or_else(|| "-".to_string(), |us| format!("{us:.1}")),
            r.reserved_bytes.map_or_else(
                || "-".to_string(),
                |b| format!("{:.1}", b as f64 / f64::from(1 << 20))
            ),
            r.reports
                .map_or_else(|| "n/a".to_string(), |n| n.to_string())
        )?;
    }
    writeln!(out)?;
    write!(out, "{NOTES}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(correct: bool, expected_correct: bool, reports: Option<usize>) -> Row {
        Row {
            scenario: "s",
            mode: "m",
            correct,
            expected_correct,
            device_us: Some(1.0),
            reserved_bytes: None,
            memory_as_meant: None,
            reports,
        }
    }

    #[test]
    fn rows_without_reports_are_judged_by_their_results() {
        assert!(as_meant(&row(false, false, None)));
        assert!(as_meant(&row(true, true, None)));
        assert!(!as_meant(&row(false, true, None)));
        assert!(!as_meant(&row(false, false, Some(0))));
        assert!(!as_meant(&row(true, true, Some(2))));
        let mut out = Vec::new();
        table(&mut out, &[row(true, true, None)]).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("n/a"));
    }

    #[test]
    fn a_memory_row_is_as_meant_only_with_its_reservation() {
        let memory = |as_meant| Row {
            device_us: None,
            reserved_bytes: Some(40 << 20),
            memory_as_meant: Some(as_meant),
            ..row(true, true, Some(0))
        };
        assert!(as_meant(&memory(true)));
        assert!(!as_meant(&memory(false)));
        let mut out = Vec::new();
        table(&mut out, &[memory(false)]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text.lines().nth(2).unwrap();
        // correct yes, as meant NO, no device time, 40 MiB reserved, no report.
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells, ["s", "m", "yes", "NO", "-", "40.0", "0"], "{line}");
    }
}
