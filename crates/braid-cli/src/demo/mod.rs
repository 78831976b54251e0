//! `braid demo`: the seed scenarios as one table, on the simulated device or through ACL.
//!
//! [`rows`](mod@rows) runs the scenarios ([`Setup::rows`]), [`table`](mod@table) judges and
//! prints them; this module picks the backend and writes the title.

mod rows;
mod table;

use crate::alloc_conf::AllocConf;
use braid::allocator::AllocatorConfig;
use braid::scenarios::devices;
use braid::scenarios::devices::Role;
use braid::scenarios::tagged_events;
use braid::DType;
pub use rows::Setup;
use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
pub use table::{as_meant, table, Row};

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

/// The data type `braid demo` runs the scenarios in (`--dtype`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, clap::ValueEnum)]
pub enum DemoDType {
    /// Half precision, as the seed examples compute.
    #[default]
    Float16,
    /// Single precision.
    Float32,
    /// bfloat16.
    Bfloat16,
}

impl DemoDType {
    /// The data type.
    pub fn dtype(self) -> DType {
        match self {
            DemoDType::Float16 => DType::F16,
            DemoDType::Float32 => DType::F32,
            DemoDType::Bfloat16 => DType::BF16,
        }
    }
}

/// Where the timeline of the `tensor_parallel` timing run goes when the tagged-events one
/// goes to `timeline`: the same folder, the file name prefixed with `tensor_parallel.`
/// (`timeline.json` → `tensor_parallel.timeline.json`, which the repository's `.gitignore`
/// ignores as `*.timeline.json`).
pub fn tensor_parallel_timeline(timeline: &Path) -> PathBuf {
    let name = timeline
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    timeline.with_file_name(format!("tensor_parallel.{name}"))
}

/// Writes `text` to `path`, naming the path in the error.
fn write_timeline(path: &Path, text: &str) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write the timeline to {}: {e}", path.display()).into())
}

/// Runs every scenario on `backend` in `dtype` with the scenarios' allocators configured by
/// `config` and returns the rows. With `timeline` (simulator only), writes the Chrome Trace
/// Event JSON of the tagged-events multi-stream run (data mode) there, and that of the
/// `tensor_parallel` timing run (one process per device, a track per stream and link, the
/// all-reduces among the slices) to [`tensor_parallel_timeline`].
pub fn rows(
    backend: DemoBackend,
    timeline: Option<&Path>,
    config: &AllocatorConfig,
    dtype: DType,
) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
    match backend {
        DemoBackend::Sim => {
            let timing_node = RefCell::new(None);
            let open_node = |role, n| {
                let node = devices::sim_node(role, n);
                let opened = devices::sim_devices(&node);
                if role == Role::Timing {
                    *timing_node.borrow_mut() = Some(node);
                }
                opened
            };
            let rows = Setup {
                open: &devices::sim,
                open_node: &open_node,
                reports: &braid::sim_race_reports,
                config,
                dtype,
            }
            .rows(|device, layout| match (timeline, layout) {
                (Some(path), tagged_events::Layout::MultiStream) => {
                    write_timeline(path, &device.hal().chrome_trace_json())
                }
                _ => Ok(()),
            })?;
            if let (Some(path), Some(node)) = (timeline, timing_node.take()) {
                write_timeline(&tensor_parallel_timeline(path), &node.chrome_trace_json())?;
            }
            Ok(rows)
        }
        DemoBackend::Acl => {
            if timeline.is_some() {
                return Err(
                    "--timeline needs --backend sim (the timeline is the simulator's)".into(),
                );
            }
            Setup {
                open: &devices::acl,
                open_node: &devices::acl_devices,
                reports: &braid::acl_race_reports,
                config,
                dtype,
            }
            .rows(|_, _| Ok(()))
        }
    }
}

/// Prints the table for `backend` in `dtype` (which the first line names), and writes the timeline to `timeline`, if given, with the scenarios'
/// allocators configured by `conf`; returns whether every row is as meant (see
/// [`as_meant`]).
pub fn run(
    out: &mut impl Write,
    backend: DemoBackend,
    timeline: Option<&Path>,
    conf: &AllocConf,
    dtype: DType,
) -> Result<bool, Box<dyn std::error::Error>> {
    let rows = rows(backend, timeline, &conf.config, dtype)?;
    match backend {
        DemoBackend::Sim => writeln!(
            out,
            "braid demo on the simulated device ({}), in {dtype}",
            braid::sim::DeviceProfile::ascend_910b().name
        )?,
        DemoBackend::Acl => {
            // Loaded already by `rows`: this names the library it used, and says so when it
            // is the simulator.
            let api = braid::acl::AclApi::load_or_sim()?;
            writeln!(
                out,
                "braid demo through {}, in {dtype}",
                devices::describe_acl(api)
            )?
        }
    }
    writeln!(out, "{}", conf.describe())?;
    writeln!(out)?;
    table(out, &rows)?;
    if let Some(path) = timeline {
        writeln!(
            out,
            "timeline of the tagged_events multi-stream run written to {} (open in ui.perfetto.dev)",
            path.display()
        )?;
        writeln!(
            out,
            "timeline of the tensor_parallel timing run (one process per device) written to {}",
            tensor_parallel_timeline(path).display()
        )?;
    }
    Ok(rows.iter().all(as_meant))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> AllocConf {
        AllocConf::resolve(None, None).unwrap()
    }

    fn sim_rows() -> Vec<Row> {
        sim_rows_in(DType::F16)
    }

    fn sim_rows_in(dtype: DType) -> Vec<Row> {
        rows(DemoBackend::Sim, None, &AllocatorConfig::new(), dtype).unwrap()
    }

    #[test]
    fn the_demo_runs_in_float16_by_default() {
        let mut out = Vec::new();
        assert!(run(&mut out, DemoBackend::Sim, None, &defaults(), DType::F16).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.lines().next().unwrap().ends_with(", in float16"),
            "{text}"
        );
        // The same rows in float32, all as meant: moving twice the bytes takes longer, and
        // the model's graphs reserve more.
        let (half, single) = (sim_rows(), sim_rows_in(DType::F32));
        assert!(single.iter().all(as_meant));
        let row = |rows: &[Row], scenario, mode| {
            rows.iter()
                .find(|r| r.scenario == scenario && r.mode == mode)
                .cloned()
                .unwrap()
        };
        let (h, s) = (
            row(&half, "tagged_events", "single stream"),
            row(&single, "tagged_events", "single stream"),
        );
        assert!(h.device_us < s.device_us, "{h:?} vs {s:?}");
        let (h, s) = (
            row(&half, "memory_reuse", "pool per graph"),
            row(&single, "memory_reuse", "pool per graph"),
        );
        assert!(h.reserved_bytes < s.reserved_bytes, "{h:?} vs {s:?}");
    }

    #[test]
    fn demo_table_lists_every_scenario_and_all_behave_as_meant() {
        let mut out = Vec::new();
        let ok = run(&mut out, DemoBackend::Sim, None, &defaults(), DType::F16).expect("demo runs");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(ok, "{text}");
        assert_eq!(
            text.lines().nth(1),
            Some("allocator configuration: defaults (BRAID_ALLOC_CONF unset)")
        );
        for needle in [
            "wait_stream",
            "tagged_events",
            "without wait_stream",
            "tagged stream \"1\"",
            "graph_mode",
            "graph replay",
            "record_tagged_stream",
            "without the record",
            "cross_stream_lifetime",
            "manual, no record_stream",
            "memory_reuse",
            "one pool per runner",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
        let rows = sim_rows();
        let modes: Vec<(&str, &str, Option<usize>)> = rows
            .iter()
            .map(|r| (r.scenario, r.mode, r.reports))
            .collect();
        // The modes that leave out an ordering are wrong with one report; all else is right
        // with none.
        assert_eq!(
            modes,
            vec![
                ("wait_stream", "without wait_stream", Some(1)),
                ("wait_stream", "with wait_stream", Some(0)),
                ("tagged_events", "single stream", Some(0)),
                ("tagged_events", "tagged stream \"1\"", Some(0)),
                ("graph_mode", "eager, 1,012 kernels", Some(0)),
                ("graph_mode", "graph replay", Some(0)),
                ("graph_mode", "graph, tagged \"1\"", Some(0)),
                ("record_tagged_stream", "without the record", Some(1)),
                ("record_tagged_stream", "with record_tagged_stream", Some(0)),
                ("cross_stream_lifetime", "manual, no record_stream", Some(1)),
                ("cross_stream_lifetime", "automatic", Some(0)),
                ("memory_reuse", "pool per graph", Some(0)),
                ("memory_reuse", "one pool per runner", Some(0)),
                ("memory_reuse", "2 runners share a pool", Some(0)),
                ("tensor_parallel", "4 devices, serial", Some(0)),
                ("tensor_parallel", "4 devices, overlapped", Some(0)),
                ("tensor_parallel", "4 devices, graph replay", Some(0)),
                ("llama_decode", "2 devices, graph + update", Some(0)),
            ]
        );
        let wrong: Vec<&str> = rows.iter().filter(|r| !r.correct).map(|r| r.mode).collect();
        assert_eq!(
            wrong,
            [
                "without wait_stream",
                "without the record",
                "manual, no record_stream"
            ]
        );
        // Graph replay takes far less device time than eager dispatch of the same step, and the
        // tagged-stream branches shorten it further.
        let graph: Vec<f64> = rows
            .iter()
            .filter(|r| r.scenario == "graph_mode")
            .filter_map(|r| r.device_us)
            .collect();
        assert!(
            graph[1] < graph[0] / 2.0 && graph[2] < graph[1],
            "{graph:?}"
        );
        // Overlapping the all-reduce with the next micro-batch's matmuls beats running it on
        // the compute stream.
        let tp: Vec<f64> = rows
            .iter()
            .filter(|r| r.scenario == "tensor_parallel")
            .filter_map(|r| r.device_us)
            .collect();
        assert!(tp.len() == 3 && tp[1] < tp[0], "{tp:?}");
        // The long work on the side stream (2 ms) is in the timed rows.
        for r in rows
            .iter()
            .filter(|r| matches!(r.scenario, "record_tagged_stream" | "cross_stream_lifetime"))
        {
            assert!(r.device_us.is_some_and(|us| us >= 2000.0), "{r:?}");
        }
    }

    #[test]
    fn memory_reuse_rows_show_what_sharing_a_pool_saves() {
        let rows = sim_rows();
        let reserved: Vec<u64> = rows
            .iter()
            .filter(|r| r.scenario == "memory_reuse")
            .map(|r| r.reserved_bytes.expect("a reservation"))
            .collect();
        // The figures of the memory_reuse example in float16: 80 MiB with a pool per graph,
        // 24 MiB (the largest graph's) with one pool per runner, 26 MiB for two runners
        // sharing a pool (both capture on the stream the device's pool lends, so the second
        // runner's graphs reuse the blocks the first's freed in the shared pool).
        assert_eq!(reserved, [83_886_080, 25_165_824, 27_262_976]);
        assert!(rows
            .iter()
            .filter(|r| r.scenario == "memory_reuse")
            .all(|r| r.memory.is_some_and(|(_, shown)| shown) && r.device_us.is_none()));
        let mut out = Vec::new();
        table(&mut out, &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("one pool per runner"))
            .unwrap();
        assert!(line.contains(" 24.0 "), "{line}");
    }

    #[test]
    fn the_scenarios_allocators_take_the_configuration() {
        // A 1 MiB limit leaves no room for the scenarios' allocators: the run fails with the
        // allocator's out-of-memory error, so the configuration reached them.
        let tiny = AllocatorConfig::parse("limit_mb:1").unwrap();
        let err = rows(DemoBackend::Sim, None, &tiny, DType::F16).unwrap_err();
        assert!(err.to_string().contains("out of memory"), "{err}");
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
        // The tensor_parallel rows need a node of each mode; this is the only test of this
        // process that loads ACL.
        devices::set_acl_sim_node_settings();
        let api = braid::acl::AclApi::load_from(sim_lib).unwrap();
        let config = AllocatorConfig::new();
        let acl = Setup {
            open: &|role| devices::acl_with(api, role),
            open_node: &|role, n| devices::acl_devices_with(api, role, n),
            reports: &braid::acl_race_reports,
            config: &config,
            dtype: DType::F16,
        }
        .rows(|_, _| Ok(()))
        .unwrap();
        // Through ACL the built-in kernels are aclnn operators in float16, as on the simulator.
        let sim = sim_rows_in(DType::F16);
        // Same rows: correct / as-meant columns, simulated times, reservations and reports.
        assert_eq!(acl, sim);
        assert!(acl.iter().all(as_meant));
        let text = |rows: &[Row]| {
            let mut out = Vec::new();
            table(&mut out, rows).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(&acl), text(&sim));
        assert!(rows(
            DemoBackend::Acl,
            Some(Path::new("t.json")),
            &config,
            DType::F16
        )
        .is_err());
    }

    #[test]
    fn a_timeline_that_cannot_be_written_names_its_path() {
        let path = Path::new("/nonexistent/dir/x.json");
        let mut out = Vec::new();
        let err = run(
            &mut out,
            DemoBackend::Sim,
            Some(path),
            &defaults(),
            DType::F16,
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("cannot write the timeline to /nonexistent/dir/x.json: "),
            "{msg}"
        );
    }

    #[test]
    fn timeline_has_tracks_slices_flows_and_counters() {
        let path = std::env::temp_dir().join(format!("braid-demo-{}.json", std::process::id()));
        let mut out = Vec::new();
        assert!(run(
            &mut out,
            DemoBackend::Sim,
            Some(&path),
            &defaults(),
            DType::F16
        )
        .expect("demo runs"));
        let text = std::fs::read_to_string(&path).expect("timeline written");
        std::fs::remove_file(&path).ok();
        let tp_path = tensor_parallel_timeline(&path);
        assert_eq!(
            tp_path.file_name().unwrap().to_str().unwrap(),
            format!("tensor_parallel.braid-demo-{}.json", std::process::id())
        );
        let tp_text = std::fs::read_to_string(&tp_path).expect("tensor_parallel timeline");
        std::fs::remove_file(&tp_path).ok();
        let tp: serde_json::Value = serde_json::from_str(&tp_text).expect("valid JSON");
        let tp = tp["traceEvents"].as_array().expect("traceEvents");
        // One process per device, each with its host track and streams; the all-reduces are
        // slices on the streams.
        let processes: Vec<&str> = tp
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert_eq!(processes.len(), 4, "{processes:?}");
        for (i, p) in processes.iter().enumerate() {
            assert!(p.starts_with(&format!("braid sim device {i} ")), "{p}");
        }
        let all_reduces = tp
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == "allreduce(sum)")
            .map(|e| e["pid"].as_u64().unwrap())
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(all_reduces.into_iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
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
