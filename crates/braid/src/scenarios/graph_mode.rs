//! Graph mode: one decode step of about 1,000 small kernels, run eagerly, replayed as a
//! captured graph, and replayed with the parallel branches of the tagged-events example
//! ([`super::tagged_events`]) on a tagged stream.
//!
//! Each of [`Step::layers`] layers does what the tagged-events example does, at decode size:
//! the main stream adds (vector units) and records a tagged event; the branch — on tagged
//! stream "1" in the multi-stream variant, else on the main stream — waits for it and runs
//! matmuls (cube units) while the main stream continues with its own element-wise work; the
//! layer ends when the main stream has waited for the branch and added its result.
//!
//! **Inside the capture, the tagged stream starts from the beginning of the capture, not from
//! where `stream_switch` is called** (TorchAir's rule): its matmuls are ordered after nothing
//! the main stream captured before them. The event each layer records after its add
//! (TorchAir's tagged event), and the branch waits on, is what orders the branch after that
//! add; leave it out and every replay reads the activations before the add wrote them
//! (silently wrong numbers; only the simulator's race report shows it).
//!
//! What the figures show follows from the device profile's cited numbers, never from tuning:
//! eagerly every kernel costs the host an `eager_launch_ns` and the device waits for the host;
//! a graph launch costs `graph_launch_ns + nodes × graph_node_ns` and the device runs the
//! kernels back to back; on two streams the cube and vector work of a layer overlap.
//!
//! The activations and weights are `float16` ([`DTYPE`]). The replays are checked against the eager step bit for bit:
//! the same kernels in the same order compute the same bits in any type. The weights are
//! small (`1 / (64 · hidden)`) so that 44 layers of accumulation stay well inside `float16`'s
//! range.

use super::Timer;
use crate::{DType, Device, Kernel, Stream};
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_graph_capture::{CaptureSession, GraphError, RunContext};
use braid_stream_core::hal::Backend;

/// Tag of the branch stream, as in the tagged-events example.
pub const BRANCH_TAG: &str = "1";
/// The data type of the step's activations and weights.
pub const DTYPE: DType = DType::F16;

/// Sizes of the decode step.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Layers.
    pub layers: u32,
    /// Element-wise kernels per layer on the main stream.
    pub vector_ops: u32,
    /// Matmuls per layer on the branch.
    pub matmuls: u32,
    /// Tokens in the batch (rows of the activations).
    pub batch: u32,
    /// Hidden size.
    pub hidden: u32,
    /// The data type of activations and weights ([`DTYPE`] by default).
    pub dtype: DType,
}

impl Default for Step {
    /// 44 layers × (12 element-wise kernels + 10 matmuls + 1 joining add) = 1,012 kernels,
    /// batch 1 at hidden size 1024: each kernel is small, as in a decode step.
    fn default() -> Self {
        Step {
            layers: 44,
            vector_ops: 12,
            matmuls: 10,
            batch: 1,
            hidden: 1024,
            dtype: DTYPE,
        }
    }
}

impl Step {
    /// Kernels in one step.
    pub fn kernels(&self) -> u64 {
        u64::from(self.layers) * u64::from(self.vector_ops + self.matmuls + 1)
    }
}

/// One row of the comparison.
#[derive(Clone, Debug)]
pub struct Row {
    /// What ran.
    pub mode: &'static str,
    /// Device time of one step, from its first enqueue to its end, in microseconds.
    pub step_us: f64,
    /// Kernels per step.
    pub kernels: u64,
}

/// The three figures of the example.
#[derive(Clone, Debug)]
pub struct Figures {
    /// One step run eagerly on one stream.
    pub eager_us: f64,
    /// One replay of the step captured on one stream.
    pub graph_us: f64,
    /// One replay of the step captured with the branches on tagged stream "1".
    pub graph_multistream_us: f64,
    /// The rows, in that order.
    pub rows: Vec<Row>,
    /// Whether both replays left the same activations as the eager step (meaningful on a
    /// device that computes, such as the simulator in data mode).
    pub replays_match_eager: bool,
}

struct Buffers<B: Backend> {
    dtype: DType,
    x: DeviceBuffer<B>,
    w: DeviceBuffer<B>,
    vec_out: Vec<DeviceBuffer<B>>,
    mm_out: Vec<DeviceBuffer<B>>,
}

fn buffers<B: Backend>(
    alloc: &CachingAllocator<B>,
    stream: &Stream<B>,
    step: Step,
) -> Result<Buffers<B>, GraphError> {
    let dtype = step.dtype;
    let act = u64::from(step.batch) * u64::from(step.hidden) * dtype.size();
    let mut vec_out = Vec::new();
    for _ in 0..step.vector_ops.max(1) {
        vec_out.push(alloc.alloc(act, stream)?);
    }
    let mut mm_out = Vec::new();
    for _ in 0..step.matmuls.max(1) {
        mm_out.push(alloc.alloc(act, stream)?);
    }
    Ok(Buffers {
        dtype,
        x: alloc.alloc(act, stream)?,
        w: alloc.alloc(
            u64::from(step.hidden) * u64::from(step.hidden) * dtype.size(),
            stream,
        )?,
        vec_out,
        mm_out,
    })
}

/// Puts every buffer back to the step's starting values and waits for it, so each run starts
/// from the same state.
fn reset<B: Backend>(main: &Stream<B>, bufs: &Buffers<B>, step: Step) -> Result<(), GraphError> {
    main.launch(
        Kernel::Fill {
            dst: bufs.x.slice(),
            value: 1.0,
        }
        .typed(bufs.dtype),
    )?;
    // Small weights keep 44 layers of accumulation inside float16's range: each layer grows
    // the activations by about 1 + 2 / 64.
    main.launch(
        Kernel::Fill {
            dst: bufs.w.slice(),
            value: 1.0 / (64.0 * step.hidden as f32),
        }
        .typed(bufs.dtype),
    )?;
    for out in bufs.vec_out.iter().chain(&bufs.mm_out) {
        main.launch(
            Kernel::Fill {
                dst: out.slice(),
                value: 0.0,
            }
            .typed(bufs.dtype),
        )?;
    }
    main.synchronize()?;
    Ok(())
}

/// Issues one decode step in `ctx`; with `multistream` the branches go to tagged stream "1".
fn decode_step<B: Backend>(
    ctx: &RunContext<'_, B>,
    bufs: &Buffers<B>,
    step: Step,
    multistream: bool,
) -> Result<(), GraphError> {
    let main = ctx.stream();
    let branch = ctx.device().tagged_stream(BRANCH_TAG, 0)?;
    for _ in 0..step.layers {
        // add_result = in1 + in2; npu_tagged_event_record(event)
        main.launch(
            Kernel::Add {
                a: bufs.x.slice(),
                b: bufs.vec_out[0].slice(),
                out: bufs.vec_out[0].slice(),
            }
            .typed(bufs.dtype),
        )?;
        let start = if multistream {
            Some(main.record_event()?)
        } else {
            None
        };
        {
            // with npu_stream_switch("1"): npu_tagged_event_wait(event); mm = in3 @ in4
            let _switch = match &start {
                Some(event) => {
                    let guard = ctx.stream_switch(BRANCH_TAG, 0)?;
                    ctx.current_stream().wait(event)?;
                    Some(guard)
                }
                None => None,
            };
            let s = ctx.current_stream();
            for out in &bufs.mm_out {
                s.launch(
                    Kernel::Matmul {
                        a: bufs.vec_out[0].slice(),
                        b: bufs.w.slice(),
                        c: out.slice(),
                        m: step.batch,
                        k: step.hidden,
                        n: step.hidden,
                    }
                    .typed(bufs.dtype),
                )?;
            }
        }
        // add2 = in3 + in4 on the main stream, overlapping the branch
        for out in bufs.vec_out.iter().skip(1) {
            main.launch(
                Kernel::Scale {
                    src: bufs.x.slice(),
                    dst: out.slice(),
                    factor: 0.5,
                }
                .typed(bufs.dtype),
            )?;
        }
        if multistream {
            main.wait_stream(&branch)?;
        }
        main.launch(
            Kernel::Add {
                a: bufs.mm_out[0].slice(),
                b: bufs.vec_out[1 % bufs.vec_out.len()].slice(),
                out: bufs.x.slice(),
            }
            .typed(bufs.dtype),
        )?;
    }
    Ok(())
}

/// Runs the comparison on `device` (use the simulator's `ascend_910b()` profile in
/// timing-only mode for the example's figures).
pub fn run<B: Backend>(device: &Device<B>, step: Step) -> Result<Figures, GraphError> {
    run_with(device, &AllocatorConfig::new(), step)
}

/// [`run`] with the caching allocator configured by `config`.
pub fn run_with<B: Backend>(
    device: &Device<B>,
    config: &AllocatorConfig,
    step: Step,
) -> Result<Figures, GraphError> {
    let alloc = CachingAllocator::new(device.clone(), config.clone())?;
    let main = device.create_stream(0)?;
    let bufs = buffers(&alloc, &main, step)?;

    // Eager, one stream.
    reset(&main, &bufs, step)?;
    let timer = Timer::start(&main)?;
    {
        let ctx = RunContext::eager(&alloc, &main)?;
        decode_step(&ctx, &bufs, step, false)?;
        ctx.finish()?;
    }
    let eager_us = timer.stop_us(&main)?;
    let eager_out = main.copy_d2h(bufs.x.slice())?.wait()?;

    let mut replay_us = Vec::new();
    let mut replays_match_eager = true;
    for multistream in [false, true] {
        let (graph, ()) = CaptureSession::new(&alloc, &main)
            .run(|ctx| decode_step(ctx, &bufs, step, multistream))?;
        graph.launch(&main)?; // warm replay
        reset(&main, &bufs, step)?;
        let timer = Timer::start(&main)?;
        graph.launch(&main)?;
        replay_us.push(timer.stop_us(&main)?);
        replays_match_eager &= main.copy_d2h(bufs.x.slice())?.wait()? == eager_out;
    }
    let kernels = step.kernels();
    let rows = vec![
        Row {
            mode: "eager",
            step_us: eager_us,
            kernels,
        },
        Row {
            mode: "graph replay",
            step_us: replay_us[0],
            kernels,
        },
        Row {
            mode: "graph replay, tagged stream \"1\"",
            step_us: replay_us[1],
            kernels,
        },
    ];
    Ok(Figures {
        eager_us,
        graph_us: replay_us[0],
        graph_multistream_us: replay_us[1],
        rows,
        replays_match_eager,
    })
}

/// The comparison on a fresh simulated Ascend 910B in timing-only mode (what `braid demo`
/// and the `graph_mode` example show).
pub fn run_sim(step: Step) -> Result<Figures, GraphError> {
    let device = crate::sim_device(
        braid_backend_sim::SimConfig::new()
            .profile(braid_backend_sim::DeviceProfile::ascend_910b())
            .mode(braid_backend_sim::SimMode::TimingOnly)
            .record_timeline(false),
    )?;
    run(&device, step)
}
