//! GraphRunner: keys, warm-up, capture, replay, recapture reasons, limits, memory modes,
//! cloning (D49, G58's pool sharing, TorchAir's aclgraph behaviour).

mod common;

use braid_graph_capture::{
    graph_pool_handle, GraphError, GraphRunner, InputKind, MemoryReuse, RunContext, RunnerConfig,
};
use braid_stream_core::{DeviceSlice, Kernel};
use common::*;

/// `y = 2x + w` (w a parameter, x a user input); `kv += x` when a third (mutated) input is
/// given. Sizes follow x.
fn model(ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]) -> Result<Vec<Buf>, GraphError> {
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

type Model = fn(&RunContext<'_, B>, &[DeviceSlice]) -> Result<Vec<Buf>, GraphError>;

fn runner(alloc: &Alloc, config: RunnerConfig<B>) -> GraphRunner<B, Model> {
    GraphRunner::new(alloc, config, model as Model).unwrap()
}

const PARAM_USER: [InputKind; 2] = [InputKind::Parameter, InputKind::User];

#[test]
fn outputs_match_eager_across_warmup_capture_and_replay() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let w = alloc.alloc(64 * 4, &s).unwrap();
    fill(&s, &w, 0.5);
    let mut r = runner(&alloc, RunnerConfig::new(PARAM_USER.to_vec()));
    for (i, n) in [16u64, 16, 16, 8, 8, 8, 16].into_iter().enumerate() {
        let x = alloc.alloc(n * 4, &s).unwrap();
        fill(&s, &x, i as f32);
        let out = r.run(&s, &[w.slice(), x.slice()]).unwrap();
        assert_eq!(
            out.read_f32(0).unwrap(),
            vec![2.0 * i as f32 + 0.5; n as usize]
        );
    }
    let st = r.stats();
    assert_eq!(
        (st.calls, st.warmups, st.captures, st.replays),
        (7, 2, 2, 3)
    );
    assert_eq!(r.graph_count(), 2);
    assert_eq!(r.pools().len(), 1, "mode 2: one pool for all shapes");
    assert_eq!(reports(&dev), 0, "{:?}", dev.hal().sanitizer_reports());
}

/// D49: 19 calls over 5 shapes with 9, 5, 3, 1, 1 calls → 3 captures, 11 replays; with a
/// limit of 2 graphs → 2 captures, 10 replays.
fn d49(limit: usize) -> (u64, u64, u64) {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let w = alloc.alloc(64 * 4, &s).unwrap();
    let mut r = runner(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).capture_limit(limit),
    );
    let xs: Vec<Buf> = (1..=5).map(|n| alloc.alloc(n * 4, &s).unwrap()).collect();
    for (x, calls) in xs.iter().zip([9, 5, 3, 1, 1]) {
        for _ in 0..calls {
            r.run(&s, &[w.slice(), x.slice()]).unwrap();
        }
    }
    let st = r.stats();
    assert_eq!(st.calls, 19);
    (st.captures, st.replays, st.eager_fallbacks)
}

#[test]
fn d49_capture_on_the_second_call_per_shape_and_the_limit() {
    assert_eq!(d49(64), (3, 11, 0));
    assert_eq!(d49(2), (2, 10, 2));
}

#[test]
fn moved_parameters_and_kv_caches_recapture() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let kinds = vec![InputKind::Parameter, InputKind::User, InputKind::Mutated];
    let mut r = runner(&alloc, RunnerConfig::new(kinds));
    let w = alloc.alloc(16 * 4, &s).unwrap();
    let w2 = alloc.alloc(16 * 4, &s).unwrap();
    let kv = alloc.alloc(16 * 4, &s).unwrap();
    let kv2 = alloc.alloc(16 * 4, &s).unwrap();
    let x = alloc.alloc(16 * 4, &s).unwrap();
    fill(&s, &w, 1.0);
    fill(&s, &w2, 10.0);
    fill(&s, &x, 1.0);
    fill(&s, &kv, 0.0);
    fill(&s, &kv2, 100.0);
    for _ in 0..3 {
        r.run(&s, &[w.slice(), x.slice(), kv.slice()]).unwrap();
    }
    assert_eq!(read(&s, kv.slice()), vec![3.0; 16], "kv updated in place");
    let out = r.run(&s, &[w.slice(), x.slice(), kv2.slice()]).unwrap();
    assert_eq!(out.read_f32(0).unwrap(), vec![3.0; 16]);
    assert_eq!(read(&s, kv2.slice()), vec![101.0; 16]);
    let out = r.run(&s, &[w2.slice(), x.slice(), kv2.slice()]).unwrap();
    assert_eq!(out.read_f32(0).unwrap(), vec![12.0; 16]);
    let st = r.stats();
    assert_eq!(
        (
            st.recaptures_mutated_input,
            st.recaptures_parameter,
            st.captures
        ),
        (1, 1, 1)
    );
    assert_eq!(r.graph_count(), 1);
    // A moved user input is just copied.
    let x2 = alloc.alloc(16 * 4, &s).unwrap();
    fill(&s, &x2, 4.0);
    let out = r.run(&s, &[w2.slice(), x2.slice(), kv2.slice()]).unwrap();
    assert_eq!(out.read_f32(0).unwrap(), vec![18.0; 16]);
    assert_eq!(r.stats().recaptures(), 2);
    assert_eq!(reports(&dev), 0);
}

#[test]
fn without_input_cloning_user_addresses_are_part_of_the_key() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let w = alloc.alloc(16 * 4, &s).unwrap();
    let mut r = runner(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec())
            .clone_inputs(false)
            .warmup_calls(0),
    );
    let x1 = alloc.alloc(16 * 4, &s).unwrap();
    let x2 = alloc.alloc(16 * 4, &s).unwrap();
    fill(&s, &w, 1.0);
    fill(&s, &x1, 1.0);
    fill(&s, &x2, 2.0);
    for x in [&x1, &x2, &x1, &x2] {
        let v = if x.ptr() == x1.ptr() { 3.0 } else { 5.0 };
        assert_eq!(
            r.run(&s, &[w.slice(), x.slice()])
                .unwrap()
                .read_f32(0)
                .unwrap(),
            vec![v; 16]
        );
    }
    let st = r.stats();
    assert_eq!((st.captures, st.replays, st.warmups), (2, 2, 0));
}

#[test]
fn cloned_outputs_are_owned_and_survive_later_calls() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let w = alloc.alloc(16 * 4, &s).unwrap();
    fill(&s, &w, 0.0);
    let mut r = runner(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).clone_outputs(true),
    );
    let x = alloc.alloc(16 * 4, &s).unwrap();
    let mut kept = Vec::new();
    for i in 0..4 {
        fill(&s, &x, i as f32);
        let out = r.run(&s, &[w.slice(), x.slice()]).unwrap();
        assert!(!out.is_replay());
        kept.push(out.into_owned().unwrap());
    }
    for (i, bufs) in kept.iter().enumerate() {
        assert_eq!(read(&s, bufs[0].slice()), vec![2.0 * i as f32; 16]);
    }
}

#[test]
fn memory_modes_pool_per_graph_vs_runner_pool() {
    let sizes = [64u64 << 10, 32 << 10, 16 << 10, 8 << 10];
    let reserved = |memory: MemoryReuse<B>| {
        let (_dev, alloc) = setup(256 * MIB);
        let s = _dev.create_stream(0).unwrap();
        let w = alloc.alloc(64 << 12, &s).unwrap();
        let mut r = runner(
            &alloc,
            RunnerConfig::new(PARAM_USER.to_vec())
                .memory(memory)
                .warmup_calls(0),
        );
        for n in sizes {
            let x = alloc.alloc(n * 4, &s).unwrap();
            r.run(&s, &[w.slice(), x.slice()]).unwrap();
        }
        (r.reserved_bytes(), r.pools().len())
    };
    let (per_graph, per_graph_pools) = reserved(MemoryReuse::PoolPerGraph);
    let (mode2, mode2_pools) = reserved(MemoryReuse::RunnerPool);
    assert_eq!((per_graph_pools, mode2_pools), (4, 1));
    assert!(mode2 < per_graph, "{mode2} vs {per_graph}");
}

/// G58 `test_aclgraph_dynamic_use_custom_pool` and mode 1's overwrite check.
#[test]
fn mode1_runners_share_a_user_pool() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let w = alloc.alloc(16 * 4, &s).unwrap();
    fill(&s, &w, 1.0);
    let pool = graph_pool_handle(&alloc);
    let config = RunnerConfig::new(PARAM_USER.to_vec())
        .memory(MemoryReuse::Shared(pool.clone()))
        .warmup_calls(0);
    let mut first = runner(&alloc, config.clone());
    let mut second = runner(&alloc, config);
    let x = alloc.alloc(16 * 4, &s).unwrap();
    fill(&s, &x, 1.0);
    // Pipeline: first's output feeds second.
    let out1 = first.run(&s, &[w.slice(), x.slice()]).unwrap();
    let h = out1.slices().unwrap()[0];
    let out2 = second.run(&s, &[w.slice(), h]).unwrap();
    assert_eq!(out2.read_f32(0).unwrap(), vec![7.0; 16]);
    assert!(matches!(
        out1.slices(),
        Err(GraphError::OutputOverwritten { .. })
    ));
    assert!(first.pools()[0].same_as(&pool) && second.pools()[0].same_as(&pool));
    assert_eq!(reports(&dev), 0);
    // Separate runners without a custom pool get different pools.
    let mut a = runner(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).warmup_calls(0),
    );
    let mut b = runner(
        &alloc,
        RunnerConfig::new(PARAM_USER.to_vec()).warmup_calls(0),
    );
    a.run(&s, &[w.slice(), x.slice()]).unwrap();
    b.run(&s, &[w.slice(), x.slice()]).unwrap();
    assert!(!a.pools()[0].same_as(&b.pools()[0]));
}

#[test]
fn a_model_on_tagged_streams_matches_eager_and_is_race_free() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let branches =
        |ctx: &RunContext<'_, B>, inputs: &[DeviceSlice]| -> Result<Vec<Buf>, GraphError> {
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
        };
    let mut r =
        GraphRunner::new(&alloc, RunnerConfig::new(vec![InputKind::User]), branches).unwrap();
    let x = alloc.alloc(256 * 4, &s).unwrap();
    for i in 0..4 {
        fill(&s, &x, i as f32);
        let out = r.run(&s, &[x.slice()]).unwrap();
        assert_eq!(out.read_f32(0).unwrap(), vec![8.0 * i as f32; 256]);
    }
    assert_eq!(r.stats().replays, 2);
    assert_eq!(reports(&dev), 0, "{:?}", dev.hal().sanitizer_reports());
}

#[test]
fn wrong_input_count_is_a_typed_error() {
    let (dev, alloc) = setup(64 * MIB);
    let s = dev.create_stream(0).unwrap();
    let mut r = runner(&alloc, RunnerConfig::new(PARAM_USER.to_vec()));
    assert!(matches!(
        r.run(&s, &[]),
        Err(GraphError::InputCount {
            expected: 2,
            got: 0
        })
    ));
}
