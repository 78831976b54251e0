//! A Llama-architecture decoder on braid: see `braid::scenarios::llama`.
use braid::scenarios::devices::{self, Role};
use braid::scenarios::llama::{self, HostWeights, LlamaConfig, Request};

fn main() -> Result<(), braid::Report> {
    if cfg!(feature = "acl") {
        devices::set_acl_sim_node_settings();
    }
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("/tmp/h28/model".into()));
    let config = LlamaConfig::ci();
    llama::write_model(&dir, &config, 28)?;
    let weights = HostWeights::load(&dir, &config)?;
    let prompts: Vec<Vec<u32>> = (0..2u32)
        .map(|s| (0..8u32).map(|t| (s * 389 + t * 97 + 11) % 1024).collect())
        .collect();
    let request = Request {
        prompts,
        generate: 8,
        micro_batches: 2,
    };
    for n in [1u32, 2, 4, 8] {
        let devs = devices::open_node(Role::Data, n)?;
        let g = llama::generate(&devs, &weights, &request)?;
        println!(
            "{n}: {:?} eager {:.1} graph {:.1} prefill {:.1} eq {} pool {} {} first {:?}",
            g.tokens,
            g.eager_step_us,
            g.graph_step_us,
            g.prefill_us,
            g.eager_equals_graph,
            g.predicted_pool_bytes,
            g.pool_bytes,
            &g.first_logits[0][..4]
        );
    }
    for (b, n) in [(1usize, 1u32), (16, 1), (1, 8), (16, 8)] {
        let t0 = std::time::Instant::now();
        let devs = devices::open_node(Role::Timing, n)?;
        let t = llama::timing::decode_step_times(&devs, &LlamaConfig::llama2_7b(1024), b, 1)?;
        println!(
            "7b b{b} tp{n}: eager {:.1} graph {:.1} ({:?})",
            t.eager_us,
            t.graph_us,
            t0.elapsed()
        );
    }
    Ok(())
}
