//! `braid demo`: the seed scenarios as one table, on the simulated device or through ACL.

use braid::core::hal::Backend;
use braid::scenarios::devices::{self, Role};
use braid::scenarios::{tagged_events, wait_stream};
use braid::Device;
use std::io::Write;
use std::path::Path;

/// The backend `braid demo` runs the scenarios on.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, clap::ValueEnum)]
pub enum DemoBackend {
    /// braid's simulated device (Ascend 910B profile).
    #[default]
    Sim,
    /// Huawei Ascend through ACL, loaded at run time: `$BRAID_ACL_LIB`, then
    /// `lib64/libascendcl.so` under `$ASCEND_HOME_PATH` / `$ASCEND_TOOLKIT_HOME`, then
    /// `libascendcl.so` on the loader path, then `libbraid_acl_sim.so` (ACL's API on the
    /// simulator) built next to this binary.
    Acl,
}

/// One line of the table.
#[derive(Clone, PartialEq, Debug)]
pub struct Row {
    /// Scenario name.
    pub scenario: &'static str,
    /// Mode within the scenario.
    pub mode: &'static str,
    /// Whether the computed result is correct.
    pub correct: bool,
    /// Whether `correct` is what the scenario is meant to show (a missing wait must be wrong).
    pub expected_correct: bool,
    /// Device time in microseconds (simulated on the simulator and on `braid-acl-sim`).
    pub device_us: f64,
    /// Reports of the race detector (the simulator's sanitizer) during the run that computed
    /// the result; `None` where the backend has none to ask (ACL on CANN).
    pub reports: Option<usize>,
}

/// Runs every scenario on `backend` and returns the rows. With `timeline` (simulator only),
/// writes the Chrome Trace Event JSON of the tagged-events multi-stream run (data mode) there.
pub fn rows(
    backend: DemoBackend,
    timeline: Option<&Path>,
) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    match backend {
        DemoBackend::Sim => rows_on(
            devices::sim,
            braid::sim_race_reports,
            |device, layout| match (timeline, layout) {
                (Some(path), tagged_events::Layout::MultiStream) => {
                    Ok(device.hal().write_chrome_trace(path)?)
                }
                _ => Ok(()),
            },
        ),
        DemoBackend::Acl => {
            if timeline.is_some() {
                return Err(
                    "--timeline needs --backend sim (the timeline is the simulator's)".into(),
                );
            }
            rows_on(devices::acl, braid::acl_race_reports, |_, _| Ok(()))
        }
    }
}

/// The rows on devices from `open`, with race reports from `reports`; `after_data` sees each
/// tagged-events data run's device.
pub fn rows_on<B: Backend>(
    open: impl Fn(Role) -> braid::Result<Device<B>>,
    reports: impl Fn(&Device<B>) -> Option<Vec<String>>,
    mut after_data: impl FnMut(
        &Device<B>,
        tagged_events::Layout,
    ) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    let shape = wait_stream::Shape::default();
    for (mode, with_wait) in [("without wait_stream", false), ("with wait_stream", true)] {
        let run = wait_stream::run_checked(&open(Role::Data)?, shape, with_wait, &reports)?;
        rows.push(Row {
            scenario: "wait_stream",
            mode,
            correct: run.correct,
            expected_correct: with_wait,
            device_us: run.elapsed_us,
            reports: run.reports.map(|r| r.len()),
        });
    }
    for (mode, layout) in [
        ("single stream", tagged_events::Layout::SingleStream),
        ("tagged stream \"1\"", tagged_events::Layout::MultiStream),
    ] {
        let small = tagged_events::Shape::SMALL;
        let data_device = open(Role::Data)?;
        let data = tagged_events::run(&data_device, small, layout, true)?;
        after_data(&data_device, layout)?;
        let found = reports(&data_device).map(|r| r.len());
        let correct = data
            .results
            .as_ref()
            .is_some_and(|r| tagged_events::check(small, r));
        let timing = tagged_events::run(
            &open(Role::Timing)?,
            tagged_events::Shape::MODEL,
            layout,
            false,
        )?;
        rows.push(Row {
            scenario: "tagged_events",
            mode,
            correct,
            expected_correct: true,
            device_us: timing.makespan_us,
            reports: found,
        });
    }
    // Graph modes: one decode step of ~1,000 small kernels, eager vs graph replay. Results are
    // compared in data mode at a small step; times come from the full step on the timing device.
    let data_device = open(Role::Data)?;
    let small = braid::scenarios::graph_mode::Step {
        layers: 3,
        vector_ops: 3,
        matmuls: 2,
        batch: 2,
        hidden: 64,
    };
    let checked = braid::scenarios::graph_mode::run(&data_device, small)?;
    let found = reports(&data_device).map(|r| r.len());
    let timed = braid::scenarios::graph_mode::run(
        &open(Role::Timing)?,
        braid::scenarios::graph_mode::Step::default(),
    )?;
    for (mode, us) in [
        ("eager, 1,012 kernels", timed.eager_us),
        ("graph replay", timed.graph_us),
        ("graph, tagged \"1\"", timed.graph_multistream_us),
    ] {
        rows.push(Row {
            scenario: "graph_mode",
            mode,
            correct: checked.replays_match_eager,
            expected_correct: true,
            device_us: us,
            reports: found,
        });
    }
    Ok(rows)
}

/// The table of `rows` (header, rows, and what the columns mean), without the title.
pub fn table(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<15} {:<22} {:<8} {:<9} {:>14} {:>8}",
        "scenario", "mode", "correct", "as meant", "device us", "reports"
    )?;
    writeln!(out, "{}", "-".repeat(81))?;
    for r in rows {
        writeln!(
            out,
            "{:<15} {:<22} {:<8} {:<9} {:>14.1} {:>8}",
            r.scenario,
            r.mode,
            if r.correct { "yes" } else { "NO" },
            if as_meant(r) { "yes" } else { "NO" },
            r.device_us,
            r.reports
                .map_or_else(|| "n/a".to_string(), |n| n.to_string())
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "correct:   whether the numbers computed on the device are right."
    )?;
    writeln!(
        out,
        "as meant:  a missing wait must give a wrong result and a sanitizer report, every other"
    )?;
    writeln!(out, "           mode a right result and no report.")?;
    writeln!(
        out,
        "reports:   races and uses after free the simulator's sanitizer found in the run (n/a:"
    )?;
    writeln!(out, "           the backend has no race detector to ask).")?;
    writeln!(
        out,
        "device us: device time of the scenario's work from timing events (simulated on the"
    )?;
    writeln!(
        out,
        "           simulator and on braid-acl-sim); tagged_events checks results at a small"
    )?;
    writeln!(
        out,
        "           shape and times a model-sized shape on the timing device (timing-only on"
    )?;
    writeln!(
        out,
        "           the simulators). graph_mode: one decode step eager, replayed as a"
    )?;
    writeln!(
        out,
        "           graph, and replayed with its branches on tagged stream \"1\"; correct means"
    )?;
    writeln!(
        out,
        "           both replays compute what the eager step computes."
    )
}

/// Prints the table for `backend` (and writes the timeline to `timeline`, if given); returns
/// whether every scenario behaved as it should: a missing wait gives a wrong result and a
/// sanitizer report, every other mode a right result and no report.
pub fn run(
    out: &mut impl Write,
    backend: DemoBackend,
    timeline: Option<&Path>,
) -> Result<bool, Box<dyn std::error::Error>> {
    let rows = rows(backend, timeline)?;
    match backend {
        DemoBackend::Sim => writeln!(
            out,
            "braid demo on the simulated device ({})",
            braid::sim::DeviceProfile::ascend_910b().name
        )?,
        DemoBackend::Acl => {
            // Loaded already by `rows`: this names the library it used, and says so when it
            // is the simulator.
            let api = braid::acl::AclApi::load_or_sim()?;
            writeln!(out, "braid demo through {}", devices::describe_acl(api))?
        }
    }
    writeln!(out)?;
    table(out, &rows)?;
    if let Some(path) = timeline {
        writeln!(
            out,
            "timeline of the tagged_events multi-stream run written to {} (open in ui.perfetto.dev)",
            path.display()
        )?;
    }
    Ok(rows.iter().all(as_meant))
}

/// Whether a row shows what its scenario is meant to show (reports are judged where known).
fn as_meant(r: &Row) -> bool {
    r.correct == r.expected_correct && r.reports.is_none_or(|n| (n == 0) == r.expected_correct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_table_lists_every_scenario_and_all_behave_as_meant() {
        let mut out = Vec::new();
        let ok = run(&mut out, DemoBackend::Sim, None).expect("demo runs");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(ok, "{text}");
        for needle in [
            "wait_stream",
            "tagged_events",
            "without wait_stream",
            "tagged stream \"1\"",
            "graph_mode",
            "graph replay",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
        let rows = rows(DemoBackend::Sim, None).unwrap();
        let reports: Vec<Option<usize>> = rows.iter().map(|r| r.reports).collect();
        assert_eq!(
            reports,
            vec![
                Some(1),
                Some(0),
                Some(0),
                Some(0),
                Some(0),
                Some(0),
                Some(0)
            ]
        );
        // Graph replay takes far less device time than eager dispatch of the same step, and the
        // tagged-stream branches shorten it further.
        let graph: Vec<f64> = rows
            .iter()
            .filter(|r| r.scenario == "graph_mode")
            .map(|r| r.device_us)
            .collect();
        assert!(
            graph[1] < graph[0] / 2.0 && graph[2] < graph[1],
            "{graph:?}"
        );
    }

    #[test]
    fn the_acl_table_on_braid_acl_sim_is_the_simulator_table() {
        // braid-acl-sim by path (it is built into target/<profile>/deps, next to this test),
        // so a CANN configured on this machine is not picked up.
        let exe = std::env::current_exe().unwrap();
        let sim_lib = braid::acl::sim_library_candidates(exe.parent().unwrap())
            .into_iter()
            .find(|p| p.exists())
            .expect("libbraid_acl_sim.so built next to the test");
        let api = braid::acl::AclApi::load_from(sim_lib).unwrap();
        let acl = rows_on(
            |role| devices::acl_with(api, role),
            braid::acl_race_reports,
            |_, _| Ok(()),
        )
        .unwrap();
        let sim = rows(DemoBackend::Sim, None).unwrap();
        // Same rows: correct / as-meant columns, simulated times and report counts.
        assert_eq!(acl, sim);
        assert!(acl.iter().all(as_meant));
        let text = |rows: &[Row]| {
            let mut out = Vec::new();
            table(&mut out, rows).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(&acl), text(&sim));
        assert!(rows(DemoBackend::Acl, Some(Path::new("t.json"))).is_err());
    }

    #[test]
    fn rows_without_reports_are_judged_by_their_results() {
        let row = |correct, expected_correct, reports| Row {
            scenario: "s",
            mode: "m",
            correct,
            expected_correct,
            device_us: 1.0,
            reports,
        };
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
    fn timeline_has_tracks_slices_flows_and_counters() {
        let path = std::env::temp_dir().join(format!("braid-demo-{}.json", std::process::id()));
        let mut out = Vec::new();
        assert!(run(&mut out, DemoBackend::Sim, Some(&path)).expect("demo runs"));
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
