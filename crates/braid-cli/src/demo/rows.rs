//! The demo's rows: every seed scenario, each in the mode that shows braid at work and, where
//! the scenario has one, in the mode that must fail (an ordering left out).

use super::table::Row;
use braid::allocator::{AllocatorConfig, CrossStreamMode};
use braid::collective::CollectiveBackend;
use braid::core::hal::Backend;
use braid::scenarios::devices::Role;
use braid::scenarios::llama::{self, ci, HostWeights, LlamaConfig};
use braid::scenarios::tensor_parallel::{self, Mode};
use braid::scenarios::{
    cross_stream_lifetime, graph_mode, memory_reuse, record_tagged_stream, tagged_events,
    wait_stream,
};
use braid::{DType, Device, EventFlags};

/// Boxed errors of the demo.
type DemoResult<T> = Result<T, Box<dyn std::error::Error>>;

/// What the rows are made from: devices for each role, the race detector's reports of a
/// device, and the allocator configuration of the scenarios that build allocators.
pub struct Setup<'a, B: Backend> {
    /// Opens a fresh device for a role.
    pub open: &'a dyn Fn(Role) -> braid::Result<Device<B>>,
    /// Opens `n` devices of one node for a role (the `tensor_parallel` rows).
    pub open_node: &'a dyn Fn(Role, u32) -> braid::Result<Vec<Device<B>>>,
    /// The race detector's reports of a device (`None` where the backend has none).
    pub reports: &'a dyn Fn(&Device<B>) -> Option<Vec<String>>,
    /// Configuration of the caching allocators the scenarios build.
    pub config: &'a AllocatorConfig,
    /// The data type the scenarios compute in.
    pub dtype: DType,
}

/// Devices of the `tensor_parallel` rows.
pub const TENSOR_PARALLEL_DEVICES: u32 = 4;

impl<B: CollectiveBackend> Setup<'_, B> {
    /// Every row, in the order of the table; `after_data` sees each tagged-events data run's
    /// device (the simulator's timeline is written from there).
    pub fn rows(
        &self,
        after_data: impl FnMut(&Device<B>, tagged_events::Layout) -> DemoResult<()>,
    ) -> DemoResult<Vec<Row>> {
        let mut rows = self.wait_stream()?;
        rows.extend(self.tagged_events(after_data)?);
        rows.extend(self.graph_mode()?);
        rows.extend(self.record_tagged_stream()?);
        rows.extend(self.cross_stream_lifetime()?);
        rows.extend(self.memory_reuse()?);
        rows.extend(self.tensor_parallel()?);
        rows.extend(self.llama_decode()?);
        Ok(rows)
    }

    fn count(&self, device: &Device<B>) -> Option<usize> {
        (self.reports)(device).map(|r| r.len())
    }

    fn wait_stream(&self) -> DemoResult<Vec<Row>> {
        let shape = wait_stream::Shape {
            dtype: self.dtype,
            ..wait_stream::Shape::default()
        };
        [("without wait_stream", false), ("with wait_stream", true)]
            .into_iter()
            .map(|(mode, with_wait)| {
                let device = (self.open)(Role::Data)?;
                let run = wait_stream::run_checked(&device, shape, with_wait, self.reports)?;
                Ok(Row {
                    device_us: Some(run.elapsed_us),
                    reports: run.reports.map(|r| r.len()),
                    ..plain(
                        "wait_stream",
                        mode,
                        run.correct,
                        (!with_wait).then_some("the wait"),
                    )
                })
            })
            .collect()
    }

    fn tagged_events(
        &self,
        mut after_data: impl FnMut(&Device<B>, tagged_events::Layout) -> DemoResult<()>,
    ) -> DemoResult<Vec<Row>> {
        let mut rows = Vec::new();
        for (mode, layout) in [
            ("single stream", tagged_events::Layout::SingleStream),
            ("tagged stream \"1\"", tagged_events::Layout::MultiStream),
        ] {
            let small = tagged_events::Shape::SMALL.with_dtype(self.dtype);
            let data_device = (self.open)(Role::Data)?;
            let data = tagged_events::run(&data_device, small, layout, true)?;
            after_data(&data_device, layout)?;
            let correct = data
                .results
                .as_ref()
                .is_some_and(|r| tagged_events::check(small, r));
            let timing = tagged_events::run(
                &(self.open)(Role::Timing)?,
                tagged_events::Shape::MODEL.with_dtype(self.dtype),
                layout,
                false,
            )?;
            rows.push(Row {
                device_us: Some(timing.makespan_us),
                reports: self.count(&data_device),
                ..plain("tagged_events", mode, correct, None)
            });
        }
        Ok(rows)
    }

    /// One decode step of ~1,000 small kernels, eager vs graph replay. Results are compared
    /// in data mode at a small step; times come from the full step on the timing device.
    fn graph_mode(&self) -> DemoResult<Vec<Row>> {
        let data_device = (self.open)(Role::Data)?;
        let small = graph_mode::Step {
            layers: 3,
            vector_ops: 3,
            matmuls: 2,
            batch: 2,
            hidden: 64,
            dtype: self.dtype,
        };
        let checked = graph_mode::run_with(&data_device, self.config, small)?;
        let found = self.count(&data_device);
        let timed = graph_mode::run_with(
            &(self.open)(Role::Timing)?,
            self.config,
            graph_mode::Step {
                dtype: self.dtype,
                ..graph_mode::Step::default()
            },
        )?;
        Ok([
            ("eager, 1,012 kernels", timed.eager_us),
            ("graph replay", timed.graph_us),
            ("graph, tagged \"1\"", timed.graph_multistream_us),
        ]
        .into_iter()
        .map(|(mode, us)| Row {
            device_us: Some(us),
            reports: found,
            ..plain("graph_mode", mode, checked.replays_match_eager, None)
        })
        .collect())
    }

    /// TorchAir's example: without `record_tagged_stream`, `C` takes `A`'s block while the
    /// tagged stream still reads `A`, so `B` must be wrong and the use after free reported.
    fn record_tagged_stream(&self) -> DemoResult<Vec<Row>> {
        [
            ("without the record", false),
            ("with record_tagged_stream", true),
        ]
        .into_iter()
        .map(|(mode, with_record)| {
            let device = (self.open)(Role::Data)?;
            let (run, us) = timed(&device, || {
                record_tagged_stream::run_with(
                    &device,
                    self.config,
                    self.dtype,
                    with_record,
                    self.reports,
                )
            })?;
            Ok(Row {
                device_us: Some(us),
                reports: run.reports.map(|r| r.len()),
                ..plain(
                    "record_tagged_stream",
                    mode,
                    run.b_correct && run.c_correct,
                    (!with_record).then_some("the record"),
                )
            })
        })
        .collect()
    }

    /// MindSpore's example: in manual mode (PyTorch's semantics) with no `record_stream`, the
    /// next allocation takes `x`'s memory while a side stream still reads it, so `y` must be
    /// wrong and the use after free reported; automatic mode keeps `x` alive unasked.
    fn cross_stream_lifetime(&self) -> DemoResult<Vec<Row>> {
        [
            ("manual, no record_stream", CrossStreamMode::Manual),
            ("automatic", CrossStreamMode::Automatic),
        ]
        .into_iter()
        .map(|(mode, cross_stream)| {
            let device = (self.open)(Role::Data)?;
            let (run, us) = timed(&device, || {
                cross_stream_lifetime::run_with(
                    &device,
                    self.config,
                    self.dtype,
                    cross_stream,
                    self.reports,
                )
            })?;
            Ok(Row {
                device_us: Some(us),
                reports: run.reports.map(|r| r.len()),
                ..plain(
                    "cross_stream_lifetime",
                    mode,
                    run.correct,
                    (cross_stream == CrossStreamMode::Manual).then_some("record_stream"),
                )
            })
        })
        .collect()
    }

    /// A decoder captured at 8 batch sizes under TorchAir's memory-reuse modes: every replay
    /// must match eager execution, and each mode must reserve what it is meant to.
    fn memory_reuse(&self) -> DemoResult<Vec<Row>> {
        let report = memory_reuse::run_on(
            self.open,
            self.reports,
            self.config,
            memory_reuse::Decoder {
                dtype: self.dtype,
                ..memory_reuse::Decoder::check()
            },
            memory_reuse::Decoder {
                dtype: self.dtype,
                ..memory_reuse::Decoder::llama7b_width()
            },
        )?;
        let largest = report.largest_single_graph;
        let per_graph = report.per_graph.reserved;
        Ok([
            (
                "pool per graph",
                report.per_graph,
                ("more than the largest graph", per_graph > largest),
            ),
            (
                "one pool per runner",
                report.runner_pool,
                (
                    "at most the largest graph",
                    report.runner_pool.reserved <= largest,
                ),
            ),
            (
                "2 runners share a pool",
                report.shared_pipeline,
                (
                    "less than a pool per graph",
                    report.shared_pipeline.reserved < per_graph,
                ),
            ),
        ]
        .into_iter()
        .map(|(mode, figures, memory)| Row {
            reserved_bytes: Some(figures.reserved),
            memory: Some(memory),
            reports: figures.reports.map(|n| n as usize),
            ..plain("memory_reuse", mode, figures.identical, None)
        })
        .collect())
    }

    /// Llama-2-7B's layers sharded over [`TENSOR_PARALLEL_DEVICES`] devices of one node, the
    /// all-reduce on the compute stream, overlapped on its own stream, and the overlapped
    /// step replayed as graphs. Every row is correct when the sharded step (and its graph
    /// replay) matches one device at a small size; the overlap row also needs to beat the
    /// serial one. Reports are the data node's, all devices together.
    fn tensor_parallel(&self) -> DemoResult<Vec<Row>> {
        let n = TENSOR_PARALLEL_DEVICES;
        let data = (self.open_node)(Role::Data, n)?;
        let shape = tensor_parallel::Shape {
            dtype: self.dtype,
            ..tensor_parallel::Shape::small()
        };
        let checked = tensor_parallel::check(&data, &shape)?.correct();
        let reports = data.iter().map(|d| self.count(d)).sum::<Option<usize>>();
        let timing = tensor_parallel::time(
            &(self.open_node)(Role::Timing, n)?,
            &tensor_parallel::Shape {
                dtype: self.dtype,
                ..tensor_parallel::Shape::llama2_7b()
            },
        )?;
        Ok(Mode::ALL
            .into_iter()
            .map(|mode| {
                let correct = match mode {
                    Mode::Overlap => checked && timing.overlap_us < timing.serial_us,
                    Mode::Serial | Mode::Graph => checked,
                };
                Row {
                    device_us: Some(timing.us(mode)),
                    reports,
                    ..plain("tensor_parallel", tensor_parallel_mode(mode), correct, None)
                }
            })
            .collect())
    }
}

impl<B: CollectiveBackend> Setup<'_, B> {
    /// The Llama decoder (`llama_decode` example) on [`LLAMA_DEVICES`] devices: the CI model
    /// written and read back, two prompts prefilled, 4 tokens decoded through the captured
    /// step with one task-group update per token. Right when the tokens are transformers'
    /// (`ci::REFERENCE_TOKENS`), each replay equals the eager step, the decode pool is as the
    /// dry run predicted and nothing was recaptured; the time is a decode step's (update and
    /// replay). It computes in float32 whatever the demo's type: its tokens are checked
    /// against transformers' float32 run.
    fn llama_decode(&self) -> DemoResult<Vec<Row>> {
        let config = LlamaConfig::ci();
        // One directory per call: demos may run at once in one process (the tests do).
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("braid-demo-llama-{}-{call}", std::process::id()));
        llama::write_model(&dir, &config, ci::SEED)?;
        let weights = HostWeights::load(&dir, &config);
        std::fs::remove_dir_all(&dir).ok();
        let devices = (self.open_node)(Role::Data, LLAMA_DEVICES)?;
        let g = llama::generate(&devices, &weights?, &ci::request(4))?;
        let reports = devices.iter().map(|d| self.count(d)).sum::<Option<usize>>();
        let correct = ci::matches_reference(&g.tokens)
            && g.eager_equals_graph
            && g.recaptures() == 0
            && g.predicted_pool_bytes == g.pool_bytes;
        Ok(vec![Row {
            device_us: Some(g.graph_step_us),
            reports,
            ..plain("llama_decode", "2 devices, graph + update", correct, None)
        }])
    }
}

/// Devices of the `llama_decode` row.
pub const LLAMA_DEVICES: u32 = 2;

/// The mode column of a `tensor_parallel` row (on [`TENSOR_PARALLEL_DEVICES`] devices).
fn tensor_parallel_mode(mode: Mode) -> &'static str {
    match mode {
        Mode::Serial => "4 devices, serial",
        Mode::Overlap => "4 devices, overlapped",
        Mode::Graph => "4 devices, graph replay",
    }
}

/// A row with no figures yet: no time, no reservation, no reports. `left_out` is what the mode
/// leaves out when it is meant to be wrong.
fn plain(
    scenario: &'static str,
    mode: &'static str,
    correct: bool,
    left_out: Option<&'static str>,
) -> Row {
    Row {
        scenario,
        mode,
        correct,
        left_out,
        device_us: None,
        reserved_bytes: None,
        memory: None,
        reports: None,
    }
}

/// Runs `work` on `device` between two timing events on its default stream and returns its
/// result with the device time in microseconds. The scenarios timed so end with their default
/// stream waiting for every other stream they used.
fn timed<B: Backend, T, E: std::error::Error + 'static>(
    device: &Device<B>,
    work: impl FnOnce() -> Result<T, E>,
) -> DemoResult<(T, f64)> {
    let stream = device.default_stream();
    let start = device.create_event(EventFlags::TIMING)?;
    start.record(&stream)?;
    let result = work()?;
    let end = device.create_event(EventFlags::TIMING)?;
    end.record(&stream)?;
    end.synchronize()?;
    Ok((result, f64::from(start.elapsed_ms(&end)?) * 1000.0))
}
