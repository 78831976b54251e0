//! `braid demo`: the seed scenarios as one table.

use braid::scenarios::{tagged_events, wait_stream};
use braid::sim::{SimConfig, SimMode};
use std::io::Write;

/// One line of the table.
pub struct Row {
    /// Scenario name.
    pub scenario: &'static str,
    /// Mode within the scenario.
    pub mode: &'static str,
    /// Whether the computed result is correct.
    pub correct: bool,
    /// Whether `correct` is what the scenario is meant to show (a missing wait must be wrong).
    pub expected_correct: bool,
    /// Simulated device time in microseconds.
    pub simulated_us: f64,
}

/// Runs every scenario and returns the rows.
pub fn rows() -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    let shape = wait_stream::Shape::default();
    for (mode, with_wait) in [("without wait_stream", false), ("with wait_stream", true)] {
        let run = wait_stream::run(&braid::sim_device(SimConfig::new())?, shape, with_wait)?;
        rows.push(Row {
            scenario: "wait_stream",
            mode,
            correct: run.correct,
            expected_correct: with_wait,
            simulated_us: run.elapsed_us,
        });
    }
    for (mode, layout) in [
        ("single stream", tagged_events::Layout::SingleStream),
        ("tagged stream \"1\"", tagged_events::Layout::MultiStream),
    ] {
        let small = tagged_events::Shape::SMALL;
        let data = tagged_events::run(&braid::sim_device(SimConfig::new())?, small, layout, true)?;
        let correct = data
            .results
            .as_ref()
            .is_some_and(|r| tagged_events::check(small, r));
        let timing_device = braid::sim_device(
            SimConfig::new()
                .capacity(64 << 30)
                .mode(SimMode::TimingOnly),
        )?;
        let timing =
            tagged_events::run(&timing_device, tagged_events::Shape::MODEL, layout, false)?;
        rows.push(Row {
            scenario: "tagged_events",
            mode,
            correct,
            expected_correct: true,
            simulated_us: timing.makespan_us,
        });
    }
    Ok(rows)
}

/// Prints the table; returns whether every scenario behaved as it should.
pub fn run(out: &mut impl Write) -> Result<bool, Box<dyn std::error::Error>> {
    let rows = rows()?;
    writeln!(
        out,
        "braid demo on the simulated device ({})",
        braid::sim::DeviceProfile::ascend_910b().name
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<15} {:<22} {:<8} {:<9} {:>14}",
        "scenario", "mode", "correct", "as meant", "simulated us"
    )?;
    writeln!(out, "{}", "-".repeat(72))?;
    for r in &rows {
        writeln!(
            out,
            "{:<15} {:<22} {:<8} {:<9} {:>14.1}",
            r.scenario,
            r.mode,
            if r.correct { "yes" } else { "NO" },
            if r.correct == r.expected_correct {
                "yes"
            } else {
                "NO"
            },
            r.simulated_us
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "correct:  whether the numbers computed on the simulated device are right."
    )?;
    writeln!(
        out,
        "as meant: a missing wait must give a wrong result, every other mode a right one."
    )?;
    writeln!(
        out,
        "simulated us: device time of the scenario's work from timing events; tagged_events"
    )?;
    writeln!(
        out,
        "          checks results at a small shape and times a model-sized shape (timing-only)."
    )?;
    Ok(rows.iter().all(|r| r.correct == r.expected_correct))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_table_lists_every_scenario_and_all_behave_as_meant() {
        let mut out = Vec::new();
        let ok = run(&mut out).expect("demo runs");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(ok, "{text}");
        for needle in [
            "wait_stream",
            "tagged_events",
            "without wait_stream",
            "tagged stream \"1\"",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
