//! GraphRunner options the conformance suite's runner cases (`braid_conformance::graph`:
//! warm-up, capture and replay, D49's limit, recaptures, a shared user pool, tagged streams,
//! the input count) leave out: user addresses in the key without input cloning, cloned
//! outputs, and TorchAir's memory modes compared.

use crate::common;

use braid_graph_capture::{
    GraphError, GraphRunner, InputKind, MemoryReuse, RunContext, RunnerConfig,
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
