//! The `GraphRunner` (D49, TorchAir's aclgraph runner): warm-up, capture and replay per input
//! shape, the capture limit, recapture of moved inputs, a user pool shared between runners,
//! and models on tagged streams.

use crate::support::{all_equal, allocator, allocator_works, download, fill};
use crate::{CaseError, Harness};
use braid_allocator::{AllocatorConfig, DeviceBuffer};
use braid_graph_capture::{
    graph_pool_handle, GraphError, GraphRunner, InputKind, MemoryReuse, RunContext, RunnerConfig,
};
use braid_stream_core::hal::Backend;
use braid_stream_core::{DeviceSlice, Kernel};

/// `y = 2x + w` (w a parameter, x a user input); `kv += x` when a third (mutated) input is
/// given. Sizes follow x.
fn runner_model<B: Backend>(
    ctx: &RunContext<'_, B>,
    inputs: &[DeviceSlice],
) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
    let (w, x) = (inputs[0], inputs[1]);
    let s = ctx.current_stream();
    let t = ctx.alloc(x.len)?;
    s.launch(&Kernel::Scale {
        src: x,
        dst: t.slice(),
        factor: 2.0,
    })?;
    let y = ctx.alloc(x.len)?;
    s.launch(&Kernel::Add {
        a: t.slice(),
        b: w.sub(0, x.len)
            .ok_or_else(|| GraphError::model("w too short"))?,
        out: y.slice(),
    })?;
    if let Some(kv) = inputs.get(2) {
        s.launch(&Kernel::Add {
            a: *kv,
            b: x,
            out: *kv,
        })?;
    }
    Ok(vec![y])
}

/// `y = 2x`.
pub(super) fn scale_model<B: Backend>(
    ctx: &RunContext<'_, B>,
    inputs: &[DeviceSlice],
) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
    let y = ctx.alloc(inputs[0].len)?;
    ctx.current_stream().launch(&Kernel::Scale {
        src: inputs[0],
        dst: y.slice(),
        factor: 2.0,
    })?;
    Ok(vec![y])
}

/// A parameter and a user input.
const PARAM_USER: [InputKind; 2] = [InputKind::Parameter, InputKind::User];

/// The runner's outputs match the eager results through warm-up, capture and replay of two
/// shapes (7 calls: 2 warm-ups, 2 captures, 3 replays), with one pool for both shapes.
pub fn runner_matches_eager_across_capture_and_replay<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let w = alloc.alloc(64 * 4, &s)?;
    fill(&s, w.slice(), 0.5)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()),
        runner_model::<B>,
    )?;
    for (i, n) in [16u64, 16, 16, 8, 8, 8, 16].into_iter().enumerate() {
        let x = alloc.alloc(n * 4, &s)?;
        fill(&s, x.slice(), i as f32)?;
        let out = runner.run(&s, &[w.slice(), x.slice()])?;
        ensure_eq!(
            out.read_f32(0)?,
            vec![2.0 * i as f32 + 0.5; n as usize],
            "call {i} with {n} floats"
        );
    }
    let st = runner.stats();
    ensure_eq!(
        (st.calls, st.warmups, st.captures, st.replays),
        (7, 2, 2, 3),
        "(calls, warm-ups, captures, replays)"
    );
    ensure_eq!(runner.graph_count(), 2, "graphs");
    ensure_eq!(runner.pools().len(), 1, "pools (one for all shapes)");
    drop(runner);
    drop(w);
    allocator_works(&alloc)
}

/// D49 with a capture limit: the runner's (captures, replays, eager fallbacks) over 19 calls
/// of 5 shapes with 9, 5, 3, 1, 1 calls each.
fn runner_counts<B: Backend>(h: &Harness<B>, limit: usize) -> Result<(u64, u64, u64), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let w = alloc.alloc(64 * 4, &s)?;
    fill(&s, w.slice(), 1.0)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).capture_limit(limit),
        runner_model::<B>,
    )?;
    let xs = (1..=5)
        .map(|n| alloc.alloc(n * 4, &s))
        .collect::<Result<Vec<_>, _>>()?;
    for (x, calls) in xs.iter().zip([9, 5, 3, 1, 1]) {
        fill(&s, x.slice(), 2.0)?;
        for call in 0..calls {
            let out = runner.run(&s, &[w.slice(), x.slice()])?;
            all_equal(
                &out.read_f32(0)?,
                5.0,
                &format!(
                    "call {call} with {} floats (limit {limit})",
                    x.requested_size() / 4
                ),
            )?;
        }
    }
    let st = runner.stats();
    ensure_eq!(st.calls, 19, "calls");
    drop(runner);
    drop((xs, w));
    allocator_works(&alloc)?;
    Ok((st.captures, st.replays, st.eager_fallbacks))
}

/// D49 (MindSpore's capture on the second call per shape): 19 calls over 5 shapes with 9, 5,
/// 3, 1, 1 calls give 3 captures and 11 replays; with a capture limit of 2, 2 captures, 10
/// replays and 2 eager fallbacks. Every output is correct.
pub fn runner_captures_on_the_second_call_per_shape<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    ensure_eq!(
        runner_counts(h, 64)?,
        (3, 11, 0),
        "(captures, replays, eager fallbacks) with the default limit"
    );
    ensure_eq!(
        runner_counts(h, 2)?,
        (2, 10, 2),
        "(captures, replays, eager fallbacks) with a limit of 2"
    );
    Ok(())
}

/// A mutated input (KV cache) or a parameter that moves makes the runner recapture its key
/// (one recapture each), with correct outputs and the KV cache updated in place; a moved user
/// input is only copied.
pub fn runner_recaptures_moved_inputs<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let kinds = vec![InputKind::Parameter, InputKind::User, InputKind::Mutated];
    let mut runner = GraphRunner::new(&alloc, RunnerConfig::new(kinds), runner_model::<B>)?;
    let w = alloc.alloc(16 * 4, &s)?;
    let w2 = alloc.alloc(16 * 4, &s)?;
    let kv = alloc.alloc(16 * 4, &s)?;
    let kv2 = alloc.alloc(16 * 4, &s)?;
    let x = alloc.alloc(16 * 4, &s)?;
    fill(&s, w.slice(), 1.0)?;
    fill(&s, w2.slice(), 10.0)?;
    fill(&s, x.slice(), 1.0)?;
    fill(&s, kv.slice(), 0.0)?;
    fill(&s, kv2.slice(), 100.0)?;
    for _ in 0..3 {
        runner.run(&s, &[w.slice(), x.slice(), kv.slice()])?;
    }
    ensure_eq!(
        download(&s, kv.slice())?,
        vec![3.0; 16],
        "kv updated in place by 3 calls"
    );
    let out = runner.run(&s, &[w.slice(), x.slice(), kv2.slice()])?;
    ensure_eq!(
        out.read_f32(0)?,
        vec![3.0; 16],
        "y after the KV cache moved"
    );
    ensure_eq!(
        download(&s, kv2.slice())?,
        vec![101.0; 16],
        "the moved KV cache"
    );
    let out = runner.run(&s, &[w2.slice(), x.slice(), kv2.slice()])?;
    ensure_eq!(
        out.read_f32(0)?,
        vec![12.0; 16],
        "y after the parameter moved"
    );
    let st = runner.stats();
    ensure_eq!(
        (
            st.recaptures_mutated_input,
            st.recaptures_parameter,
            st.captures
        ),
        (1, 1, 1),
        "(recaptures for the KV cache, for the parameter, captures)"
    );
    ensure_eq!(runner.graph_count(), 1, "graphs");
    let x2 = alloc.alloc(16 * 4, &s)?;
    fill(&s, x2.slice(), 4.0)?;
    let out = runner.run(&s, &[w2.slice(), x2.slice(), kv2.slice()])?;
    ensure_eq!(
        out.read_f32(0)?,
        vec![18.0; 16],
        "y after the user input moved"
    );
    ensure_eq!(
        runner.stats().recaptures(),
        2,
        "a moved user input does not recapture"
    );
    drop(runner);
    drop((w, w2, kv, kv2, x, x2));
    allocator_works(&alloc)
}

/// TorchAir's mode 1: two runners sharing a user pool run as a pipeline (the first's output
/// feeds the second); reading the first's output after the second replayed is
/// `GraphError::OutputOverwritten`; runners without a custom pool get different pools.
pub fn runners_share_a_user_pool<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let w = alloc.alloc(16 * 4, &s)?;
    fill(&s, w.slice(), 1.0)?;
    let pool = graph_pool_handle(&alloc);
    let config = RunnerConfig::new(PARAM_USER.to_vec())
        .memory(MemoryReuse::Shared(pool.clone()))
        .warmup_calls(0);
    let mut first = GraphRunner::new(&alloc, config.clone(), runner_model::<B>)?;
    let mut second = GraphRunner::new(&alloc, config, runner_model::<B>)?;
    let x = alloc.alloc(16 * 4, &s)?;
    fill(&s, x.slice(), 1.0)?;
    {
        let out1 = first.run(&s, &[w.slice(), x.slice()])?;
        let hidden = out1.slices()?[0];
        let out2 = second.run(&s, &[w.slice(), hidden])?;
        ensure_eq!(out2.read_f32(0)?, vec![7.0; 16], "the pipeline's output");
        expect_err!(
            out1.slices(),
            GraphError::OutputOverwritten { pool: p } if p == pool.id().0,
            "reading the first output after the second runner replayed"
        );
    }
    ensure!(
        first.pools()[0].same_as(&pool) && second.pools()[0].same_as(&pool),
        "the runners do not use the shared pool"
    );
    let mut a = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).warmup_calls(0),
        runner_model::<B>,
    )?;
    let mut b = GraphRunner::new(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).warmup_calls(0),
        runner_model::<B>,
    )?;
    a.run(&s, &[w.slice(), x.slice()])?;
    b.run(&s, &[w.slice(), x.slice()])?;
    ensure!(
        !a.pools()[0].same_as(&b.pools()[0]),
        "runners without a custom pool share one"
    );
    expect_err!(
        a.run(&s, &[]).map(|_| ()),
        GraphError::InputCount {
            expected: 2,
            got: 0
        },
        "a call with no inputs"
    );
    drop((first, second, a, b, pool));
    drop((w, x));
    allocator_works(&alloc)
}

/// A runner whose model forks a branch onto a tagged stream (`stream_switch`) and joins it:
/// warm-up, capture and replays all give `3x + 5x`.
pub fn runner_on_tagged_streams_matches_eager<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    fn branches<B: Backend>(
        ctx: &RunContext<'_, B>,
        inputs: &[DeviceSlice],
    ) -> Result<Vec<DeviceBuffer<B>>, GraphError> {
        let x = inputs[0];
        let left = {
            let _g = ctx.stream_switch("runner_left", 0)?;
            let t = ctx.alloc(x.len)?;
            ctx.current_stream().launch(&Kernel::Scale {
                src: x,
                dst: t.slice(),
                factor: 3.0,
            })?;
            t
        };
        let right = ctx.alloc(x.len)?;
        ctx.stream().launch(&Kernel::Scale {
            src: x,
            dst: right.slice(),
            factor: 5.0,
        })?;
        ctx.stream()
            .wait_stream(&ctx.device().tagged_stream("runner_left", 0)?)?;
        let out = ctx.alloc(x.len)?;
        ctx.stream().launch(&Kernel::Add {
            a: left.slice(),
            b: right.slice(),
            out: out.slice(),
        })?;
        Ok(vec![out])
    }
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let mut runner = GraphRunner::new(
        &alloc,
        RunnerConfig::new(vec![InputKind::User]),
        branches::<B>,
    )?;
    let x = alloc.alloc(256 * 4, &s)?;
    for i in 0..4 {
        fill(&s, x.slice(), i as f32)?;
        let out = runner.run(&s, &[x.slice()])?;
        all_equal(&out.read_f32(0)?, 8.0 * i as f32, &format!("call {i}"))?;
    }
    ensure_eq!(runner.stats().replays, 2, "replays");
    drop(runner);
    drop(x);
    allocator_works(&alloc)
}
