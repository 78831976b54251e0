//! Memory reuse between captured graphs: a decoder-like model captured for batch sizes 128,
//! 64, …, 1 (largest first, as vLLM captures), under TorchAir's memory-reuse modes:
//!
//! - a pool per graph (`disable_mempool_reuse_in_same_fx = True`): reserved memory is the sum
//!   of every graph's;
//! - mode 2 (one pool for all shapes of a runner, the default): about the largest graph's;
//! - mode 1 (`use_custom_pool`): two runners in a pipeline (first half of the layers, second
//!   half and the head) sharing one user pool.
//!
//! Every replay's output is compared with eager execution of the same model on the same
//! device, and the simulator's sanitizer checks every access of every replay. The outputs are
//! checked in data mode at a reduced width ([`Decoder::check`]); the memory figures come from
//! the same code in timing-only mode at Llama-2-7B's width ([`Decoder::llama7b_width`]),
//! where nothing is computed and the sanitizer still checks every access.
//!
//! [`run`] runs on fresh simulated devices; [`run_on`] on the devices of any backend (the
//! [`Role::Data`] device checks outputs, the [`Role::Timing`] device measures memory), which is
//! how `braid demo --backend acl` runs it through ACL.
//!
//! The model follows the decode step of the workloads reference (§3.4) at a reduced width:
//! per layer a query projection, a KV-cache write (a mutated input, used in place), an
//! attention stand-in, an output projection and residual, a gate/up/down MLP and a residual.
//!
//! Weights and activations are `float16` ([`DTYPE`]), so the memory figures are those of a `float16` model. Replays
//! are compared with eager execution bit for bit: the same kernels compute the same bits in
//! any type.

use super::devices::Role;
use braid_allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid_backend_sim::{SimConfig, SimMode};
use braid_graph_capture::{
    graph_pool_handle, GraphError, GraphRunner, InputKind, MemoryReuse, RunContext, RunnerConfig,
};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DType, Device, DeviceSlice, Kernel, Stream};
use std::ops::Range;

type Buf<B> = DeviceBuffer<B>;

/// The data type of the decoder's weights and activations.
pub const DTYPE: DType = DType::F16;

/// Batch sizes captured, in capture order (largest first).
pub const BATCHES: [u32; 8] = [128, 64, 32, 16, 8, 4, 2, 1];

/// Sizes of the decoder.
#[derive(Clone, Copy, Debug)]
pub struct Decoder {
    /// Hidden size.
    pub hidden: u32,
    /// MLP intermediate size.
    pub intermediate: u32,
    /// Vocabulary (columns of the logits).
    pub vocab: u32,
    /// Layers.
    pub layers: u32,
    /// The data type of weights and activations ([`DTYPE`] in the sizes below).
    pub dtype: DType,
}

impl Decoder {
    /// Llama-like proportions at a width that computes quickly in data mode.
    pub fn check() -> Self {
        Decoder {
            hidden: 64,
            intermediate: 172,
            vocab: 256,
            layers: 2,
            dtype: DTYPE,
        }
    }

    /// Llama-2-7B's hidden, intermediate and vocabulary sizes (workloads reference §3.1),
    /// two layers, for memory figures in timing-only mode.
    pub fn llama7b_width() -> Self {
        Decoder {
            hidden: 4096,
            intermediate: 11008,
            vocab: 32000,
            layers: 2,
            dtype: DTYPE,
        }
    }
}

/// What one memory-reuse mode showed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ModeReport {
    /// Every replayed output equals eager execution (checked in data mode; in timing-only
    /// mode, every step was a replay).
    pub identical: bool,
    /// The race detector's reports over the mode's data and timing runs (`None` where the
    /// backend has none to ask).
    pub reports: Option<u64>,
    /// Reserved bytes of the mode's graph pools, measured at the memory width.
    pub reserved: u64,
}

/// What the example reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Report {
    /// A pool per graph: reserved is the sum of every graph's pool.
    pub per_graph: ModeReport,
    /// Mode 2: one pool for all shapes of a runner.
    pub runner_pool: ModeReport,
    /// Mode 1: one user pool shared by two pipelined runners.
    pub shared_pipeline: ModeReport,
    /// Reserved bytes of the largest single graph's pool (batch 128, pool per graph).
    pub largest_single_graph: u64,
}

impl Report {
    /// Whether every replayed output equals eager execution, in every mode.
    pub fn identical(&self) -> bool {
        self.modes().iter().all(|m| m.identical)
    }

    /// The race detector's reports over all modes (`None` where the backend has none).
    pub fn reports(&self) -> Option<u64> {
        self.modes().iter().map(|m| m.reports).sum()
    }

    fn modes(&self) -> [ModeReport; 3] {
        [self.per_graph, self.runner_pool, self.shared_pipeline]
    }
}

/// The decoder's weights (also read by the `graph_memory` scenario's captures).
pub(crate) struct Weights<B: Backend> {
    q: Vec<Buf<B>>,
    o: Vec<Buf<B>>,
    gate: Vec<Buf<B>>,
    up: Vec<Buf<B>>,
    down: Vec<Buf<B>>,
    head: Buf<B>,
}

fn filled<B: Backend>(
    alloc: &CachingAllocator<B>,
    s: &Stream<B>,
    d: Decoder,
    elems: u64,
    value: f32,
) -> Result<Buf<B>, GraphError> {
    let buf = alloc.alloc(elems * d.dtype.size(), s)?;
    s.launch(
        Kernel::Fill {
            dst: buf.slice(),
            value,
        }
        .typed(d.dtype),
    )?;
    Ok(buf)
}

pub(crate) fn weights<B: Backend>(
    alloc: &CachingAllocator<B>,
    s: &Stream<B>,
    d: Decoder,
) -> Result<Weights<B>, GraphError> {
    let (h, i) = (u64::from(d.hidden), u64::from(d.intermediate));
    let mut w = Weights {
        q: Vec::new(),
        o: Vec::new(),
        gate: Vec::new(),
        up: Vec::new(),
        down: Vec::new(),
        head: filled(alloc, s, d, h * u64::from(d.vocab), 1.0 / h as f32)?,
    };
    for l in 0..d.layers {
        let v = 1.0 + l as f32 / 8.0;
        w.q.push(filled(alloc, s, d, h * h, v / h as f32)?);
        w.o.push(filled(alloc, s, d, h * h, 0.5 / h as f32)?);
        w.gate.push(filled(alloc, s, d, h * i, 1.0 / h as f32)?);
        w.up.push(filled(alloc, s, d, h * i, 0.5 / h as f32)?);
        w.down.push(filled(alloc, s, d, i * h, 1.0 / i as f32)?);
    }
    Ok(w)
}

fn matmul<B: Backend>(
    ctx: &RunContext<'_, B>,
    dtype: DType,
    a: DeviceSlice,
    w: &Buf<B>,
    m: u32,
    k: u32,
    n: u32,
) -> Result<Buf<B>, GraphError> {
    let c = ctx.alloc(u64::from(m) * u64::from(n) * dtype.size())?;
    ctx.current_stream().launch(
        Kernel::Matmul {
            a,
            b: w.slice(),
            c: c.slice(),
            m,
            k,
            n,
        }
        .typed(dtype),
    )?;
    Ok(c)
}

fn binary<B: Backend>(
    ctx: &RunContext<'_, B>,
    dtype: DType,
    a: DeviceSlice,
    b: DeviceSlice,
) -> Result<Buf<B>, GraphError> {
    let out = ctx.alloc(a.len)?;
    ctx.current_stream().launch(
        Kernel::Add {
            a,
            b,
            out: out.slice(),
        }
        .typed(dtype),
    )?;
    Ok(out)
}

fn half<B: Backend>(
    ctx: &RunContext<'_, B>,
    dtype: DType,
    a: DeviceSlice,
) -> Result<Buf<B>, GraphError> {
    let out = ctx.alloc(a.len)?;
    ctx.current_stream().launch(
        Kernel::Scale {
            src: a,
            dst: out.slice(),
            factor: 0.5,
        }
        .typed(dtype),
    )?;
    Ok(out)
}

/// Layers `layers` (and the head when `head`) on inputs `[hidden states, kv cache]`; the
/// batch follows from the hidden states' length.
pub(crate) fn forward<B: Backend>(
    ctx: &RunContext<'_, B>,
    inputs: &[DeviceSlice],
    w: &Weights<B>,
    d: Decoder,
    layers: Range<u32>,
    head: bool,
) -> Result<Vec<Buf<B>>, GraphError> {
    let (x, kv) = (inputs[0], inputs[1]);
    let batch = (x.len / (u64::from(d.hidden) * d.dtype.size())) as u32;
    let act = u64::from(batch) * u64::from(d.hidden) * d.dtype.size();
    let mut h: Option<Buf<B>> = None;
    for (slot, l) in layers.clone().enumerate() {
        let l = l as usize;
        let input = h.as_ref().map_or(x, Buf::slice);
        let q = matmul(ctx, d.dtype, input, &w.q[l], batch, d.hidden, d.hidden)?;
        let kv_l = kv
            .sub(slot as u64 * act, act)
            .ok_or_else(|| GraphError::model("kv cache too small"))?;
        ctx.current_stream().launch(
            Kernel::Copy {
                src: q.slice(),
                dst: kv_l,
            }
            .typed(d.dtype),
        )?;
        let attn = binary(ctx, d.dtype, q.slice(), kv_l)?;
        drop(q);
        let o = matmul(
            ctx,
            d.dtype,
            attn.slice(),
            &w.o[l],
            batch,
            d.hidden,
            d.hidden,
        )?;
        drop(attn);
        let r = binary(ctx, d.dtype, input, o.slice())?;
        drop(o);
        let g = matmul(
            ctx,
            d.dtype,
            r.slice(),
            &w.gate[l],
            batch,
            d.hidden,
            d.intermediate,
        )?;
        let u = matmul(
            ctx,
            d.dtype,
            r.slice(),
            &w.up[l],
            batch,
            d.hidden,
            d.intermediate,
        )?;
        let m = binary(ctx, d.dtype, g.slice(), u.slice())?;
        drop((g, u));
        let m = half(ctx, d.dtype, m.slice())?;
        let down = matmul(
            ctx,
            d.dtype,
            m.slice(),
            &w.down[l],
            batch,
            d.intermediate,
            d.hidden,
        )?;
        drop(m);
        let next = binary(ctx, d.dtype, r.slice(), down.slice())?;
        drop((r, down));
        h = Some(half(ctx, d.dtype, next.slice())?);
    }
    let h = match h {
        Some(h) => h,
        None => {
            let copy = ctx.alloc(act)?;
            ctx.current_stream().launch(
                Kernel::Copy {
                    src: x,
                    dst: copy.slice(),
                }
                .typed(d.dtype),
            )?;
            copy
        }
    };
    if head {
        Ok(vec![matmul(
            ctx,
            d.dtype,
            h.slice(),
            &w.head,
            batch,
            d.hidden,
            d.vocab,
        )?])
    } else {
        Ok(vec![h])
    }
}

/// Memory-reuse configurations of the report.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reuse {
    PerGraph,
    RunnerPool,
    SharedPipeline,
}

struct ModeResult {
    identical: bool,
    reserved: u64,
    largest: u64,
}

fn read<B: Backend>(s: &Stream<B>, d: Decoder, slice: DeviceSlice) -> Result<Vec<f32>, GraphError> {
    Ok(s.copy_d2h(slice)?.wait_as(d.dtype)?)
}

/// Runs `mode` on `device`, comparing outputs with eager execution when `data`.
fn run_mode<B: Backend>(
    device: &Device<B>,
    config: &AllocatorConfig,
    d: Decoder,
    mode: Reuse,
    data: bool,
) -> Result<ModeResult, GraphError> {
    let d = Decoder {
        dtype: d.dtype,
        ..d
    };
    let alloc = CachingAllocator::new(device.clone(), config.clone())?;
    let s = device.create_stream(0)?;
    let w = weights(&alloc, &s, d)?;
    let max_act = u64::from(BATCHES[0]) * u64::from(d.hidden);
    let kv_full = alloc.alloc(u64::from(d.layers) * max_act * d.dtype.size(), &s)?;
    let xs: Vec<Buf<B>> = BATCHES
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            filled(
                &alloc,
                &s,
                d,
                u64::from(b) * u64::from(d.hidden),
                0.1 * (i + 1) as f32,
            )
        })
        .collect::<Result<_, _>>()?;
    let kv_len = |b: u32, layers: u32| {
        u64::from(layers) * u64::from(b) * u64::from(d.hidden) * d.dtype.size()
    };
    let kv_for = |b: u32, first: u32, layers: u32| -> Result<DeviceSlice, GraphError> {
        kv_full
            .slice()
            .sub(kv_len(BATCHES[0], first), kv_len(b, layers))
            .ok_or_else(|| GraphError::model("kv cache too small"))
    };

    // Eager reference.
    let mut expected = Vec::new();
    for (x, &b) in xs.iter().zip(&BATCHES) {
        let ctx = RunContext::eager(&alloc, &s)?;
        let out = forward(
            &ctx,
            &[x.slice(), kv_for(b, 0, d.layers)?],
            &w,
            d,
            0..d.layers,
            true,
        )?;
        expected.push(if data {
            read(&s, d, out[0].slice())?
        } else {
            Vec::new()
        });
    }

    let kinds = vec![InputKind::User, InputKind::Mutated];
    let half_layers = d.layers / 2;
    let mut identical = true;
    let (reserved, largest) = match mode {
        Reuse::PerGraph | Reuse::RunnerPool => {
            let memory = if mode == Reuse::PerGraph {
                MemoryReuse::PoolPerGraph
            } else {
                MemoryReuse::RunnerPool
            };
            let mut runner = GraphRunner::new(
                &alloc,
                RunnerConfig::new(kinds).memory(memory),
                |ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]| {
                    forward(ctx, inputs, &w, d, 0..d.layers, true)
                },
            )?;
            // Warm-up then capture, largest batch first.
            for (x, &b) in xs.iter().zip(&BATCHES) {
                for _ in 0..2 {
                    runner.run(&s, &[x.slice(), kv_for(b, 0, d.layers)?])?;
                }
            }
            for ((x, &b), want) in xs.iter().zip(&BATCHES).zip(&expected) {
                let out = runner.run(&s, &[x.slice(), kv_for(b, 0, d.layers)?])?;
                identical &=
                    out.is_replay() && (!data || &read(out.stream(), d, out.slices()?[0])? == want);
            }
            let pools = runner.pools();
            let largest = pools.first().map_or(0, |p| p.reserved_bytes());
            (runner.reserved_bytes(), largest)
        }
        Reuse::SharedPipeline => {
            let pool = graph_pool_handle(&alloc);
            let config = RunnerConfig::new(kinds).memory(MemoryReuse::Shared(pool.clone()));
            let mut first = GraphRunner::new(
                &alloc,
                config.clone(),
                |ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]| {
                    forward(ctx, inputs, &w, d, 0..half_layers, false)
                },
            )?;
            let mut second = GraphRunner::new(
                &alloc,
                config,
                |ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]| {
                    forward(ctx, inputs, &w, d, half_layers..d.layers, true)
                },
            )?;
            let mut step =
                |x: &Buf<B>, b: u32, check: Option<&Vec<f32>>| -> Result<bool, GraphError> {
                    let h = first.run(&s, &[x.slice(), kv_for(b, 0, half_layers)?])?;
                    let h = h.slices()?[0];
                    let out =
                        second.run(&s, &[h, kv_for(b, half_layers, d.layers - half_layers)?])?;
                    Ok(match check {
                        Some(want) => {
                            out.is_replay()
                                && (!data || &read(out.stream(), d, out.slices()?[0])? == want)
                        }
                        None => true,
                    })
                };
            for (x, &b) in xs.iter().zip(&BATCHES) {
                step(x, b, None)?;
                step(x, b, None)?;
            }
            for ((x, &b), want) in xs.iter().zip(&BATCHES).zip(&expected) {
                identical &= step(x, b, Some(want))?;
            }
            (pool.reserved_bytes(), 0)
        }
    };
    s.synchronize()?;
    Ok(ModeResult {
        identical,
        reserved,
        largest,
    })
}

/// Runs the three modes on fresh simulated devices with the sanitizer on: outputs checked in
/// data mode with `check`, memory measured in timing-only mode with `size`.
pub fn run(check: Decoder, size: Decoder) -> Result<Report, GraphError> {
    let open = |role| {
        let mode = match role {
            Role::Data => SimMode::Data,
            Role::Timing => SimMode::TimingOnly,
        };
        crate::sim_device(SimConfig::new().mode(mode).record_timeline(false))
    };
    run_on(
        open,
        crate::sim_race_reports,
        &AllocatorConfig::new(),
        check,
        size,
    )
}

/// Runs the three modes with allocators configured by `config`, each on a fresh
/// [`Role::Data`] device from `open` (outputs checked with `check`) and a fresh
/// [`Role::Timing`] one (memory measured with `size`); `reports` asks each device's race
/// detector after its run.
pub fn run_on<B: Backend>(
    open: impl Fn(Role) -> crate::Result<Device<B>>,
    reports: impl Fn(&Device<B>) -> Option<Vec<String>>,
    config: &AllocatorConfig,
    check: Decoder,
    size: Decoder,
) -> Result<Report, GraphError> {
    let count = |device: &Device<B>| reports(device).map(|r| r.len() as u64);
    let mode = |reuse| -> Result<(ModeReport, u64), GraphError> {
        let data_device = open(Role::Data)?;
        let checked = run_mode(&data_device, config, check, reuse, true)?;
        let data_reports = count(&data_device);
        let timing_device = open(Role::Timing)?;
        let measured = run_mode(&timing_device, config, size, reuse, false)?;
        let timing_reports = count(&timing_device);
        let report = ModeReport {
            identical: checked.identical && measured.identical,
            reports: data_reports.zip(timing_reports).map(|(a, b)| a + b),
            reserved: measured.reserved,
        };
        Ok((report, measured.largest))
    };
    let (per_graph, largest_single_graph) = mode(Reuse::PerGraph)?;
    Ok(Report {
        per_graph,
        runner_pool: mode(Reuse::RunnerPool)?.0,
        shared_pipeline: mode(Reuse::SharedPipeline)?.0,
        largest_single_graph,
    })
}
