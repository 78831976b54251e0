//! A Llama-architecture decoder written with braid alone (`braid::scenarios::llama`).
//!
//! 1. Writes a CI-sized model (hidden 256, 4 layers, 8 heads with 4 KV heads, MLP 512,
//!    vocabulary 1024, float32) with seeded weights as transformers saves one
//!    (`model.safetensors`, `config.json`), and reads it back, checking every tensor.
//! 2. On 1, 2, 4 and 8 simulated devices (tensor-parallel, Megatron-style, the all-reduces on
//!    communication streams overlapped with the other micro-batch's work): sizes the decode
//!    pool with a dry run, allocates the KV cache in it, prefills two prompts of 8 tokens,
//!    captures the decode step once per device and decodes 8 tokens greedily, each step one
//!    task-group update (position and input tokens) and one replay. Prints each device
//!    count's tokens and step times (prefill, the decode step eager, through the graph), and
//!    a `RESULT` line: `correct` when every device count gives transformers' tokens, each
//!    replay equals the eager step, the pool is as predicted and nothing was recaptured.
//! 3. Times Llama-2-7B's decode step (float16, a cache of 1024 positions, batch 1, 4 and 16,
//!    1/2/4/8 devices) on timing-only devices and prints the predicted per-token latency
//!    beside the published measurements of the 910B profile's table, with their ratio.
//!
//! `cargo run --release -p braid --example llama_decode [-- --dir DIR] [--json FILE]
//! [--skip-7b]` (add `--features acl` to run through ACL: on `braid-acl-sim` the tokens are
//! the same). `--dir` is where the model is written (default `target/llama_decode`);
//! `--json` writes every device count's tokens and first-step logits for
//! `tests/torch_npu/test_llama_decode.py`, which checks them against transformers.

use braid::scenarios::devices::{self, Role};
use braid::scenarios::llama::{self, ci, timing, HostWeights, LlamaConfig};
use std::path::PathBuf;

/// Device counts of the CI runs.
const DEVICE_COUNTS: [u32; 4] = [1, 2, 4, 8];

/// Batches and device counts of the Llama-2-7B timing.
const TIMING_7B: [(usize, u32); 9] = [
    (1, 1),
    (1, 2),
    (1, 4),
    (1, 8),
    (4, 1),
    (16, 1),
    (16, 2),
    (16, 4),
    (16, 8),
];

struct Args {
    dir: PathBuf,
    json: Option<PathBuf>,
    skip_7b: bool,
}

fn args() -> Result<Args, braid::Report> {
    let mut args = Args {
        dir: PathBuf::from("target/llama_decode"),
        json: None,
        skip_7b: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| braid::Report::msg(format!("{name} needs a value")))
        };
        match a.as_str() {
            "--dir" => args.dir = value("--dir")?.into(),
            "--json" => args.json = Some(value("--json")?.into()),
            "--skip-7b" => args.skip_7b = true,
            other => {
                return Err(braid::Report::msg(format!(
                    "unknown argument {other} (--dir DIR, --json FILE, --skip-7b)"
                )))
            }
        }
    }
    Ok(args)
}

fn main() -> Result<(), braid::Report> {
    let args = args()?;
    if cfg!(feature = "acl") {
        // Before anything loads ACL, while this is the only thread.
        devices::set_acl_sim_node_settings();
    }
    let config = LlamaConfig::ci();
    println!("running on {}", devices::describe());
    llama::write_model(&args.dir, &config, ci::SEED)?;
    let weights = HostWeights::load(&args.dir, &config)?;
    println!(
        "model: hidden {}, {} layers, {} heads ({} KV heads), MLP {}, vocabulary {}, {} positions, {}; seed {}",
        config.hidden,
        config.layers,
        config.heads,
        config.kv_heads,
        config.intermediate,
        config.vocab,
        config.max_positions,
        config.dtype,
        ci::SEED
    );
    let request = ci::request(ci::GENERATE);
    println!(
        "prompts: {} sequences of {} tokens in {} micro-batches, {} tokens generated each",
        request.prompts.len(),
        request.prompts[0].len(),
        request.micro_batches,
        request.generate
    );
    println!(
        "{:>7} {:>11} {:>14} {:>14} {:>21}  tokens",
        "devices", "prefill us", "eager step us", "graph step us", "pool bytes (dry run)"
    );
    let mut runs = Vec::new();
    let mut correct = true;
    for n in DEVICE_COUNTS {
        let g = llama::generate(&devices::open_node(Role::Data, n)?, &weights, &request)?;
        let pool_ok = g.predicted_pool_bytes == g.pool_bytes;
        correct &= ci::matches_reference(&g.tokens)
            && g.eager_equals_graph
            && pool_ok
            && g.recaptures() == 0;
        println!(
            "{n:>7} {:>11.1} {:>14.1} {:>14.1} {:>10} ({:>8})  {:?}",
            g.prefill_us,
            g.eager_step_us,
            g.graph_step_us,
            g.pool_bytes,
            g.predicted_pool_bytes,
            g.tokens
        );
        runs.push(g);
    }
    let profile = profile_name();
    println!(
        "RESULT correct={correct} devices={} recaptures={} eager_us={:.1} graph_us={:.1} tp_graph_us={} profile={profile}",
        DEVICE_COUNTS.map(|n| n.to_string()).join(","),
        runs.iter().map(|g| g.recaptures()).sum::<u32>(),
        runs[0].eager_step_us,
        runs[0].graph_step_us,
        runs[1..]
            .iter()
            .map(|g| format!("{:.1}", g.graph_step_us))
            .collect::<Vec<_>>()
            .join(","),
    );
    if let Some(path) = &args.json {
        write_json(path, &args.dir, &request, &runs)?;
    }
    if !args.skip_7b {
        time_7b(&profile)?;
    }
    if !correct {
        return Err(braid::Report::msg(
            "a device count differed from transformers' tokens, a replay from the eager step, or the pool from the dry run",
        ));
    }
    Ok(())
}

/// The profile the simulated figures come from.
fn profile_name() -> String {
    let described = devices::describe();
    match described.rsplit_once("profile ") {
        Some((_, rest)) => rest.trim_end_matches(')').to_string(),
        None => described
            .rsplit_once('(')
            .map_or(described.clone(), |(_, p)| {
                p.trim_end_matches(')').to_string()
            }),
    }
}

fn write_json(
    path: &PathBuf,
    dir: &std::path::Path,
    request: &llama::Request,
    runs: &[llama::Generation],
) -> Result<(), braid::Report> {
    let runs: Vec<_> = runs
        .iter()
        .map(|g| {
            serde_json::json!({
                "devices": g.devices,
                "tokens": g.tokens,
                "first_logits": g.first_logits,
            })
        })
        .collect();
    let json = serde_json::json!({
        "backend": devices::describe(),
        "model_dir": dir,
        "prompts": request.prompts,
        "generate": request.generate,
        "reference_tokens": ci::REFERENCE_TOKENS,
        "runs": runs,
    });
    std::fs::write(path, json.to_string())
        .map_err(|e| braid::Report::msg(format!("{}: {e}", path.display())))
}

/// Llama-2-7B's decode step on timing-only devices beside the published measurements.
fn time_7b(profile: &str) -> Result<(), braid::Report> {
    let config = LlamaConfig::llama2_7b(1024);
    let published = timing::published_decode_rows();
    println!(
        "Llama-2-7B decode step, timing only ({}, a cache of {} positions), profile {profile}:",
        config.dtype, config.max_positions
    );
    println!(
        "{:>5} {:>7} {:>9} {:>9} {:>14} {:>7}  source",
        "batch", "devices", "eager ms", "graph ms", "published ms", "ratio"
    );
    let mut rows = Vec::new();
    for (batch, n) in TIMING_7B {
        let t =
            timing::decode_step_times(&devices::open_node(Role::Timing, n)?, &config, batch, 1)?;
        let found = published
            .iter()
            .find(|p| p.batch == batch && p.devices == n as usize);
        let (eager, graph) = (t.eager_us / 1000.0, t.graph_us / 1000.0);
        match found {
            Some(p) => {
                let predicted = if p.mode == "eager" { eager } else { graph };
                let ratio = predicted / p.ms;
                let (low, high) = timing::RATIO_BAND;
                let note = if (low..=high).contains(&ratio) {
                    String::new()
                } else if p.gap.is_some() {
                    " (outside the band: gap noted in the profile's table)".to_string()
                } else {
                    " (outside the band and no gap noted)".to_string()
                };
                println!(
                    "{batch:>5} {n:>7} {eager:>9.2} {graph:>9.2} {:>6.1} ({:<5}) {ratio:>7.2}  {}{note}",
                    p.ms,
                    p.mode,
                    p.source.split(": ").next().unwrap_or_default()
                );
                rows.push(format!("{batch}x{n}:{ratio:.2}"));
            }
            None => println!(
                "{batch:>5} {n:>7} {eager:>9.2} {graph:>9.2} {:>14} {:>7}  no published measurement found",
                "-", "-"
            ),
        }
    }
    println!(
        "RESULT llama2_7b profile={profile} ratios={}",
        if rows.is_empty() {
            "none".to_string()
        } else {
            rows.join(",")
        }
    );
    Ok(())
}
