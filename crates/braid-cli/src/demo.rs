//! `braid demo`: the seed scenarios as one table.

use braid::scenarios::{tagged_events, wait_stream};
use braid::sim::{SimConfig, SimMode};
use std::io::Write;
use std::path::Path;

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
    /// Reports of the simulator's sanitizer during the run that computed the result.
    pub reports: usize,
}

/// Runs every scenario and returns the rows. With `timeline`, writes the Chrome Trace Event
/// JSON of the tagged-events multi-stream run (data mode) there.
pub fn rows(timeline: Option<&Path>) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    let shape = wait_stream::Shape::default();
    for (mode, with_wait) in [("without wait_stream", false), ("with wait_stream", true)] {
        let run = wait_stream::run_checked(
            &braid::sim_device(SimConfig::new())?,
            shape,
            with_wait,
            braid::sim_race_reports,
        )?;
        rows.push(Row {
            scenario: "wait_stream",
            mode,
            correct: run.correct,
            expected_correct: with_wait,
            simulated_us: run.elapsed_us,
            reports: run.reports.map_or(0, |r| r.len()),
        });
    }
    for (mode, layout) in [
        ("single stream", tagged_events::Layout::SingleStream),
        ("tagged stream \"1\"", tagged_events::Layout::MultiStream),
    ] {
        let small = tagged_events::Shape::SMALL;
        let data_device = braid::sim_device(SimConfig::new())?;
        let data = tagged_events::run(&data_device, small, layout, true)?;
        if let (Some(path), tagged_events::Layout::MultiStream) = (timeline, layout) {
            data_device.hal().write_chrome_trace(path)?;
        }
        let reports = data_device.hal().sanitizer_reports().len();
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
            reports,
        });
    }
    Ok(rows)
}

/// Prints the table (and writes the timeline to `timeline`, if given); returns whether every
/// scenario behaved as it should: a missing wait gives a wrong result and a sanitizer report,
/// every other mode a right result and no report.
pub fn run(
    out: &mut impl Write,
    timeline: Option<&Path>,
) -> Result<bool, Box<dyn std::error::Error>> {
    let rows = rows(timeline)?;
    writeln!(
        out,
        "braid demo on the simulated device ({})",
        braid::sim::DeviceProfile::ascend_910b().name
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<15} {:<22} {:<8} {:<9} {:>14} {:>8}",
        "scenario", "mode", "correct", "as meant", "simulated us", "reports"
    )?;
    writeln!(out, "{}", "-".repeat(81))?;
    for r in &rows {
        writeln!(
            out,
            "{:<15} {:<22} {:<8} {:<9} {:>14.1} {:>8}",
            r.scenario,
            r.mode,
            if r.correct { "yes" } else { "NO" },
            if as_meant(r) { "yes" } else { "NO" },
            r.simulated_us,
            r.reports
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "correct:  whether the numbers computed on the simulated device are right."
    )?;
    writeln!(
        out,
        "as meant: a missing wait must give a wrong result and a sanitizer report, every other"
    )?;
    writeln!(out, "          mode a right result and no report.")?;
    writeln!(
        out,
        "reports:  races and uses after free the simulator's sanitizer found in the run."
    )?;
    writeln!(
        out,
        "simulated us: device time of the scenario's work from timing events; tagged_events"
    )?;
    writeln!(
        out,
        "          checks results at a small shape and times a model-sized shape (timing-only)."
    )?;
    if let Some(path) = timeline {
        writeln!(
            out,
            "timeline of the tagged_events multi-stream run written to {} (open in ui.perfetto.dev)",
            path.display()
        )?;
    }
    Ok(rows.iter().all(as_meant))
}

/// Whether a row shows what its scenario is meant to show.
fn as_meant(r: &Row) -> bool {
    r.correct == r.expected_correct && (r.reports == 0) == r.expected_correct
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_table_lists_every_scenario_and_all_behave_as_meant() {
        let mut out = Vec::new();
        let ok = run(&mut out, None).expect("demo runs");
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
        let reports: Vec<usize> = rows(None).unwrap().iter().map(|r| r.reports).collect();
        assert_eq!(reports, vec![1, 0, 0, 0]);
    }

    #[test]
    fn timeline_has_tracks_slices_flows_and_counters() {
        let path = std::env::temp_dir().join(format!("braid-demo-{}.json", std::process::id()));
        let mut out = Vec::new();
        assert!(run(&mut out, Some(&path)).expect("demo runs"));
        let text = std::fs::read_to_string(&path).expect("timeline written");
        std::fs::remove_file(&path).ok();
        let trace: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let events = trace["traceEvents"].as_array().expect("traceEvents");
        let with = |ph: &'static str| events.iter().filter(move |e| e["ph"] == ph);
        let tracks: Vec<&str> = with("M")
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(tracks.contains(&"host"), "{tracks:?}");
        assert!(
            tracks.iter().filter(|t| t.starts_with("stream ")).count() >= 2,
            "{tracks:?}"
        );
        let slices: Vec<&str> = with("X").filter_map(|e| e["name"].as_str()).collect();
        for name in ["add", "matmul", "fill", "memcpy_d2h", "launch"] {
            assert!(slices.contains(&name), "no {name} slice in {slices:?}");
        }
        let starts: Vec<_> = with("s").map(|e| e["id"].clone()).collect();
        let ends: Vec<_> = with("f").map(|e| e["id"].clone()).collect();
        assert!(!starts.is_empty(), "no flows");
        assert_eq!(starts, ends, "every flow starts and ends");
        // the tagged stream waits for the main stream's record: a flow between two tracks
        let first = with("s").next().unwrap();
        let end = with("f").find(|e| e["id"] == first["id"]).unwrap();
        assert_ne!(first["tid"], end["tid"]);
        let counters: Vec<_> = with("C").collect();
        assert!(!counters.is_empty());
        assert!(counters
            .iter()
            .all(|c| c["args"]["reserved"].is_u64() && c["args"]["allocated"].is_u64()));
        assert!(counters
            .iter()
            .any(|c| c["args"]["reserved"].as_u64() > Some(0)));
    }
}
